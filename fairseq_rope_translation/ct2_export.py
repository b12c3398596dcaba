"""A checkpoint exported to CTranslate2 (fairseq-rope-ct2, the cache): the model (ct2_spec), the fairseq
dictionaries, the data's preprocessing record with its files and METADATA, assembled under a temporary
name and renamed when complete."""

import json
import os
import shutil
import tempfile
from typing import Optional

import ctranslate2
import torch
from ctranslate2.converters.converter import Converter

from fairseq_rope_checkpoints import load_checkpoint, longest_training_source
from fairseq_rope_text.preprocessing import Preprocessing, PreprocessingError, resolve

from .ct2_spec import ExportError, check_exportable, checkpoint_args, model_name_of, model_spec
from .model_files import METADATA


def load_model(checkpoint: str, data_bin: str, source_lang=None, target_lang=None):
    """(args, task, model) of a checkpoint, loaded with weights_only, with the dictionaries of ``data_bin``."""
    from fairseq import models, tasks
    from fairseq.data.data_utils import infer_language_pair

    # (the models are registered: ct2_spec imported the fairseq_rope package)
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
