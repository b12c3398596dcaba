"""A parallel corpus from documentation translated page by page (Debian's manuals): the paragraphs of an
English page and of its German translation paired by the pages' own structure, then their sentences.

* ``page_blocks``: a page's paragraphs of prose (``p``, DocBook/Publican ``div.para``, ``li``, ``dd``,
  ``blockquote``, ``caption`` without a paragraph inside), each with its element path; code blocks
  (``pre``), navigation, tables of contents, headings, tables and each source's page furniture (HTML5's
  ``header``/``footer``/``nav``/``aside``: LibreOffice's help puts its title bar, index and debug footer
  there; its icon tables, "Related Topics" and "To access this command..." labels) are not prose and are
  left out. Where a page carries per-platform or per-module alternatives side by side for a script to
  choose (LibreOffice's ``switchinline``/``switch``: "Command" on a Mac, "Ctrl" elsewhere), only the
  default reading is kept. Menu items, UI labels and keys count as code (``Block.code_share``), as
  commands and file names do.
* ``paired_blocks``: the two pages' paragraphs paired by element path. Pages made from one gettext catalog
  (po4a, Publican) have the same paths in the same order: paired one by one. Where they differ (a
  paragraph added or left out in one language), Gale & Church's alignment of the paragraphs by length
  pairs them, and a pair of different paths is left out.
* ``sentence_pairs``: within a pair of paragraphs, the project's sentence splitter on both sides
  (fairseq_rope_text.running_text); the same count on both sides: pairs one by one, else Gale & Church's
  length-based alignment (1993; the ``galechurch`` package) with beads of up to two sentences a side.
* ``page_level_pairs``: the same sentences aligned by Gale & Church over the whole page, ignoring the
  paragraphs: the second, independent alignment against which the first is measured.
* ``Filter``: the cleaning (untranslated, code, no words, length ratio).
* ``similar_pairs``: every pair of sentences whose word sets (letters only, casefolded: ``word_set``)
  have a Jaccard similarity of at least a threshold, found exactly (Bayardo et al.'s all-pairs prefix
  filter), and ``clusters``, their connected components: what the corpus treats as one template, so that
  no held-out sentence has a near copy in training.

lxml (HTML) and galechurch are imported when needed: ``pip install 'fairseq-rope[corpus]'``.
"""

import bisect
import collections
import itertools
import math
import re
from typing import Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .running_text import sentences_of

# a paragraph of prose: these elements, where no other one of them is inside
PROSE = frozenset({"p", "li", "dd", "blockquote", "caption"})
# left out with everything inside them: code blocks, page furniture, tables, headings
LEFT_OUT = frozenset({"pre", "script", "style", "table", "h1", "h2", "h3", "h4", "h5", "h6", "head",
                      "header", "footer", "nav", "aside"})
LEFT_OUT_CLASSES = frozenset({"toc", "navheader", "navfooter", "list-of-tables", "list-of-figures",
                              "list-of-examples", "screen", "programlisting", "synopsis", "cmdsynopsis",
                              "legalnotice", "docnav", "breadcrumbs",
                              # LibreOffice's help: debug footer, icon tables, link lists, access labels
                              "debug", "icontable", "relatedtopics", "howtogetheader"})
# alternatives side by side, of which a script shows one (LibreOffice's help: by platform, by module);
# the one kept is the child whose id starts with "default" (none: the block is not shown by default)
SWITCH_CLASSES = frozenset({"switchinline", "switch"})
# inline elements whose text is code, a command, a file name, a menu item, a UI label or a key: counted in
# Block.code_share (DocBook's gui* and key* classes, LibreOffice's menuitem/keycode/input/widget)
CODE_TAGS = frozenset({"code", "tt", "kbd", "samp", "var"})
CODE_CLASSES = frozenset({"command", "filename", "literal", "userinput", "computeroutput", "option",
                          "replaceable", "systemitem", "varname", "envar", "function", "parameter",
                          "package", "uri", "email", "prompt",
                          "guimenu", "guisubmenu", "guimenuitem", "guibutton", "guilabel", "guiicon",
                          "menuchoice", "shortcut", "keycap", "keycombo", "keysym", "mousebutton", "accel",
                          "menuitem", "keycode", "input", "widget", "bascode", "pycode"})
WORD = re.compile(r"[^\W\d_]+")  # a run of letters
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


def shown_children(element):
    """The element's child elements a reader sees: all of them, except in a set of alternatives (a
    ``switch``), where only the default one (or none) is shown; comments and what is left out dropped."""
    children = [c for c in element if isinstance(c.tag, str) and not left_out(c)]
    if classes(element) & SWITCH_CLASSES:
        return [c for c in children if (c.get("id") or "").startswith("default")]
    return children


def text_after(child, parent) -> str:
    """The text after ``child`` inside ``parent`` (its tail); none inside a set of alternatives, whose
    text between the alternatives is only their layout."""
    return "" if classes(parent) & SWITCH_CLASSES else (child.tail or "")


