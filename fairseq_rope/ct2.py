"""CTranslate2 for rope_transformer and transformer checkpoints: export, then translate like fairseq.

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

Decoding as fairseq's SequenceGenerator (checked against fairseq-generate in tests/test_ct2.py):
  * length penalty: fairseq ranks finished hypotheses by sum(log p) / len**lenpen with ``len``
    counting the EOS; CTranslate2 divides by the length of the returned tokens, so it is called
    with ``return_end_token=True`` (the EOS counted) and the EOS is stripped afterwards;
  * maximum length: fairseq allows max_len = min(int(a * S + b), max target positions - 1) tokens
    before the EOS, S the length of the padded source batch, EOS included: it depends on the longest
    sentence of the batch. Here S is each sentence's own length with its EOS, as fairseq computes it
    for a sentence translated alone (fairseq-interactive, the hub), so that a translation does not
    depend on its batch. CTranslate2 has one limit per call: sentences are grouped by max_len and
    each group is decoded with ``max_decoding_length = max_len + 1`` (the EOS included). At that
    last step fairseq forces the EOS, while CTranslate2 keeps the best token: so the hypotheses
    that reach the limit are cut to max_len tokens, re-scored with the EOS after them
    (``score_batch``) and ranked with the others by fairseq's score. Not exact: CTranslate2's last
    step keeps the best tokens, so two beams may extend one prefix and crowd out a prefix that
    fairseq finishes with the forced EOS (tests: max length 3, >= 97% identical to fairseq-generate);
  * minimum length 1 (fairseq's default ``--min-len 1``: no empty translation). Both forbid the EOS
    at the first step, but CTranslate2 does so before its softmax, which renormalises that step's
    log-probabilities over the other tokens, while fairseq sets the EOS to -inf after it: every
    CTranslate2 hypothesis score is too high by -log(1 - p(EOS first)) / length**lenpen. That
    p(EOS first) comes from ``score_batch`` with an empty target (one encoder pass per batch) and the
    scores are corrected, so that they and the ranking are fairseq's;
  * no input truncation (``max_input_length=0``; inputs over the model's source positions are
    refused instead).
"""

import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
from argparse import Namespace
from dataclasses import dataclass
from itertools import groupby
from typing import Callable, Dict, List, Optional, Sequence, Union

import ctranslate2
import numpy as np
import torch
from ctranslate2.converters import fairseq as ct2_fairseq
from ctranslate2.converters.converter import Converter
from ctranslate2.specs import transformer_spec

from fairseq_rope_text import preprocessing
from fairseq_rope_text.markup import Translation
from fairseq_rope_text.preprocessing import Preprocessing, PreprocessingError, resolve

from .alibi import ALiBi
from fairseq_rope_checkpoints import load_checkpoint, longest_training_source
from .encodings import ENCODINGS
from .nope import NoPE
from .options import RopeOptions
from .shaw import ShawRPE
from .t5_bias import T5Bias
from .translator import EngineError, TranslatorInterface

METADATA = "fairseq_rope_ct2.json"


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
                    "(no entry in fairseq_rope.ct2.EXPORTERS)")
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


def load_model(checkpoint: str, data_bin: str, source_lang=None, target_lang=None):
    """(args, task, model) of a checkpoint, loaded with weights_only, with the dictionaries of ``data_bin``."""
    from fairseq import models, tasks
    from fairseq.data.data_utils import infer_language_pair

    # (the models are registered: importing this module imported the fairseq_rope package)
    state = load_checkpoint(checkpoint)
    args = checkpoint_args(state, checkpoint)
    args.data = data_bin
    args.source_lang = source_lang or args.source_lang
    args.target_lang = target_lang or args.target_lang
    if args.source_lang is None or args.target_lang is None:  # as fairseq's translation task infers them
        args.source_lang, args.target_lang = infer_language_pair(data_bin)
        if args.source_lang is None:
            raise ValueError(f"cannot tell the language pair from {data_bin} (no <split>.<src>-<tgt>.* files): "
                             f"give the languages (--source-lang/--target-lang)")
    check_exportable(args, model_name_of(args))
    for lang in (args.source_lang, args.target_lang):
        path = os.path.join(data_bin, f"dict.{lang}.txt")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"dictionary for '{lang}' not found: {path} (wrong --data-bin or language?)")
    task = tasks.setup_task(args)
    model = models.build_model(args, task)
    try:
        model.load_state_dict(state["model"], strict=True, model_cfg=args)
    except RuntimeError as error:
        if "size mismatch" not in str(error):
            raise
        raise ExportError(
            f"{checkpoint} does not fit the dictionaries in {data_bin} (source {len(task.source_dictionary)}, "
            f"target {len(task.target_dictionary)} symbols): was it trained with another --data-bin?\n{error}"
        ) from None
    return args, task, model.eval()


