"""A checkpoint as CTranslate2's Transformer spec: rope_transformer, transformer, rpe_transformer, t5bias_transformer.

CTranslate2's own fairseq converter refuses models without additive positions. Its encoder and
decoder specs do have rotary self-attention (``rotary_dim``, ``rotary_interleave``,
``rotary_base``), applied to the projected queries and keys at positions 0, 1, ... of each
sentence, which is eq. 34 as our attention computes it. :func:`model_spec` fills those specs
with ctranslate2's own fairseq helpers (layers, layer norms, linears, embeddings); only the input
layers differ (no position table for RoPE). The baseline ``transformer`` goes through the same
function with its sinusoidal or learned position table, so both run on one engine.

The relative encodings map to CTranslate2's own relative attention: Shaw's RPE (``rpe_transformer``)
to ``relative_position`` (each layer's a^K and a^V, one row per clipped distance j - i from -k to k;
the decoder's tables, which stop at distance 0, get zero rows for the future distances, which
causal attention never reads; ``--rpe-keys-only`` exports a^V as zeros), and T5's bias
(``t5bias_transformer``) to ``relative_attention_bias`` (the stack's table in every layer, T5's
buckets, ``relative_attention_max_distance``). CTranslate2 4.x has ALiBi in decoders only, not in
encoders: ``alibi_transformer`` is refused. What each encoding exports to, or why it is refused, is one
entry of :data:`EXPORTERS`, keyed by the encoding's options class; an encoding without an entry is
refused naming it.
"""

from argparse import Namespace
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Union

import numpy as np
import torch
from ctranslate2.converters import fairseq as ct2_fairseq
from ctranslate2.specs import transformer_spec

from fairseq_rope import RopeOptions
from fairseq_rope.alibi import ALiBi
from fairseq_rope.encodings import ENCODINGS
from fairseq_rope.nope import NoPE
from fairseq_rope.shaw import ShawRPE
from fairseq_rope.t5_bias import T5Bias


class ExportError(ValueError):
    """The checkpoint uses something CTranslate2 cannot represent; the message names the option."""


def checkpoint_args(state, path):
    args = state.get("args") or (state.get("cfg") or {}).get("model")
    if not isinstance(args, Namespace):
        raise ExportError(f"{path}: no model arguments (args or cfg.model) in this checkpoint; is it a fairseq checkpoint?")
    return args


@dataclass(frozen=True)
class Exporter:
    """How a model with an encoding becomes CTranslate2's Transformer spec: the keyword arguments of its
    encoder and decoder specs (``spec_args(options)``), what the engine would compute differently
    (``problems(options, args)``: one message per option), and the tables its self-attention specs
    take from the model (``set_self_attention(spec, attention, coder)``), if any."""

    spec_args: Callable[[object], dict]
    problems: Callable[[object, Namespace], List[str]] = lambda options, args: []
    set_self_attention: Optional[Callable] = None


def rotary_problems(options: RopeOptions, args) -> List[str]:
    problems = []
    if getattr(args, "add_token_positional_embeddings", False):
        problems.append("--add-token-positional-embeddings: CTranslate2 skips additive positions in layers with "
                        "rotary self-attention")
    # (--rope-random-positions acts in training only: such a model decodes as any other)
    default = RopeOptions()
    for field in ("attention", "scaling"):
        value = getattr(options, field)
        if value != getattr(default, field):
            problems.append(f"--rope-{field} {value}: not exported (only {getattr(default, field)})")
    return problems


def relative_problems(options, args) -> List[str]:
    if getattr(args, "add_token_positional_embeddings", False):
        return ["--add-token-positional-embeddings: CTranslate2's relative-position specs have no additive "
                "position table"]
    return []


def set_shaw_tables(spec, attention, coder):
    """Shaw's a^K and a^V of a layer: rows for distances -k .. k (the decoder's, which stop at 0, get
    zero rows for the future, which causal attention never reads; keys-only: a^V zeros)."""
    k = attention.max_relative_position
    tables = []
    for table in (attention.relative_keys, attention.relative_values):
        rows = torch.zeros(2 * k + 1, attention.head_dim) if table is None else table.weight.detach().float()
        if rows.size(0) == k + 1:
            rows = torch.cat([rows, rows.new_zeros(k, rows.size(1))])
        tables.append(rows.numpy())
    spec.relative_position_keys, spec.relative_position_values = tables


def set_t5_table(spec, attention, coder):
    """The stack's T5 bias table, in every layer's spec."""
    bias = coder.position_bias
    spec.relative_attention_bias = bias.relative_attention_bias.weight.detach().float().numpy()
    spec.relative_attention_max_distance = np.dtype("int32").type(bias.options.max_distance)


# encoding options class -> its Exporter, or why CTranslate2 cannot run it
EXPORTERS: Dict[type, Union[Exporter, str]] = {
    RopeOptions: Exporter(lambda o: dict(rotary_dim=o.dim or 0, rotary_interleave=o.layout == "interleaved",
                                         rotary_base=float(o.theta)), rotary_problems),
    ShawRPE: Exporter(lambda o: dict(relative_position=True), relative_problems, set_shaw_tables),
    T5Bias: Exporter(lambda o: dict(relative_attention_bias=True), relative_problems, set_t5_table),
    ALiBi: "CTranslate2 4.8.5 has ALiBi in decoder specs only, not in the encoder (TransformerEncoderSpec has no alibi)",
    NoPE: "CTranslate2's Transformer specs always have positions (a table, rotary or relative)",
}


