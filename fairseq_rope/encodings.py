"""fairseq's Transformer with a position encoding in its self-attention: one model for every encoding.

The path from ``--arch`` to the hooks: an architecture (``rope_transformer_wmt_en_de``, ...) is a model
class registered by :func:`register_architectures`, an :class:`EncodingTransformerModel` whose
``encoding`` is the encoding's options class. Building the model writes the options' defaults into the
args, refuses the fairseq features the encoding declares it cannot run with, and makes the options
object from the args. fairseq's encoder and decoder (:class:`Encoder`, :class:`Decoder`) are given it
as an argument and pass it to their layers, which ask it, through fairseq's own
``build_self_attention`` hook, for the layer's self-attention
(:class:`~fairseq_rope.self_attention.SelfAttention` or its subclass with the encoding's hooks). The
stack asks it for what the stack itself holds:

  * :meth:`PositionEncoding.build_position_bias`: a logit bias shared by the layers of a stack (T5's
    table, ALiBi's slopes; encodings subclassing :class:`StackBias`), a module of the encoder or
    decoder that each layer's :class:`StackBiasAttention` evaluates for its own queries and keys;
  * :attr:`PositionEncoding.stack_buffers`: state the stack saves with the model (RoPE's recorded
    training length), completed with its initial value in checkpoints saved without it;
  * :meth:`PositionEncoding.forward_inputs`: what the self-attentions need at each forward (RoPE's
    random positions and per-sentence factors), a frozen
    :class:`~fairseq_rope.self_attention.PositionInputs` (whose docstring says how it reaches them); the
    fields named in :attr:`PositionEncoding.encoder_output_fields` are passed on to the decoder in the
    encoder's output.

Everything else is fairseq's: embeddings, cross-attention, layer norms, incremental decoding,
checkpoints, LayerDrop and activation checkpointing (which runs a layer's forward again in the backward
with the arguments of its first run, position inputs included). There are no additive position
embeddings unless ``--add-token-positional-embeddings``. An encoding is one module (or, for RoPE, one
package: fairseq_rope/rope/): its options (a frozen dataclass subclassing :class:`PositionEncoding`,
field ``x`` the flag ``--<prefix>-x``), its attention term and its registration; it imports from this
scaffold only.
"""

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import typing
from typing import Callable, ClassVar, Dict, Optional, Tuple

import torch
from torch import Tensor, nn
from fairseq.distributed import fsdp_wrap
from fairseq.models import MODEL_REGISTRY, register_model_architecture
from fairseq.models.transformer import (
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
    transformer_wmt_en_de_big,
)
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from .self_attention import PositionInputs, SelfAttention

logger = logging.getLogger(__name__)

# fairseq's sizes: architecture <model><suffix> = fairseq's transformer<suffix> with the encoding
SIZES = {"": base_architecture, "_wmt_en_de": transformer_wmt_en_de,
         "_wmt_en_de_big": transformer_wmt_en_de_big, "_iwslt_de_en": transformer_iwslt_de_en}
# Without additive position embeddings the model reports this many positions: only the task's
# --max-{source,target}-positions apply.
UNBOUNDED_POSITIONS = 1_000_000
# fairseq's MultiheadAttention parameters: whatever else a self-attention holds is its encoding's
FAIRSEQ_ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj", "bias_k", "bias_v")
# fairseq's features that need a self-attention to take other keys than its queries' (args names)
SELF_ATTENTION_ONLY = {"cross_self_attention": "its decoder self-attention would also attend to the encoder's "
                                              "states, which have no positions on the target's axis"}
# model name -> its encoding's options class, for the tools that offer every encoding
ENCODINGS: Dict[str, type] = {}


