"""One preprocessing, recorded with the data: how a sentence becomes model input, and a translation text.

prepare.sh writes ``DATA_BIN/preprocessing.json`` (RECORD) beside the dictionaries, with every file it
names copied there, and makes its own training, valid and test text with this module; every way in
(the Python API, fairseq-interactive's ``--bpe recorded``, the document commands, CTranslate2) reads
the record and applies the same functions, so that a model reads at inference what it read in training:

    {"format": 1, "source_lang": "en", "target_lang": "de",
     "pretokenizer": "moses",
     "subword": {"type": "subword_nmt", "codes": "codes", "separator": "@@",
                 "vocabulary": {"en": "vocab.en", "de": "vocab.de"}, "vocabulary_threshold": 50},
     "context": {"sentences": 0, "separator": "<sep>"}}

* ``pretokenizer``: ``moses`` is sacremoses' punctuation normalization (normalize-punctuation.perl with
  its unicode-punctuation pre-replacement and control-character removal) then ``tokenize -a`` without
  escaping (``&`` and ``'`` stay as they are; fairseq's ``--tokenizer moses`` escapes them and does not
  normalize); detokenization is sacremoses' detokenizer of the language, without unescaping. ``none``:
  the text is used as it is.
* ``subword``: ``subword_nmt`` codes, with subword-nmt's vocabulary filter where a vocabulary is
  recorded (a subword seen fewer than ``vocabulary_threshold`` times in that language's training text
  is split again; fairseq's ``--bpe subword_nmt`` never applies it), or ``sentencepiece`` (``model``),
  or ``none``. Subwords are joined back as fairseq's ``--remove-bpe`` ("@@ " or ``sentencepiece``) does.
* ``context``: sentences of context a document-level model was trained with (prepare.sh's CONTEXT),
  joined by `` <sep> `` after subwords (fairseq_rope_text.documents).

Only the standard library at import time; sacremoses, subword-nmt and sentencepiece are imported
when first used.
"""

import contextlib
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

RECORD = "preprocessing.json"
FORMAT = 1
PRETOKENIZERS = ("moses", "none")
SUBWORDS = ("subword_nmt", "sentencepiece", "none")
SEPARATOR = "<sep>"


class PreprocessingError(ValueError):
    """A record that cannot be read or applied; the message names the file and the field."""


# --- the steps ---------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _moses(lang: str):
    from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

    normalizer = MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=True, post_remove_control_chars=True)
    return normalizer, MosesTokenizer(lang=lang), MosesDetokenizer(lang=lang)


def moses_tokenize(line: str, lang: str) -> str:
    """Normalizes punctuation, removes control characters and tokenizes one line (``-a``, no escaping)."""
    normalizer, tokenizer, _ = _moses(lang)
    text = normalizer.normalize(line.strip())
    return tokenizer.tokenize(text, aggressive_dash_splits=True, escape=False, return_str=True).strip()


def moses_detokenize(line: str, lang: str) -> str:
    """The inverse of moses_tokenize: joins "@-@" splits and attaches punctuation (no unescaping)."""
    _, _, detokenizer = _moses(lang)
    return detokenizer.detokenize(line.split(), unescape=False).strip()


@lru_cache(maxsize=None)
def _bpe(codes: str, separator: str, vocabulary: Optional[str], threshold: Optional[int]):
    """subword-nmt's BPE as its apply-bpe command builds it (codes, separator, vocabulary filter)."""
    from subword_nmt.apply_bpe import BPE, read_vocabulary

    vocab = None
    if vocabulary:
        try:
            with open(vocabulary, encoding="utf-8") as f:
                vocab = read_vocabulary(f, threshold)
        except (UnicodeDecodeError, ValueError, IndexError) as error:
            raise PreprocessingError(f"{vocabulary}: not a subword-nmt vocabulary (UTF-8, a subword and its count "
                                     f"a line): {error}") from None
    try:
        with open(codes, encoding="utf-8") as f:
            # (subword-nmt prints a bad line to stderr and exits: kept to one line here)
            with contextlib.redirect_stderr(io.StringIO()):
                return BPE(f, -1, separator, vocab, None)
    except (UnicodeDecodeError, ValueError, IndexError, SystemExit) as error:
        why = "a line that is not two subwords" if isinstance(error, SystemExit) else error
        raise PreprocessingError(f"{codes}: not subword-nmt codes (UTF-8, '#version: 0.2', then two subwords a "
                                 f"line): {why}") from None


