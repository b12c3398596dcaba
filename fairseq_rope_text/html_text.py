"""HTML as text to translate: ``html_parts`` cuts a page (or a fragment) into its tags and the text between
them, ``html_join`` puts translations of the text back between the same tags. The server's ``format: html``
and the .html files of fairseq_rope_text.files both read HTML this way.

Only the standard library.
"""

import html
import re
from typing import Iterator, List


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


def html_join(parts: List[tuple], translations: Iterator[str]) -> str:
    """The HTML of ``html_parts``' parts with each text part that is not blank replaced by the next of
    ``translations`` (the spaces around it kept), every text escaped, every other part as it was."""
    out = []
    for is_text, part in parts:
        if not is_text:
            out.append(part)
        elif not part.strip():
            out.append(html.escape(part, quote=False))
        else:
            lead, trail = part[:len(part) - len(part.lstrip())], part[len(part.rstrip()):]
            out.append(lead + html.escape(next(translations).strip(), quote=False) + trail)
    return "".join(out)