class PositionEncoding:
    """Base of an encoding's options (a frozen dataclass; field ``x`` is ``--<prefix>-x``) and of
    what it asks of the scaffold; every hook is a no-op here (the encoding of fairseq's attention
    without positions)."""

    prefix: ClassVar[str]  # of the flags and of the args: --<prefix>-<field>, args.<prefix>_<field>
    title: ClassVar[str]  # its name in messages (and the flags' group where a parser, not fairseq's group, is given)
    # fairseq features (args names) the encoding cannot run with, and why: refused when the model is built
    refused_features: ClassVar[Dict[str, str]] = SELF_ATTENTION_ONLY
    # state each stack saves with the model: buffer name -> its value before training (and in
    # checkpoints saved without it)
    stack_buffers: ClassVar[Dict[str, Callable[[], Tensor]]] = {}
    # fields of the encoder's forward inputs (batch-first tensors, or None) that the decoder reads from the
    # encoder's output (fairseq's encoder_out, as <prefix>_<field>: encoder_output), reordered with the beams
    encoder_output_fields: ClassVar[Tuple[str, ...]] = ()
    # settings for tiny models (a few tokens, d = 32), as the tests build every encoding: variant name ->
    # flags; empty: one variant, the encoding's defaults
    tiny_model_variants: ClassVar[Dict[str, Tuple[str, ...]]] = {}

    def fail(self, field: str, what: str):
        raise ValueError(f"--{self.prefix}-{field.replace('_', '-')} {what}; got {getattr(self, field)!r}")

    # ---- the options: flags, defaults, the object made from the args ----

    @classmethod
    def add_args(cls, parser):
        # fairseq gives models a group of its parser: the flags join it (argparse deprecates nested groups)
        group = parser.add_argument_group(cls.title) if isinstance(parser, argparse.ArgumentParser) else parser
        for field in dataclasses.fields(cls):
            flag = f"--{cls.prefix}-{field.name.replace('_', '-')}"
            help = f"{field.metadata['help']} (default: {field.metadata.get('default', field.default)})"
            if field.type is bool:
                group.add_argument(flag, action="store_true", help=help)
            else:
                kind = [t for t in typing.get_args(field.type) if t is not type(None)] or [field.type]
                group.add_argument(flag, type=kind[0], metavar=field.metadata.get("metavar", field.name[0].upper()),
                                   help=help)
        group.add_argument("--add-token-positional-embeddings", action="store_true",
                           help="also add fairseq's token-position embeddings (off: the encoding's positions only)")

    @classmethod
    def set_defaults(cls, args):
        """Writes each option's default into ``args`` where it is unset (so checkpoints record them);
        additive token positions off unless asked for."""
        for field in dataclasses.fields(cls):
            if getattr(args, f"{cls.prefix}_{field.name}", None) is None:
                setattr(args, f"{cls.prefix}_{field.name}", field.default)
        args.add_token_positional_embeddings = getattr(args, "add_token_positional_embeddings", False)
        if args.add_token_positional_embeddings and getattr(args, "no_token_positional_embeddings", False):
            raise ValueError("--add-token-positional-embeddings contradicts --no-token-positional-embeddings")
        args.no_token_positional_embeddings = not args.add_token_positional_embeddings

    @classmethod
    def from_args(cls, args) -> "PositionEncoding":
        """The options of fairseq's ``args`` (``args.<prefix>_*``; a missing one, as in checkpoints saved
        before the option existed, takes its default)."""
        return cls(**{field.name: getattr(args, f"{cls.prefix}_{field.name}", None) for field in
                      dataclasses.fields(cls) if getattr(args, f"{cls.prefix}_{field.name}", None) is not None})

    def check_model(self, args):
        """Checks the options against the model's other settings (``args``), once per model built:
        nothing here."""

    # ---- what the layers and the stacks hold ----

    def build_self_attention(self, embed_dim: int, num_heads: int, causal: bool, **fairseq_args) -> SelfAttention:
        """The self-attention of one layer (``fairseq_args``: dropout, q_noise, qn_block_size)."""
        return SelfAttention(embed_dim, num_heads, causal=causal, **fairseq_args)

    def build_position_bias(self, num_heads: int, causal: bool) -> Optional[nn.Module]:
        """The module of a logit bias shared by the layers of a stack, or None (see :class:`StackBias`)."""
        return None

    # ---- each forward ----

    def forward_inputs(self, coder: nn.Module, tokens: Tensor, encoder_out: Optional[dict] = None) -> PositionInputs:
        """What every self-attention of ``coder`` needs for this forward, from its input ``tokens`` (B x T)
        and, in the decoder, the encoder's output (the encoder: None). Nothing here."""
        return PositionInputs()

    def encoder_output_key(self, field: str) -> str:
        """The key in fairseq's ``encoder_out`` of the encoder's input ``field``, one of
        ``encoder_output_fields`` (another name is an error, not a value that is never there)."""
        if field not in self.encoder_output_fields:
            raise KeyError(f"{field!r} is not one of {type(self).__name__}.encoder_output_fields "
                           f"{self.encoder_output_fields}")
        return f"{self.prefix}_{field}"

    def encoder_output(self, encoder_out: dict, field: str) -> Optional[Tensor]:
        """The encoder's input ``field`` as the decoder reads it from ``encoder_out``, or None."""
        return (encoder_out.get(self.encoder_output_key(field)) or [None])[0]


