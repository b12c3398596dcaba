"""Texts to the pieces a model translates, and back, inline markup carried across.

``pieces_of`` and ``join_pieces`` are what every way in translates texts with (the translator's
``translate_texts``, fairseq-rope-translate's files, the server's text, HTML and files): texts (running
text, or HTML) -> pieces, each with its sentences -> the texts with the translations in place. A piece
is running text (its layout kept line by line: fairseq_rope_text.running_text) or, in HTML, a
paragraph's run of text and inline elements, translated by detag, translate, project (Joanis et al.
2013; Hanneman & Dinu 2020). A model translates plain sentences; a paragraph of a page holds ``<b>``, ``<a href>``,
``<code>`` inside its sentences. So the paragraph is translated without its inline tags, and each tag pair
is put back around the target words that the model's own attention aligns to the source words it
enclosed:

1. ``detag``: a fragment of inline HTML -> its plain text (whitespace runs read as one space, as a
   browser shows them) and its elements, each with the span of the plain text it enclosed;
2. the plain text is split into sentences (an element that crosses a sentence end is cut in two, closed
   at the end of one sentence and opened again at the start of the next) and each sentence translated,
   the translation carrying its target subwords and, for each, the source subword it attends to most
   (``Translation``: fairseq's ``attention`` of the last decoder layer, averaged over heads; CTranslate2's
   ``return_attention``, exported with every head averaged the same way);
3. ``project``: words are the pretokenized tokens (a subword's word), found in the text by their
   characters; an element covers the target words holding a subword aligned to a source word it
   enclosed, and the target words between the first and the last of them (a phrase stays whole). The
   rules where that is not enough: an element inside another stays inside it (clipped to its parent's
   words); siblings do not overlap (a later one loses the words an earlier one took); an element whose
   words align nowhere (or lost them all) goes around one target word: the first that starts at or after
   its place, the point after the target word aligned to the source word before it (the start where there
   is none; the last word where none starts there), within its parent's words, or the nearest word no
   sibling took (up to ``NEAREST_FREE`` words away; else inside the sibling's). An engine that aligned no
   target word is read as one that gives no alignment: each target word at its relative place. So no element that held words comes back empty, in any format: an empty element is
   invisible in a page, and a Word run or hyperlink without text has nothing to hold (it was lost). A void
   element (``<br>``, ``<img>``, a comment) and an element that held no words go, as they were, at that
   place. Code (``<code>``, ``<tt>``, ``<kbd>``, ``<samp>``, ``<var>``, ``translate="no"``, class
   ``notranslate``) is read by the model as part of its sentence (it then has words to align) and comes
   back verbatim, in place of the target words it covers.

A paragraph without inline tags is running text (its layout kept line by line). Only the standard library.
"""

import bisect
import html
import re
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from .html_text import RAW_TEXT, TAG, html_of, html_parts, without_tags

# phrasing elements that mark words inside a sentence (every other element ends a paragraph's text)
INLINE = frozenset("a abbr b bdi bdo big cite data del dfn em font i ins label mark q s small span strike strong "
                   "sub sup time u".split())
# phrasing elements whose text is not prose: kept verbatim
CODE = frozenset("code kbd samp tt var".split())
# void phrasing elements: kept at their aligned place
VOID = frozenset("br img wbr".split())
# a subtitle cue's markup: SubRip's <i>, <b>, <u>, <font>; WebVTT's <c.class>, <v Name>, <lang>, <ruby>,
# <rt> and timestamps (<00:01.000>); {\an8}-style codes (SSA's, in SubRip files)
CUE_INLINE = frozenset("b c font i lang ruby rt u v".split())
CUE_TAG = re.compile(r"<[^<>\n]*>|\{\\[^{}\n]*\}")
NAME = re.compile(r"</?\s*([a-zA-Z][a-zA-Z0-9-]*)")
MARKUPS = ("text", "html", "srt", "vtt")  # what pieces_of reads
NO_TRANSLATE = re.compile(r"""\btranslate\s*=\s*["']?no\b|\bclass\s*=\s*["'][^"']*\bnotranslate\b""", re.I)
# inline elements open inside one another (<b><i>...): the default of fairseq-rope-serve's and
# fairseq-rope-translate's --nesting-limit (pieces_of's own default: no limit)
NESTING_LIMIT = 100
# how far (in target words) an element whose words align nowhere looks for a word no sibling took (project)
NEAREST_FREE = 32


