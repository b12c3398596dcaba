"""HTML as text to translate: ``html_parts`` cuts a page (or a fragment) into its tags and the text between
them, ``html_of`` writes parts as HTML again.
(fairseq_rope_text.markup groups them into paragraphs with their inline tags.)

Only the standard library.
"""

import html
import re
from typing import List


# a tag: "<" then a letter, "/", "!" or "?" (a "<" in text, "a < b", is text); comments and CDATA whole
TAG = re.compile(r"""<!--.*?-->|<!\[CDATA\[.*?\]\]>|<[a-zA-Z/!?](?:"[^"]*"|'[^']*'|[^'">])*>""", re.S)
RAW_TEXT = re.compile(r"<(script|style|code|pre|textarea)\b", re.I)


def html_parts(document: str) -> List[tuple]:
    """An HTML text as [(is_text, part)]: tags, comments and the content of script, style, code, pre and
    textarea (up to its closing tag) as they are (is_text False), the text between tags unescaped (is_text
    True)."""
    parts, at = [], 0
    while at < len(document):
        match = TAG.search(document, at)
        end = match.start() if match else len(document)
        if end > at:
            parts.append((True, html.unescape(document[at:end])))
        if not match:
            break
        tag, at = match.group(0), match.end()
        parts.append((False, tag))
        raw = RAW_TEXT.match(tag)
        if raw and not tag.endswith("/>"):  # everything up to its closing tag is kept as it is
            close = re.compile(rf"</{raw.group(1)}\s*>", re.I).search(document, at)
            end = close.start() if close else len(document)
            if end > at:
                parts.append((False, document[at:end]))
            at = end
    return parts


def html_of(parts: List[tuple]) -> str:
    """html_parts' parts (or some of them) as HTML again: the text escaped, the rest as it was."""
    return "".join(html.escape(part, quote=False) if is_text else part for is_text, part in parts)
