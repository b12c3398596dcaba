"""Loading fairseq checkpoints with ``torch.load(weights_only=True)``, never without it.

Since torch 2.6 ``torch.load`` only unpickles tensors and plain containers unless told
otherwise. fairseq checkpoints of add_args-style models (``transformer``, ours) also
pickle an ``argparse.Namespace`` (the model config) and, with ``--eval-bleu``, numpy
arrays in the training metrics. We allowlist exactly those classes; a checkpoint that
needs anything else (e.g. a pickle that calls ``os.system``) is refused and nothing in it
runs. Turning weights_only off would let any checkpoint run code.

A package of its own, beside the plugin: it imports torch and numpy, not fairseq (whose import takes
seconds), so the commands that only read checkpoints (fairseq-rope-average, fairseq-rope-checkpoint: a
step of every training and averaging) start without it; what needs fairseq (its dictionaries, datasets)
imports it where it is used.
"""

import argparse
import os

import numpy
import numpy.dtypes
import torch

try:  # numpy 2 (numpy 1.26 has this name only as a shim that ``import numpy`` does not load)
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy < 1.26
    from numpy.core.multiarray import _reconstruct

FAIRSEQ_CHECKPOINT_GLOBALS = [
    argparse.Namespace,  # cfg.model / args of add_args-style models
    numpy.ndarray,  # --eval-bleu counts in extra_state["metrics"]
    numpy.dtype,
    numpy.dtypes.Int64DType,
    # the function that unpickles arrays, under the name numpy 2 pickles it with and numpy 1.x's
    (_reconstruct, "numpy._core.multiarray._reconstruct"),
    (_reconstruct, "numpy.core.multiarray._reconstruct"),
]


def allowed_names():
    """The names of FAIRSEQ_CHECKPOINT_GLOBALS as they appear in a pickle."""
    return {g[1] if isinstance(g, tuple) else f"{g.__module__}.{g.__qualname__}" for g in FAIRSEQ_CHECKPOINT_GLOBALS}


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the message names the file and why."""


class UnsafeCheckpointError(CheckpointError):
    """The pickle needs classes a fairseq checkpoint never contains (it could run code)."""


class CorruptCheckpointError(CheckpointError):
    """Not a readable PyTorch checkpoint: truncated (e.g. a copy that was killed) or damaged."""


def allow_fairseq_checkpoints():
    """Adds what fairseq checkpoints contain to torch's weights_only allowlist."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_GLOBALS)