@lru_cache(maxsize=None)
def _sentencepiece(model: str):
    import sentencepiece

    try:
        return sentencepiece.SentencePieceProcessor(model_file=model)
    except (OSError, RuntimeError) as error:
        raise PreprocessingError(f"{model}: not a sentencepiece model: {str(error).strip()}") from None


# --- the record ----------------------------------------------------------------------------------

@dataclass
class Preprocessing:
    """A record (see the module's docstring); file fields are absolute paths once read."""

    source_lang: str
    target_lang: str
    pretokenizer: str = "moses"
    subword: str = "subword_nmt"
    codes: Optional[str] = None
    separator: str = "@@"
    vocabulary: Dict[str, str] = field(default_factory=dict)
    vocabulary_threshold: Optional[int] = None
    sentencepiece_model: Optional[str] = None
    context: int = 0
    context_separator: str = SEPARATOR
    origin: str = ""  # where it was read from (messages)

    def __post_init__(self):
        where = self.origin or "preprocessing"
        if self.pretokenizer not in PRETOKENIZERS:
            raise PreprocessingError(f"{where}: pretokenizer {self.pretokenizer!r}: expected one of {PRETOKENIZERS}")
        if self.subword not in SUBWORDS:
            raise PreprocessingError(f"{where}: subword type {self.subword!r}: expected one of {SUBWORDS}")
        if self.subword == "subword_nmt" and not self.codes:
            raise PreprocessingError(f"{where}: subword_nmt needs its codes file")
        if self.subword == "sentencepiece" and not self.sentencepiece_model:
            raise PreprocessingError(f"{where}: sentencepiece needs its model file")
        if self.vocabulary and self.vocabulary_threshold is None:
            raise PreprocessingError(f"{where}: a subword vocabulary needs its vocabulary_threshold")
        if self.vocabulary_threshold is not None and (not isinstance(self.vocabulary_threshold, int)
                                                      or isinstance(self.vocabulary_threshold, bool)
                                                      or self.vocabulary_threshold < 0):
            raise PreprocessingError(f"{where}: vocabulary_threshold must be a whole number >= 0, got "
                                     f"{self.vocabulary_threshold!r}")
        if not isinstance(self.context, int) or self.context < 0:
            raise PreprocessingError(f"{where}: context sentences must be an integer >= 0, got {self.context!r}")
        for path in self.files():
            if not os.path.isfile(path):
                raise PreprocessingError(f"{where}: file not found: {path}")

    # --- text -> subwords -> text --------------------------------------------------------------
    def pretokenize(self, line: str, lang: str) -> str:
        return moses_tokenize(line, lang) if self.pretokenizer == "moses" else line

    def split(self, line: str, lang: str) -> str:
        """The subwords of a pretokenized line, space-separated, as prepare.sh writes them."""
        if self.subword == "subword_nmt":
            if self.vocabulary and lang not in self.vocabulary:
                raise PreprocessingError(f"{self.origin}: no subword vocabulary for language {lang!r} (it has "
                                         f"{', '.join(sorted(self.vocabulary))})")
            vocabulary = self.vocabulary.get(lang)
            return _bpe(self.codes, self.separator, vocabulary,
                        self.vocabulary_threshold if vocabulary else None).process_line(line)
        if self.subword == "sentencepiece":
            return " ".join(_sentencepiece(self.sentencepiece_model).encode(line, out_type=str))
        return line

    def encode(self, line: str, lang: str) -> str:
        """Raw text of ``lang`` -> the subwords the model reads (fairseq's dictionary splits them on spaces)."""
        return self.split(self.pretokenize(line, lang), lang)

    def join(self, subwords: str) -> str:
        """Subwords -> tokenized text, as fairseq's --remove-bpe ("@@ ", or sentencepiece)."""
        if self.subword == "subword_nmt":
            return (subwords + " ").replace(self.separator + " ", "").rstrip()
        if self.subword == "sentencepiece":
            return subwords.replace(" ", "").replace("\u2581", " ").strip()
        return subwords

    def detokenize(self, line: str, lang: str) -> str:
        return moses_detokenize(line, lang) if self.pretokenizer == "moses" else line

    def decode(self, subwords: str, lang: str) -> str:
        """The model's subwords in ``lang`` -> the text a reader gets (what fairseq-rope-score scores)."""
        return self.detokenize(self.join(subwords), lang)

    def words(self, subwords: Sequence[str]) -> Tuple[List[str], List[int]]:
        """The pretokenized words that ``subwords`` make, as the raw text writes them (subword markers
        and Moses' "@-@" taken out), and for each subword the index of its word: what inline markup is
        projected onto (fairseq_rope_text.markup)."""
        words: List[str] = []
        word_of: List[int] = []
        joined = True  # the next subword starts a word
        for piece in subwords:
            if self.subword == "sentencepiece":
                starts, text = piece.startswith("\u2581") or not words, piece.replace("\u2581", "")
            else:
                starts, text = joined, piece
                joined = not (self.subword == "subword_nmt" and piece.endswith(self.separator))
                if not joined:
                    text = piece[:-len(self.separator)]
            if starts:
                words.append("")
            words[-1] += text
            word_of.append(len(words) - 1)
        if self.pretokenizer == "moses":
            words = [w.replace("@-@", "-") for w in words]
        return words, word_of

    # --- files ----------------------------------------------------------------------------------
    def files(self) -> List[str]:
        """Every file the record names."""
        return [p for p in (self.codes, *self.vocabulary.values(), self.sentencepiece_model) if p]

    def to_json(self) -> dict:
        """The record as written: file names relative to its directory (they are copied there)."""
        subword = {"type": self.subword}
        if self.subword == "subword_nmt":
            subword.update(codes=os.path.basename(self.codes), separator=self.separator)
            if self.vocabulary:
                subword.update(vocabulary={lang: os.path.basename(p) for lang, p in self.vocabulary.items()},
                               vocabulary_threshold=self.vocabulary_threshold)
        elif self.subword == "sentencepiece":
            subword.update(model=os.path.basename(self.sentencepiece_model))
        return {"format": FORMAT, "source_lang": self.source_lang, "target_lang": self.target_lang,
                "pretokenizer": self.pretokenizer, "subword": subword,
                "context": {"sentences": self.context, "separator": self.context_separator}}

    def describe(self) -> str:
        """One line: what is applied."""
        pre = ("Moses (sacremoses punctuation normalization + tokenize -a, no escaping)"
               if self.pretokenizer == "moses" else "no pretokenization (text as it is)")
        if self.subword == "subword_nmt":
            sub = f"subword-nmt codes {self.codes}"
            sub += (f" with the vocabulary filter ({', '.join(sorted(self.vocabulary))}, threshold "
                    f"{self.vocabulary_threshold})" if self.vocabulary else " without a vocabulary filter")
        elif self.subword == "sentencepiece":
            sub = f"sentencepiece {self.sentencepiece_model}"
        else:
            sub = "no subwords"
        ctx = f", {self.context} sentences of context" if self.context else ""
        return f"{pre}, {sub}{ctx}"

    def write(self, directory: str, force: bool = False) -> str:
        """Copies the files into ``directory`` (under their record names) and writes RECORD there,
        atomically; an existing record or file with other content is an error unless ``force``."""
        os.makedirs(directory, exist_ok=True)
        names = {}
        for path in self.files():
            target = os.path.join(directory, _record_name(self, path))
            names[path] = target
            if os.path.abspath(path) == os.path.abspath(target):
                continue
            if os.path.exists(target) and not force and not _same_file(path, target):
                raise PreprocessingError(f"{target} exists with other content than {path}: remove it or force")
            shutil.copyfile(path, target + ".tmp")
            os.replace(target + ".tmp", target)
        placed = Preprocessing(**{**self.__dict__, "codes": names.get(self.codes),
                                  "vocabulary": {lang: names[p] for lang, p in self.vocabulary.items()},
                                  "sentencepiece_model": names.get(self.sentencepiece_model),
                                  "origin": directory})
        text = json.dumps(placed.to_json(), indent=2, ensure_ascii=False) + "\n"
        out = os.path.join(directory, RECORD)
        if os.path.exists(out) and not force:
            with open(out, encoding="utf-8") as f:
                if f.read() != text:
                    raise PreprocessingError(f"{out} exists and records another preprocessing: remove it or force")
        with open(out + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(out + ".tmp", out)
        return out

    def agrees(self, other: "Preprocessing") -> List[str]:
        """What differs between two records (file contents compared, not paths), as lines naming both."""
        diffs = []
        for name in ("source_lang", "target_lang", "pretokenizer", "subword", "separator", "vocabulary_threshold",
                     "context", "context_separator"):
            if getattr(self, name) != getattr(other, name):
                diffs.append(f"{name}: {getattr(self, name)!r} ({self.origin}) vs {getattr(other, name)!r} "
                             f"({other.origin})")
        for name in ("codes", "sentencepiece_model"):
            a, b = getattr(self, name), getattr(other, name)
            if a and b and not _same_file(a, b):
                diffs.append(f"{name}: {a} and {b} differ")
        if sorted(self.vocabulary) != sorted(other.vocabulary) or any(
                not _same_file(p, other.vocabulary[lang]) for lang, p in self.vocabulary.items()
                if lang in other.vocabulary):
            diffs.append(f"vocabulary: {self.vocabulary or 'none'} vs {other.vocabulary or 'none'}")
        return diffs


def _record_name(record: Preprocessing, path: str) -> str:
    if path == record.codes:
        return "codes"
    if path == record.sentencepiece_model:
        return "spm.model"
    return f"vocab.{next(lang for lang, p in record.vocabulary.items() if p == path)}"


def _same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def record_path(path: str) -> str:
    """RECORD of a directory (a data-bin, a CTranslate2 export), or the path itself if it is a file."""
    return os.path.join(path, RECORD) if os.path.isdir(path) else path


def read(path: str) -> Preprocessing:
    """The record of a directory or a RECORD file; errors name the file and what is wrong."""
    path = record_path(path)
    if not os.path.isfile(path):
        raise PreprocessingError(f"{path} not found")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PreprocessingError(f"{path} is not a JSON preprocessing record: {error}") from None
    base = os.path.dirname(os.path.abspath(path))

    def get(obj, key, where=""):
        if not isinstance(obj, dict) or key not in obj:
            raise PreprocessingError(f"{path}: field {where}{key!r} missing")
        return obj[key]

    def inside(name, field):
        """``name``, a file of the record's own directory: absolute paths, '..' and links that lead out
        are refused (a shared data-bin or export must not make the tools read files elsewhere)."""
        if not isinstance(name, str) or not name:
            raise PreprocessingError(f"{path}: field {field!r} must be a file name, got {name!r}")
        target = os.path.join(base, name)
        real_base = os.path.realpath(base)
        if os.path.isabs(name) or os.pardir in name.replace("\\", "/").split("/") or \
                os.path.commonpath([real_base, os.path.realpath(target)]) != real_base:
            raise PreprocessingError(f"{path}: field {field!r} names {name!r}, which lies outside {base}; a record "
                                     "names files in its own directory")
        return target

    if get(data, "format") != FORMAT:
        raise PreprocessingError(f"{path}: format {data['format']!r}; this fairseq-rope reads format {FORMAT}")
    subword = get(data, "subword")
    kind = get(subword, "type", "subword.")
    context = get(data, "context")
    return Preprocessing(
        source_lang=get(data, "source_lang"), target_lang=get(data, "target_lang"),
        pretokenizer=get(data, "pretokenizer"), subword=kind,
        codes=inside(get(subword, "codes", "subword."), "subword.codes") if kind == "subword_nmt" else None,
        separator=subword.get("separator", "@@"),
        vocabulary={lang: inside(name, f"subword.vocabulary.{lang}")
                    for lang, name in (subword.get("vocabulary") or {}).items()},
        vocabulary_threshold=subword.get("vocabulary_threshold"),
        sentencepiece_model=inside(get(subword, "model", "subword."), "subword.model") if kind == "sentencepiece"
        else None,
        context=get(context, "sentences", "context."), context_separator=get(context, "separator", "context."),
        origin=path)


def recipe_env(data_bin: str) -> Dict[str, str]:
    """The settings prepare.sh wrote into ``data_bin/recipe.env`` (NAME=value a line; {} without the file)."""
    path = os.path.join(data_bin, "recipe.env")
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def write_command(record: Preprocessing, data_bin: str) -> str:
    """The fairseq-rope-prep record command that writes ``record`` into ``data_bin``."""
    parts = ["fairseq-rope-prep record", "--dir", data_bin, "--source-lang", record.source_lang,
             "--target-lang", record.target_lang, "--pretokenizer", record.pretokenizer]
    if record.subword == "subword_nmt":
        parts += ["--bpe-codes", record.codes]
        if record.vocabulary:
            parts += ["--bpe-vocabulary", record.vocabulary[record.source_lang], record.vocabulary[record.target_lang],
                      "--bpe-vocabulary-threshold", str(record.vocabulary_threshold)]
        else:
            parts += ["[--bpe-vocabulary VOCAB.src VOCAB.tgt --bpe-vocabulary-threshold N]"]
    elif record.subword == "sentencepiece":
        parts += ["--sentencepiece-model", record.sentencepiece_model]
    if record.context:
        parts += ["--context", str(record.context)]
    return " ".join(parts)


def resolve(data_bin: str, source_lang: Optional[str] = None, target_lang: Optional[str] = None, bpe_codes: Optional[str] = None,
            sentencepiece_model: Optional[str] = None, pretokenizer: Optional[str] = None,
            context: Optional[int] = None) -> Preprocessing:
    """The preprocessing of a model's data: ``data_bin``'s record, which the given values (a caller's
    ``bpe_codes``, ``--tokenization``, ``--context``, ...) must agree with (an error names both); without
    a record, the given values over what the data-bin tells (assumed, said in one line). The languages
    matter only without a record (default: the data-bin's)."""
    for name, path in (("BPE codes", bpe_codes), ("sentencepiece model", sentencepiece_model)):
        if path and not os.path.isfile(path):
            raise PreprocessingError(f"{name} file not found: {path}")
    if bpe_codes and sentencepiece_model:
        raise PreprocessingError("give BPE codes (subword-nmt) or a sentencepiece model, not both")
    if os.path.isfile(os.path.join(data_bin, RECORD)):
        record = read(data_bin)
        diffs = []
        if bpe_codes and (record.subword != "subword_nmt" or not _same_file(bpe_codes, record.codes)):
            diffs.append(f"BPE codes {bpe_codes}, but the record has "
                         f"{record.codes if record.subword == 'subword_nmt' else record.subword}")
        if sentencepiece_model and (record.subword != "sentencepiece"
                                    or not _same_file(sentencepiece_model, record.sentencepiece_model)):
            diffs.append(f"sentencepiece model {sentencepiece_model}, but the record has "
                         f"{record.sentencepiece_model if record.subword == 'sentencepiece' else record.subword}")
        if pretokenizer is not None and pretokenizer != record.pretokenizer:
            diffs.append(f"pretokenizer {pretokenizer!r}, but the record has {record.pretokenizer!r}")
        if context is not None and context != record.context:
            diffs.append(f"context {context}, but the record has {record.context} (the model was trained with it)")
        if diffs:
            raise PreprocessingError(f"{record.origin} records how the model's text was made; given: "
                                     + "; ".join(diffs) + ". Leave them out to use the record")
        return record
    return _without_record(data_bin, source_lang, target_lang, bpe_codes, sentencepiece_model, pretokenizer, context)


def _without_record(data_bin, source_lang, target_lang, bpe_codes, sentencepiece_model, pretokenizer, context):
    """For a data-bin made before preprocessing was recorded: the given values over what prepare.sh did
    then, as far as the data-bin tells (recipe.env's PRETOKENIZER and CONTEXT, its codes or spm.model; the
    vocabulary files were not kept, so no filter). Said in one line on stderr, with the command that
    writes the record."""
    env = recipe_env(data_bin)
    if source_lang is None or target_lang is None:
        pair = env.get("SRC"), env.get("TGT")
        source_lang, target_lang = pair if all(pair) else _language_pair(data_bin)
    codes = os.path.abspath(bpe_codes) if bpe_codes else None
    spm = os.path.abspath(sentencepiece_model) if sentencepiece_model else None
    if not codes and not spm:
        codes, spm = _file_of(data_bin, "codes"), _file_of(data_bin, "spm.model")
        spm = None if codes else spm
    record = Preprocessing(
        source_lang=source_lang, target_lang=target_lang, pretokenizer=pretokenizer or env.get("PRETOKENIZER", "moses"),
        subword="subword_nmt" if codes else "sentencepiece" if spm else "none", codes=codes,
        sentencepiece_model=spm, context=int(env.get("CONTEXT", 0)) if context is None else context, origin=data_bin)
    print(f"[fairseq-rope] {data_bin} has no {RECORD}: applying {record.describe()}; if its text was made "
          f"otherwise, record how once: {write_command(record, data_bin)}", file=sys.stderr)
    return record


def _language_pair(data_bin: str):
    """(source, target) of fairseq-preprocess's file names (SPLIT.SRC-TGT.LANG.idx), as fairseq infers them."""
    for name in sorted(os.listdir(data_bin)):
        parts = name.split(".")
        if len(parts) >= 3 and "-" in parts[1]:
            src, _, tgt = parts[1].partition("-")
            return src, tgt
    raise PreprocessingError(f"cannot tell the language pair of {data_bin} (no SPLIT.SRC-TGT.* files)")


def _file_of(data_bin: str, name: str) -> Optional[str]:
    path = os.path.join(data_bin, name)
    return path if os.path.isfile(path) else None