def prose_text(element) -> Tuple[str, float]:
    """A paragraph's text, whitespace collapsed, without what is left out inside it (a code block in a
    paragraph), and the share of its characters inside code, commands and file names."""
    parts: List[Tuple[str, bool]] = []

    def walk(el, code: bool):
        parts.append((el.text or "", code))
        shown = shown_children(el)
        for child in el:
            if child in shown:
                walk(child, code or is_code(child))
            parts.append((text_after(child, el), code))

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
        for child in shown_children(element):  # no comments, code blocks, navigation, other alternatives
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


def word_set(text: str) -> FrozenSet[str]:
    """A sentence's words for the similarity of near copies: runs of letters, casefolded (digits,
    punctuation and order ignored)."""
    return frozenset(WORD.findall(text.casefold()))


def jaccard(a: FrozenSet[str], b: FrozenSet[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


class WordSetIndex:
    """Sets of words indexed for an exact similarity join under Jaccard >= ``threshold`` (0 < t <= 1): the
    all-pairs prefix filter (Bayardo, Ma & Srikant 2007). With every set's words ordered rarest first (by
    their frequency in the indexed sets), two sets x, y of similarity >= t overlap in at least t max(|x|, |y|)
    words, so they share one among the first |x| - ceil(t |x|) + 1 of x and the first |y| - ceil(t |y|) + 1
    of y, and t |x| <= |y| <= |x| / t: only such candidates are compared. Sets are added in order of
    size, so each word's list of sets is sorted by size and the size bounds cut it by bisection. Where
    only sets no larger than every later query are indexed (``similar_pairs``' self-join, queries in order
    of size: ``smaller_only``), an indexed y needs only its first |y| - ceil(2t / (1 + t) |y|) + 1 words,
    as the overlap is then at least t / (1 + t) (|x| + |y|) >= 2t / (1 + t) |y|. (Why not
    MinHash/LSH, e.g. datasketch: it is approximate, and a near copy it misses is a leak; this is exact,
    and fast enough for a corpus of 10^5 sentences.) Empty sets are never similar to anything."""

    EPS = 1e-9

    def __init__(self, sets: Sequence[FrozenSet[str]], threshold: float, smaller_only: bool = False):
        if not 0 < threshold <= 1:
            raise ValueError(f"similarity threshold must be in (0, 1], got {threshold}")
        self.sets, self.threshold = list(sets), threshold
        self.frequency = collections.Counter(w for x in self.sets for w in x)
        self.ids: Dict[str, List[int]] = collections.defaultdict(list)    # word -> sets, by size
        self.sizes: Dict[str, List[int]] = collections.defaultdict(list)  # word -> their sizes
        self.by_size = sorted(range(len(self.sets)), key=lambda k: len(self.sets[k]))
        self.index_share = 2 * threshold / (1 + threshold) if smaller_only else threshold

    def prefix(self, words: FrozenSet[str], share: float) -> List[str]:
        """The ``words`` rarest first, as many as a set that keeps ``share`` of them must share one of."""
        ordered = sorted(words, key=lambda w: (self.frequency[w], w))
        return ordered[:len(ordered) - math.ceil(share * len(ordered) - self.EPS) + 1]

    def add(self, i: int):
        """Indexes set i (no smaller than any set added before it)."""
        for w in self.prefix(self.sets[i], self.index_share):
            self.ids[w].append(i)
            self.sizes[w].append(len(self.sets[i]))

    def matches(self, words: FrozenSet[str]) -> Iterator[Tuple[int, float]]:
        """(j, similarity) of every indexed set j within the threshold of ``words``."""
        if not words:
            return
        low, high = self.threshold * len(words) - self.EPS, len(words) / self.threshold + self.EPS
        candidates = set()
        for w in self.prefix(words, self.threshold):
            sizes = self.sizes.get(w)
            if sizes:
                candidates.update(self.ids[w][bisect.bisect_left(sizes, low):bisect.bisect_right(sizes, high)])
        n = len(words)
        for j in candidates:
            shared = len(words & self.sets[j])
            similarity = shared / (n + len(self.sets[j]) - shared)
            if similarity >= self.threshold - self.EPS:
                yield j, similarity


def similar_pairs(sets: Sequence[FrozenSet[str]], threshold: float) -> Iterator[Tuple[int, int, float]]:
    """Every (i, j, similarity), i < j, whose word sets have a Jaccard similarity >= ``threshold``
    (``WordSetIndex``'s exact join of the sets with themselves)."""
    index = WordSetIndex(sets, threshold, smaller_only=True)
    for i in index.by_size:
        for j, similarity in index.matches(index.sets[i]):
            yield (j, i, similarity) if j < i else (i, j, similarity)
        index.add(i)


def nearest_similarity(queries: Sequence[FrozenSet[str]], sets: Sequence[FrozenSet[str]],
                       threshold: float) -> List[float]:
    """For each query, its largest Jaccard similarity to one of ``sets`` where that is >= ``threshold``,
    else 0.0."""
    index = WordSetIndex(sets, threshold)
    for i in index.by_size:
        index.add(i)
    return [max((s for _, s in index.matches(q)), default=0.0) for q in queries]


def clusters(n: int, pairs: Sequence[Tuple[int, int]]) -> List[int]:
    """The connected components of ``pairs`` over items 0..n-1: each item's component, named by its
    smallest member."""
    parent = list(range(n))

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [root(k) for k in range(n)]


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
