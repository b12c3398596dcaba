"""fairseq's Transformer with another position encoding in its self-attention: what the baselines share.

RoPE's model is model.py. The other encodings (Shaw's relative positions: shaw.py, T5's relative
bias: t5_bias.py, ALiBi: alibi.py) are each one module holding their options, their attention term
and their registration (a model class and :func:`register_architectures`). Everything else comes from here and from
fairseq, once: the encoder and decoder (fairseq's, with this self-attention in every layer and
cross-attention left as it is), no additive position embeddings unless
``--add-token-positional-embeddings``, and fairseq's sizes as architectures.

An encoding is a frozen dataclass subclassing :class:`PositionEncoding`: each field is the flag
``--<prefix>-<field>`` with its default, checked once when the model is built. It builds the
self-attention of a layer (:meth:`PositionEncoding.build_self_attention`) and, for a bias shared by the
layers of a stack (T5, ALiBi), the module that computes it once per forward
(:meth:`PositionEncoding.build_position_bias`), which the stack hands to each layer's :class:`StackBiasAttention`.
"""

import contextlib
import dataclasses
from typing import ClassVar, Optional

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

from .model import UNBOUNDED_POSITIONS, drop_additive_positions, wrap_layer
from .self_attention import SelfAttention

# fairseq's sizes: architecture <model><suffix> = fairseq's transformer<suffix> with this encoding
SIZES = {"": base_architecture, "_wmt_en_de": transformer_wmt_en_de,
         "_wmt_en_de_big": transformer_wmt_en_de_big, "_iwslt_de_en": transformer_iwslt_de_en}


class PositionEncoding:
    """Base of an encoding's options (a frozen dataclass; field ``x`` is ``--<prefix>-x``)."""

    prefix: ClassVar[str]  # of the flags and of the args: --<prefix>-<field>, args.<prefix>_<field>
    title: ClassVar[str]  # of the flags' group in --help

    def fail(self, field: str, what: str):
        raise ValueError(f"--{self.prefix}-{field.replace('_', '-')} {what}; got {getattr(self, field)!r}")

    def build_self_attention(self, embed_dim: int, num_heads: int, causal: bool, **fairseq_args) -> SelfAttention:
        """The self-attention of one layer (``fairseq_args``: dropout, q_noise, qn_block_size)."""
        return StackBiasAttention(embed_dim, num_heads, causal=causal, **fairseq_args)

    def build_position_bias(self, num_heads: int, causal: bool) -> Optional[nn.Module]:
        """The module computing a logit bias once per forward of a stack, for all its layers: called
        as ``module(past, T, S)`` -> 1 x H x T x S for queries at past .. past+T-1 and keys 0 .. S-1.
        None: the layers' attention needs none."""
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


class StackBiasAttention(SelfAttention):
    """Self-attention whose logits get the bias its stack computed for this forward (T5, ALiBi)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stack_bias: Optional[Tensor] = None  # 1 x H x T x S, set by the stack for one forward

    def position_logits(self, q: Tensor, past: int, S: int) -> Tensor:
        bias = self.stack_bias
        if bias is None or bias.shape[-2:] != (q.size(2), S):
            raise RuntimeError(f"{type(self).__name__} needs the bias of its encoder or decoder for "
                               f"{q.size(2)} queries x {S} keys; got {None if bias is None else tuple(bias.shape)}")
        return bias


@contextlib.contextmanager
def bias_for_layers(coder, past: int, T: int, S: int):
    """Computes the stack's bias once (queries at past .. past+T-1, keys 0 .. S-1) and gives it to
    every layer's self-attention for one forward."""
    if coder.position_bias is None:
        yield
        return
    bias = coder.position_bias(past, T, S)
    attentions = [layer.self_attn for layer in coder.layers]
    for attention in attentions:
        attention.stack_bias = bias
    try:
        yield
    finally:
        for attention in attentions:
            attention.stack_bias = None


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
    and a checkpoint's additive positions dropped (a baseline's, for fine-tuning)."""

    def max_positions(self):
        return super().max_positions() if self.embed_positions is not None else UNBOUNDED_POSITIONS

    def upgrade_state_dict_named(self, state_dict, name):
        drop_additive_positions(self, state_dict, name)
        return super().upgrade_state_dict_named(state_dict, name)


class Encoder(RelativePositions, TransformerEncoderBase):
    """fairseq's encoder; its layers' self-attention is the encoding's, and a stack bias is computed
    once per forward (positions: the slot index 0 .. T-1, so left padding shifts all of them)."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.position_bias = cfg.position_encoding.build_position_bias(cfg.encoder.attention_heads, causal=False)

    def forward(self, src_tokens, *args, **kwargs):
        T = src_tokens.size(1)
        with bias_for_layers(self, 0, T, T):
            return super().forward(src_tokens, *args, **kwargs)

    def build_encoder_layer(self, cfg):
        return wrap_layer(EncoderLayer(cfg, return_fc=self.return_fc), cfg)



class Decoder(RelativePositions, TransformerDecoderBase):
    """fairseq's decoder; its layers' self-attention is the encoding's (causal). Decoding
    incrementally, fairseq feeds the last of the n tokens so far: its query is at n - 1 and the keys
    at 0 .. n-1, as fairseq's own position embeddings count."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.position_bias = cfg.position_encoding.build_position_bias(cfg.decoder.attention_heads, causal=True)

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, *args, **kwargs):
        n = prev_output_tokens.size(1)
        past = n - 1 if incremental_state is not None else 0
        with bias_for_layers(self, past, n - past, n):
            return super().extract_features(prev_output_tokens, encoder_out, incremental_state, *args, **kwargs)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return wrap_layer(DecoderLayer(cfg, no_encoder_attn), cfg)



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
        for flag in ("cross_self_attention", "checkpoint_activations", "offload_activations"):
            if getattr(args, flag, False):
                raise ValueError(f"--{flag.replace('_', '-')} is not supported by {args.arch} (its self-attention "
                                 "takes position terms that fairseq's layers do not pass on)")
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        cfg.position_encoding = cls.encoding.from_args(cfg)
        return Encoder(cfg, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        cfg.position_encoding = cls.encoding.from_args(cfg)
        return Decoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


def register_architectures(model_name: str, encoding: type):
    """Registers ``model_name`` (base) and ``<model_name>_wmt_en_de``, ``_wmt_en_de_big``, ``_iwslt_de_en``:
    fairseq's sizes with ``encoding``'s defaults."""
    for suffix, fairseq_architecture in SIZES.items():
        def architecture(args, fairseq_architecture=fairseq_architecture):
            encoding.set_defaults(args)  # before fairseq's, whose sizes would otherwise be base's
            fairseq_architecture(args)

        architecture.__name__ = f"{model_name}{suffix}"
        register_model_architecture(model_name, f"{model_name}{suffix}")(architecture)