class StackBias(PositionEncoding):
    """An encoding whose logit bias is the same function of positions in every layer of a stack (T5's
    table, ALiBi's slopes): the stack owns one module for it, which each layer evaluates."""

    def build_self_attention(self, embed_dim: int, num_heads: int, causal: bool, **fairseq_args) -> SelfAttention:
        return StackBiasAttention(embed_dim, num_heads, causal=causal, **fairseq_args)

    def build_position_bias(self, num_heads: int, causal: bool) -> nn.Module:
        """The stack's bias: called as ``module(past, T, S)`` -> 1 x H x T x S for queries at
        past .. past+T-1 and keys 0 .. S-1."""
        raise NotImplementedError


class StackBiasAttention(SelfAttention):
    """Self-attention whose logits get its stack's bias (T5, ALiBi), evaluated for its own queries
    and keys: in training in every layer that runs, and again when activation checkpointing recomputes
    one (so that the gradient reaches T5's table from each layer); without gradients (translation,
    validation) once per forward of the stack, for all its layers (``inputs.stack_bias``, a cache
    the stack makes anew at each such forward)."""

    stack_bias: Optional[Callable[[int, int, int], Tensor]] = None  # the stack's module, see use_stack_bias

    def use_stack_bias(self, position_bias: nn.Module):
        """Called once by the stack that owns ``position_bias``. Kept as its bound ``forward``, not as
        a submodule, so that the bias is a parameter of the stack only (saved once, updated once)."""
        self.stack_bias = position_bias.forward

    def position_logits(self, q: Tensor, past: int, S: int, inputs: PositionInputs) -> Tensor:
        if self.stack_bias is None:
            raise RuntimeError(f"{type(self).__name__} is a layer of an encoder or decoder that owns its position "
                               "bias; built alone it has none")
        cache, key = inputs.stack_bias, (past, q.size(2), S)
        if cache is None:
            return self.stack_bias(*key)
        if key not in cache:
            cache[key] = self.stack_bias(*key)
        return cache[key]


# ---- fairseq's layers, encoder and decoder with the encoding's self-attention ----

def fairseq_attention_args(layer, cfg):
    return dict(dropout=cfg.attention_dropout, q_noise=layer.quant_noise, qn_block_size=layer.quant_noise_block_size)


def wrap_layer(layer, cfg):
    """fairseq's activation checkpointing and FSDP wrapping, as in its build_*_layer."""
    if cfg.checkpoint_activations:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    min_params_to_wrap = cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)


class EncodingLayer:
    """What the encoder's and the decoder's layers add to fairseq's: the self-attention the encoding
    builds (fairseq's ``build_self_attention`` hook), and this forward's position inputs as an argument
    of the layer's forward, given to its self-attention for that call (see :class:`PositionInputs`)."""

    def forward(self, *args, position_inputs: Optional[PositionInputs] = None, **kwargs):
        self.self_attn.position_inputs = position_inputs
        try:
            return super().forward(*args, **kwargs)
        finally:
            self.self_attn.position_inputs = None


class EncoderLayer(EncodingLayer, TransformerEncoderLayerBase):
    def __init__(self, cfg, encoding: PositionEncoding, return_fc=False):
        self.encoding = encoding  # (before fairseq's __init__, which calls build_self_attention)
        super().__init__(cfg, return_fc=return_fc)

    def build_self_attention(self, embed_dim, cfg):
        return self.encoding.build_self_attention(embed_dim, cfg.encoder.attention_heads, causal=False,
                                                  **fairseq_attention_args(self, cfg))


class DecoderLayer(EncodingLayer, TransformerDecoderLayerBase):
    def __init__(self, cfg, encoding: PositionEncoding, no_encoder_attn=False):
        self.encoding = encoding  # (before fairseq's __init__, which calls build_self_attention)
        super().__init__(cfg, no_encoder_attn)

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("add_bias_kv/add_zero_attn are not supported with a position encoding in self-attention")
        return self.encoding.build_self_attention(embed_dim, cfg.decoder.attention_heads, causal=True,
                                                  **fairseq_attention_args(self, cfg))


