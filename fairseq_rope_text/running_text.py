"""Running text (a paragraph, an e-mail, a list, a file) to sentences and back, with its layout kept.

A model translates sentences; a user hands it text. ``split_text`` cuts the text into units, each
translated alone (split into sentences) and put back on its line by ``join_text``. The rule:

* a line is a unit of its own when it is a list item (``LIST_ITEM``: ``-``, ``*``, ``+``, ``•``,
  ``–``, ..., ``1.``, ``1)``, ``(1)``, ``iv.``, ``a)``, ``(a)`` followed by a space; its indentation
  and marker kept, only its text translated), a short line without a sentence end (under
  ``SHORT_LINE`` characters: a heading, a label such as "Shopping list:", a line of verse), or a
  line that ends a sentence;
* lines are joined only where a paragraph is hard-wrapped prose: a long line that does not end a
  sentence (the splitter, reading it with the next line, finds no boundary between them) followed
  by a continuation line (text that is not a list item), a wrapped list item too; the unit comes
  back on its first line;
* what is not language, a line or a sentence with no letters once URLs and e-mail addresses are
  taken out (punctuation, numbers, symbols, emoji, a lone URL), is not translated: the layout keeps
  it verbatim and ``split_text`` does not return it; blank lines are kept as they are too.

With ``keep_line_breaks`` every line is a unit of its own (nothing is joined). A unit keeps its
first line's indentation (and marker) and its last line's trailing whitespace; its sentences are
joined by one space. Line endings: ``split_text`` takes text with "\r\n" or "\n" (``line_ending``
says which ending a text uses, so that a caller can give its translation the same).

The splitter, chosen by measuring (docs/serving.md, "Sentence splitting"): Moses' rules
(sentence-splitter, the Python port of split-sentences.perl: non-breaking prefixes for 24 European
languages) where it has the language's list, with a few fixes of our own (``ABBREVIATIONS`` and
``NUMBERED_ABBREVIATIONS``, a numbered item's label kept with its sentence, a sentence ending in German
quotes or in "…", one ending before a German opening quote, "etc." or an acronym before a
``SENTENCE_STARTERS`` word); sentencex (Wikimedia's rules for about 300 languages,
each falling back to a related language's or English's) for every other language. Moses' rules
start a sentence only at an upper-case letter, so the pronoun before a full stop ("... for me. I
can") ends a sentence, where sentencex and pysbd take "me." for an abbreviation.

Only the standard library at import time; the splitters are imported when first used.
"""

import functools
import re
from typing import List, NamedTuple, Optional, Tuple, Union


# lower-case abbreviations Moses' lists lack, after which a sentence does not end (language: words)
ABBREVIATIONS = {
    "en": ("approx", "incl", "excl", "resp", "dept", "est"),
    "de": ("inkl", "exkl", "Hr", "Fr"),
}
# abbreviations Moses' lists lack, after which a sentence does not end when a number follows
# ("Abb. 3", "gegr. 1990"; "Nr", "vgl", "bzw", "ca", "Mio", "Mrd", "usw" are in Moses' German list)
NUMBERED_ABBREVIATIONS = {
    "de": ("Abb", "Tab", "Kap", "gegr", "Bd", "Anm"),
}
# words that start a sentence (pronouns, determiners, conjunctions) and hardly follow "etc." or an
# acronym ("U.S.") inside one: before them "etc." and the acronym end the sentence, which Moses' rules
# never end there ("etc. and", "the U.S. Army" go on)
SENTENCE_STARTERS = {
    "en": ("I", "We", "You", "He", "She", "It", "They", "My", "Our", "Your", "His", "Her", "Its", "Their",
           "The", "This", "That", "These", "Those", "There", "But", "And", "So", "Then", "However"),
}
# a sentence that ends inside quotes which Unicode calls opening ones (German „...“, »...«) before a
# capital: Moses' rules see only closing quotes there
QUOTED_END = r"""(?<=[.!?…][“«‹‘]) +(?=[„“»«‚"']?\p{Lu})"""
# the ellipsis character before a capital, as Moses' rules treat "..." there
ELLIPSIS_END = r"""(?<=…) +(?=[„“»«‚"'(\[]?\p{Lu})"""
# a sentence end before a German opening quote („, », ‚, ›: Moses' rules take none of them for one) and
# a capital; not after an abbreviation (``abbreviation_before``)
OPENING_QUOTE = r"""(?<=[.!?…]["'”“»«’‘)\]]*) +(?=[„»‚›]\p{Lu})"""
# a numbered item's label: "1.", "12.", "iv.", "(a)", "b)"
LABEL = re.compile(r"^(\(?\d{1,3}[.)]|\(?[ivxlIVXL]{1,5}[.)]|\(?[a-zA-Z]\))$")
# a list item's indentation and marker (a bullet, dash or label), then the space before its text
LIST_ITEM = re.compile(r"^\s*(?:[-*+•◦‣▪–—]|\(?\d{1,3}[.)]|\(?[ivxlIVXL]{1,5}[.)]|\(?[a-zA-Z]\))\s+(?=\S)")
# a line shorter than this (without its indentation and trailing whitespace) that does not end a
# sentence is a heading, a label or a line of verse, not hard-wrapped prose (wrapped at 60-80 columns)
SHORT_LINE = 40
# a word that is a URL or an e-mail address (maybe in brackets or quotes), not language
URL_OR_EMAIL = re.compile(r"""[(<\["'“«]*(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.|[^@\s]+@[^@\s]+\.)""")


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