class MarkupError(ValueError):
    """Inline markup past a limit that the caller set (``nesting_limit``)."""


class Element(NamedTuple):
    """An inline element of a sentence: the plain text's characters [start, end) it encloses, its opening
    and closing tags as written (``close`` "" for a void element or a comment, start == end), and for code
    its whole HTML (``verbatim``), put back as it is."""
    start: int
    end: int
    open: str
    close: str
    verbatim: Optional[str] = None


class Marked(NamedTuple):
    """A fragment of inline HTML (or a cue's line) detagged: its plain text and its elements (in the order
    of their opening tags), the whitespace before and after it, and whether its text is written escaped
    (HTML, WebVTT; not SubRip)."""
    text: str
    elements: List[Element]
    lead: str
    trail: str
    escaped: bool = True


class Translation(str):
    """A sentence's translation (the detokenized text) with what projection needs: ``source`` and
    ``target``, the subwords of the sentence and of the translation, and ``alignment``: for each target
    subword, the index of the source subword it attends to most (None where the engine gives none)."""

    source: List[str]
    target: List[str]
    alignment: Optional[List[int]]

    def __new__(cls, text: str, source: Sequence[str] = (), target: Sequence[str] = (),
                alignment: Optional[Sequence[int]] = None):
        self = super().__new__(cls, text)
        self.source, self.target = list(source), list(target)
        self.alignment = None if alignment is None else list(alignment)
        return self


def tag_name(tag: str) -> str:
    found = NAME.match(tag)
    return found.group(1).lower() if found else ""


def closing_tag(parts: List[Tuple[bool, str]], i: int, name: str) -> int:
    """The index of the tag that closes the ``name`` element opened at ``parts[i]`` (elements of that name
    inside it counted), or the last part's where it is never closed."""
    depth = 0
    for k in range(i, len(parts)):
        if not parts[k][0] and tag_name(parts[k][1]) == name and not parts[k][1].endswith("/>"):
            depth += -1 if parts[k][1].startswith("</") else 1
            if depth == 0:
                return k
    return len(parts) - 1


def inline_runs(parts: List[Tuple[bool, str]]) -> List[Tuple[bool, List[Tuple[bool, str]]]]:
    """html_parts' parts grouped: [(True, a run of text and inline elements that holds text), (False,
    parts kept as they are)]. Block tags, script, style, pre and textarea (with their content) end a run;
    a comment inside one is kept in it, at its place."""
    runs: List[Tuple[bool, List[Tuple[bool, str]]]] = []
    current: List[Tuple[bool, str]] = []

    def flush():
        if current:
            runs.append((any(is_text and part.strip() for is_text, part in current), list(current)))
            current.clear()

    i = 0
    while i < len(parts):
        is_text, part = parts[i]
        name = "" if is_text else tag_name(part)
        if is_text or name in INLINE or name in VOID or part.startswith("<!--"):
            current.append(parts[i])
            i += 1
            continue
        opening = not part.startswith("</") and not part.endswith("/>")
        # script, style, pre, textarea (their content one raw part) and code elements: whole, up to their closing tag
        end = closing_tag(parts, i, name) + 1 if opening and (RAW_TEXT.match(part) or name in CODE) else i + 1
        if name in CODE and opening:
            current.extend(parts[i:end])
        else:
            flush()
            runs.append((False, parts[i:end]))
        i = end
    flush()
    return runs