class Stack:
    """What the encoder and the decoder share: the encoding's state and position bias, its inputs at
    each forward, no length limit without additive positions, and checkpoints of other models."""

    encoding: PositionEncoding
    position_inputs: Optional[PositionInputs] = None  # this forward's, while it runs (see run_layers_with)

    def build_positions(self, num_heads: int, causal: bool):
        for name, initial in self.encoding.stack_buffers.items():
            self.register_buffer(name, initial())
        self.position_bias = self.encoding.build_position_bias(num_heads, causal)
        if self.position_bias is not None:
            for module in self.modules():
                if isinstance(module, StackBiasAttention):
                    module.use_stack_bias(self.position_bias)

    def pass_position_inputs(self, layer, args, kwargs):
        return args, {**kwargs, "position_inputs": self.position_inputs}

    @contextlib.contextmanager
    def run_layers_with(self, inputs: PositionInputs):
        """Runs fairseq's forward of the stack with its layers called with ``inputs`` (and, without
        gradients, an empty cache for the stack's bias) as their ``position_inputs`` (see
        :class:`PositionInputs`): a hook on each layer (as built, not as iterated: LayerDrop samples
        them) adds them, for this forward only, and only where there is something to pass (most
        forwards of most encodings have nothing: fairseq's loop then runs as it is, as in beam search)."""
        if self.position_bias is not None and not torch.is_grad_enabled():
            inputs = dataclasses.replace(inputs, stack_bias={})
        if inputs.holds_nothing():
            yield
            return
        self.position_inputs = inputs
        hooks = [layer.register_forward_pre_hook(self.pass_position_inputs, with_kwargs=True)
                 for layer in self.layers.children()]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()
            self.position_inputs = None

    def max_positions(self):
        return super().max_positions() if self.embed_positions is not None else UNBOUNDED_POSITIONS

    def upgrade_state_dict_named(self, state_dict, name):
        drop_additive_positions(self, state_dict, name)
        for buffer, initial in self.encoding.stack_buffers.items():
            state_dict.setdefault(f"{name}.{buffer}" if name else buffer, initial())
        return super().upgrade_state_dict_named(state_dict, name)


def drop_additive_positions(coder, state_dict, name):
    """A model without additive positions ignores them in a checkpoint (a baseline's, to fine-tune)."""
    if coder.embed_positions is not None:
        return
    prefix = f"{name}.embed_positions." if name else "embed_positions."
    dropped = [key for key in state_dict if key.startswith(prefix)]
    for key in dropped:
        del state_dict[key]
    if dropped:
        logger.warning("%s has no additive position embeddings (no --add-token-positional-embeddings): ignoring "
                       "%s from the checkpoint", name or type(coder).__name__, ", ".join(dropped))


class Encoder(Stack, TransformerEncoderBase):
    """fairseq's encoder with the encoding's self-attention (positions: the slot index 0 .. T-1, so
    left padding shifts all of them)."""

    def __init__(self, cfg, encoding: PositionEncoding, dictionary, embed_tokens, return_fc=False):
        self.encoding = encoding  # (before fairseq's __init__, which builds the layers)
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.build_positions(cfg.encoder.attention_heads, causal=False)

    def build_encoder_layer(self, cfg):
        return wrap_layer(EncoderLayer(cfg, self.encoding, return_fc=self.return_fc), cfg)

    def forward(self, src_tokens, *args, **kwargs):
        inputs = self.encoding.forward_inputs(self, src_tokens)
        with self.run_layers_with(inputs):
            encoder_out = super().forward(src_tokens, *args, **kwargs)
        for field in self.encoding.encoder_output_fields:
            if getattr(inputs, field) is not None:
                encoder_out[self.encoding.encoder_output_key(field)] = [getattr(inputs, field)]
        return encoder_out

    def reorder_encoder_out(self, encoder_out, new_order):
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        for key in map(self.encoding.encoder_output_key, self.encoding.encoder_output_fields):
            if encoder_out.get(key):
                reordered[key] = [encoder_out[key][0].index_select(0, new_order)]
        return reordered