@functools.lru_cache(maxsize=None)
def numbered_abbreviation_end(lang: str):
    """A pattern for a sentence ending in one of ``NUMBERED_ABBREVIATIONS[lang]``, or None."""
    if lang not in NUMBERED_ABBREVIATIONS:
        return None
    return re.compile(r"(?:^|\W)(?:" + "|".join(NUMBERED_ABBREVIATIONS[lang]) + r")\.$")


@functools.lru_cache(maxsize=None)
def our_breaks(lang: str):
    """The pattern of the boundaries we add to Moses' rules in ``lang``: named groups ``open`` (before
    an opening quote, to check for an abbreviation) and ``starter`` (after "etc." or an acronym)."""
    found = [QUOTED_END, ELLIPSIS_END, f"(?P<open>{OPENING_QUOTE})"]
    if lang in SENTENCE_STARTERS:
        found.append(r"(?P<starter>(?<=(?:^|[\s(])(?:etc|(?:\p{Lu}\.)+\p{Lu})\.) +(?=(?:"
                     + "|".join(SENTENCE_STARTERS[lang]) + r")\b))")
    import regex

    return regex.compile("|".join(found))


@functools.lru_cache(maxsize=None)
def moses_prefixes(lang: str) -> frozenset:
    """The non-breaking prefixes of Moses' rules for ``lang``: the file sentence-splitter ships
    (``non_breaking_prefixes/<lang>.txt``: a prefix a line, ``#`` comments, ``#NUMERIC_ONLY#`` marks)."""
    from importlib import resources

    try:
        text = resources.files("sentence_splitter").joinpath("non_breaking_prefixes", f"{lang}.txt").read_text("utf-8")
    except FileNotFoundError:
        return frozenset()
    return frozenset(line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip())


def abbreviation_before(text: str, lang: str) -> bool:
    """Whether ``text`` ends in an abbreviation: a word of Moses' non-breaking prefixes (or of
    ``ABBREVIATIONS``) and a full stop, or an acronym ("z.B.")."""
    words = text.split()
    word = words[-1] if words else ""
    if not word.endswith("."):
        return False
    prefix = re.sub(r"^\W+", "", word.rstrip("."))
    return (prefix in moses_prefixes(lang) or prefix in ABBREVIATIONS.get(lang, ())
            or bool(re.search(r"\.[^\W\d_]+$", prefix) and prefix[-1].isupper()))


def split_further(sentence: str, lang: str) -> List[str]:
    """``sentence`` (of Moses' rules) cut where our rules (``our_breaks``) find a boundary."""
    parts, start = [], 0
    for found in our_breaks(lang).finditer(sentence):
        if found.group("open") and abbreviation_before(sentence[:found.start()], lang):
            continue
        parts.append(sentence[start:found.start()])
        start = found.end()
    parts.append(sentence[start:])
    return parts


