"""Running text (a paragraph, an e-mail, a file) to sentences and back, with its layout kept.

A model translates sentences; a user hands it text. ``split_text`` cuts the text into lines, keeps
blank lines as they are, joins the lines of each paragraph (a run of non-blank lines) and splits it
into sentences with sentencex (Wikimedia's segmenter: rules for about 300 languages, each without
rules of its own falling back to a related language's or English's; maintained, offline, no model
to download; chosen over sentence-splitter, Moses' rules for some 20 languages, and pysbd, 22
languages and unmaintained since 2021). ``join_text`` puts translations back in their place: a
paragraph's sentences joined by one space after its first line's indentation; with
``keep_line_breaks`` every line is a unit of its own (a sentence does not run across lines), for
text whose line breaks mean something (verse, lists, subtitles).

Only the standard library at import time; sentencex is imported when first used.
"""

from typing import List, Tuple, Union

# a layout item: a line kept as it is (str), or (indentation, number of sentences) of a unit
Item = Union[str, Tuple[str, int]]


def sentences_of(text: str, lang: str) -> List[str]:
    """The sentences of one paragraph, stripped, as sentencex splits them (none for blank text)."""
    from sentencex import segment

    return [s.strip() for s in segment(lang, text) if s.strip()]


def split_text(text: str, lang: str, keep_line_breaks: bool = False) -> Tuple[List[Item], List[str]]:
    """(layout, sentences) of ``text`` in ``lang``: the sentences in order, and what join_text needs to
    put their translations back (blank lines, indentation, paragraph or line units)."""
    lines = text.split("\n")
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


def join_text(layout: List[Item], translations: List[str]) -> str:
    """The text of split_text's layout with each sentence replaced by its translation."""
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
    return "\n".join(out)