def detag(parts: List[Tuple[bool, str]], inline: frozenset = INLINE, escaped: bool = True,
          nesting_limit: int = 0) -> Marked:
    """A run of inline_runs (or cue_parts) as its plain text and elements, ``inline`` the names of elements
    with a closing tag. A closing tag without its opening tag in the run, or an opening tag not closed in
    it (WebVTT's <v Name>), is kept as a void element (at its place). More than ``nesting_limit`` elements
    open inside one another (0: no limit) is a MarkupError."""
    chars: List[str] = []
    elements: List[Element] = []
    open_ones: List[Tuple[str, int]] = []  # (name, index in elements)
    latest: Dict[str, List[int]] = {}  # name: the places in open_ones of the open elements of that name

    def add_text(s: str):
        for c in s:
            if not c.isspace():
                chars.append(c)
            elif chars and chars[-1] != " ":
                chars.append(" ")

    i = 0
    while i < len(parts):
        is_text, part = parts[i]
        if is_text:
            add_text(part)
            i += 1
            continue
        name = tag_name(part)
        closing, void = part.startswith("</"), part.endswith("/>") or part.startswith("<!")
        if (name in CODE or name in INLINE and NO_TRANSLATE.search(part)) and not closing and not void:
            end = closing_tag(parts, i, name)
            start = len(chars)
            for inner_is_text, inner in parts[i + 1:end]:
                add_text(inner if inner_is_text else "" if TAG.fullmatch(inner) else html.unescape(without_tags(inner)))
            verbatim = "".join(html.escape(p, quote=False) if t else p for t, p in parts[i:end + 1])
            elements.append(Element(start, len(chars), part, "", verbatim))
            i = end + 1
            continue
        if closing and name in inline and latest.get(name):
            k = latest[name][-1]
            index = open_ones[k][1]
            elements[index] = elements[index]._replace(end=len(chars), close=part)
            for n, _ in open_ones[k:]:  # (those opened inside it and not closed stay void)
                latest[n].pop()
            del open_ones[k:]
        elif name in inline and not closing and not void:
            if nesting_limit and len(open_ones) >= nesting_limit:
                raise MarkupError(f"inline elements nested deeper than the limit of {nesting_limit}: {part[:40]!r} "
                                  f"opens inside {len(open_ones)} others, at character {len(chars)} of a "
                                  "paragraph's text")
            latest.setdefault(name, []).append(len(open_ones))
            open_ones.append((name, len(elements)))
            elements.append(Element(len(chars), len(chars), part, ""))
        else:  # a void element, a self-closed one, a comment, a stray closing tag
            elements.append(Element(len(chars), len(chars), part, ""))
            if name == "br":  # (a line break between words)
                add_text(" ")
        i += 1
    if chars and chars[-1] == " ":
        chars.pop()
    n = len(chars)
    elements = [e._replace(start=min(e.start, n), end=min(e.end, n)) for e in elements]
    lead = re.match(r"\s*", parts[0][1]).group(0) if parts and parts[0][0] else ""
    trail = re.search(r"\s*$", parts[-1][1]).group(0) if parts and parts[-1][0] else ""
    return Marked("".join(chars), elements, lead, trail, escaped)


def cue_parts(line: str, escaped: bool) -> List[Tuple[bool, str]]:
    """A subtitle cue's line as [(is_text, part)]: its tags and {\\...} codes, and the text between them
    (WebVTT's character references read where ``escaped``)."""
    parts, at = [], 0
    for match in CUE_TAG.finditer(line):
        if match.start() > at:
            parts.append((True, html.unescape(line[at:match.start()]) if escaped else line[at:match.start()]))
        parts.append((False, match.group(0)))
        at = match.end()
    if at < len(line):
        parts.append((True, html.unescape(line[at:]) if escaped else line[at:]))
    return parts


def sentence_spans(text: str, sentences: Sequence[str]) -> Optional[List[Tuple[int, int]]]:
    """Where each sentence is in ``text`` (found in order), or None where one is not there verbatim."""
    spans, at = [], 0
    for sentence in sentences:
        start = text.find(sentence, at)
        if start < 0:
            return None
        spans.append((start, start + len(sentence)))
        at = start + len(sentence)
    return spans


def word_spans(words: Sequence[str], text: str) -> List[Tuple[int, int]]:
    """Where each word (its characters, in order) is in ``text``: its characters found one by one, spaces
    skipped, case ignored (a truecased or lower-cased model), each near where the last one was; a
    character not found there is skipped (normalized punctuation). A word not found at all: the empty
    span where the search stood."""
    spans, at = [], 0
    folded = "".join(c.lower()[:1] for c in text)  # (one character for one: "ß", "İ" keep their places)
    for word in words:
        start = end = None
        for c in word:
            found = -1 if c.isspace() else folded.find(c.lower()[:1], at, at + 8 + len(word))
            if found >= 0:
                start = found if start is None else start
                end = at = found + 1
        spans.append((start, end) if start is not None else (at, at))
    return spans


