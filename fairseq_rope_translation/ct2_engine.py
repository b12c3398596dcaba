"""The translator interface run by CTranslate2, on a fairseq-rope-ct2 export.

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

import json
import logging
import math
import os
from itertools import groupby
from typing import List, Optional, Sequence

import ctranslate2
import numpy as np
import torch

from fairseq_rope_text import preprocessing
from fairseq_rope_text.markup import Translation
from fairseq_rope_text.preprocessing import Preprocessing

from .interface import EngineError, TranslatorInterface
from .model_files import METADATA

LOG = logging.getLogger(__name__)


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
    """The translator interface (fairseq_rope_translation.interface) run by CTranslate2.

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
        LOG.warning(f"{self.model_dir} has no {preprocessing.RECORD} (exported before records): applying "
                    f"{record.describe()}; export again from a data-bin with a record to carry it")
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
        if verbose:  # (as fairseq's hub: its log)
            for source, output in zip(batch, outputs):
                LOG.info(f"S\t{source}")
                LOG.info(f"H\t{output}")
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
