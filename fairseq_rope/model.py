"""The rotary Transformer: fairseq's ``transformer`` with RoPE in every self-attention.

Registered as model ``rope_transformer`` with architectures named after fairseq's:
``rope_transformer`` (= base), ``rope_transformer_wmt_en_de``, ``rope_transformer_wmt_en_de_big``,
``rope_transformer_vaswani_wmt_en_de_big``, ``rope_transformer_iwslt_de_en``.

Everything but the self-attention module is fairseq's: embeddings, layers, cross-attention,
incremental decoding, checkpoints. By default there are no additive token-position
embeddings (the paper's RoFormer); ``--add-token-positional-embeddings`` restores them.
"""

import dataclasses
import logging
import os
import sys

import torch

from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
    transformer_wmt_en_de,
    transformer_wmt_en_de_big,
)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper

from .attention import RotaryMultiheadAttention
from .linear_attention import RotaryLinearAttention
from .options import RopeOptions

logger = logging.getLogger(__name__)

# RoPE itself puts no bound on length: without additive position embeddings the model
# reports this many positions, and only the task's --max-{source,target}-positions apply.
UNBOUNDED_POSITIONS = 1_000_000


def rope_options(cfg) -> RopeOptions:
    """The model's rotary options, made from ``cfg`` (fairseq's TransformerConfig of the model being
    built, which carries the ``rope_*`` args) when the encoder is built, kept on it for the decoder."""
    if getattr(cfg, "rope_options", None) is None:
        cfg.rope_options = RopeOptions.from_args(cfg)
        if cfg.rope_options.attention == "linear" and cfg.attention_dropout > 0:
            logger.warning("--rope-attention linear forms no attention weights in self-attention: --attention-dropout "
                           "%g applies to cross-attention only", cfg.attention_dropout)
    return cfg.rope_options


def build_rotary_self_attention(embed_dim, num_heads, cfg, layer, causal):
    """The self-attention of a layer: softmax or linear (eq. 19), as --rope-attention says."""
    options = rope_options(cfg)
    attention = RotaryLinearAttention if options.attention == "linear" else RotaryMultiheadAttention
    return attention(embed_dim, num_heads, options, causal=causal, dropout=cfg.attention_dropout,
                     q_noise=layer.quant_noise, qn_block_size=layer.quant_noise_block_size)


class RoPETransformerEncoderLayer(TransformerEncoderLayerBase):
    def build_self_attention(self, embed_dim, cfg):
        return build_rotary_self_attention(embed_dim, cfg.encoder.attention_heads, cfg, self, causal=False)


class RoPETransformerDecoderLayer(TransformerDecoderLayerBase):
    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("rope_transformer: add_bias_kv/add_zero_attn are not supported in rotary self-attention")
        return build_rotary_self_attention(embed_dim, cfg.decoder.attention_heads, cfg, self, causal=True)


def wrap_layer(layer, cfg):
    """fairseq's activation checkpointing and FSDP wrapping, as in its build_*_layer."""
    if cfg.checkpoint_activations:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    min_params_to_wrap = cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)


def refuse_features(args, refused):
    """Stops the build of ``args.arch`` on a fairseq feature its encoding cannot run with (``refused``:
    args name -> why), in argparse's words: ``PROG: error: --flag is not supported by ARCH: why``."""
    for name, why in refused.items():
        if getattr(args, name, False):
            raise ValueError(f"{os.path.basename(sys.argv[0])}: error: --{name.replace('_', '-')} is not supported "
                             f"by {args.arch}: {why}")


def drop_additive_positions(module, state_dict, name):
    """A rope model without additive positions ignores them in a (baseline) checkpoint."""
    if module.embed_positions is not None:
        return
    prefix = f"{name}.embed_positions." if name else "embed_positions."
    dropped = [key for key in state_dict if key.startswith(prefix)]
    for key in dropped:
        del state_dict[key]
    if dropped:
        logger.warning("rope_transformer has no additive position embeddings: ignoring %s from the checkpoint", ", ".join(dropped))


def draw_random_positions(coder, tokens):
    """--rope-random-positions N, in training: the T slots of each sentence get T distinct positions
    drawn from [0, N) and sorted (randomized positional encodings, Ruoss et al. 2023), the same in
    every self-attention of this forward, so that distances up to N are seen in training. In
    evaluation (and incremental decoding) positions stay the slot index: None."""
    n = rope_options(coder.cfg).random_positions
    if not (coder.training and n):
        return None
    B, T = tokens.shape
    if T > n:
        raise ValueError(f"--rope-random-positions {n} is less than the length of a training batch ({T} tokens, "
                         f"padding included): raise it above --max-source/target-positions")
    return torch.rand(B, n, device=tokens.device).topk(T, dim=1).indices.sort(dim=1).values