def render(text: str, elements: Sequence[Element], ranges: Sequence[Optional[Tuple[int, int]]],
           places: Sequence[int], escaped: bool = True) -> str:
    """``text`` as HTML with each element around its character range (None: empty, at its place; code:
    its verbatim HTML in place of the range). Elements are in opening order, parents before children, so
    that at one position closings come first, then openings and empty elements in the source's order."""
    inserts = []  # (position, kind, order, html)
    hidden = []  # the characters code takes the place of
    for k, (e, span) in enumerate(zip(elements, ranges)):
        if span is None:  # (with the openings, in the source's order)
            inserts.append((places[k], 1, k, e.verbatim if e.verbatim is not None else e.open + e.close))
        elif e.verbatim is not None:
            hidden.append(span)
            inserts.append((span[0], 1, k, e.verbatim))
        else:
            inserts.append((span[0], 1, k, e.open))
            inserts.append((span[1], 0, -k, e.close))
    inserts.sort()
    out, i = [], 0
    cuts = sorted({0, len(text), *(p for p, _, _, _ in inserts), *(x for span in hidden for x in span)})
    place = {cut: n for n, cut in enumerate(cuts)}
    starting = [0] * (len(cuts) + 1)  # code ranges that start at each cut, less those that end there
    for s, t in hidden:
        starting[place[s]] += 1
        starting[place[t]] -= 1
    covered = 0  # the code ranges the piece from this cut to the next lies in
    for n, (a, b) in enumerate(zip(cuts, cuts[1:] + [len(text)])):
        covered += starting[n]
        while i < len(inserts) and inserts[i][0] == a:
            out.append(inserts[i][3])
            i += 1
        if a < b and not covered:
            out.append(html.escape(text[a:b], quote=False) if escaped else text[a:b])
    return "".join(out)


def nesting(elements: Sequence[Element]) -> List[Optional[int]]:
    """Each element's parent: the innermost (the latest) earlier element with a closing tag that encloses it
    (an element without characters encloses only elements without characters at its place). Elements
    come in opening order, as detag gives them: their starts never decrease, and two elements with closing
    tags are one inside the other or one after the other. So the candidates are a stack: the elements
    with characters that can still enclose a later one (each ending before the one under it), and the last
    element without characters."""
    parents: List[Optional[int]] = []
    stack: List[int] = []
    empty: Optional[int] = None
    for k, e in enumerate(elements):
        while stack and elements[stack[-1]].end < (e.end if e.start < e.end else e.start):
            stack.pop()  # (ends before this one does, or before its place: encloses nothing after it)
        parent = stack[-1] if stack else None
        if e.start == e.end and empty is not None and elements[empty].start == e.start and \
                (parent is None or empty > parent):
            parent = empty
        parents.append(parent)
        if e.close and e.start < e.end:
            while stack and elements[stack[-1]].end <= e.end:
                stack.pop()  # (what it encloses, this one encloses too, and it comes later)
            stack.append(k)
        elif e.close:
            empty = k
    return parents


def extremes(values: Sequence[int], pick: Callable) -> Callable[[int, int], int]:
    """``pick`` (min or max) of ``values[i:j]`` for any i < j, each in two look-ups: a sparse table (the
    pick of each run of 1, 2, 4, ... values)."""
    table = [list(values)]
    while 2 ** len(table) <= len(values):
        row, half = table[-1], 2 ** (len(table) - 1)
        table.append([pick(row[i], row[i + half]) for i in range(len(row) - half)])

    def query(i: int, j: int) -> int:
        level = (j - i).bit_length() - 1
        return pick(table[level][i], table[level][j - 2 ** level])
    return query