class _SpecConverter(Converter):
    def __init__(self, spec):
        self.spec = spec

    def _load(self):
        return self.spec


def export(checkpoint: str, data_bin: str, output_dir: str, quantization: Optional[str] = None, force: bool = False,
           bpe_codes: Optional[str] = None, sentencepiece_model: Optional[str] = None, tokenizer: Optional[str] = None,
           source_lang: Optional[str] = None, target_lang: Optional[str] = None,
           preprocessing_record: Optional[Preprocessing] = None) -> str:
    """Writes the CTranslate2 model of ``checkpoint`` to ``output_dir`` with what translation needs
    beside it: the fairseq dictionaries, METADATA, and ``data_bin``'s preprocessing record with its
    files (fairseq_rope_text.preprocessing; ``bpe_codes``, ``sentencepiece_model`` and ``tokenizer``,
    "moses" or "none", are needed only for a data-bin without a record, and must agree with one;
    ``preprocessing_record``: a record already read, used as it is).

    The directory is assembled under a temporary name beside ``output_dir`` and renamed at the end,
    so a failed or killed export leaves no half-written model under that name."""
    if not os.path.isfile(checkpoint):
        raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
    output_dir = os.path.abspath(output_dir)
    if os.path.exists(output_dir) and not force:
        raise FileExistsError(f"output directory exists: {output_dir} (give --force to replace it)")
    args, _, model = load_model(checkpoint, data_bin, source_lang, target_lang)
    record = preprocessing_record
    try:
        record = record or resolve(data_bin, args.source_lang, args.target_lang, bpe_codes=bpe_codes,
                                   sentencepiece_model=sentencepiece_model, pretokenizer=tokenizer)
    except PreprocessingError as error:
        raise ValueError(str(error)) from None
    with torch.no_grad():
        spec = model_spec(args, model)

    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.tmp-", dir=parent)
    try:
        _SpecConverter(spec).convert(staging, quantization=quantization, force=True)
        for lang in (args.source_lang, args.target_lang):
            shutil.copyfile(os.path.join(data_bin, f"dict.{lang}.txt"), os.path.join(staging, f"dict.{lang}.txt"))
        record.write(staging)
        metadata = dict(
            source_lang=args.source_lang, target_lang=args.target_lang, arch=args.arch, checkpoint=os.path.abspath(checkpoint), quantization=quantization or "float32",
            max_source_positions=model.encoder.max_positions(), max_target_positions=model.decoder.max_positions(),
            longest_training_source=longest_training_source(model.encoder, data_bin, args.source_lang, args.target_lang),
            ctranslate2_version=ctranslate2.__version__,
        )
        with open(os.path.join(staging, METADATA), "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=2)
            f.write("\n")
        if os.path.exists(output_dir):  # --force: the old model goes only once the new one is complete
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.old-", dir=parent)
            os.rename(output_dir, os.path.join(old, "model"))
            os.rename(staging, output_dir)
            shutil.rmtree(old)
        else:
            os.rename(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output_dir


CACHE = "ct2-cache"  # beside the checkpoint, where load_translator keeps the exports it makes


# what an export holds, counted up when it changes (2: the decoder's attention averaged over every head)
EXPORT_FORMAT = 2


def cache_key(checkpoint: str, data_bin: str, record: Preprocessing, source_lang: str, target_lang: str) -> str:
    """What an export is made of, as one hex digest: the checkpoint's bytes, the two dictionaries, the
    preprocessing record and its files, the languages, and the versions of CTranslate2 and of this
    exporter and its format (a new checkpoint, or the same file trained further, is exported again)."""
    from . import __version__

    digest = hashlib.sha256()
    digest.update(json.dumps([source_lang, target_lang, record.to_json(), ctranslate2.__version__, __version__,
                              EXPORT_FORMAT], sort_keys=True).encode())
    for path in (checkpoint, os.path.join(data_bin, f"dict.{source_lang}.txt"),
                 os.path.join(data_bin, f"dict.{target_lang}.txt"), *record.files()):
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:32]


def cache_dirs(checkpoint: str) -> List[str]:
    """Where exports are kept, first choice first: FAIRSEQ_ROPE_CT2_CACHE where set; else ``ct2-cache``
    beside the checkpoint, then the user's cache ($XDG_CACHE_HOME or ~/.cache, fairseq-rope/ct2)."""
    if os.environ.get("FAIRSEQ_ROPE_CT2_CACHE"):
        return [os.environ["FAIRSEQ_ROPE_CT2_CACHE"]]
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [os.path.join(os.path.dirname(os.path.abspath(checkpoint)), CACHE), os.path.join(user, "fairseq-rope", "ct2")]


def cached_export(checkpoint: str, data_bin: str, record: Preprocessing, source_lang: str, target_lang: str):
    """(directory, made): the float32 export of ``checkpoint``, made once per content (:func:`cache_key`)
    in the first writable of :func:`cache_dirs`, and reused. Written atomically (:func:`export`): a
    directory under the key is complete. Other exports of the same checkpoint file in that directory
    (older contents) are removed when a new one is made."""
    key = cache_key(checkpoint, data_bin, record, source_lang, target_lang)
    for root in cache_dirs(checkpoint):
        path = os.path.join(root, key)
        if os.path.isfile(os.path.join(path, METADATA)):
            return path, False
    errors = []
    for root in cache_dirs(checkpoint):
        try:
            os.makedirs(root, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=f".{key}.export-", dir=root)
        except OSError as error:
            errors.append(f"{root}: {error.strerror or error}")
            continue
        path = os.path.join(root, key)
        try:
            export(checkpoint, data_bin, os.path.join(staging, "model"), source_lang=source_lang,
                   target_lang=target_lang, preprocessing_record=record)
            try:
                os.rename(os.path.join(staging, "model"), path)
            except OSError:  # another process made the same export meanwhile: theirs is as good
                if not os.path.isfile(os.path.join(path, METADATA)):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        remove_stale_exports(root, key, checkpoint)
        return path, True
    raise OSError(f"no writable place for the CTranslate2 export of {checkpoint}: {'; '.join(errors)} "
                  f"(set FAIRSEQ_ROPE_CT2_CACHE to a writable directory)")


def remove_stale_exports(root: str, key: str, checkpoint: str):
    """Removes the exports in ``root`` made from the same checkpoint file with other contents."""
    for name in os.listdir(root):
        meta = os.path.join(root, name, METADATA)
        if name == key or not os.path.isfile(meta):
            continue
        try:
            with open(meta, encoding="utf-8") as f:
                made_from = json.load(f).get("checkpoint")
        except (OSError, ValueError):
            continue
        if made_from == os.path.abspath(checkpoint):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def fairseq_max_len(n_subwords: int, max_len_a: float, max_len_b: int, max_target_positions: int) -> int:
    """Tokens fairseq's SequenceGenerator allows before the EOS for a source of ``n_subwords``
    translated alone (its source length then counts the EOS)."""
    return min(int(max_len_a * (n_subwords + 1) + max_len_b), max_target_positions - 1)


def subword_text(tokens: Sequence[str]) -> str:
    """The subwords of a hypothesis as fairseq's Dictionary.string writes them: <s> and </s> left out
    (a model may predict <s>; fairseq's beam search does not forbid it)."""
    return " ".join(token for token in tokens if token not in ("<s>", "</s>"))


# fairseq's hub attributes, which a CTranslate2 translator does not have (its error names the backend that does)
FAIRSEQ_ONLY = {"models", "task", "cfg", "generate", "sample", "binarize", "string", "src_dict", "tgt_dict"}


class CTranslate2Translator(TranslatorInterface):
    """The translator interface (fairseq_rope.translator) run by CTranslate2.

    Raw sentences in, detokenized translations out, through the preprocessing record the export
    carries (the data's: the subwords are those of training), beam 4 and length penalty 0.6 by default.

    Args:
        model_dir: a directory written by ``fairseq-rope-ct2``.
        device: "cpu" or "cuda"; compute_type: CTranslate2's (default: the model's quantization).
        threads: intra-op threads (0: CTranslate2's default); max_batch_size: sentences per batch.
    """

    engine = "ctranslate2"

    def __init__(self, model_dir: str, device: str = "cpu", compute_type: str = "default", threads: int = 0,
                 beam: int = 4, lenpen: float = 0.6, max_len_a: float = 0.0, max_len_b: int = 200,
                 max_batch_size: int = 64):
        meta_path = os.path.join(model_dir, METADATA)
        if not os.path.isfile(meta_path):
            raise FileNotFoundError(f"{meta_path} not found: {model_dir} is not a model written by fairseq-rope-ct2")
        try:
            with open(meta_path, encoding="utf-8") as f:
                self.metadata = json.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{meta_path}: not the JSON fairseq-rope-ct2 writes: {error}") from None
        self.model_dir = model_dir
        try:
            kind, _, index = device.partition(":")  # (torch's "cuda:N")
            self.translator = ctranslate2.Translator(str(model_dir), device=kind, device_index=int(index or 0),
                                                     compute_type=compute_type, intra_threads=threads)
        except RuntimeError as error:  # (a damaged or truncated model.bin, a spec it does not know)
            raise ValueError(f"{os.path.join(str(model_dir), 'model.bin')}: CTranslate2 cannot load it: "
                             f"{' '.join(str(error).split())}") from None
        self.compute_type = self.translator.compute_type
        self.beam, self.lenpen, self.max_len_a, self.max_len_b = beam, lenpen, max_len_a, max_len_b
        self.max_batch_size = max_batch_size
        self.dictionaries = {}
        self.preprocessing = self._preprocessing()
        self.source_lang, self.target_lang = self.metadata["source_lang"], self.metadata["target_lang"]

    def _preprocessing(self) -> Preprocessing:
        """The export's record; an export made before records held its tokenizer and subword file in
        METADATA: what they name, applied as prepare.sh did (said in one line)."""
        if os.path.isfile(os.path.join(self.model_dir, preprocessing.RECORD)):
            return preprocessing.read(self.model_dir)
        meta, bpe = self.metadata, self.metadata.get("bpe") or {}
        path = os.path.join(self.model_dir, bpe["file"]) if bpe else None
        record = Preprocessing(
            source_lang=meta["source_lang"], target_lang=meta["target_lang"],
            pretokenizer="moses" if meta.get("tokenizer") else "none",
            subword={"subword_nmt": "subword_nmt", "sentencepiece": "sentencepiece"}.get(bpe.get("bpe"), "none"),
            codes=path if bpe.get("bpe") == "subword_nmt" else None,
            sentencepiece_model=path if bpe.get("bpe") == "sentencepiece" else None, origin=self.model_dir)
        print(f"[fairseq-rope] {self.model_dir} has no {preprocessing.RECORD} (exported before records): applying "
              f"{record.describe()}; export again from a data-bin with a record to carry it", file=sys.stderr)
        return record

    def encode(self, sentence: str) -> torch.LongTensor:
        """Raw source text -> the ids of its subwords in the source dictionary, with the EOS: what
        fairseq's hub ``encode`` returns."""
        return self.dictionary(self.source_lang).encode_line(" ".join(self.subwords(sentence)),
                                                             add_if_not_exist=False).long()

    def decode(self, ids: torch.LongTensor) -> str:
        """Target ids -> text, as fairseq's hub ``decode`` (the EOS, <s> and padding left out)."""
        return self.detokenize(self.dictionary(self.target_lang).string(ids).split())

    def dictionary(self, lang: str):
        """The export's fairseq dictionary of ``lang`` (read once)."""
        if lang not in self.dictionaries:
            from fairseq.data import Dictionary

            path = os.path.join(self.model_dir, f"dict.{lang}.txt")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path} not found: export the model again with fairseq-rope-ct2")
            self.dictionaries[lang] = Dictionary.load(path)
        return self.dictionaries[lang]

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Target subwords -> text, as fairseq-rope-score detokenizes (without <s> and </s>, which
        fairseq's Dictionary.string leaves out)."""
        return self.preprocessing.decode(subword_text(tokens), self.target_lang)

    def __getattr__(self, name: str):
        if name in FAIRSEQ_ONLY:
            raise AttributeError(f"{name!r} is fairseq's: this translator runs on CTranslate2; "
                                 f"load_translator(..., backend='fairseq') gives fairseq's hub with it")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def translate_tokens(self, sources: Sequence[Sequence[str]], beam: Optional[int] = None,
                         lenpen: Optional[float] = None, nbest: int = 1, align: bool = False):
        """Beam search over subword sequences; returns, per source, ``nbest`` (tokens, score, alignment)
        best first, the score fairseq's: sum of log-probabilities (EOS included) / (length + 1)**lenpen, the
        alignment each token's most attended source position (CTranslate2's attention, the heads averaged;
        with ``align`` only, else None)."""
        beam = beam or self.beam
        lenpen = self.lenpen if lenpen is None else lenpen
        limit = self.metadata["max_source_positions"] - 1  # the source EOS takes one position
        for i, source in enumerate(sources):
            if len(source) > limit:
                raise ValueError(f"sentence {i} has {len(source)} subwords; this model takes at most {limit} "
                                 f"(its max source positions {limit + 1}, with the EOS)")
        max_lens = [fairseq_max_len(len(s), self.max_len_a, self.max_len_b, self.metadata["max_target_positions"])
                    for s in sources]
        results = [None] * len(sources)
        order = sorted(range(len(sources)), key=lambda i: (max_lens[i], len(sources[i])))
        for max_len, group in groupby(order, key=lambda i: max_lens[i]):
            group = list(group)
            for start in range(0, len(group), self.max_batch_size):
                batch = group[start : start + self.max_batch_size]
                outputs = self.translator.translate_batch(
                    [list(sources[i]) for i in batch], beam_size=beam, num_hypotheses=beam, length_penalty=lenpen,
                    return_end_token=True, return_scores=True, return_attention=align,
                    max_decoding_length=max_len + 1, min_decoding_length=1, max_input_length=0)
                first_eos = self.score_tokens([sources[i] for i in batch], [[]] * len(batch))
                # the first step's attention, which CTranslate2's beam search (4.x) gives wrong in a batch of
                # several sentences (another sentence's, or zeros): the same step of a greedy search
                first_step = self.translator.translate_batch(
                    [list(sources[i]) for i in batch], beam_size=1, max_decoding_length=1, return_attention=True,
                    max_input_length=0) if align and len(batch) > 1 else outputs
                for i, output, eos, first in zip(batch, outputs, first_eos, first_step):
                    renormalised = math.log1p(-math.exp(min(float(eos[0]), -1e-12)))
                    step = first.attention[0][0] if first.attention and first.attention[0] else None
                    results[i] = self._fairseq_ranking(sources[i], output, max_len, lenpen, renormalised, step)[:nbest]
        return results

    def _fairseq_ranking(self, source, output, max_len: int, lenpen: float, renormalised: float, first_step=None):
        """The finished hypotheses of one sentence, best first by fairseq's score: CTranslate2's
        first-step renormalisation (``renormalised`` = log(1 - p(EOS first))) taken out, and the
        hypotheses cut at the length limit (no EOS) given fairseq's forced EOS, scored by score_batch.
        Each as (tokens, score, alignment: the source position each token attends to most; the first
        token's from ``first_step``, the first step's attention, where given)."""
        finished, cut, alignments = {}, [], {}
        for k, (tokens, score) in enumerate(zip(output.hypotheses, output.scores)):
            ended = bool(tokens) and tokens[-1] == "</s>"
            kept = tuple(tokens[:-1]) if ended else tuple(tokens[:max_len])
            if output.attention and kept not in alignments:
                rows = [first_step if first_step is not None and step == 0 else row
                        for step, row in enumerate(output.attention[k][:len(kept)])]
                alignments[kept] = [int(np.argmax(row[:len(source)])) if len(source) else 0 for row in rows]
            if ended:
                finished.setdefault(kept, score + renormalised / len(tokens) ** lenpen)
            else:
                cut.append(kept)
        cut = [prefix for prefix in dict.fromkeys(cut) if prefix not in finished]
        if cut:
            for prefix, log_probs in zip(cut, self.score_tokens([source] * len(cut), cut)):
                finished[prefix] = float(log_probs.sum()) / (len(prefix) + 1) ** lenpen
        return sorted(((list(tokens), score, alignments.get(tokens)) for tokens, score in finished.items()),
                      key=lambda h: -h[1])

    def translate_sentences(self, sentences, beam, lenpen, verbose, **kwargs):
        if kwargs:
            raise EngineError(f"translate(): {', '.join(sorted(kwargs))} are fairseq's generation options: "
                              f"load_translator(..., backend='fairseq') takes them")
        single = isinstance(sentences, str)
        batch = [sentences] if single else list(sentences)
        outputs = [nbest[0] for nbest in self.translate_subwords([self.subwords(s) for s in batch], beam, lenpen)]
        if verbose:
            for source, output in zip(batch, outputs):
                print(f"S\t{source}\nH\t{output}")
        return outputs[0] if single else outputs

    def translate_subwords(self, sources, beam=None, lenpen=None, nbest=1, align=False):
        return [[Translation(self.detokenize(tokens), source, tokens, alignment) for tokens, _, alignment in hypotheses]
                for source, hypotheses in zip(sources, self.translate_tokens(sources, beam, lenpen, nbest, align))]

    def score_subwords(self, sources, targets, batch_size=32):
        return [float(log_probs.sum()) for log_probs in self.score_tokens(sources, targets)]

    def longest_training_source(self) -> Optional[int]:
        return self.metadata.get("longest_training_source")  # (an export made before it was recorded: none)

    def score_tokens(self, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]]) -> List[np.ndarray]:
        """Forced decoding: per pair, the log-probability of each target subword and of the final EOS."""
        outputs = self.translator.score_batch([list(s) for s in sources], [list(t) for t in targets],
                                              max_batch_size=self.max_batch_size, max_input_length=0)
        return [np.asarray(output.log_probs, dtype=np.float64) for output in outputs]
