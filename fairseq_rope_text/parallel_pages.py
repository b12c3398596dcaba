"""A parallel corpus from documentation translated page by page (Debian's manuals): the paragraphs of an
English page and of its German translation paired by the pages' own structure, then their sentences.

* ``page_blocks``: a page's paragraphs of prose (``p``, DocBook/Publican ``div.para``, ``li``, ``dd``,
  ``blockquote``, ``caption`` without a paragraph inside), each with its element path; code blocks
  (``pre``), navigation, tables of contents, headings and tables are not prose and are left out.
* ``paired_blocks``: the two pages' paragraphs paired by element path. Pages made from one gettext catalog
  (po4a, Publican) have the same paths in the same order: paired one by one. Where they differ (a
  paragraph added or left out in one language), Gale & Church's alignment of the paragraphs by length
  pairs them, and a pair of different paths is left out.
* ``sentence_pairs``: within a pair of paragraphs, the project's sentence splitter on both sides
  (fairseq_rope_text.running_text); the same count on both sides: pairs one by one, else Gale & Church's
  length-based alignment (1993; the ``galechurch`` package) with beads of up to two sentences a side.
* ``page_level_pairs``: the same sentences aligned by Gale & Church over the whole page, ignoring the
  paragraphs: the second, independent alignment against which the first is measured.
* ``Filter``: the cleaning (untranslated, code, no words, length ratio); ``near_copy_key``:
  the key by which a held-out sentence's near copies are taken out of training.

lxml (HTML) and galechurch are imported when needed: ``pip install 'fairseq-rope[corpus]'``.
"""

import itertools
import re
from typing import List, NamedTuple, Optional, Sequence, Tuple

from .running_text import sentences_of

# a paragraph of prose: these elements, where no other one of them is inside
PROSE = frozenset({"p", "li", "dd", "blockquote", "caption"})
# left out with everything inside them: code blocks, page furniture, tables, headings
LEFT_OUT = frozenset({"pre", "script", "style", "table", "h1", "h2", "h3", "h4", "h5", "h6", "head"})
LEFT_OUT_CLASSES = frozenset({"toc", "navheader", "navfooter", "list-of-tables", "list-of-figures",
                              "list-of-examples", "screen", "programlisting", "synopsis", "cmdsynopsis",
                              "legalnotice", "docnav", "breadcrumbs"})
# inline elements whose text is code, a command, a file name: counted in Block.code_share
CODE_TAGS = frozenset({"code", "tt", "kbd", "samp", "var"})
CODE_CLASSES = frozenset({"command", "filename", "literal", "userinput", "computeroutput", "option",
                          "replaceable", "systemitem", "varname", "envar", "function", "parameter",
                          "package", "uri", "email", "prompt"})
URL = re.compile(r"(?:https?|ftp)://\S+|www\.\S+", re.I)
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


class Block(NamedTuple):
    path: str          # element path from <html>, e.g. "html/body/div/div/p"
    text: str          # its text, whitespace collapsed
    code_share: float  # share of its characters inside code, commands and file names


def classes(element) -> set:
    return set((element.get("class") or "").split())


def is_prose(element) -> bool:
    return element.tag in PROSE or (element.tag == "div" and "para" in classes(element))


def left_out(element) -> bool:
    return element.tag in LEFT_OUT or bool(classes(element) & LEFT_OUT_CLASSES)


def is_code(element) -> bool:
    return element.tag in CODE_TAGS or bool(classes(element) & CODE_CLASSES)


def prose_text(element) -> Tuple[str, float]:
    """A paragraph's text, whitespace collapsed, without what is left out inside it (a code block in a
    paragraph), and the share of its characters inside code, commands and file names."""
    parts: List[Tuple[str, bool]] = []

    def walk(el, code: bool):
        parts.append((el.text or "", code))
        for child in el:
            if isinstance(child.tag, str) and not left_out(child):
                walk(child, code or is_code(child))
            parts.append((child.tail or "", code))

    walk(element, False)
    text = " ".join("".join(part for part, _ in parts).split())
    code = sum(len(" ".join(part.split())) for part, in_code in parts if in_code)
    return text, min(1.0, code / max(len(text), 1))


def page_blocks(data: bytes, name: str) -> List[Block]:
    """The paragraphs of prose of an HTML page (bytes: lxml reads the charset it declares), in order;
    a ValueError naming ``name`` for what is not an HTML page."""
    import lxml.html

    try:
        root = lxml.html.document_fromstring(data)
    except Exception as error:  # lxml's ParserError ("Document is empty") and friends
        raise ValueError(f"{name}: not an HTML page ({error})") from None
    blocks: List[Block] = []

    def visit(element, path: str):
        for child in element:
            if not isinstance(child.tag, str) or left_out(child):  # comments; code blocks, navigation, ...
                continue
            here = f"{path}/{child.tag}"
            if is_prose(child) and not any(isinstance(d.tag, str) and is_prose(d) for d in child.iterdescendants()):
                text, code = prose_text(child)
                if text:
                    blocks.append(Block(here, text, code))
            else:
                visit(child, here)

    visit(root, root.tag)
    return blocks