def record_length(coder, tokens):
    """In training: ``coder.original_max_positions`` := the longest sequence seen so far, in tokens
    (padding excluded, EOS included), the largest over all processes of a distributed run. Saved
    with the model, it is the training length L of --rope-scaling auto."""
    longest = tokens.ne(coder.padding_idx).sum(1).max()
    if torch.distributed.is_available() and torch.distributed.is_initialized() \
            and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(longest, op=torch.distributed.ReduceOp.MAX)
    coder.original_max_positions.copy_(torch.maximum(coder.original_max_positions, longest))


def training_length(coder) -> int:
    """L of --rope-scaling auto: --rope-original-max-positions, else the length recorded in training."""
    length = rope_options(coder.cfg).original_max_positions or int(coder.original_max_positions)
    if length < 1:
        raise ValueError("--rope-scaling auto needs the training length L: this model records none (it was saved "
                         "before fairseq-rope recorded it, or never trained); give it as "
                         "--rope-original-max-positions (model_overrides {'rope_original_max_positions': L}), "
                         "the longest training sentence in tokens")
    return length


def scaling_factors(encoder, src_tokens):
    """--rope-scaling auto, outside training: each sentence's YaRN factor, its source length (tokens,
    EOS included) over the encoder's training length L, at least 1 (B, float64), and L. None where
    no sentence is longer than L (all factors 1 change nothing: the plain path) or otherwise."""
    if encoder.training or rope_options(encoder.cfg).scaling != "auto":
        return None
    length = training_length(encoder)
    factors = (src_tokens.ne(encoder.padding_idx).sum(1).to(torch.float64) / length).clamp(min=1)
    return (factors, length) if bool((factors > 1).any()) else None


def set_rotation_inputs(coder, positions=None, scaling=None):
    """Gives every rotary self-attention of ``coder`` its random ``positions`` (B x T) or the sentences'
    ``scaling`` (factors B, training length L) for this forward, None for neither. Found among all
    modules, not by iterating the layers (which LayerDrop samples); they stay until the next forward,
    so that activation checkpointing's second run of a layer, in the backward, rotates as the first."""
    for attention in coder.modules():
        if isinstance(attention, RotaryMultiheadAttention):
            attention.positions, attention.sentence_scaling = positions, scaling


def add_length_buffer(coder):
    """The longest training sequence, in tokens, recorded by :func:`record_length`; 0 = not recorded."""
    coder.register_buffer("original_max_positions", torch.zeros((), dtype=torch.long))


def upgrade_length_buffer(coder, state_dict, name):
    """Checkpoints saved before the training length was recorded (or a baseline's) get 0: unknown."""
    key = f"{name}.original_max_positions" if name else "original_max_positions"
    if key not in state_dict:
        state_dict[key] = torch.zeros((), dtype=torch.long)


class RoPETransformerEncoder(TransformerEncoderBase):
    """fairseq's encoder; records its longest training source, and under --rope-scaling auto puts each
    sentence's factor in its output (``encoder_out["rope_scaling_factors"]``) for the decoder when one
    of them is longer than the training length."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        add_length_buffer(self)

    def forward(self, src_tokens, *args, **kwargs):
        if self.training:
            record_length(self, src_tokens)
        scaling = scaling_factors(self, src_tokens)
        set_rotation_inputs(self, draw_random_positions(self, src_tokens), scaling)
        encoder_out = super().forward(src_tokens, *args, **kwargs)
        if scaling is not None:  # absent: every sentence is within the training length
            encoder_out["rope_scaling_factors"] = [scaling[0]]
        return encoder_out

    def reorder_encoder_out(self, encoder_out, new_order):
        reordered = super().reorder_encoder_out(encoder_out, new_order)
        if encoder_out.get("rope_scaling_factors"):
            reordered["rope_scaling_factors"] = [encoder_out["rope_scaling_factors"][0].index_select(0, new_order)]
        return reordered

    def build_encoder_layer(self, cfg):
        return wrap_layer(RoPETransformerEncoderLayer(cfg, return_fc=self.return_fc), cfg)

    def max_positions(self):
        return super().max_positions() if self.embed_positions is not None else UNBOUNDED_POSITIONS

    def upgrade_state_dict_named(self, state_dict, name):
        drop_additive_positions(self, state_dict, name)
        upgrade_length_buffer(self, state_dict, name)
        return super().upgrade_state_dict_named(state_dict, name)


class RoPETransformerDecoder(TransformerDecoderBase):
    """fairseq's decoder; records its longest training target, and under --rope-scaling auto rotates
    each sentence with its source's factor (from the encoder's output) at every step."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        add_length_buffer(self)

    def extract_features(self, prev_output_tokens, encoder_out=None, *args, **kwargs):
        if self.training:
            record_length(self, prev_output_tokens)
        factors = (encoder_out or {}).get("rope_scaling_factors")
        scaling = (factors[0], training_length(self)) if factors else None
        set_rotation_inputs(self, draw_random_positions(self, prev_output_tokens), scaling)
        return super().extract_features(prev_output_tokens, encoder_out, *args, **kwargs)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return wrap_layer(RoPETransformerDecoderLayer(cfg, no_encoder_attn), cfg)

    def max_positions(self):
        return super().max_positions() if self.embed_positions is not None else UNBOUNDED_POSITIONS

    def upgrade_state_dict_named(self, state_dict, name):
        drop_additive_positions(self, state_dict, name)
        upgrade_length_buffer(self, state_dict, name)
        return super().upgrade_state_dict_named(state_dict, name)