def project(sentence: str, elements: Sequence[Element], translation: Translation,
            words_of: Callable[[Sequence[str]], Tuple[List[str], List[int]]], escaped: bool = True) -> str:
    """The translation as HTML with the sentence's elements (spans of ``sentence``) on the target words
    aligned to theirs (the module's rules). ``words_of(subwords)`` gives the pretokenized words that
    subwords make, as the text writes them, and each subword's word (Preprocessing.words)."""
    text = str(translation)
    if not elements:
        return html.escape(text, quote=False) if escaped else text
    alignment = getattr(translation, "alignment", None)
    aligned = alignment is not None and len(alignment) == len(translation.target) and \
        any(i is not None for i in alignment)  # (an engine that aligned nothing: as one without alignment)
    if aligned:
        source_words, source_word_of = words_of(translation.source)
        target_words, target_word_of = words_of(translation.target)
    else:  # no attention from the engine: the words between spaces, each target word at its relative place
        source_words, target_words = sentence.split(), text.split()
    source_spans, target_spans = word_spans(source_words, sentence), word_spans(target_words, text)
    target_starts = [a for a, _ in target_spans]
    aligned_to: List[List[int]] = [[] for _ in source_words]  # the target words aligned to each source word
    if aligned:
        for j, i in enumerate(alignment):
            if i is not None and 0 <= i < len(source_word_of):
                aligned_to[source_word_of[i]].append(target_word_of[j])
    elif source_words:
        for t in range(len(target_words)):
            aligned_to[t * len(source_words) // len(target_words)].append(t)

    # the source words' spans come in order (word_spans): the words an element encloses are a run of them,
    # found by bisection, and the first and last target words aligned to a run come from sparse tables
    starts, ends = [s for s, _ in source_spans], [f for _, f in source_spans]
    none = len(target_words)
    first = extremes([min(ts, default=none) for ts in aligned_to], min)
    last = extremes([max(ts, default=-1) for ts in aligned_to], max)
    last_aligned: List[int] = []  # the last source word up to each one with target words aligned to it (-1: none)
    for w, ts in enumerate(aligned_to):
        last_aligned.append(w if ts else last_aligned[-1] if last_aligned else -1)

    def place_after(position: int) -> int:
        """The target character after the word aligned to the last source word that ends by ``position``."""
        w = bisect.bisect_right(ends, position) - 1
        w = last_aligned[w] if w >= 0 else -1
        return target_spans[last(w, w + 1)][1] if w >= 0 else 0

    parents = nesting(elements)
    words: List[Optional[Tuple[int, int]]] = []  # target words [a, b) of each element
    places: List[int] = []
    # parent: the target words its children took, in order (their starts, ends and element indices): siblings'
    # words never overlap, so those a new child's words overlap are a run of them, found by bisection
    taken: Dict[Optional[int], Tuple[list, list, list]] = {}
    for k, e in enumerate(elements):
        span = None
        if e.start < e.end:
            i, j = bisect.bisect_right(ends, e.start), bisect.bisect_left(starts, e.end)  # the source words in it
            if i < j and first(i, j) < none:
                span = (first(i, j), last(i, j) + 1)
        parent = parents[k]
        if span and parent is not None:
            span = None if words[parent] is None else \
                (max(span[0], words[parent][0]), min(span[1], words[parent][1]))
        siblings = taken.setdefault(parent, ([], [], []))
        if span and span[0] < span[1]:  # earlier siblings keep their words (those overlapping it, in order)
            around = range(bisect.bisect_right(siblings[1], span[0]), bisect.bisect_left(siblings[0], span[1]))
            for n in sorted(around, key=lambda n: siblings[2][n]):
                other = (siblings[0][n], siblings[1][n])
                if span[0] < other[1] and other[0] < span[1]:
                    span = (other[1], span[1]) if other[0] <= span[0] else (span[0], other[0])
                if span[0] >= span[1]:
                    break
        words.append(span if span and span[0] < span[1] else None)
        if words[-1]:
            at = bisect.bisect_left(siblings[0], span[0])
            for column, value in zip(siblings, (span[0], span[1], k)):
                column.insert(at, value)
        place = place_after(e.start)
        if parent is not None:  # inside its parent's words (or where its parent went)
            if words[parent] is None:
                place = places[parent]
            else:
                a, b = target_spans[words[parent][0]][0], target_spans[words[parent][1] - 1][1]
                place = min(max(place, a), b)
        places.append(place)
        if words[-1] is None and e.start < e.end and e.verbatim is None and target_words and \
                (parent is None or words[parent] is not None):
            # words aligned nowhere (or all taken): the target word at its place, within its parent's words,
            # or the nearest one no sibling took (looked for up to NEAREST_FREE words away)
            low, high = (0, len(target_words)) if parent is None else words[parent]
            at = min(max(bisect.bisect_left(target_starts, place), low), high - 1)
            free = lambda w: not (siblings[0] and (n := bisect.bisect_right(siblings[0], w) - 1) >= 0  # noqa: E731
                                  and siblings[1][n] > w)
            w = next((w for d in range(NEAREST_FREE) for w in (at + d, at - d) if low <= w < high and free(w)), at)
            words[-1] = (w, w + 1)
            if free(w):
                n = bisect.bisect_left(siblings[0], w)
                for column, value in zip(siblings, (w, w + 1, k)):
                    column.insert(n, value)
    ranges = [None if w is None else (target_spans[w[0]][0], target_spans[w[1] - 1][1]) for w in words]
    return render(text, elements, ranges, places, escaped)


def translate_marked(marked: Marked, pieces: Sequence[str], translations: Sequence[Optional[Translation]],
                     words_of) -> str:
    """A detagged run's HTML in the target language. ``pieces``: its plain text cut by the sentence
    splitter, in order; ``translations``: each piece's (None for a piece kept as it is, one without
    words). Each piece's elements are projected onto its translation (an element across pieces cut in
    two); a void element or code between pieces goes with the piece before it. Pieces joined by a space."""
    spans = sentence_spans(marked.text, pieces)
    if spans is None:  # (a splitter that changed the text: one piece)
        spans, translations = [(0, len(marked.text))], [translations[0]] if len(translations) == 1 else [None]
    starts, ends = [s for s, _ in spans], [f for _, f in spans]  # (in order: found in order)
    homes: List[List[Element]] = [[] for _ in spans]  # the elements that go into each piece, in order
    for e in marked.elements:
        overlapped = range(bisect.bisect_right(ends, e.start), bisect.bisect_left(starts, e.end))
        if e.start == e.end or e.verbatim is not None or not overlapped:
            m = bisect.bisect_left(ends, e.start)
            overlapped = [m if m < len(spans) else len(spans) - 1]
        for m in overlapped:
            if 0 <= m < len(spans):
                homes[m].append(e)
    out = []
    for (start, end), translation, home in zip(spans, translations, homes):
        inside = [Element(min(max(e.start, start), end) - start, min(max(e.end, start), end) - start,
                          e.open, e.close, e.verbatim) for e in home]
        piece = marked.text[start:end]
        if translation is None:  # kept as it is, its elements where they were
            out.append(render(piece, inside, [(e.start, e.end) if e.start < e.end else None for e in inside],
                              [e.start for e in inside], marked.escaped))
        else:
            out.append(project(piece, inside, translation, words_of, marked.escaped))
    return marked.lead + " ".join(out) + marked.trail


class Piece:
    """A text to translate: running text (``marked`` None: split by running_text, its layout kept; its
    translation written ``escaped`` for HTML and WebVTT) or a run of inline markup detagged (``marked``:
    a Marked); ``sentences``: what is translated, in order."""

    def __init__(self, lang: str, text: str = "", marked=None, keep_line_breaks: bool = False,
                 escaped: bool = False):
        from .running_text import Unit, split_text

        self.text, self.marked, self.escaped = text, marked, escaped
        if marked is None:
            self.layout, self.sentences = split_text(text, lang, keep_line_breaks)
            return
        # the plain text (one line) cut as running text cuts a line: a list marker ("1.1.", "a)") and the
        # parts without words kept, the sentences translated; self.pieces: (text, translated) in order
        layout, sentences = split_text(marked.text, lang)
        left, self.pieces = iter(sentences), []
        for item in layout:
            if isinstance(item, Unit):
                self.pieces += [(item.prefix.strip(), False)] if item.prefix.strip() else []
                self.pieces += [(next(left), True) if part is None else (part, False) for part in item.parts]
            elif item.strip():
                self.pieces.append((item.strip(), False))
        self.sentences = sentences

    def join(self, translations: Sequence[str], words_of: Callable) -> str:
        """The piece with ``translations`` (one per sentence) in place: running text as text, a run of
        inline HTML as HTML (words_of: Preprocessing.words, for the projection)."""
        from .running_text import join_text, line_ending

        if self.marked is None:
            joined = join_text(self.layout, list(translations), line_ending(self.text))
            return html.escape(joined, quote=False) if self.escaped else joined
        left = iter(translations)
        return translate_marked(self.marked, [text for text, _ in self.pieces],
                                [next(left) if translated else None for _, translated in self.pieces], words_of)


def pieces_of(texts: Sequence[str], fmt: str, lang: str, keep_line_breaks: bool = False, nesting_limit: int = 0
              ) -> List[List[Union[str, Piece]]]:
    """Each text as a list of what is kept as it is (a blank text, HTML outside paragraphs) and Pieces.
    ``fmt``: "text" (running text), "html" (HTML), "srt" or "vtt" (a subtitle cue's text, its lines
    joined by spaces, or one line per line of a dialogue cue; a line with tags or {\\...} codes is a
    run of inline markup). Inline elements open inside one another more than ``nesting_limit`` deep (0: no
    limit) are a MarkupError. Reading and projecting take time about linear in the texts' and the
    translations' length however the elements nest (docs/usage.md#inline-markup-bold-links-code); with
    elements nested D deep around a paragraph of S sentences, the translation holds D x S of them (an
    element across a sentence end is cut in two)."""
    from .running_text import list_marker

    if fmt not in MARKUPS:
        raise ValueError(f"format {fmt!r} is not one of: {', '.join(MARKUPS)}")
    out = []
    for text in texts:
        items: List[Union[str, Piece]] = []
        if fmt in ("srt", "vtt"):
            for n, line in enumerate(text.split("\n")):
                items += ["\n"] if n else []
                parts = cue_parts(line, fmt == "vtt")
                if all(is_text for is_text, _ in parts):  # (WebVTT's references read, and written again)
                    plain = "".join(part for _, part in parts)
                    items.append(Piece(lang, plain, keep_line_breaks=True, escaped=fmt == "vtt") if line.strip()
                                 else line)
                else:  # (a dialogue line's dash, kept as running text keeps a list marker)
                    marker = list_marker(line) if parts[0][0] else ""
                    parts[0] = (True, parts[0][1][len(marker):]) if marker else parts[0]
                    items += [marker] if marker else []
                    items.append(Piece(lang, marked=detag(parts, CUE_INLINE, fmt == "vtt", nesting_limit)))
        elif fmt != "html":
            items.append(Piece(lang, text, keep_line_breaks=keep_line_breaks) if text.strip() else text)
        else:
            for translatable, run in inline_runs(html_parts(text)):
                if not translatable:
                    items.append(html_of(run))
                elif len(run) == 1:  # text alone: running text between tags, its spaces around it kept
                    part = run[0][1]
                    lead, trail = part[:len(part) - len(part.lstrip())], part[len(part.rstrip()):]
                    items += [html.escape(lead, quote=False),
                              Piece(lang, part.strip(), keep_line_breaks=keep_line_breaks, escaped=True),
                              html.escape(trail, quote=False)]
                else:
                    items.append(Piece(lang, marked=detag(run, nesting_limit=nesting_limit)))
        out.append(items)
    return out


def check_nesting(texts: Sequence[str], fmt: str, nesting_limit: int):
    """pieces_of's MarkupError for ``texts`` where there is one (inline elements nested deeper than
    ``nesting_limit``; 0: no limit), without splitting sentences: a file's check before a model loads."""
    for text in texts if nesting_limit else ():
        if fmt == "html":
            for translatable, run in inline_runs(html_parts(text)):
                if translatable and len(run) > 1:
                    detag(run, nesting_limit=nesting_limit)
        elif fmt in ("srt", "vtt"):
            for line in text.split("\n"):
                detag(cue_parts(line, fmt == "vtt"), CUE_INLINE, fmt == "vtt", nesting_limit)


def needs_alignment(texts: List[List[Union[str, Piece]]]) -> bool:
    """Whether any piece of pieces_of's ``texts`` has inline markup to carry: only then is the translations'
    alignment asked of the engine."""
    return any(item.marked is not None for items in texts for item in items if not isinstance(item, str))


def join_pieces(items: List[Union[str, Piece]], translations: Iterator[str], words_of: Optional[Callable] = None
                ) -> str:
    """A text of pieces_of with each piece's translations (taken in order from ``translations``) in place."""
    return "".join(item if isinstance(item, str) else item.join([next(translations) for _ in item.sentences], words_of)
                   for item in items)
