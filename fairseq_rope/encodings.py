"""fairseq's Transformer with another position encoding in its self-attention: what the baselines share.

RoPE's model is model.py. The other encodings (Shaw's relative positions: shaw.py, T5's relative
bias: t5_bias.py, ALiBi: alibi.py) are each one module holding their options, their attention term
and their registration (a model class and :func:`register_architectures`). Everything else comes from here and from
fairseq, once: the encoder and decoder (fairseq's, with this self-attention in every layer and
cross-attention left as it is), no additive position embeddings unless
``--add-token-positional-embeddings``, and fairseq's sizes as architectures.

An encoding is a frozen dataclass subclassing :class:`PositionEncoding`: each field is the flag
``--<prefix>-<field>`` with its default, checked once when the model is built. It builds the
self-attention of a layer (:meth:`PositionEncoding.build_self_attention`: fairseq's attention, with
the encoding's hooks if it has any) and says which of fairseq's features it cannot run with
(``refused_features``). An encoding whose logit bias is shared by the layers of a stack (T5, ALiBi)
subclasses :class:`StackBias`: each stack owns the bias module (:meth:`StackBias.build_position_bias`,
saved once, as ``encoder.position_bias``) and every layer's :class:`StackBiasAttention` evaluates it
for its own queries and keys. Nothing is handed to the layers per forward, so that fairseq's
LayerDrop (which samples the layers it runs) and activation checkpointing (which runs a layer's
forward again in the backward) see the same model as a plain forward.
"""

import dataclasses
import logging
from typing import Callable, ClassVar, Dict, Optional

from torch import Tensor, nn
from fairseq.models import register_model_architecture
from fairseq.models.transformer import (
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
    transformer_wmt_en_de_big,
)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase

from .model import UNBOUNDED_POSITIONS, drop_additive_positions, refuse_features, wrap_layer
from .self_attention import SELF_ATTENTION_ONLY, SelfAttention

logger = logging.getLogger(__name__)

# fairseq's sizes: architecture <model><suffix> = fairseq's transformer<suffix> with this encoding
SIZES = {"": base_architecture, "_wmt_en_de": transformer_wmt_en_de,
         "_wmt_en_de_big": transformer_wmt_en_de_big, "_iwslt_de_en": transformer_iwslt_de_en}
# fairseq's MultiheadAttention parameters: whatever else a self-attention holds is its encoding's
FAIRSEQ_ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj", "bias_k", "bias_v")


class PositionEncoding:
    """Base of an encoding's options (a frozen dataclass; field ``x`` is ``--<prefix>-x``)."""

    prefix: ClassVar[str]  # of the flags and of the args: --<prefix>-<field>, args.<prefix>_<field>
    title: ClassVar[str]  # of the flags' group in --help
    # fairseq features (args names) the encoding cannot run with, and why: refused when the model is built
    refused_features: ClassVar[Dict[str, str]] = SELF_ATTENTION_ONLY

    def fail(self, field: str, what: str):
        raise ValueError(f"--{self.prefix}-{field.replace('_', '-')} {what}; got {getattr(self, field)!r}")

    def build_self_attention(self, embed_dim: int, num_heads: int, causal: bool, **fairseq_args) -> SelfAttention:
        """The self-attention of one layer (``fairseq_args``: dropout, q_noise, qn_block_size)."""
        return SelfAttention(embed_dim, num_heads, causal=causal, **fairseq_args)

    def build_position_bias(self, num_heads: int, causal: bool) -> Optional[nn.Module]:
        """The module of a logit bias shared by the layers of a stack, or None (see :class:`StackBias`)."""
        return None

    @classmethod
    def add_args(cls, parser):
        group = parser.add_argument_group(cls.title)
        for field in dataclasses.fields(cls):
            flag, help = f"--{cls.prefix}-{field.name.replace('_', '-')}", f"{field.metadata['help']} (default: {field.default})"
            if field.type is bool:
                group.add_argument(flag, action="store_true", help=help)
            else:
                group.add_argument(flag, type=field.type, metavar=field.name[0].upper(), help=help)
        group.add_argument("--add-token-positional-embeddings", action="store_true",
                           help="also add fairseq's token-position embeddings (off: relative positions only)")

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
        return cls(**{field.name: getattr(args, f"{cls.prefix}_{field.name}", field.default)
                      for field in dataclasses.fields(cls)})


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
    and keys: in every layer that runs, and again when activation checkpointing recomputes one."""

    stack_bias: Optional[Callable[[int, int, int], Tensor]] = None  # the stack's module, see use_stack_bias

    def use_stack_bias(self, position_bias: nn.Module):
        """Called once by the stack that owns ``position_bias``. Kept as its bound ``forward``, not as
        a submodule, so that the bias is a parameter of the stack only (saved once, updated once)."""
        self.stack_bias = position_bias.forward

    def position_logits(self, q: Tensor, past: int, S: int) -> Tensor:
        if self.stack_bias is None:
            raise RuntimeError(f"{type(self).__name__} is a layer of an encoder or decoder that owns its position "
                               "bias; built alone it has none")
        return self.stack_bias(past, q.size(2), S)


def fairseq_attention_args(layer, cfg):
    return dict(dropout=cfg.attention_dropout, q_noise=layer.quant_noise, qn_block_size=layer.quant_noise_block_size)


class EncoderLayer(TransformerEncoderLayerBase):
    def build_self_attention(self, embed_dim, cfg):
        return cfg.position_encoding.build_self_attention(embed_dim, cfg.encoder.attention_heads, causal=False,
                                                          **fairseq_attention_args(self, cfg))


class DecoderLayer(TransformerDecoderLayerBase):
    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("add_bias_kv/add_zero_attn are not supported with relative position encodings")
        return cfg.position_encoding.build_self_attention(embed_dim, cfg.decoder.attention_heads, causal=True,
                                                          **fairseq_attention_args(self, cfg))


class RelativePositions:
    """Encoder and decoder without additive positions unless asked for: no length limit of their own,
    and a checkpoint's additive positions dropped (a baseline's, for fine-tuning). The stack's
    position bias, if its encoding has one, is built here and given to every layer's self-attention."""

    def build_position_bias(self, cfg, num_heads: int, causal: bool):
        self.position_bias = cfg.position_encoding.build_position_bias(num_heads, causal)
        if self.position_bias is not None:
            for module in self.modules():  # every layer, whatever LayerDrop samples
                if isinstance(module, StackBiasAttention):
                    module.use_stack_bias(self.position_bias)

    def max_positions(self):
        return super().max_positions() if self.embed_positions is not None else UNBOUNDED_POSITIONS

    def upgrade_state_dict_named(self, state_dict, name):
        drop_additive_positions(self, state_dict, name)
        return super().upgrade_state_dict_named(state_dict, name)


