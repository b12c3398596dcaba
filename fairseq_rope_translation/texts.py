"""Texts of a format split into the sentences to translate, and put back together with their translations:
written once for the translators (TranslatorInterface.translate_texts) and the server, which translates the
sentences of many requests through one queue. Standard library and fairseq_rope_text only."""

from typing import List, Sequence

from fairseq_rope_text.markup import join_pieces, needs_alignment, pieces_of


class SplitTexts:
    """``texts`` (``fmt``: fairseq_rope_text.markup.pieces_of's: "text", "html", "srt", "vtt") as pieces;
    ``sentences``: every text's sentences in order; ``align``: whether inline markup needs the alignment."""

    def __init__(self, texts: Sequence[str], fmt: str, lang: str, keep_line_breaks: bool = False,
                 nesting_limit: int = 0):
        self.items = pieces_of(texts, fmt, lang, keep_line_breaks, nesting_limit=nesting_limit)
        self.sentences: List[str] = [s for text in self.items for item in text if not isinstance(item, str)
                                     for s in item.sentences]
        self.align = needs_alignment(self.items)

    def join(self, translations: Sequence[str], words_of=None) -> List[str]:
        """Every text with the sentences' ``translations`` (in order) in place."""
        left = iter(translations)
        return [join_pieces(text, left, words_of) for text in self.items]