@register_model("rope_transformer")
class RoPETransformerModel(TransformerModel):
    """Transformer with Rotary Position Embedding in encoder and decoder self-attention."""

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        group = parser.add_argument_group("Rotary position embedding (RoFormer)")
        group.add_argument("--rope-theta", type=float, metavar="F",
                           help="base of the rotation frequencies theta_i = F^(-2(i-1)/d) (default: 10000)")
        group.add_argument("--rope-layout", metavar="L",
                           help="pairing of rotated channels: 'interleaved' (the paper's eq. 34, default) "
                                "or 'half' (GPT-NeoX rotate_half)")
        group.add_argument("--rope-dim", type=int, metavar="N",
                           help="channels rotated per head, even (default: the whole head)")
        group.add_argument("--rope-attention", metavar="A",
                           help="self-attention of encoder and decoder: 'softmax' (default) or 'linear': the "
                                "paper's eq. 19, RoPE with linear attention, phi(x) = elu(x) + 1, O(length); "
                                "no attention weights and no --attention-dropout in linear mode (cross-attention "
                                "stays softmax and keeps both)")
        group.add_argument("--rope-scaling", metavar="S",
                           help="frequencies for inputs longer than in training: 'none' (default, the paper's), "
                                "'linear' (position interpolation, positions / F), 'ntk' (NTK-aware: base * "
                                "F^(d/(d-2))), 'yarn' (YaRN: per-frequency interpolation and its softmax "
                                "temperature; needs --rope-original-max-positions) or 'auto' (YaRN per sentence, "
                                "factor = source length / training length, none for sentences no longer than in "
                                "training; the training length is recorded by the model); usually set at "
                                "generation time with --model-overrides")
        group.add_argument("--rope-scaling-factor", type=float, metavar="F",
                           help="how many times longer the inputs are than in training (>= 1; default 1)")
        group.add_argument("--rope-original-max-positions", type=int, metavar="L",
                           help="the longest training sequence in tokens (YaRN's L; for 'auto' it overrides "
                                "the length the model recorded in training)")
        group.add_argument("--rope-random-positions", type=int, metavar="N",
                           help="in training, give each sentence's tokens sorted random positions from [0, N) "
                                "instead of 0, 1, 2, ... (randomized positional encodings, Ruoss et al. 2023), "
                                "so that distances longer than the training sentences are seen; evaluation and "
                                "generation use 0, 1, 2, ... (default 0: off)")
        group.add_argument("--add-token-positional-embeddings", action="store_true",
                           help="also add fairseq's token-position embeddings (off: pure RoPE)")

    @classmethod
    def build_model(cls, args, task):
        rope_defaults(args)
        refuse_features(args, RopeOptions.refused_features)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, cfg, src_dict, embed_tokens):
        return RoPETransformerEncoder(cfg, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        return RoPETransformerDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


def rope_defaults(args):
    """The rotary settings (the defaults of RopeOptions); additive token positions off unless asked for."""
    for field in dataclasses.fields(RopeOptions):
        name = f"rope_{field.name}"
        if getattr(args, name, None) is None:
            setattr(args, name, field.default)
    args.add_token_positional_embeddings = getattr(args, "add_token_positional_embeddings", False)
    if args.add_token_positional_embeddings and getattr(args, "no_token_positional_embeddings", False):
        raise ValueError("--add-token-positional-embeddings contradicts --no-token-positional-embeddings")
    args.no_token_positional_embeddings = not args.add_token_positional_embeddings


def rope_base_architecture(args):
    rope_defaults(args)
    base_architecture(args)


def rope_architecture(name, fairseq_architecture):
    """Registers rope_<name>: fairseq's <name> sizes with rotary self-attention."""

    def architecture(args):
        rope_defaults(args)  # before fairseq's, whose sizes would otherwise be base's
        fairseq_architecture(args)

    architecture.__name__ = f"rope_{name}"
    architecture.__doc__ = f"fairseq's {name}, with RoPE instead of additive positions."
    return register_model_architecture("rope_transformer", f"rope_{name}")(architecture)


register_model_architecture("rope_transformer", "rope_transformer")(rope_base_architecture)
rope_transformer_wmt_en_de = rope_architecture("transformer_wmt_en_de", transformer_wmt_en_de)
rope_transformer_wmt_en_de_big = rope_architecture("transformer_wmt_en_de_big", transformer_wmt_en_de_big)
rope_transformer_vaswani_wmt_en_de_big = rope_architecture(
    "transformer_vaswani_wmt_en_de_big", transformer_vaswani_wmt_en_de_big
)
rope_transformer_iwslt_de_en = rope_architecture("transformer_iwslt_de_en", transformer_iwslt_de_en)