def exporter_of(args, model_name) -> Optional[Exporter]:
    """The Exporter of the model's encoding (None: fairseq's transformer); raises ExportError for a model
    CTranslate2 cannot run, saying why."""
    if model_name == "transformer":
        return None
    encoding = ENCODINGS.get(model_name)
    if encoding is None:
        raise ExportError(f"cannot export to CTranslate2: --arch {args.arch} (model {model_name}): only fairseq's "
                          f"transformer and the models of fairseq-rope's encodings ({', '.join(ENCODINGS)}) are supported")
    exporter = EXPORTERS.get(encoding)
    if exporter is None:
        exporter = (f"{encoding.title} ({encoding.__module__}.{encoding.__name__}) has no CTranslate2 exporter "
                    "(no entry in fairseq_rope_translation.ct2_spec.EXPORTERS)")
    if isinstance(exporter, str):
        raise ExportError(f"cannot export to CTranslate2: --arch {args.arch}: {exporter}")
    return exporter


def check_exportable(args, model_name):
    """Refuses, naming the option, what the engine would silently compute differently."""
    exporter = exporter_of(args, model_name)
    problems = []
    activation = getattr(args, "activation_fn", "relu")
    if activation not in ct2_fairseq._SUPPORTED_ACTIVATIONS:
        problems.append(f"--activation-fn {activation}: CTranslate2 has {', '.join(ct2_fairseq._SUPPORTED_ACTIVATIONS)}")
    if getattr(args, "adaptive_softmax_cutoff", None):
        problems.append("--adaptive-softmax-cutoff: CTranslate2 has a plain output projection only")
    for side in ("decoder_input_dim", "decoder_output_dim"):
        if getattr(args, side, args.decoder_embed_dim) != args.decoder_embed_dim:
            problems.append(f"--{side.replace('_', '-')} {getattr(args, side)} != --decoder-embed-dim "
                            f"{args.decoder_embed_dim}: input/output projections are not exported")
    if getattr(args, "cross_self_attention", False):
        problems.append("--cross-self-attention: not in CTranslate2's Transformer")
    if exporter is not None:
        problems += exporter.problems(ENCODINGS[model_name].from_args(args), args)
    elif getattr(args, "no_token_positional_embeddings", False):
        problems.append("--no-token-positional-embeddings: a transformer without positions has no CTranslate2 spec")
    if problems:
        raise ExportError("cannot export to CTranslate2: " + "; ".join(problems))


def set_input_layers(spec, module, positions_in_attention: bool):
    """ctranslate2's fairseq ``set_input_layers``, without a position table for models whose positions
    are in their self-attention (rotary or relative)."""
    if positions_in_attention:
        ct2_fairseq.set_embeddings(spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings,
                                   module.embed_tokens)
        spec.scale_embeddings = module.embed_scale
    else:
        ct2_fairseq.set_input_layers(spec, module)


def model_name_of(args) -> Optional[str]:
    """The registered fairseq model of the checkpoint's ``--arch``."""
    from fairseq import models

    return models.ARCH_MODEL_NAME_REGISTRY.get(args.arch, getattr(args, "_name", None))


def model_spec(args, model) -> transformer_spec.TransformerSpec:
    """The CTranslate2 spec of a loaded fairseq ``transformer`` or a model of an encoding in EXPORTERS."""
    model_name = model_name_of(args)
    exporter = exporter_of(args, model_name)
    encoding_args = {} if exporter is None else exporter.spec_args(ENCODINGS[model_name].from_args(args))
    activation = ct2_fairseq._SUPPORTED_ACTIVATIONS[getattr(args, "activation_fn", "relu")]
    encoder, decoder = model.encoder, model.decoder
    encoder_spec = transformer_spec.TransformerEncoderSpec(
        len(encoder.layers), args.encoder_attention_heads, pre_norm=args.encoder_normalize_before,
        activation=activation, layernorm_embedding=encoder.layernorm_embedding is not None, **encoding_args)
    decoder_spec = transformer_spec.TransformerDecoderSpec(
        len(decoder.layers), args.decoder_attention_heads, pre_norm=args.decoder_normalize_before,
        no_final_norm=decoder.layer_norm is None, activation=activation,
        layernorm_embedding=decoder.layernorm_embedding is not None,
        alignment_heads=args.decoder_attention_heads, **encoding_args)  # (attention averaged as fairseq's)
    spec = transformer_spec.TransformerSpec(encoder_spec, decoder_spec)

    set_input_layers(encoder_spec, encoder, exporter is not None)
    for layer_spec, layer in zip(encoder_spec.layer, encoder.layers):
        ct2_fairseq.set_transformer_encoder_layer(layer_spec, layer)
    set_input_layers(decoder_spec, decoder, exporter is not None)
    ct2_fairseq.set_linear(decoder_spec.projection, decoder.output_projection)
    for layer_spec, layer in zip(decoder_spec.layer, decoder.layers):
        ct2_fairseq.set_transformer_decoder_layer(layer_spec, layer)
    for side_spec, module in ((encoder_spec, encoder), (decoder_spec, decoder)):
        if exporter is not None and exporter.set_self_attention is not None:
            for layer_spec, layer in zip(side_spec.layer, module.layers):
                exporter.set_self_attention(layer_spec.self_attention, layer.self_attn, module)
        if module.layer_norm is not None:
            ct2_fairseq.set_layer_norm(side_spec.layer_norm, module.layer_norm)
        if module.layernorm_embedding is not None:
            ct2_fairseq.set_layer_norm(side_spec.layernorm_embedding, module.layernorm_embedding)

    spec.register_source_vocabulary(ct2_fairseq._get_vocab(encoder.dictionary))
    spec.register_target_vocabulary(ct2_fairseq._get_vocab(decoder.dictionary))
    spec.config.decoder_start_token = spec.config.eos_token  # fairseq starts decoding with </s>
    spec.config.add_source_eos = True  # and ends every source with </s>
    spec.config.layer_norm_epsilon = float(encoder.layers[0].final_layer_norm.eps)
    return spec
