"""HTML as text to translate: ``html_parts`` cuts a page (or a fragment) into its tags and the text between
them, ``html_of`` writes parts as HTML again.
(fairseq_rope_text.markup groups them into paragraphs with their inline tags.)

Only the standard library.
"""

import html
import re
from typing import Iterator, List, Tuple


# a tag: "<" then a letter, "/", "!" or "?" (a "<" in text, "a < b", is text); comments and CDATA whole.
# (Tags finds its matches in time linear in the text; TAG.search itself, from a "<" whose tag is never
# closed, reads to the text's end, and again from every "<" after it.)
TAG = re.compile(r"""<!--.*?-->|<!\[CDATA\[.*?\]\]>|<[a-zA-Z/!?](?:"[^"]*"|'[^']*'|[^'">])*>""", re.S)
RAW_TEXT = re.compile(r"<(script|style|code|pre|textarea)\b", re.I)
TAG_START = re.compile(r"<[a-zA-Z/!?]")
SPECIAL = re.compile(r"""['">]""")  # what ends a tag's run of other characters


class Tags:
    """TAG's matches in a text, left to right, as ``TAG.search(text, at)`` finds them, each character read a
    bounded number of times. A tag's body runs to its first ">" outside quotes; where it has none (a quote
    never closed, or the text's end first) the "<" is text and the search goes on from the next one. The
    scans of those that fail meet: where a later one reaches a quote at which an earlier failed one stood
    outside quotes, it fails there too (``failed``); the searches for the end of a comment, of a CDATA
    section and for the first quote or ">" after a "<" go forward only (their last answers kept)."""

    def __init__(self, text: str):
        self.text = text
        self.failed = None  # bytearray: 1 at each quote where a failed tag's scan stood outside quotes
        self.frontier = 0  # where the failed scans stopped, the farthest: past it TAG.match reads new text only
        self.found = {}  # what find looked for: (from where, where it was found or -1)

    def find(self, what: str, at: int) -> int:
        """The first ``what`` ("-->", "]]>", or "special": a quote or ">") at or after ``at``, or -1."""
        start, where = self.found.get(what, (len(self.text) + 1, -1))
        if start <= at and (where == -1 or at <= where):
            return where
        if what == "special":
            match = SPECIAL.search(self.text, at)
            where = match.start() if match else -1
        else:
            where = self.text.find(what, at)
        self.found[what] = (at, where)
        return where

    def tag_end(self, start: int) -> int:
        """The end of the tag whose "<" and first character are at ``start``, or -1 where it has none."""
        text = self.text
        if start >= self.frontier and text[start + 1] != "!":  # (a comment's or CDATA's end: found below)
            match = TAG.match(text, start)
            if match:
                return match.end()
        if text.startswith("<!--", start):
            end = self.find("-->", start + 4)
            if end >= 0:
                return end + 3
        if text.startswith("<![CDATA[", start):
            end = self.find("]]>", start + 9)
            if end >= 0:
                return end + 3
        at, outside = self.find("special", start + 2), []  # (the first: forward only; the rest: after a quote)
        while True:
            if at < 0 or (self.failed is not None and self.failed[at]):
                self.frontier = max(self.frontier, len(text) if at < 0 else at)
                break
            if text[at] == ">":
                return at + 1
            outside.append(at)
            close = text.find(text[at], at + 1)
            if close < 0:
                self.frontier = max(self.frontier, at)
                break
            match = SPECIAL.search(text, close + 1)
            at = match.start() if match else -1
        if outside:
            if self.failed is None:
                self.failed = bytearray(len(text))
            for at in outside:
                self.failed[at] = 1
        return -1

    def matches(self, at: int = 0) -> Iterator[Tuple[int, int]]:
        """(start, end) of each tag from ``at`` on."""
        while True:
            found = TAG_START.search(self.text, at)
            if not found:
                return
            end = self.tag_end(found.start())
            if end < 0:
                at = found.start() + 1
                continue
            yield found.start(), end
            at = end


def without_tags(text: str) -> str:
    """``text`` with its tags taken out (TAG.sub("", text), linear)."""
    out, at = [], 0
    for start, end in Tags(text).matches():
        out.append(text[at:start])
        at = end
    out.append(text[at:])
    return "".join(out)


def html_parts(document: str) -> List[tuple]:
    """An HTML text as [(is_text, part)]: tags, comments and the content of script, style, code, pre and
    textarea (up to its closing tag) as they are (is_text False), the text between tags unescaped (is_text
    True)."""
    parts, at, tags = [], 0, Tags(document)
    found = tags.matches(at)
    while at < len(document):
        match = next(found, None)
        end = match[0] if match else len(document)
        if end > at:
            parts.append((True, html.unescape(document[at:end])))
        if not match:
            break
        tag, at = document[match[0]:match[1]], match[1]
        parts.append((False, tag))
        raw = RAW_TEXT.match(tag)
        if raw and not tag.endswith("/>"):  # everything up to its closing tag is kept as it is
            close = re.compile(rf"</{raw.group(1)}\s*>", re.I).search(document, at)
            end = close.start() if close else len(document)
            if end > at:
                parts.append((False, document[at:end]))
            at = end
            found = tags.matches(at)
    return parts


def html_of(parts: List[tuple]) -> str:
    """html_parts' parts (or some of them) as HTML again: the text escaped, the rest as it was."""
    return "".join(html.escape(part, quote=False) if is_text else part for is_text, part in parts)
