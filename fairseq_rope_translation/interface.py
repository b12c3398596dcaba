"""The one translator interface, whichever engine runs the model (fairseq or CTranslate2).

``load_translator`` returns a :class:`fairseq_rope_translation.fairseq_engine.Translator` (fairseq's hub
interface) or a :class:`fairseq_rope_translation.ct2_engine.CTranslate2Translator`; both are a
:class:`TranslatorInterface`: the same
methods, arguments and return types, the same translations, and scores within float32 rounding.
The text-level methods (running text, documents, scores of given translations) are written here
once, on three things each engine gives: the subwords of a sentence, beam search over subwords
(:meth:`translate_subwords`) and forced decoding (:meth:`score_subwords`). What an engine cannot do
(CTranslate2 cannot give a model its sentences of context) raises one line naming the engine that can.
"""

import logging
import warnings
from typing import Callable, List, Optional, Sequence, Tuple, Union

from fairseq_rope_text.documents import DocumentError

from .texts import SplitTexts

LOG = logging.getLogger(__name__)


class EngineError(ValueError):
    """What this engine cannot do; the message names the backend that can."""


class TranslatorInterface:
    """Raw text in, detokenized translations out, through the data's recorded preprocessing, with beam 4 and
    length penalty 0.6 by default. Attributes: ``engine`` ("fairseq" or "ctranslate2"), ``source_lang``,
    ``target_lang``, ``preprocessing`` (the record), ``beam``, ``lenpen``, ``max_len_b``."""

    engine: str

    # --- what each engine gives ------------------------------------------------------------------
    def translate_subwords(self, sources: Sequence[Sequence[str]], beam: Optional[int] = None,
                           lenpen: Optional[float] = None, nbest: int = 1, align: bool = False) -> List[List[str]]:
        """Each source's subwords -> its ``nbest`` best translations, detokenized, best first (fewer where
        the beam found fewer); each sentence translated as if alone (fairseq's length limit is its own).
        Each a fairseq_rope_text.markup.Translation: the text with its subwords, and with ``align`` their
        alignment (what inline markup is projected on; CTranslate2 computes it only then)."""
        raise NotImplementedError

    def score_subwords(self, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                       batch_size: int = 32) -> List[float]:
        """log p(target | source) (natural log, the target's subwords and its end of sentence) per pair."""
        raise NotImplementedError

    def longest_training_source(self) -> Optional[int]:
        """The longest source the model was trained on, in subwords with the EOS (None: not known)."""
        raise NotImplementedError

    def translate_in_context(self, documents: Sequence[Sequence[str]], beam: int, lenpen: float, batch_size: int,
                             progress=None) -> List[List[str]]:
        """Documents translated by a model trained with context (fairseq only)."""
        raise EngineError(f"the model was trained with {self.preprocessing.context} sentences of context; "
                          f"translation in context runs on the fairseq backend (backend='fairseq')")

    def score_in_context_items(self, items, batch_size: int) -> List[float]:
        """score_in_context for a model trained with context (fairseq only)."""
        raise EngineError(f"the model was trained with {self.preprocessing.context} sentences of context; "
                          f"scoring in context runs on the fairseq backend (backend='fairseq')")

    # --- written once, above the engines -----------------------------------------------------------
    def subwords(self, sentence: str) -> List[str]:
        """Raw source text -> its subwords, as the training text was made (the record)."""
        return self.preprocessing.encode(sentence, self.source_lang).split()

    def target_subwords(self, sentence: str) -> List[str]:
        """Raw target text -> its subwords (the record, in the target language)."""
        return self.preprocessing.encode(sentence, self.target_lang).split()

    def translate(self, sentences: Union[str, List[str]], beam: Optional[int] = None, lenpen: Optional[float] = None,
                  verbose: bool = False, **kwargs) -> Union[str, List[str]]:
        """Each given string translated as one sentence: a string -> a string, a list -> a list. A string
        that holds several sentences is warned about once (running text: :meth:`translate_text`)."""
        if isinstance(sentences, str):
            warn_if_running_text(sentences, self.source_lang)
        return self.translate_sentences(sentences, beam, lenpen, verbose, **kwargs)

    def translate_sentences(self, sentences, beam, lenpen, verbose, **kwargs):
        """The engine's translate() of ``sentences`` (a string or a list)."""
        raise NotImplementedError

    def translate_text(self, text: str, keep_line_breaks: bool = False, beam: Optional[int] = None,
                       lenpen: Optional[float] = None, batch_size: int = 32,
                       progress: Optional[Callable[[int, int], None]] = None) -> str:
        """Running text of any length (paragraphs, a whole file) translated with its layout and line
        endings kept (fairseq_rope_text.running_text): split into sentences, each translated as the
        model was trained (a model trained with context: each with its previous ones; a sentence-level
        model: one by one, ``batch_size`` at a time), put back in place. A sentence longer than the
        longest training source is translated as it is and said in one line. ``progress(done, total)``
        is called as sentences are translated. The sentences and their translations:
        :meth:`translate_text_sentences`."""
        from fairseq_rope_text.running_text import join_text, line_ending

        layout, _, translations = self.translate_text_sentences(text, keep_line_breaks, beam, lenpen, batch_size,
                                                                progress)
        return join_text(layout, translations, line_ending(text))

    def translate_text_sentences(self, text: str, keep_line_breaks: bool = False, beam: Optional[int] = None,
                                 lenpen: Optional[float] = None, batch_size: int = 32,
                                 progress: Optional[Callable[[int, int], None]] = None
                                 ) -> Tuple[list, List[str], List[str]]:
        """(layout, sentences, translations) of running text, as :meth:`translate_text` makes them."""
        from fairseq_rope_text.running_text import split_text

        layout, sentences = split_text(text, self.source_lang, keep_line_breaks)
        return layout, sentences, self.translate_running_sentences(sentences, beam, lenpen, batch_size, progress,
                                                                   align=False)

    def translate_html(self, text: str, beam: Optional[int] = None, lenpen: Optional[float] = None,
                       batch_size: int = 32) -> str:
        """An HTML page or fragment translated: the text between its block tags as running text, a paragraph
        with inline elements (bold, links, code) translated without them and each put back on the words
        aligned to its own (fairseq_rope_text.markup); tags, attributes, comments, scripts, styles and code
        blocks as they are."""
        return self.translate_texts([text], "html", beam=beam, lenpen=lenpen, batch_size=batch_size)[0][0]

    def translate_texts(self, texts: Sequence[str], fmt: str = "text", keep_line_breaks: bool = False,
                        beam: Optional[int] = None, lenpen: Optional[float] = None, batch_size: int = 32,
                        progress: Optional[Callable[[int, int], None]] = None
                        ) -> Tuple[List[str], List[str], List[str]]:
        """Texts (``fmt`` "text": running text as :meth:`translate_text`; "html": as :meth:`translate_html`;
        "srt", "vtt": a subtitle cue's text, its tags carried across as HTML's) translated together, every
        text's sentences ``batch_size`` at a time (a model trained with context:
        the texts in order, as one document). Returns (the translated texts, the sentences, their
        translations)."""
        split = SplitTexts(texts, fmt, self.source_lang, keep_line_breaks)
        translations = self.translate_running_sentences(split.sentences, beam, lenpen, batch_size, progress,
                                                        split.align)
        return split.join(translations, self.preprocessing.words), split.sentences, translations

    def translate_running_sentences(self, sentences: List[str], beam: Optional[int], lenpen: Optional[float],
                                    batch_size: int, progress=None, align: bool = False) -> List[str]:
        """The sentences of running text translated as the model was trained (with context: in order, as one
        document; a sentence-level model: one by one, ``batch_size`` at a time), each a
        fairseq_rope_text.markup.Translation, aligned with ``align``; a sentence longer than the longest
        training source is translated as it is and said in one line."""
        beam, lenpen = beam or self.beam, self.lenpen if lenpen is None else lenpen
        sources = [self.subwords(s) for s in sentences]  # (each encoded once: for its length and to translate)
        longest = self.longest_training_source()
        if longest:
            say_long_sentences([len(source) + 1 for source in sources], longest)
        if self.preprocessing.context:
            return self.translate_in_context([sentences], beam, lenpen, batch_size, progress)[0]
        return self.translate_batches(sources, beam, lenpen, batch_size, progress, align)

    def translate_batches(self, sources: Sequence[Sequence[str]], beam: int, lenpen: float, batch_size: int,
                          progress=None, align: bool = False) -> List[str]:
        """The best translation of each source's subwords (aligned with ``align``), ``batch_size`` at a time,
        progress said after each."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out: List[str] = []
        for start in range(0, len(sources), batch_size):
            out += [nbest[0] for nbest in self.translate_subwords(sources[start:start + batch_size], beam, lenpen,
                                                                  align=align)]
            if progress is not None:
                progress(len(out), len(sources))
        return out

    def check_context(self, context: Optional[int]):
        """A ``context`` given must be the record's (the model was trained with it)."""
        if context is not None and context != self.preprocessing.context:
            raise DocumentError(f"context {context}, but {self.preprocessing.origin} records "
                                f"{self.preprocessing.context} sentences of context (the model was trained with "
                                f"them); leave the context out")

    def translate_documents(self, documents: Sequence[Sequence[str]], context: Optional[int] = None,
                            beam: Optional[int] = None, lenpen: Optional[float] = None,
                            batch_size: int = 32) -> List[List[str]]:
        """Each document (a list of sentences) translated in order: a model trained with context translates
        each sentence with up to K previous source sentences and its own previous translations (the
        record's ``CONTEXT``; a ``context`` given must be the same); a sentence-level model each sentence
        alone. Returns the translations, document by document."""
        self.check_context(context)
        beam, lenpen = beam or self.beam, self.lenpen if lenpen is None else lenpen
        if self.preprocessing.context:
            return self.translate_in_context(documents, beam, lenpen, batch_size)
        flat = self.translate_batches([self.subwords(s) for doc in documents for s in doc], beam, lenpen, batch_size)
        out, start = [], 0
        for doc in documents:
            out.append(flat[start:start + len(doc)])
            start += len(doc)
        return out

    def score(self, sources: Sequence[str], targets: Sequence[str], batch_size: int = 32) -> List[float]:
        """log p(target | source) of each given translation (natural log, its subwords and its end of
        sentence), as fairseq-generate --score-reference scores it; a model trained with context: with
        none (each pair as a document's first sentence)."""
        if isinstance(sources, str) or isinstance(targets, str) or len(sources) != len(targets):
            raise ValueError("score(sources, targets) takes two lists of sentences of the same length, got "
                             f"{type(sources).__name__} and {type(targets).__name__}")
        return self.score_in_context([([], [], s, t) for s, t in zip(sources, targets)], batch_size=batch_size)

    def score_in_context(self, items: Sequence[Tuple[Sequence[str], Sequence[str], str, str]],
                         context: Optional[int] = None, batch_size: int = 32) -> List[float]:
        """log p(target | source and contexts) of each item (source context, target context, source,
        target), contexts lists of sentences, oldest first, the i-th of the two a pair; a sentence-level
        model reads no context."""
        self.check_context(context)
        if self.preprocessing.context:
            return self.score_in_context_items(items, batch_size)
        for n, (src_ctx, tgt_ctx, _, _) in enumerate(items):
            if len(src_ctx) != len(tgt_ctx):
                raise DocumentError(f"item {n + 1}: {len(src_ctx)} source context sentences but {len(tgt_ctx)} "
                                    f"target ones (they are pairs)")
        return self.score_subwords([self.subwords(src) for _, _, src, _ in items],
                                   [self.target_subwords(tgt) for _, _, _, tgt in items], batch_size)


def warn_if_running_text(text: str, lang: str):
    """A warning (once per place it is called from) when a string given as one sentence holds several."""
    from fairseq_rope_text.running_text import sentences_of

    if len(sentences_of(text, lang)) > 1:
        warnings.warn("translate() translates the string as one sentence, but it holds several: "
                      "translate_text() splits running text into sentences and keeps its layout", stacklevel=4)


def say_long_sentences(lengths, longest):
    """One warning for each sentence longer than ``longest`` subwords (with its end of sentence): no
    boundary to split it at, it is translated as it is."""
    for n, length in enumerate(lengths, 1):
        if longest and length > longest:
            LOG.warning(f"sentence {n} has {length} subwords, more than the longest training source ({longest}): "
                        "no sentence boundary to split it at; translated as it is")
