"""load_translator: a trained model (checkpoints and their data-bin, or a fairseq-rope-ct2 export) as a
translator, the engine chosen once, here: CTranslate2 where it gives fairseq's translations, else fairseq.

Both engines are a :class:`fairseq_rope_translation.interface.TranslatorInterface`; which one runs, and
why not the other, is one line of the logger ``fairseq_rope_translation``.
"""

import logging
import os
from typing import Optional

import torch
from fairseq import hub_utils

from fairseq_rope_checkpoints import check_fits, load_checkpoint, trained_languages
from fairseq_rope_text.preprocessing import Preprocessing, PreprocessingError, resolve

from .fairseq_engine import Translator
from .model_files import EXPORT_WITH_DATA_BIN, NO_DATA_BIN, model_files

LOG = logging.getLogger(__name__)
BACKENDS = ("auto", "fairseq", "ctranslate2")


def _require(path: str, what: str):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")


def check_device(device: Optional[str]) -> str:
    """``device`` as torch names it ("cpu", "cuda", "cuda:N"), one that is there; None: "cuda" when torch
    sees a GPU, else "cpu". A ValueError says what is wrong."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: torch {torch.__version__} sees no CUDA GPU here; use device 'cpu'")
    index = torch.device(device).index
    if kind == "cuda" and index is not None and index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s), numbered from 0")
    return device


def load_translator(
    model_dir: str,
    data_bin: Optional[str] = None,
    checkpoint_file: str = "checkpoint_best.pt",
    bpe_codes: Optional[str] = None,
    sentencepiece_model: Optional[str] = None,
    source_lang: Optional[str] = None,
    target_lang: Optional[str] = None,
    tokenizer: Optional[str] = None,
    beam: int = 4,
    lenpen: float = 0.6,
    max_len_a: float = 0.0,
    max_len_b: int = 200,
    device: Optional[str] = None,
    backend: str = "auto",
    compute_type: str = "default",
    threads: int = 0,
    model_overrides: Optional[dict] = None,
    preprocessing: Optional[Preprocessing] = None,
):
    """Loads ``model_dir/checkpoint_file`` with the dictionaries and the recorded preprocessing of ``data_bin``.

    Defaults, each as fairseq's own commands have it unless said:
      * ``checkpoint_file``: ``checkpoint_best.pt`` (fairseq's hub);
      * ``source_lang``, ``target_lang``: the languages the checkpoint was trained on (its task's
        ``--source-lang``/``--target-lang``), else those of ``data_bin``'s files, as fairseq infers them;
      * text to subwords and back: what ``data_bin/preprocessing.json`` records (prepare.sh writes it:
        pretokenizer, subword model with its vocabulary filter, context). ``bpe_codes``,
        ``sentencepiece_model`` and ``tokenizer`` (``"moses"`` or ``"none"``) are not needed; given, they
        must agree with the record (an error names both). A data-bin made before records: they say
        how its text was made, over what the data-bin tells (said in one line, with the command that
        writes the record);
      * ``beam`` 4 and ``lenpen`` 0.6: the paper's decoding (fairseq: 5 and 1);
      * ``max_len_a`` 0, ``max_len_b`` 200: fairseq-generate's limit ``a * source length + b``;
      * ``device``: ``"cuda"`` when torch sees a GPU, else ``"cpu"``; give it to choose;
      * ``model_overrides``: none; model options replaced at load time, as fairseq-generate's
        ``--model-overrides`` (e.g. ``{"rope_scaling": "linear", "rope_scaling_factor": 2.0}``);
      * ``preprocessing``: a record already read (fairseq_rope_text.preprocessing.resolve), used
        instead of reading ``data_bin``'s again.

    ``backend``: ``"auto"`` (the default) translates with CTranslate2 where it gives fairseq's
    translations: ``ctranslate2`` is installed and the model is one it runs (RoPE, the transformer,
    Shaw's RPE, T5's bias; sentence-level; no ``model_overrides``). The checkpoint is exported once
    (float32) into a cache keyed by its content and reused (fairseq_rope_translation.ct2_cache:
    ``ct2-cache`` beside the checkpoint, else ~/.cache/fairseq-rope/ct2, or FAIRSEQ_ROPE_CT2_CACHE), and one
    line (the logger ``fairseq_rope_translation``, on stderr by default) says which; otherwise fairseq, with
    one line saying why. ``"fairseq"``: fairseq's hub
    (:class:`Translator`, with fairseq's ``generate``, ``models``, ``task``...); ``"ctranslate2"``: CTranslate2
    or an error saying why not. ``model_dir`` may also be a ``fairseq-rope-ct2`` export (``data_bin``
    left out), whose own dictionaries and record are used. ``compute_type`` (e.g. ``"int8"``: weights
    quantized as the model loads) and ``threads`` are CTranslate2's. Both translators are a
    :class:`fairseq_rope_translation.interface.TranslatorInterface`: the same methods, the same translations;
    ``mt.engine`` says which runs it.
    """
    device = check_device(device)
    if tokenizer not in (None, "moses", "none"):
        raise ValueError(f"tokenizer must be 'moses' or 'none' (prepare.sh's PRETOKENIZER), got {tokenizer!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    decoding = dict(beam=beam, lenpen=lenpen, max_len_a=max_len_a, max_len_b=max_len_b)
    files = model_files(model_dir, data_bin, backend)
    # (backend="ctranslate2" without a data-bin: the directory is meant as an export, and its error says if not)
    if (files.export and files.misfit is None) or (files.misfit == NO_DATA_BIN and backend == "ctranslate2"):
        given = [name for name, value in (("bpe_codes", bpe_codes), ("sentencepiece_model", sentencepiece_model),
                                          ("tokenizer", tokenizer), ("model_overrides", model_overrides)) if value]
        if given:
            raise ValueError(f"{model_dir} is a CTranslate2 export: its dictionaries and preprocessing are its own; "
                             f"leave out {', '.join(given)}")
        from .ct2_engine import CTranslate2Translator

        return CTranslate2Translator(model_dir, device=device, compute_type=compute_type, threads=threads, **decoding)
    if files.misfit == EXPORT_WITH_DATA_BIN:
        raise ValueError(f"{model_dir} is a CTranslate2 export, with its own dictionaries and preprocessing: leave "
                         f"out data_bin{' and backend=fairseq' if backend == 'fairseq' else ''}")
    if files.misfit is not None:
        raise ValueError("data_bin (the fairseq-preprocess directory with the dictionaries) is required")
    checkpoint = os.path.join(model_dir, checkpoint_file)
    _require(checkpoint, "checkpoint")
    _require(data_bin, "data_bin (the fairseq-preprocess directory with the dictionaries)")
    # read weights-only first (tensors mapped, not read), whatever fairseq's own torch.load then
    # defaults to (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD): a checkpoint that would run code stops here
    state = load_checkpoint(checkpoint, mmap=True)
    if source_lang is None or target_lang is None:
        trained = trained_languages(state, data_bin)
        source_lang, target_lang = source_lang or trained[0], target_lang or trained[1]
    for lang in (source_lang, target_lang):
        _require(os.path.join(data_bin, f"dict.{lang}.txt"), f"dictionary for '{lang}' (wrong data_bin or language?)")
    record = preprocessing
    if record is None:
        try:
            record = resolve(str(data_bin), source_lang, target_lang, bpe_codes=bpe_codes and str(bpe_codes),
                             sentencepiece_model=sentencepiece_model and str(sentencepiece_model),
                             pretokenizer=tokenizer)
        except PreprocessingError as error:
            raise ValueError(str(error)) from None
    try:  # the record's files read now (codes, vocabularies, a sentencepiece model), not at the first sentence
        record.encode("a", source_lang)
    except PreprocessingError as error:
        raise ValueError(str(error)) from None
    why = None
    if backend != "fairseq":
        why = why_not_ctranslate2(state, checkpoint, record, device, model_overrides)
        if why is None:
            try:
                return ctranslate2_translator(checkpoint, str(data_bin), record, source_lang, target_lang, device,
                                              compute_type, threads, decoding)
            except Exception as error:  # (a file fairseq reads too may be damaged: fairseq's error names it)
                if backend == "ctranslate2":
                    raise
                why = f"the export failed: {error}"
        elif backend == "ctranslate2":
            raise ValueError(f"backend='ctranslate2': {why}")
    del state
    overrides = dict(model_overrides or {}, source_lang=source_lang, target_lang=target_lang,
                     max_len_a=max_len_a, max_len_b=max_len_b, bpe=None, tokenizer=None)
    try:
        loaded = hub_utils.from_pretrained(
            os.path.abspath(model_dir),
            checkpoint_file=checkpoint_file,
            data_name_or_path=os.path.abspath(data_bin),
            **overrides,
        )
    except Exception:  # fairseq's own messages do not name the file: say what is wrong if we can tell
        check_fits(checkpoint, data_bin, source_lang, target_lang)
        raise
    translator = Translator(loaded["args"], loaded["task"], loaded["models"], record, beam=beam, lenpen=lenpen)
    if why:  # (once fairseq has loaded it: where a damaged file stopped both, fairseq's error names it)
        LOG.info(f"{checkpoint}: translating with fairseq, not CTranslate2: {why}")
    return translator.to(device).eval()


def why_not_ctranslate2(state, checkpoint: str, record: Preprocessing, device: str,
                        model_overrides: Optional[dict]) -> Optional[str]:
    """Why the checkpoint cannot be translated by CTranslate2 with the same result as fairseq here, in a
    few words; None where it can."""
    try:
        import ctranslate2
    except ImportError:
        return "ctranslate2 is not installed (pip install 'fairseq-rope[ct2]')"
    if model_overrides:
        return f"model_overrides ({', '.join(sorted(model_overrides))}) change fairseq's model, not an export"
    if record.context:
        return (f"the model translates with {record.context} sentences of context (a document-level model), which "
                "CTranslate2 cannot give it")
    if device.startswith("cuda") and ctranslate2.get_cuda_device_count() == 0:
        return f"this ctranslate2 {ctranslate2.__version__} has no CUDA support (device {device})"
    from .ct2_spec import ExportError, check_exportable, checkpoint_args, model_name_of

    try:
        args = checkpoint_args(state, checkpoint)
        check_exportable(args, model_name_of(args))
    except ExportError as error:
        return str(error)
    return None


def ctranslate2_translator(checkpoint: str, data_bin: str, record: Preprocessing, source_lang: str, target_lang: str,
                           device: str, compute_type: str, threads: int, decoding: dict):
    """The CTranslate2 translator of ``checkpoint``, from its cached export (ct2_cache.cached_export: made once
    per content, reused after); a cached export that CTranslate2 cannot load is said in one line
    and made again. One line says which export is used."""
    import shutil
    import time

    from .ct2_cache import cached_export
    from .ct2_engine import CTranslate2Translator

    start = time.perf_counter()
    path, made = cached_export(checkpoint, data_bin, record, source_lang, target_lang)
    try:
        mt = CTranslate2Translator(path, device=device, compute_type=compute_type, threads=threads, **decoding)
    except (FileNotFoundError, ValueError) as error:
        if made:
            raise
        LOG.warning(f"{path}: a damaged CTranslate2 export ({error}); exporting again")
        shutil.rmtree(path, ignore_errors=True)
        path, made = cached_export(checkpoint, data_bin, record, source_lang, target_lang)
        mt = CTranslate2Translator(path, device=device, compute_type=compute_type, threads=threads, **decoding)
    how = f"exported in {time.perf_counter() - start:.1f} s to" if made else "its export in"
    LOG.info(f"{checkpoint}: translating with CTranslate2 ({mt.compute_type}), {how} {path}")
    return mt