class Encoder(RelativePositions, TransformerEncoderBase):
    """fairseq's encoder; its layers' self-attention is the encoding's (positions: the slot index
    0 .. T-1, so left padding shifts all of them)."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.build_position_bias(cfg, cfg.encoder.attention_heads, causal=False)

    def build_encoder_layer(self, cfg):
        return wrap_layer(EncoderLayer(cfg, return_fc=self.return_fc), cfg)


class Decoder(RelativePositions, TransformerDecoderBase):
    """fairseq's decoder; its layers' self-attention is the encoding's (causal). Decoding
    incrementally, fairseq feeds the last of the n tokens so far: its query is at n - 1 and the keys
    at 0 .. n-1, as fairseq's own position embeddings count."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.build_position_bias(cfg, cfg.decoder.attention_heads, causal=True)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return wrap_layer(DecoderLayer(cfg, no_encoder_attn), cfg)


def position_tables(model) -> Dict[str, Tensor]:
    """The encoding's learned tensors of ``model`` by state-dict key: every parameter of a
    self-attention beyond fairseq's projections (Shaw's a^K, a^V) and of a stack's position bias
    (T5's table). A fairseq ``transformer`` has none of them."""
    tables = {}
    for name, module in model.named_modules():
        if isinstance(module, SelfAttention):
            tables.update((f"{name}.{key}", tensor) for key, tensor in module.state_dict().items()
                          if key.split(".")[0] not in FAIRSEQ_ATTENTION)
        elif name.endswith("position_bias"):
            tables.update((f"{name}.{key}", tensor) for key, tensor in module.state_dict().items())
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
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        cfg.position_encoding = cls.encoding.from_args(cfg)
        return Encoder(cfg, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        cfg.position_encoding = cls.encoding.from_args(cfg)
        return Decoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)

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


def register_architectures(model_name: str, encoding: type):
    """Registers ``model_name`` (base) and ``<model_name>_wmt_en_de``, ``_wmt_en_de_big``, ``_iwslt_de_en``:
    fairseq's sizes with ``encoding``'s defaults."""
    for suffix, fairseq_architecture in SIZES.items():
        def architecture(args, fairseq_architecture=fairseq_architecture):
            encoding.set_defaults(args)  # before fairseq's, whose sizes would otherwise be base's
            fairseq_architecture(args)

        architecture.__name__ = f"{model_name}{suffix}"
        register_model_architecture(model_name, f"{model_name}{suffix}")(architecture)