def load_checkpoint(path, map_location="cpu", mmap=False):
    """``torch.load(path, weights_only=True)`` with an error that names the file and what it refused.
    ``mmap``: tensors are mapped, not read, until used (to read a checkpoint's configuration only)."""
    allow_fairseq_checkpoints()
    if os.path.isfile(path):
        with open(path, "rb") as f:
            head = f.read(2)
        # torch.save writes a zip archive (b"PK"), or in its legacy format a pickle (protocol 2+: b"\x80");
        # anything else (a log, a text file, an empty one) would reach the unpickler as opcodes
        if not head.startswith((b"PK", b"\x80")):
            raise CorruptCheckpointError(
                f"{path}: not a readable checkpoint ({os.path.getsize(path):,} bytes, "
                f"{'empty' if not head else 'not a file torch.save writes'}; truncated or damaged, or another kind "
                "of file)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint not found: {path}") from None
    except Exception as error:
        if mmap and "mmap can only be used with files saved with" in str(error):  # torch's legacy format
            return load_checkpoint(path, map_location=map_location, mmap=False)
        if "Weights only load failed" not in str(error):
            size = os.path.getsize(path) if os.path.isfile(path) else 0
            raise CorruptCheckpointError(
                f"{path}: not a readable checkpoint ({size:,} bytes; truncated or damaged, e.g. a copy that "
                f"was interrupted): {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            ) from None
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:
            unsafe = []
        unsafe = ", ".join(name for name in unsafe if name not in allowed_names()) or "pickle instructions torch's safe loader refuses"
        # what torch refused, on one line: its message without the paragraphs about weights_only itself
        details = [line.strip() for line in str(error).splitlines()[1:] if line.strip() and not line.strip().startswith(
            ("Please file an issue", "Check the documentation"))]
        refused = details[0] if details else ""
        raise UnsafeCheckpointError(
            f"{path}: refusing to load this checkpoint: its pickle needs {unsafe}, which a fairseq "
            f"checkpoint never contains and which could run code. Nothing from it was executed. "
            f"Only load it with weights_only=False if you trust whoever made it"
            + (f" (torch's safe loader: {refused})" if refused else "")
        ) from None


def trained_languages(checkpoint, data_bin):
    """(source, target) a checkpoint (path or loaded state) was trained on: its task's languages, else
    those of ``data_bin``'s files as fairseq infers them (``train.src-tgt.src.bin``: src, tgt)."""
    from fairseq.data.data_utils import infer_language_pair

    state = load_checkpoint(checkpoint, mmap=True) if isinstance(checkpoint, (str, os.PathLike)) else checkpoint
    config = state.get("args") or (state.get("cfg") or {}).get("task") or {}
    get = (lambda key: getattr(config, key, None)) if isinstance(config, argparse.Namespace) else config.get
    if get("source_lang") and get("target_lang"):
        return get("source_lang"), get("target_lang")
    inferred = tuple(infer_language_pair(data_bin))
    if None in inferred:
        raise CheckpointError(f"cannot tell the languages of {data_bin} (no train/valid/test.<src>-<tgt>.* files) and "
                              "the checkpoint does not record them: give source_lang and target_lang")
    return inferred


def load_dictionary(path: str):
    """fairseq's Dictionary of ``path``; a file that is not one (not UTF-8, a line without its count): a
    ValueError naming the file and what a dictionary holds."""
    from fairseq.data import Dictionary

    try:
        return Dictionary.load(path)
    except FileNotFoundError:
        raise
    except Exception as error:  # fairseq raises Exception and RuntimeError with its own words
        reason = " ".join(str(error).split())
        raise ValueError(f"{path}: not a fairseq dictionary (UTF-8, a symbol and its count a line): {reason}") from None


def check_fits(checkpoint, data_bin, source_lang=None, target_lang=None):
    """Loads ``checkpoint`` (weights only) and checks that its embeddings have the sizes of the
    dictionaries in ``data_bin``; raises a CheckpointError naming both otherwise. Returns the state."""
    state = load_checkpoint(checkpoint)
    if "model" not in state:
        raise CheckpointError(f"{checkpoint} has no 'model' entry: not a fairseq checkpoint")
    if source_lang is None or target_lang is None:
        trained = trained_languages(state, data_bin)
        source_lang, target_lang = source_lang or trained[0], target_lang or trained[1]
    for side, lang in (("encoder", source_lang), ("decoder", target_lang)):
        weight = state["model"].get(f"{side}.embed_tokens.weight")
        path = os.path.join(data_bin, f"dict.{lang}.txt")
        if weight is None or not os.path.isfile(path):
            continue
        size = len(load_dictionary(path))
        if weight.shape[0] != size:
            raise CheckpointError(
                f"{checkpoint} does not fit the dictionary {path}: its {side} has {weight.shape[0]} embeddings, "
                f"the dictionary {size} symbols; was it trained with another data-bin?")
    return state


def longest_training_source(encoder, data_bin: str, source_lang: str, target_lang: str):
    """The longest source the model was trained on, in subwords with the end of sentence: what
    RoPE's encoder records while training (``original_max_positions``), else the longest line of
    the data-bin's training split; None when neither is there."""
    recorded = getattr(encoder, "original_max_positions", None)
    if recorded is not None and int(recorded) > 0:
        return int(recorded)
    from fairseq.data import data_utils

    data = str(data_bin).split(":")[0]
    for pair in (f"{source_lang}-{target_lang}", f"{target_lang}-{source_lang}"):
        path = os.path.join(data, f"train.{pair}.{source_lang}")
        if os.path.isfile(path + ".idx"):
            dataset = data_utils.load_indexed_dataset(path, encoder.dictionary)  # (its sizes live in its mmap)
            return int(dataset.sizes.max())
    return None
