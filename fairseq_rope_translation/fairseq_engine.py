"""The engine on fairseq: fairseq's hub interface, the data's recorded preprocessing, and the one
prefix-forced beam search that every translation goes through, sentence by sentence or in context.

In context (a model trained on sentences joined with their context, the format of
fairseq_rope_text.documents) the target context is the model's own previous outputs, forced as a prefix
of the target; what the model writes after the last separator is the translation of the sentence, at
least one token (fairseq's ``--min-len 1``, which fairseq does not apply while a prefix is forced).
Sentences never take context across a document boundary. Sentence i in context is what
``fairseq-rope-prep context`` (fairseq_rope_text.documents.in_context) wrote for it in training: up to K
previous sentences of its document, all of them when it has fewer, joined by the separator; an empty
sentence keeps its separators, as an empty line of a document does in prepare.sh's valid and test data.
A sentence-level model (K = 0) is the same search with no prefix.
"""

import math
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch
from fairseq import utils
from fairseq.data import LanguagePairDataset
from fairseq.hub_utils import GeneratorHubInterface
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

import fairseq_rope  # noqa: F401  (the plugin: its models, registered for the checkpoints fairseq loads)
from fairseq_rope.recorded_bpe import RecordedPreprocessing
from fairseq_rope_checkpoints import longest_training_source
from fairseq_rope_text.documents import DocumentError
from fairseq_rope_text.markup import Translation
from fairseq_rope_text.preprocessing import Preprocessing

from .interface import TranslatorInterface


class Hypothesis(NamedTuple):
    """A translation's target ids (after its prefix and last separator, without the EOS), fairseq's score,
    and for each id the position in the source sentence it attends to most (None: no attention)."""
    ids: List[int]
    score: float
    alignment: Optional[List[int]]


def last_separator(tokens: List[int], separator_index: int) -> int:
    """The position of the last separator (-1 when there is none)."""
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i] == separator_index:
            return i
    return -1


def last_segment(tokens: List[int], separator_index: int) -> List[int]:
    """What follows the last separator (all of it when there is none)."""
    return tokens[last_separator(tokens, separator_index) + 1:]


def join_segments(segments: Sequence[List[int]], separator_index: int) -> List[int]:
    """The segments with the separator between every two of them (an empty segment keeps both sides')."""
    out: List[int] = []
    for n, segment in enumerate(segments):
        if n:
            out.append(separator_index)
        out.extend(segment)
    return out


class SentenceLengthLimits(EnsembleModel):
    """fairseq's ensemble with fairseq's length limits for each sentence after its own forced prefix, as
    fairseq-generate gives them to a sentence alone: at least one token (--min-len 1; fairseq applies
    min_len only when no prefix is forced), so the end of sentence is forbidden at the first step and
    right after a separator; and at most ``max_len_b`` tokens after the prefix (fairseq has one limit
    for the batch, which its longest prefix would set for every row). ``limits``: per row of the batch,
    the step at which the end of sentence is forced (prefix length + max_len_b); fairseq's beam
    reorderings are applied to them (reorder_encoder_out)."""

    def __init__(self, models, separator_index: int, eos_index: int, limits: torch.Tensor):
        super().__init__(models)
        self.separator_index, self.eos_index, self.limits = separator_index, eos_index, limits

    def reorder_encoder_out(self, encoder_outs, new_order):
        self.limits = self.limits.to(new_order.device)[new_order]
        return super().reorder_encoder_out(encoder_outs, new_order)

    def forward_decoder(self, tokens, encoder_outs, incremental_states, temperature: float = 1.0):
        lprobs, attn = super().forward_decoder(tokens, encoder_outs, incremental_states, temperature)
        # tokens: (batch * beam, step + 1), the start </s> first; one row per entry of self.limits
        step = tokens.size(1) - 1
        starts = tokens[:, -1].eq(self.separator_index) | (step == 0)
        lprobs[starts, self.eos_index] = -math.inf
        ends = self.limits.le(step)
        if bool(ends.any()):
            eos = lprobs[ends, self.eos_index]
            lprobs[ends] = -math.inf
            lprobs[ends, self.eos_index] = eos
        return lprobs, attn