def paired_blocks(source: Sequence[Block], target: Sequence[Block]) -> List[Tuple[int, int]]:
    """The two pages' paragraphs paired (their indices): one by one where their element paths are the
    same sequence; else by Gale & Church over the paragraphs' lengths (a paragraph that one language
    added or left out is a bead without a partner), keeping the one-to-one beads of equal paths."""
    if [x.path for x in source] == [x.path for x in target]:
        return [(i, i) for i in range(len(source))]
    return [(i[0], j[0]) for i, j in gale_church([x.text for x in source], [x.text for x in target])
            if len(i) == len(j) == 1 and source[i[0]].path == target[j[0]].path]


Bead = Tuple[Tuple[int, ...], Tuple[int, ...]]  # source sentence indices, target sentence indices


def gale_church(source: Sequence[str], target: Sequence[str]) -> List[Bead]:
    """Gale & Church's alignment of two sentence lists (beads of 0-2 sentences a side)."""
    import galechurch

    result = galechurch.align(list(source), list(target))
    return [(tuple(range(b.source_start, b.source_end)), tuple(range(b.target_start, b.target_end)))
            for b in result.beads]


def sentence_beads(source: Sequence[str], target: Sequence[str]) -> List[Bead]:
    """One paragraph's sentences paired: one by one where both sides have as many, else Gale & Church;
    beads without a sentence on one side are left out."""
    if len(source) == len(target):
        return [((i,), (i,)) for i in range(len(source))]
    return [bead for bead in gale_church(source, target) if bead[0] and bead[1]]


class PagePairs(NamedTuple):
    pairs: List[Tuple[str, str, float]]  # source, target, the larger code share of their two paragraphs
    beads: List[Bead]                    # the same pairs as page-level sentence indices (of the lists below)
    source_sentences: List[str]          # every sentence of the page's paragraphs, in order
    target_sentences: List[str]
    paired_paragraphs: int


def page_pairs(source: Sequence[Block], target: Sequence[Block], source_lang: str, target_lang: str) -> PagePairs:
    """The sentence pairs of one page and its translation (structure, then sentences)."""
    src = [sentences_of(block.text, source_lang) for block in source]
    tgt = [sentences_of(block.text, target_lang) for block in target]
    src_start = list(itertools.accumulate((len(s) for s in src), initial=0))  # page-level index of each
    tgt_start = list(itertools.accumulate((len(t) for t in tgt), initial=0))  # paragraph's first sentence
    paragraphs = paired_blocks(source, target)
    pairs, beads = [], []
    for a, b in paragraphs:
        for si, ti in sentence_beads(src[a], tgt[b]):
            pairs.append((" ".join(src[a][k] for k in si), " ".join(tgt[b][k] for k in ti),
                          max(source[a].code_share, target[b].code_share)))
            beads.append((tuple(src_start[a] + k for k in si), tuple(tgt_start[b] + k for k in ti)))
    return PagePairs(pairs, beads, [x for xs in src for x in xs], [x for xs in tgt for x in xs], len(paragraphs))


def page_level_pairs(page: PagePairs) -> List[Bead]:
    """The page's sentences aligned by Gale & Church alone, over the whole page (no paragraphs)."""
    return gale_church(page.source_sentences, page.target_sentences)


def near_copy_key(text: str) -> str:
    """What stays of a sentence when case, digits, punctuation and spacing are ignored: two sentences
    with one key are near copies (a version number or a file name apart)."""
    return "".join(c for c in text.casefold() if c.isalpha())


def length_ratio(source: str, target: str) -> float:
    """The longer side's characters over the shorter side's."""
    return max(len(source), len(target)) / max(min(len(source), len(target)), 1)


def disagreement(source: str, target: str, max_ratio: float) -> Optional[str]:
    """Why a pair's two sides look like different content, or None: a character length ratio over
    ``max_ratio``, other numbers, other URLs."""
    if length_ratio(source, target) > max_ratio:
        return "length"
    if sorted(NUMBER.findall(source)) != sorted(NUMBER.findall(target)):
        return "numbers"
    if sorted(URL.findall(source)) != sorted(URL.findall(target)):
        return "urls"
    return None


class Filter:
    """Why a pair is not kept, by name, or None: ``untranslated`` (the same letters on both sides),
    ``code`` (over ``max_code_share`` of the paragraph is code, commands or file names), ``short`` (a side
    with fewer than ``min_words`` words), ``ratio`` (character length ratio over ``max_ratio``).
    (Duplicates are the corpus's to drop, split by split.)"""

    def __init__(self, min_words: int = 3, max_ratio: float = 2.0, max_code_share: float = 0.5):
        self.min_words, self.max_ratio, self.max_code_share = min_words, max_ratio, max_code_share

    def reason(self, source: str, target: str, code: float) -> Optional[str]:
        if near_copy_key(source) == near_copy_key(target):
            return "untranslated"
        if code > self.max_code_share:
            return "code"
        if min(len(source.split()), len(target.split())) < self.min_words:
            return "short"
        if length_ratio(source, target) > self.max_ratio:
            return "ratio"
        return None
