"""Running text (a paragraph, an e-mail, a file) to sentences and back, with its layout kept.

A model translates sentences; a user hands it text. ``split_text`` cuts the text into lines, keeps
blank lines as they are, joins the lines of each paragraph (a run of non-blank lines) and splits it
into sentences. ``join_text`` puts translations back in their place: a paragraph's sentences joined
by one space after its first line's indentation; with ``keep_line_breaks`` every line is a unit of
its own (a sentence does not run across lines), for text whose line breaks mean something (verse,
lists, subtitles). Line endings: ``split_text`` takes text with "\n" (``line_ending`` says which
ending a text uses, so that a caller can give its translation the same).

The splitter, chosen by measuring (docs/serving.md, "Sentence splitting"): Moses' rules
(sentence-splitter, the Python port of split-sentences.perl: non-breaking prefixes for 24 European
languages) where it has the language's list, with a few fixes of our own (``ABBREVIATIONS``, a
numbered item's label kept with its sentence, a sentence ending in German quotes or in "…"); sentencex (Wikimedia's rules for about 300 languages,
each falling back to a related language's or English's) for every other language. Moses' rules
start a sentence only at an upper-case letter, so the pronoun before a full stop ("... for me. I
can") ends a sentence, where sentencex and pysbd take "me." for an abbreviation.

Only the standard library at import time; the splitters are imported when first used.
"""

import functools
import re
from typing import List, Tuple, Union

# a layout item: a line kept as it is (str), or (indentation, number of sentences) of a unit
Item = Union[str, Tuple[str, int]]


# lower-case abbreviations Moses' lists lack, after which a sentence does not end (language: words)
ABBREVIATIONS = {
    "en": ("approx", "incl", "excl", "resp", "dept", "est"),
    "de": ("inkl", "exkl", "Hr", "Fr"),
}
# a sentence that ends inside quotes which Unicode calls opening ones (German „...“, »...«) before a
# capital: Moses' rules see only closing quotes there
QUOTED_END = r"""(?<=[.!?…][“«‹‘]) +(?=[„“»«‚"']?\p{Lu})"""
# the ellipsis character before a capital, as Moses' rules treat "..." there
ELLIPSIS_END = r"""(?<=…) +(?=[„“»«‚"'(\[]?\p{Lu})"""
# a numbered item's label: "1.", "12.", "iv.", "(a)", "b)"
LABEL = re.compile(r"^(\(?\d{1,3}[.)]|\(?[ivxlIVXL]{1,5}[.)]|\(?[a-zA-Z]\))$")


@functools.lru_cache(maxsize=None)
def moses_splitter(lang: str):
    """Moses' splitter for ``lang``, or None where sentence-splitter has no list for it."""
    from sentence_splitter import SentenceSplitter, SentenceSplitterException

    try:
        return SentenceSplitter(language=lang)
    except SentenceSplitterException:
        return None


@functools.lru_cache(maxsize=None)
def abbreviation_end(lang: str):
    """A pattern for a sentence ending in one of ``ABBREVIATIONS[lang]``, or None."""
    if lang not in ABBREVIATIONS:
        return None
    return re.compile(r"(?:^|\W)(?:" + "|".join(ABBREVIATIONS[lang]) + r")\.$")


def sentences_of(text: str, lang: str) -> List[str]:
    """The sentences of one paragraph in ``lang`` (an ISO 639-1 code; "de_DE", "pt-BR": their first
    part), stripped (none for blank text)."""
    base = re.split(r"[_-]", lang, maxsplit=1)[0].lower()
    moses = moses_splitter(base) if re.fullmatch(r"[a-z]{2}", base) else None
    if moses is None:
        from sentencex import segment

        return [s.strip() for s in segment(base, text) if s.strip()]
    import regex

    found = [part.strip() for s in moses.split(text) for part in regex.split(f"{QUOTED_END}|{ELLIPSIS_END}", s)
             if part.strip()]
    ending = abbreviation_end(base)
    joined: List[str] = []
    for sentence in found:
        if joined and (LABEL.match(joined[-1]) or (ending and ending.search(joined[-1]))):
            joined[-1] += " " + sentence
        else:
            joined.append(sentence)
    return joined


def line_ending(text: str) -> str:
    """"\r\n" when every line break of ``text`` is one, else "\n"."""
    breaks = text.count("\n")
    return "\r\n" if breaks and text.count("\r\n") == breaks else "\n"


def split_text(text: str, lang: str, keep_line_breaks: bool = False) -> Tuple[List[Item], List[str]]:
    """(layout, sentences) of ``text`` in ``lang``: the sentences in order, and what join_text needs to
    put their translations back (blank lines, indentation, paragraph or line units). Lines may end in
    "\r\n" or "\n" (join_text writes the ending it is given)."""
    lines = text.replace("\r\n", "\n").split("\n")
    layout: List[Item] = []
    sentences: List[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            layout.append(lines[i])  # blank (or whitespace only): as it is
            i += 1
            continue
        j = i + 1
        while not keep_line_breaks and j < len(lines) and lines[j].strip():
            j += 1
        unit = " ".join(line.strip() for line in lines[i:j])
        found = sentences_of(unit, lang)
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        layout.append((indent, len(found)))
        sentences += found
        i = j
    return layout, sentences


def join_text(layout: List[Item], translations: List[str], line_ending: str = "\n") -> str:
    """The text of split_text's layout with each sentence replaced by its translation, its lines ended by
    ``line_ending`` (the input's: ``line_ending(text)``)."""
    need = sum(item[1] for item in layout if isinstance(item, tuple))
    if len(translations) != need:
        raise ValueError(f"{len(translations)} translations for a text of {need} sentences")
    out, at = [], 0
    for item in layout:
        if isinstance(item, str):
            out.append(item)
        else:
            indent, n = item
            out.append(indent + " ".join(translations[at:at + n]))
            at += n
    return line_ending.join(out)
