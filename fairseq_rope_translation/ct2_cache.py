"""Exports made once per content and reused: load_translator's CTranslate2 default (``ct2-cache`` beside the
checkpoint, else the user's cache, or FAIRSEQ_ROPE_CT2_CACHE), keyed by what the export is made of."""

import hashlib
import json
import os
import shutil
import tempfile
from typing import List

import ctranslate2

from fairseq_rope_text.preprocessing import Preprocessing

from .ct2_export import export
from .model_files import METADATA

CACHE = "ct2-cache"  # beside the checkpoint, where load_translator keeps the exports it makes


# what an export holds, counted up when it changes (2: the decoder's attention averaged over every head)
EXPORT_FORMAT = 2


def cache_key(checkpoint: str, data_bin: str, record: Preprocessing, source_lang: str, target_lang: str) -> str:
    """What an export is made of, as one hex digest: the checkpoint's bytes, the two dictionaries, the
    preprocessing record and its files, the languages, and the versions of CTranslate2 and of this
    exporter and its format (a new checkpoint, or the same file trained further, is exported again)."""
    from fairseq_rope import __version__

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