def sentences_of(text: str, lang: str) -> List[str]:
    """The sentences of one paragraph in ``lang`` (an ISO 639-1 code; "de_DE", "pt-BR": their first
    part), stripped (none for blank text)."""
    base = re.split(r"[_-]", lang, maxsplit=1)[0].lower()
    moses = moses_splitter(base) if re.fullmatch(r"[a-z]{2}", base) else None
    if moses is None:
        from sentencex import segment

        return [s.strip() for s in segment(base, text) if s.strip()]
    found = [part.strip() for s in moses.split(text) for part in split_further(s, base) if part.strip()]
    ending, numbered = abbreviation_end(base), numbered_abbreviation_end(base)
    joined: List[str] = []
    for sentence in found:
        if joined and (LABEL.match(joined[-1]) or (ending and ending.search(joined[-1]))
                       or (numbered and numbered.search(joined[-1]) and sentence[:1].isdigit())):
            joined[-1] += " " + sentence
        else:
            joined.append(sentence)
    return joined


def has_words(text: str) -> bool:
    """Whether ``text`` holds language: a letter outside its URLs and e-mail addresses (not only
    punctuation, numbers, symbols or emoji)."""
    return any(c.isalpha() for word in text.split() if not URL_OR_EMAIL.match(word) for c in word)


def list_marker(line: str) -> str:
    """The indentation, list marker and space that start ``line`` when it is a list item, else ""."""
    found = LIST_ITEM.match(line)
    return found.group(0) if found else ""


def wraps_onto(line: str, following: str, lang: str) -> bool:
    """Whether ``following`` carries on ``line`` as hard-wrapped prose: ``line`` is long and does not
    end a sentence (the splitter, reading the two together, puts no boundary between them), and
    ``following`` is text that does not start a list item."""
    if len(line.strip()) < SHORT_LINE or not has_words(following) or list_marker(following):
        return False
    text, rest = line[len(list_marker(line)):].strip(), following.strip()
    return sentences_of(text + " " + rest, lang) != sentences_of(text, lang) + sentences_of(rest, lang)


class Unit(NamedTuple):
    """A unit of the layout: a line (or the lines of a hard-wrapped paragraph) translated alone."""
    prefix: str                        # its first line's indentation and list marker
    count: int                         # how many of its sentences are translated (split_text returns them)
    parts: Tuple[Optional[str], ...]   # its sentences in order: None where a translation goes, else kept
    suffix: str                        # its last line's trailing whitespace


# a layout item: a line kept as it is (blank, or no words), or a unit
Item = Union[str, Unit]


def line_ending(text: str) -> str:
    """"\r\n" when every line break of ``text`` is one, else "\n"."""
    breaks = text.count("\n")
    return "\r\n" if breaks and text.count("\r\n") == breaks else "\n"


def split_text(text: str, lang: str, keep_line_breaks: bool = False) -> Tuple[List[Item], List[str]]:
    """(layout, sentences) of ``text`` in ``lang``: the sentences to translate in order, and what
    join_text needs to put their translations back (the lines kept as they are, the units with their
    markers and the sentences without words). Lines may end in "\r\n" or "\n" (join_text writes the
    ending it is given)."""
    lines = text.replace("\r\n", "\n").split("\n")
    layout: List[Item] = []
    sentences: List[str] = []
    i = 0
    while i < len(lines):
        if not has_words(lines[i]):
            layout.append(lines[i])  # blank, or no language in it: as it is
            i += 1
            continue
        j = i + 1
        while not keep_line_breaks and j < len(lines) and wraps_onto(lines[j - 1], lines[j], lang):
            j += 1
        prefix = list_marker(lines[i]) or lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        unit = " ".join([lines[i][len(prefix):].strip()] + [line.strip() for line in lines[i + 1:j]])
        found = sentences_of(unit, lang)
        parts = tuple(None if has_words(s) else s for s in found)
        sentences += [s for s in found if has_words(s)]
        last = lines[j - 1]
        layout.append(Unit(prefix, parts.count(None), parts, last[len(last.rstrip()):]))
        i = j
    return layout, sentences


def join_text(layout: List[Item], translations: List[str], line_ending: str = "\n") -> str:
    """The text of split_text's layout with each sentence to translate replaced by its translation,
    every unit on its line, its lines ended by ``line_ending`` (the input's: ``line_ending(text)``)."""
    need = sum(item.count for item in layout if isinstance(item, Unit))
    if len(translations) != need:
        raise ValueError(f"{len(translations)} translations for a text of {need} sentences")
    out, left = [], iter(translations)
    for item in layout:
        if isinstance(item, str):
            out.append(item)
        else:
            text = " ".join(next(left) if part is None else part for part in item.parts)
            out.append(item.prefix + text + item.suffix)
    return line_ending.join(out)