class Decoder(Stack, TransformerDecoderBase):
    """fairseq's decoder with the encoding's (causal) self-attention. Decoding incrementally, fairseq
    feeds the last of the n tokens so far: its query is at n - 1 and the keys at 0 .. n-1, as
    fairseq's own position embeddings count."""

    def __init__(self, cfg, encoding: PositionEncoding, dictionary, embed_tokens, no_encoder_attn=False,
                 output_projection=None):
        self.encoding = encoding  # (before fairseq's __init__, which builds the layers)
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.build_positions(cfg.decoder.attention_heads, causal=True)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return wrap_layer(DecoderLayer(cfg, self.encoding, no_encoder_attn), cfg)

    def extract_features(self, prev_output_tokens, encoder_out=None, *args, **kwargs):
        with self.run_layers_with(self.encoding.forward_inputs(self, prev_output_tokens, encoder_out or {})):
            return super().extract_features(prev_output_tokens, encoder_out, *args, **kwargs)


# ---- the model ----

def refuse_features(args, refused):
    """Stops the build of ``args.arch`` on a fairseq feature its encoding cannot run with (``refused``:
    args name -> why), in argparse's words: ``PROG: error: --flag is not supported by ARCH: why``."""
    for name, why in refused.items():
        if getattr(args, name, False):
            raise ValueError(f"{os.path.basename(sys.argv[0])}: error: --{name.replace('_', '-')} is not supported "
                             f"by {args.arch}: {why}")


def position_tables(model) -> Dict[str, Tensor]:
    """The encoding's learned tensors of ``model`` by state-dict key: every parameter of a
    self-attention beyond fairseq's projections (Shaw's a^K, a^V) and of a stack's position bias
    (T5's table). A fairseq ``transformer`` has none of them."""
    tables = {}
    for name, module in model.named_modules():
        if isinstance(module, SelfAttention):
            tables.update((f"{name}.{key}", tensor) for key, tensor in module.named_parameters()
                          if key.split(".")[0] not in FAIRSEQ_ATTENTION)
        elif isinstance(module, Stack) and module.position_bias is not None:
            tables.update((f"{name}.position_bias.{key}", tensor) for key, tensor in
                          module.position_bias.named_parameters())
    return tables


class EncodingTransformerModel(TransformerModel):
    """fairseq's transformer with ``encoding`` in every self-attention of encoder and decoder."""

    encoding: ClassVar[type]  # the PositionEncoding subclass

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        cls.encoding.add_args(parser)

    @classmethod
    def build_model(cls, args, task):
        cls.encoding.set_defaults(args)
        refuse_features(args, cls.encoding.refused_features)
        cls.encoding.from_args(args).check_model(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        return Encoder(cfg, cls.encoding.from_args(cfg), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return Decoder(cfg, cls.encoding.from_args(cfg), tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

    def upgrade_state_dict_named(self, state_dict, name):
        """A checkpoint without the encoding's tables (a trained ``transformer``'s, to fine-tune from)
        gets this model's own: as initialised when it was built, for a strict load."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = f"{name}." if name else ""
        missing = {key: tensor for key, tensor in position_tables(self).items() if prefix + key not in state_dict}
        for key, tensor in missing.items():
            state_dict[prefix + key] = tensor.detach().clone()
        if missing:
            logger.info("%s: the checkpoint has no %s tables (%d tensors, e.g. %s): they start as this model "
                        "initialised them", type(self).__name__, self.encoding.title, len(missing), next(iter(missing)))


def register_architectures(model: type, sizes=SIZES):
    """Registers the architectures ``<name><suffix>`` of ``model``, an :class:`EncodingTransformerModel`
    registered with fairseq's ``register_model`` as ``name``: fairseq's sizes with the encoding's defaults.
    Lists the model in ENCODINGS."""
    names = [name for name, registered in MODEL_REGISTRY.items() if registered is model]
    if len(names) != 1 or not issubclass(model, EncodingTransformerModel):
        raise ValueError(f"{model.__name__}: register it with fairseq's @register_model first (as an "
                         f"EncodingTransformerModel with its encoding), once; registered as {names}")
    model_name, encoding = names[0], model.encoding
    for suffix, fairseq_architecture in sizes.items():
        def architecture(args, fairseq_architecture=fairseq_architecture):
            encoding.set_defaults(args)  # before fairseq's, whose sizes would otherwise be base's
            fairseq_architecture(args)

        architecture.__name__ = f"{model_name}{suffix}"
        register_model_architecture(model_name, f"{model_name}{suffix}")(architecture)
    ENCODINGS[model_name] = encoding