class Translator(TranslatorInterface, GeneratorHubInterface):
    """The translator interface (fairseq_rope_translation.interface) on fairseq: fairseq's hub interface whose
    ``translate`` defaults to beam 4 and length penalty 0.6, and whose text goes through the data's
    recorded preprocessing (``self.preprocessing``). fairseq's own ``generate``, ``encode`` (ids),
    ``decode``, ``models``, ``task`` and ``cfg`` are there as in fairseq. The context (K) and its separator
    are the record's, the separator's ids and the models' source limit found once, here."""

    engine = "fairseq"

    def __init__(self, cfg, task, models, preprocessing: Preprocessing, beam: int = 4, lenpen: float = 0.6):
        super().__init__(cfg, task, models)
        self.preprocessing = preprocessing
        self.source_lang, self.target_lang = cfg.task.source_lang, cfg.task.target_lang
        self.tokenizer = None  # the record's pretokenizer is part of its encode/decode
        self.bpe = RecordedPreprocessing.of(preprocessing, self.source_lang, self.target_lang)
        self.beam, self.lenpen, self.max_len_b = beam, lenpen, int(cfg.generation.max_len_b)
        self.separator, self.missing_separator = {}, None  # (a dictionary without it: said at the first translation)
        if preprocessing.context > 0:
            for side, dictionary in (("source", self.src_dict), ("target", self.tgt_dict)):
                index = dictionary.index(preprocessing.context_separator)
                if index == dictionary.unk() and self.missing_separator is None:
                    self.missing_separator = (f"the model's {side} dictionary has no "
                                              f"{preprocessing.context_separator!r}, which {preprocessing.origin} "
                                              f"says joins its {preprocessing.context} sentences of context")
                self.separator[side] = index
        # the models' own limits: a table of positions (learned, sinusoidal) has an end; RoPE, RPE,
        # T5's bias, ALiBi and NoPE have none, and any length is translated (the task's
        # --max-source-positions, fairseq's filter for training data, does not apply here)
        limits = [m.max_positions() for m in self.models]
        self.max_source = min(p[0] if isinstance(p, tuple) else p for p in limits)

    @property
    def context(self) -> int:
        """The sentences of context the model was trained with (the record's K)."""
        return self.preprocessing.context

    def check_separator(self):
        """A model trained with context has the record's separator in both dictionaries, or nothing runs (every
        translation and score comes through translate_batch_aligned or score_ids, which ask)."""
        if self.missing_separator:
            raise DocumentError(self.missing_separator)

    # --- the interface's engine methods ----------------------------------------------------------
    def translate_sentences(self, sentences, beam, lenpen, verbose, **kwargs):
        """fairseq's hub translate (a list decoded in batches, as fairseq-interactive does)."""
        kwargs["lenpen"] = self.lenpen if lenpen is None else lenpen
        return self.sample(sentences, beam=beam or self.beam, verbose=verbose, **kwargs)

    def translate_subwords(self, sources, beam=None, lenpen=None, nbest=1, align=False):
        # (fairseq's beam search keeps the attention anyway: the alignment is given whether asked or not)
        items = [(self.ids_of(source, "source") + [self.src_dict.eos()], []) for source in sources]
        if not items:
            return []
        found = self.translate_batch_aligned(items, nbest, beam or self.beam, self.lenpen if lenpen is None else lenpen,
                                             self.max_len_b)
        return [[Translation(self.detokenized(h.ids), source, [self.tgt_dict[i] for i in h.ids], h.alignment)
                 for h in hypotheses] for source, hypotheses in zip(sources, found)]

    def score_subwords(self, sources, targets, batch_size=32):
        return self.score_ids([self._source([], self.ids_of(s, "source"), f"item {n + 1}")
                               for n, s in enumerate(sources)],
                              [[] for _ in sources],
                              [self.ids_of(t, "target") + [self.tgt_dict.eos()] for t in targets], batch_size)

    def translate_in_context(self, documents, beam, lenpen, batch_size, progress=None):
        outputs = self.translate_documents_ids(documents, beam, lenpen, self.max_len_b, batch_size, progress=progress)
        return [[self.detokenized(ids) for ids, _ in doc] for doc in outputs]

    def score_in_context_items(self, items, batch_size):
        """Log-probability (natural log) of each target sentence (its tokens and the end of sentence) given
        its source and the contexts: items are (source context, target context, source, target), contexts
        oldest first, the i-th sentences of the two a pair; only the last ``context`` pairs are used. An
        empty sentence is a sentence: it keeps its separators, as in training."""
        encoded = self.score_inputs(items)
        return self.score_ids(*zip(*encoded), batch_size=batch_size) if encoded else []

    def longest_training_source(self) -> Optional[int]:
        """The longest source the model was trained on (fairseq_rope_checkpoints.longest_training_source)."""
        return longest_training_source(self.models[0].encoder, self.cfg.task.data, self.source_lang, self.target_lang)

    # --- sentences to token ids --------------------------------------------------------------
    def ids_of(self, subwords, side: str) -> List[int]:
        """The ids of subwords (a list, or a string of them) in the ``side`` ("source"/"target") dictionary."""
        line = subwords if isinstance(subwords, str) else " ".join(subwords)
        dictionary = self.src_dict if side == "source" else self.tgt_dict
        return dictionary.encode_line(line, add_if_not_exist=False, append_eos=False).long().tolist()

    def source_ids(self, sentence: str) -> List[int]:
        """A raw source sentence's ids (the record's preprocessing), without the EOS."""
        return self.ids_of(self.preprocessing.encode(sentence, self.source_lang), "source")

    def target_ids(self, sentence: str) -> List[int]:
        """A raw target sentence's ids (the record's preprocessing), without the EOS."""
        return self.ids_of(self.preprocessing.encode(sentence, self.target_lang), "target")

    def tokenized(self, ids: List[int]) -> str:
        """The text of target ids with the subwords joined, before detokenization (what
        fairseq-generate --remove-bpe prints)."""
        return self.preprocessing.join(self.tgt_dict.string(torch.tensor(ids, dtype=torch.long)))

    def detokenized(self, ids: List[int]) -> str:
        """The text of target ids, detokenized (fairseq's hub ``detokenize`` takes a string)."""
        return self.preprocessing.detokenize(self.tokenized(ids), self.target_lang)

    def _last(self, context: Sequence[List[int]]) -> List[List[int]]:
        """The last ``context`` of the given sentences, all of them when there are fewer (none for a
        sentence-level model)."""
        return list(context)[max(0, len(context) - self.context):] if self.context else []

    def _source(self, context: Sequence[List[int]], sentence: List[int], where: str) -> List[int]:
        """The source ids of ``sentence`` after its last context sentences, with the EOS (refused past the positions)."""
        ids = join_segments(self._last(context) + [sentence], self.separator.get("source", -1)) + [self.src_dict.eos()]
        if len(ids) > self.max_source:
            raise DocumentError(
                f"{where}: the source with its context is {len(ids)} tokens, more than the model's "
                f"{self.max_source} positions (its table of positions ends there). Use a smaller context; an "
                f"encoding without a table (RoPE, Shaw's RPE, T5's bias, ALiBi, NoPE) takes any length")
        return ids

    def _prefix(self, context: Sequence[List[int]]) -> List[int]:
        """The forced target prefix: the last context translations, each followed by the separator."""
        context = self._last(context)
        return join_segments(context, self.separator["target"]) + [self.separator["target"]] if context else []

    # --- translation -------------------------------------------------------------------------
    def _generator(self, beam: int, lenpen: float, max_len_b: int, prefix_lengths: Sequence[int]):
        """fairseq's beam search for rows with forced prefixes of ``prefix_lengths`` (in the sample's
        row order), each allowed 1 to ``max_len_b`` tokens after its prefix. With a forced prefix the
        first step keeps one hypothesis (the others score -inf), so the beam spreads from the prefix's
        end as from a first step."""
        limits = torch.tensor([n + max_len_b for n in prefix_lengths], dtype=torch.long)
        models = SentenceLengthLimits(self.models, self.separator.get("target", -1), self.tgt_dict.eos(), limits)
        return SequenceGenerator(models, self.tgt_dict, beam_size=beam, len_penalty=lenpen, max_len_a=0,
                                 max_len_b=max_len_b + max(prefix_lengths))

    def _collate(self, sources: List[List[int]], targets: Optional[List[List[int]]] = None):
        """fairseq's batch of the given ids (rows sorted by source length; ``sample["id"]`` says whose)."""
        src = [torch.tensor(s, dtype=torch.long) for s in sources]
        tgt = None if targets is None else [torch.tensor(t, dtype=torch.long) for t in targets]
        dataset = LanguagePairDataset(src, [len(s) for s in src], self.src_dict, tgt,
                                      None if tgt is None else [len(t) for t in tgt], self.tgt_dict,
                                      left_pad_source=self.cfg.task.left_pad_source,
                                      left_pad_target=self.cfg.task.left_pad_target)
        sample = dataset.collater([dataset[i] for i in range(len(src))])
        return _to(sample, self.device)

    def translate_batch(self, items: List[Tuple[List[int], List[int]]], beam: int = 4, lenpen: float = 0.6,
                        max_len_b: int = 200) -> List[Tuple[List[int], float]]:
        """Translates (source ids with eos, forced target prefix ids) pairs; returns for each the
        ids its translation has after the prefix (after the last separator it wrote, without eos)
        and the hypothesis' score (fairseq's: log-probabilities over (length + 1) ** lenpen, prefix
        included)."""
        return [(best.ids, best.score) for best, *_ in self.translate_batch_aligned(items, 1, beam, lenpen, max_len_b)]

    def translate_batch_aligned(self, items: List[Tuple[List[int], List[int]]], nbest: int, beam: int = 4,
                                lenpen: float = 0.6, max_len_b: int = 200) -> List[List[Hypothesis]]:
        """As translate_batch, the ``nbest`` best hypotheses of each item, best first, each with its alignment:
        for each of its ids, the position in the item's sentence (the source after its last separator, without
        the EOS) that the last decoder layer attends to most, averaged over heads (fairseq's ``attention``, what
        --print-alignment reads)."""
        self.check_separator()
        sample = self._collate([source for source, _ in items])
        order = sample["id"].tolist()  # the collater sorts the rows by source length
        longest = max(len(prefix) for _, prefix in items)
        prefix = None
        if longest:
            prefix = torch.full((len(items), longest), self.tgt_dict.pad(), dtype=torch.long)
            for row, n in enumerate(order):
                prefix[row, :len(items[n][1])] = torch.tensor(items[n][1], dtype=torch.long)
            prefix = prefix.to(self.device)
        generator = self._generator(beam, lenpen, max_len_b, [len(items[n][1]) for n in order])
        with torch.no_grad():
            hypos = generator.generate(self.models, sample, prefix_tokens=prefix)
        out: List[List[Hypothesis]] = [[] for _ in items]
        for row, n in enumerate(order):
            source, forced = items[n]
            first = last_separator(source[:-1], self.separator.get("source", -1)) + 1  # the sentence's first id
            for hypo in hypos[row][:nbest]:
                tokens = hypo["tokens"].tolist()
                end = len(tokens) - 1 if tokens and tokens[-1] == self.tgt_dict.eos() else len(tokens)
                begin = len(forced)
                if self.context:
                    begin = max(begin, last_separator(tokens[:end], self.separator["target"]) + 1)
                attention = hypo["attention"]  # (padded source length, target length), left-padded source
                alignment = None
                if attention.numel() and end > begin:
                    offset = attention.size(0) - len(source)
                    rows = attention[offset + first:offset + len(source) - 1, begin:end]
                    alignment = rows.argmax(dim=0).tolist() if rows.size(0) else None
                out[n].append(Hypothesis(tokens[begin:end], hypo["score"].item(), alignment))
        return out

    def translate_documents_ids(self, documents, beam=4, lenpen=0.6, max_len_b=200, batch_size=32, progress=None):
        """Each document's sentences translated in order, each with up to ``context`` previous source
        sentences and the model's own previous translations as its target context; the i-th sentences of
        all documents together, ``batch_size`` at a time. Per sentence (target ids, score);
        ``progress(done, total)`` is called after each batch with the sentences translated so far."""
        sources = [[self.source_ids(s) for s in doc] for doc in documents]
        outputs: List[List[Tuple[List[int], float]]] = [[] for _ in documents]
        done, total = 0, sum(len(doc) for doc in documents)
        for i in range(max((len(d) for d in documents), default=0)):
            work = []
            for d, doc in enumerate(sources):
                if i < len(doc):
                    where = f"document {d + 1}, sentence {i + 1}"
                    work.append((d, self._source(doc[:i], doc[i], where), self._prefix([o for o, _ in outputs[d]])))
            work.sort(key=lambda w: len(w[1]) + len(w[2]))
            for b in range(0, len(work), batch_size):
                chunk = work[b:b + batch_size]
                for (d, _, _), out in zip(chunk, self.translate_batch([(s, p) for _, s, p in chunk], beam, lenpen,
                                                                     max_len_b)):
                    outputs[d].append(out)
                if progress is not None:
                    done += len(chunk)
                    progress(done, total)
        return outputs

    # --- scoring -----------------------------------------------------------------------------
    def score_inputs(self, items: Sequence[Tuple[Sequence[str], Sequence[str], str, str]]):
        """What score() feeds the model for each item: (source ids with the EOS, the target context's
        ids, which the model reads but is not scored on, the whole target with the EOS)."""
        encoded = []
        for n, (src_ctx, tgt_ctx, src, tgt) in enumerate(items):
            where = f"item {n + 1}"
            if len(src_ctx) != len(tgt_ctx):
                raise DocumentError(f"{where}: {len(src_ctx)} source context sentences but {len(tgt_ctx)} target "
                                    f"ones (they are pairs)")
            pairs = list(zip(src_ctx, tgt_ctx))
            pairs = pairs[max(0, len(pairs) - self.context):] if self.context else []
            prefix = self._prefix([self.target_ids(t) for _, t in pairs])
            encoded.append((self._source([self.source_ids(s) for s, _ in pairs], self.source_ids(src), where), prefix,
                            prefix + self.target_ids(tgt) + [self.tgt_dict.eos()]))
        return encoded

    def score_ids(self, sources: Sequence[List[int]], prefixes: Sequence[List[int]], targets: Sequence[List[int]],
                  batch_size: int = 32) -> List[float]:
        """Log-probability of each target's ids after its prefix (the prefix read, not scored), given the
        source ids: score_inputs' three lists."""
        self.check_separator()
        scores = [0.0] * len(sources)
        order = sorted(range(len(sources)), key=lambda n: len(targets[n]))
        for b in range(0, len(order), batch_size):
            rows = order[b:b + batch_size]
            sample = self._collate([sources[n] for n in rows], [targets[n] for n in rows])
            with torch.no_grad():
                lprobs = _target_log_probs(self.models, sample)
            for r, i in enumerate(sample["id"].tolist()):  # the collater sorts the rows by source length
                n = rows[i]
                scores[n] = lprobs[r, len(prefixes[n]):len(targets[n])].sum().item()
        return scores


def _target_log_probs(models, sample) -> torch.Tensor:
    """(batch, target length) log-probabilities of the sample's target tokens, averaged over an
    ensemble's probabilities as fairseq's scorer does."""
    net_input, target = sample["net_input"], sample["target"]
    total = None
    for model in models:
        model.eval()
        lprobs = model.get_normalized_probs(model(**net_input), log_probs=True)
        lprobs = lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).float()
        total = lprobs if total is None else torch.logaddexp(total, lprobs)
    if len(models) > 1:
        total = total - math.log(len(models))
    return total.masked_fill(target.eq(models[0].decoder.dictionary.pad()), 0.0)


def _to(sample, device):
    return utils.move_to_cuda(sample, device=device) if device.type == "cuda" else sample
