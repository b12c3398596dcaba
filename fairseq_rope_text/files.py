"""Files to translate, by their format: what to translate in a file, and the file written back with the
translations in place, in the same format.

    from fairseq_rope_text.files import translate_file
    translate_file("talk.srt", "talk.de.srt", lambda units, markup: mt.translate_texts(units, markup)[0])

A file is read into *units*, each a piece of running text that the caller translates with its layout
(fairseq_rope_text.running_text: split into sentences, put back) and its inline markup (``markup``: "text",
"html", "srt" or "vtt": fairseq_rope_text.markup); ``translate_units(units, markup)`` returns one translation
per unit, in order, and the file is written back with each unit's translation where the unit was,
everything else as it was. So this module knows nothing of a model.

* ``.txt``: the whole text is one unit (the running text of fairseq-rope-translate).
* ``.html``, ``.htm``: each paragraph (the text between block tags, with its inline elements: bold,
  links, code, carried across the translation by fairseq_rope_text.markup) is one unit, as HTML; tags,
  comments and the content of script, style, pre and textarea kept.
* ``.srt``, ``.vtt``: each cue's text is one unit, its lines joined by spaces (a subtitle's lines are one
  sentence wrapped), and its translation is wrapped back into as many lines, at the spaces nearest to where
  the cue's lines broke (in proportion); a dialogue cue (every line starting with a dash) keeps a unit
  line per line. Cue numbers, identifiers, timing lines with their settings, the WEBVTT header and NOTE,
  STYLE and REGION blocks, blank lines, line endings and a byte-order mark are kept byte for byte; a cue
  without text is kept as it is; a WebVTT cue's text ends at a line with "-->", where WebVTT's parser
  starts a new cue (a SubRip file needs its blank line). Markup inside a cue's text (``<i>``, ``<c.yellow>``, ``{\\an8}``,
  ``<v Joe>``) is carried across the translation onto the aligned words (fairseq_rope_text.markup; an
  unclosed ``<v Joe>`` or a code at the cue's start stays at its start).
* ``.docx`` (python-docx, imported when needed: ``pip install 'fairseq-rope[files]'``): each paragraph
  of the body, of its tables' cells (nested tables and text boxes too) and of its headers and footers is
  one unit; a paragraph keeps its style and properties. Inside it, the runs formatted otherwise than most
  of its text (a bold phrase, an italic word, another font) and its hyperlinks are inline elements of the
  unit (``WordParagraph``), carried across the translation as a page's are: each lands on the words that
  translate the words it marked, with its run's properties (a hyperlink with its target). A paragraph
  whose translation is its text is left untouched; footnotes, comments and paragraphs holding fields (page
  numbers, a table of contents) are not translated.

Text formats are UTF-8 (a byte-order mark kept). A file that is not what its format says is a
``FileError`` naming the file and what was expected (a line number where there is one).

Only the standard library at import time.
"""

import bisect
import html
import io
import os
import re
from typing import Callable, List, NamedTuple, Optional, Union

from .html_text import html_of, html_parts
from .markup import CUE_TAG, inline_runs

# extension: format
EXTENSIONS = {".txt": "txt", ".html": "html", ".htm": "html", ".srt": "srt", ".vtt": "vtt", ".docx": "docx"}
FORMATS = ("txt", "html", "srt", "vtt", "docx")
MEDIA_TYPES = {"txt": "text/plain; charset=utf-8", "html": "text/html; charset=utf-8",
               "srt": "application/x-subrip; charset=utf-8", "vtt": "text/vtt; charset=utf-8",
               "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}
BOM = "\ufeff"
# bytes the XML parts of a .docx (a zip archive) may unpack to: a 500-page book has about 10 MB; a "zip bomb"
# of millions of empty elements in a small file is refused before it is parsed (read_docx)
DOCX_XML_LIMIT = 20 << 20

SRT_TIMING = re.compile(r"[ \t]*\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}[ \t]*-->[ \t]*\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}"
                        r"(?:[ \t].*)?")
VTT_TIMING = re.compile(r"(?:\d+:)?\d{2}:\d{2}\.\d{3}[ \t]+-->[ \t]+(?:\d+:)?\d{2}:\d{2}\.\d{3}(?:[ \t].*)?")
VTT_BLOCK = re.compile(r"(NOTE|STYLE|REGION)(?:[ \t].*)?")  # a block of the header's kind: kept whole
DIALOGUE = re.compile(r"[ \t]*[-\u2010-\u2015]")  # a line of a dialogue cue: a dash


class FileError(ValueError):
    """A file that cannot be translated: not of its format, or a format that needs a missing library."""


def supported(docx: Optional[bool] = None) -> List[str]:
    """The extensions translated (".docx" only where python-docx is installed, or where ``docx`` says)."""
    if docx is None:
        try:
            import docx  # noqa: F401
        except ImportError:
            docx = False
        else:
            docx = True
    return [e for e in EXTENSIONS if e != ".htm" and (docx or e != ".docx")]


def file_format(name: str, given: Optional[str] = None) -> str:
    """The format of file ``name``: ``given`` (one of FORMATS) or its extension's (in any case)."""
    if given is not None:
        if given not in FORMATS:
            raise FileError(f"format {given!r} is not one of: {', '.join(FORMATS)}")
        return given
    extension = os.path.splitext(name)[1].lower()
    if extension not in EXTENSIONS:
        raise FileError(f"{name}: {'extension ' + repr(extension) if extension else 'no extension'} is not a "
                        f"format translated; the formats are {', '.join(EXTENSIONS)}")
    return EXTENSIONS[extension]


class Document:
    """A file read: its ``units`` to translate (``markup`` "text": running text; "html": paragraphs of
    inline HTML, fairseq_rope_text.markup), and ``write(translations)``, the file's bytes with them, in its
    ``encoding`` (a text file's: UTF-8, or the charset an HTML page declares)."""

    def __init__(self, units: List[str], write: Callable[[List[str]], bytes], markup: str = "text",
                 encoding: Optional[str] = None):
        self.units, self._write, self.markup, self.encoding = units, write, markup, encoding

    def write(self, translations: List[str]) -> bytes:
        if len(translations) != len(self.units):
            raise ValueError(f"{len(translations)} translations for {len(self.units)} units")
        return self._write(list(translations))


def read_document(data: bytes, fmt: str, name: str, docx_xml_limit: int = DOCX_XML_LIMIT) -> Document:
    """The file ``data`` (named ``name`` in errors) of format ``fmt``; a .docx whose XML unpacks to more than
    ``docx_xml_limit`` bytes is refused (0: no limit)."""
    if fmt == "docx":
        return read_docx(data, name, docx_xml_limit)
    declared = declared_charset(data, name) if fmt == "html" else None
    bom, text = decode(data, name, declared)
    if fmt == "txt":
        units = [text] if text.strip() else []
        return Document(units, lambda t: (bom + (t[0] if units else text)).encode("utf-8"))
    if fmt == "html":
        return html_document(text, bom, declared or "utf-8")
    if fmt in ("srt", "vtt"):
        layout = read_subtitles(text, fmt, name)
        cues = [item for item in layout if isinstance(item, Cue)]
        return Document([cue.unit() for cue in cues],
                        lambda t: (bom + write_subtitles(layout, iter(t))).encode("utf-8"), fmt)
    raise FileError(f"format {fmt!r} is not one of: {', '.join(FORMATS)}")


def html_document(text: str, bom: str, encoding: str) -> Document:
    """A page's paragraphs as units, written back in ``encoding`` (a character it lacks as a character
    reference, &#NNNN;, which HTML reads as the character)."""
    runs = [(translatable, html_of(run)) for translatable, run in inline_runs(html_parts(text))]

    def write_html(translations: List[str]) -> bytes:
        left = iter(translations)
        page = bom + "".join(next(left) if translatable else kept for translatable, kept in runs)
        return page.encode(encoding, errors="xmlcharrefreplace")

    return Document([run for translatable, run in runs if translatable], write_html, "html", encoding)


# the charset a page declares in its first 1024 bytes (HTML's prescan): <meta charset=...> or
# <meta http-equiv="Content-Type" content="text/html; charset=...">
CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def declared_charset(data: bytes, name: str) -> Optional[str]:
    """The encoding an HTML page declares where it is not UTF-8 (None: UTF-8, by its byte-order mark, its
    declaration or none); a label Python does not know is a FileError naming it."""
    import codecs

    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return None
    found = CHARSET.search(data[:1024])
    if not found:
        return None
    label = found.group(1).decode("ascii").lower()
    try:
        encoding = codecs.lookup(label).name
    except LookupError:
        raise FileError(f"{name} declares charset {label!r}, an encoding not known here; expected UTF-8 or an "
                        "encoding Python's codecs read (ISO-8859-1, windows-1252, ...)") from None
    return None if encoding == "utf-8" else encoding


def translate_bytes(data: bytes, fmt: str, name: str, translate_units: Callable[[List[str], str], List[str]]) -> bytes:
    """The file ``data`` translated (see the module's text)."""
    document = read_document(data, fmt, name)
    return document.write(translate_units(document.units, document.markup) if document.units else [])


def translate_file(path_in: str, path_out: str, translate_units: Callable[[List[str], str], List[str]],
                   fmt: Optional[str] = None) -> int:
    """``path_in`` translated into ``path_out``, in the same format (``fmt``, or ``path_in``'s extension's);
    the number of units translated."""
    fmt = file_format(path_in, fmt)
    with open(path_in, "rb") as f:
        document = read_document(f.read(), fmt, path_in)
    data = document.write(translate_units(document.units, document.markup) if document.units else [])
    import tempfile

    handle, staging = tempfile.mkstemp(prefix=f".{os.path.basename(path_out)}.", dir=os.path.dirname(
        os.path.abspath(path_out)))  # written whole, then renamed: never a half-written file under its name
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(staging, path_out)
    except BaseException:
        if os.path.exists(staging):
            os.remove(staging)
        raise
    return len(document.units)


def decode(data: bytes, name: str, declared: Optional[str] = None):
    """(byte-order mark or "", text) of a text file: UTF-8, or the encoding a page ``declared`` (its bytes
    have no byte-order mark then: declared_charset); bytes that are not that encoding are a FileError
    naming the line."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise FileError(f"{name} is UTF-16 (it starts with a UTF-16 byte-order mark); expected UTF-8")
    try:
        text = data.decode(declared or "utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        byte = f"byte 0x{data[error.start]:02x}"
        raise FileError(f"{name}, line {line}: not {declared} as it declares ({byte})" if declared else
                        f"{name}, line {line}: not UTF-8 ({byte}); expected UTF-8 text") from None
    return (BOM, text[1:]) if text.startswith(BOM) else ("", text)


# ---- subtitles ------------------------------------------------------------------------------------
class Cue(NamedTuple):
    """A cue's text lines (without their endings) and the endings (the last may be "": the file's end)."""
    lines: List[str]
    endings: List[str]

    def dialogue(self) -> bool:
        return len(self.lines) > 1 and all(DIALOGUE.match(line) for line in self.lines)

    def unit(self) -> str:
        if self.dialogue():
            return "\n".join(line.strip() for line in self.lines)
        return " ".join(line.strip() for line in self.lines)

    def write(self, translation: str) -> str:
        if self.dialogue() or "\n" in translation:
            lines = [line.strip() for line in translation.replace("\r\n", "\n").split("\n")]
        else:
            lines = wrap(translation.strip(), [visible_length(line.strip()) for line in self.lines])
        lines = [line for line in lines if line] or [""]  # (a blank line would end the cue)
        inner = self.endings[0] if len(self.endings) > 1 else (self.endings[0] or "\n")
        return "".join(line + (inner if i < len(lines) - 1 else self.endings[-1]) for i, line in enumerate(lines))


def wrap(text: str, lengths: List[int]) -> List[str]:
    """``text`` in ``len(lengths)`` lines (fewer where it has fewer spaces), broken at the spaces nearest to
    where lines of these lengths, joined by spaces, break, in proportion to ``text``'s length; lengths
    and positions count what a viewer sees (a cue's tags left out: visible_length), and a space inside a
    tag is not a break."""
    inside = {i for tag in CUE_TAG.finditer(text) for i in range(tag.start(), tag.end())}
    seen, visible = 0, []  # visible[i]: the characters a viewer sees before text[i]
    for i in range(len(text)):
        visible.append(seen)
        seen += i not in inside
    spaces = [i for i, c in enumerate(text) if c == " " and i not in inside]
    if len(lengths) < 2 or not spaces:
        return [text]
    shown = [visible[i] for i in spaces]  # (increasing: a space is seen)
    total = sum(lengths) + len(lengths) - 1
    breaks, at = [], 0
    for k in range(1, len(lengths)):
        at += lengths[k - 1] + (1 if k > 1 else 0)  # where the k-th space was in the joined lines
        wanted = at * seen / total if total else 0
        left = bisect.bisect_right(spaces, breaks[-1]) if breaks else 0  # the spaces after the last break
        if left == len(spaces):
            break
        nearest = bisect.bisect_left(shown, wanted, left)  # the nearest: this one or the one before
        best = min((n for n in (nearest - 1, nearest) if left <= n < len(spaces)),
                   key=lambda n: (abs(shown[n] - wanted), n))
        breaks.append(spaces[best])
    ends = breaks + [len(text)]
    return [text[(ends[k - 1] + 1 if k else 0):end] for k, end in enumerate(ends)]


def visible_length(line: str) -> int:
    """The characters of a cue's line that a viewer sees (its tags and {\\...} codes left out)."""
    return len(CUE_TAG.sub("", line))


def lines_of(text: str):
    """[(line, ending)], ending "\\r\\n", "\\n", "\\r" or "" (the last line without one)."""
    found = re.findall(r"([^\r\n]*)(\r\n|\n|\r|$)", text)
    if found and found[-1] == ("", ""):
        found.pop()
    return found


def read_subtitles(text: str, fmt: str, name: str) -> List[Union[str, Cue]]:
    """A SubRip or WebVTT text as its layout: verbatim strings and Cues (their text lines)."""
    lines = lines_of(text)
    layout: List[Union[str, Cue]] = []
    timing, example = (SRT_TIMING, "00:00:01,000 --> 00:00:04,000") if fmt == "srt" else \
        (VTT_TIMING, "00:00:01.000 --> 00:00:04.000")
    at = 0
    if fmt == "vtt":
        if not lines or not re.match(r"WEBVTT(?:[ \t].*)?$", lines[0][0]):
            got = repr(lines[0][0][:60]) if lines else "an empty file"
            raise FileError(f"{name}, line 1: expected 'WEBVTT' (a WebVTT file's first line), got {got}")
        while at < len(lines) and lines[at][0].strip():  # the header: up to the first blank line
            layout.append("".join(lines[at]))
            at += 1
    while at < len(lines):
        if not lines[at][0].strip():
            layout.append("".join(lines[at]))
            at += 1
            continue
        block = at
        while at < len(lines) and lines[at][0].strip():
            at += 1
        first = lines[block][0]
        if fmt == "vtt" and VTT_BLOCK.fullmatch(first):
            layout.extend("".join(line) for line in lines[block:at])
            continue
        if fmt == "srt" and not timing.fullmatch(first):
            if not first.strip().isdigit():
                raise FileError(f"{name}, line {block + 1}: expected a cue number or a timing line ({example}), "
                                f"got {first[:60]!r}")
            head = 2
        elif fmt == "vtt" and "-->" not in first:
            head = 2  # an identifier, then the timing line
        else:
            head = 1
        if head == 2:
            if block + 1 >= at:
                raise FileError(f"{name}, line {block + 2}: expected a timing line ({example}) after "
                                f"{first[:60]!r}, got a blank line or the end of the file")
            if not timing.fullmatch(lines[block + 1][0]):
                raise FileError(f"{name}, line {block + 2}: expected a timing line ({example}), got "
                                f"{lines[block + 1][0][:60]!r}")
        elif not timing.fullmatch(first):
            raise FileError(f"{name}, line {block + 1}: expected a timing line ({example}), got {first[:60]!r}")
        layout.extend("".join(line) for line in lines[block:block + head])
        text_lines = lines[block + head:at]
        for k, (line, _) in enumerate(text_lines):
            if "-->" in line and fmt == "vtt":  # WebVTT's parser ends the cue's text there: a new cue starts
                text_lines, at = text_lines[:k], block + head + k
                break
            if "-->" in line:
                raise FileError(f"{name}, line {block + head + k + 1}: a timing line inside a cue's text "
                                f"({line[:60]!r}); expected a blank line before each cue")
        if text_lines:
            layout.append(Cue([line for line, _ in text_lines], [ending for _, ending in text_lines]))
    return layout


def write_subtitles(layout: List[Union[str, Cue]], translations) -> str:
    return "".join(item.write(next(translations)) if isinstance(item, Cue) else item for item in layout)


# ---- Word documents -------------------------------------------------------------------------------
def python_docx():
    try:
        import docx
    except ImportError:
        raise FileError("a .docx file needs python-docx, which is not installed: pip install "
                        "'fairseq-rope[files]'") from None
    return docx


def read_docx(data: bytes, name: str, xml_limit: int = DOCX_XML_LIMIT) -> Document:
    """A Word document's paragraphs (body, tables, text boxes, headers and footers) as units of inline HTML
    (WordParagraph); refused before it is parsed if its XML parts unpack to more than ``xml_limit`` bytes
    (0: no limit), as zipfile's headers give their sizes (zipfile reads no more than a header says)."""
    import zipfile

    docx = python_docx()
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.oxml.ns import qn

    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise FileError(f"{name} is not a Word document (.docx): expected a zip archive (a .doc of older Word "
                        "versions, or a damaged file, is not one)")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        unpacked = sum(part.file_size for part in archive.infolist() if part.filename.endswith((".xml", ".rels")))
    if xml_limit and unpacked > xml_limit:
        raise FileError(f"{name}: its XML unpacks to {unpacked:,} bytes, more than the limit of {xml_limit:,} for a "
                        f"Word document (a small file that unpacks to this much is mostly markup, not text)")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as error:  # (python-docx raises KeyError, PackageNotFoundError, XML errors, ...)
        raise FileError(f"{name} is not a Word document (.docx): {type(error).__name__}: {error}") from None
    roots = [document.element.body]
    seen = set()
    for rel in document.part.rels.values():
        if rel.reltype in (RT.HEADER, RT.FOOTER) and not rel.is_external and rel.target_part.partname not in seen:
            seen.add(rel.target_part.partname)
            roots.append(rel.target_part.element)
    paragraphs = []
    text_of, hyphen = qn("w:t"), qn("w:noBreakHyphen")
    for root in roots:
        for p in root.iter(qn("w:p")):
            if not any(t.text for t in p.iter(text_of)) and p.find(".//" + hyphen) is None:
                continue  # no text (an empty paragraph, an image; python-docx's run text adds only tabs, breaks
                # and hyphens to w:t's): kept as it is, without the cost of reading its runs
            if p.find(".//" + qn("w:fldChar")) is not None or p.find(".//" + qn("w:fldSimple")) is not None:
                continue  # fields (page numbers, a table of contents): kept as they are
            paragraph = WordParagraph(p)
            if "".join(paragraph.texts).strip():
                paragraphs.append(paragraph)
    units = [paragraph.html() for paragraph in paragraphs]

    def write(translations: List[str]) -> bytes:
        for paragraph, unit, translation in zip(paragraphs, units, translations):
            if translation != unit:
                paragraph.write(translation)
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()

    return Document(units, write, "html")


class WordParagraph:
    """A paragraph of a Word document as one unit of inline HTML, its formatting carried across the
    translation as a page's inline elements are (fairseq_rope_text.markup). Its *runs* are those that hold
    text (in its hyperlinks and other containers too; not a text box's, whose paragraphs are units of their
    own). The formatting (a run's properties, w:rPr) that most of the paragraph's characters have is its
    base; a run formatted otherwise (a bold word, another font) is a ``<span data-run="I">`` (runs of one
    formatting in a row: one span); a hyperlink is an ``<a data-link="J">`` around its runs (their base: the
    link's own most common formatting); inside those, a line break is a ``<br>`` and a tab a ``<br
    data-tab="">`` (HTML would read either as a space). A paragraph without spans or links is its text as it
    is (running text: its line breaks and tabs kept in place). Written back, the translation's text goes into
    new runs with the properties of the run each piece of it is marked with (the base run's where unmarked)
    and into copies of the hyperlinks (their target kept), where the paragraph's first text was; the old
    runs' text is removed, and a run that held more than text (a picture, a page break, a footnote's
    reference) is kept without it."""

    def __init__(self, p):
        from docx.oxml.ns import qn

        self.p = p
        self.runs, self.texts, self.link_of, self.links = [], [], [], []
        for r in p.iter(qn("w:r")):
            link, up = None, r.getparent()
            while up is not None and up.tag != qn("w:p"):
                link = up if up.tag == qn("w:hyperlink") else link
                up = up.getparent()
            text = r.text
            if up is not p or not text:
                continue
            if link is not None and (not self.links or self.links[-1] is not link):  # (a link's runs: in a row)
                self.links.append(link)
            self.runs.append(r)
            self.texts.append(text)
            self.link_of.append(None if link is None else len(self.links) - 1)
        formats = [run_format(r) for r in self.runs]
        weights: dict = {}  # container (None: the paragraph, J: link J) -> {formatting: [characters, first run]}
        for i, (text, link) in enumerate(zip(self.texts, self.link_of)):
            weights.setdefault(link, {}).setdefault(formats[i], [0, i])[0] += len(text)
        # container -> the first run of its base formatting
        self.base = {link: max(found.values(), key=lambda w: (w[0], -w[1]))[1] for link, found in weights.items()}
        # each run's formatting where it is not its container's base, else None
        self.marks = [None if f == formats[self.base[link]] else f for f, link in zip(formats, self.link_of)]

    def html(self) -> str:
        if not self.links and not any(self.marks):
            return html.escape("".join(self.texts), quote=False)
        out, link, span = [], None, None  # the open <a>, and the formatting of the open <span>
        for i, (text, fmt) in enumerate(zip(self.texts, self.marks)):
            if span is not None and (self.link_of[i] != link or fmt != span):
                out.append("</span>")
                span = None
            if self.link_of[i] != link:
                out += ["</a>"] if link is not None else []
                out += [f'<a data-link="{self.link_of[i]}">'] if self.link_of[i] is not None else []
                link = self.link_of[i]
            if fmt is not None and span is None:
                out.append(f'<span data-run="{i}">')
                span = fmt
            out.append(html.escape(text, quote=False).replace("\n", "<br>").replace("\t", '<br data-tab="">'))
        out += ["</span>"] if span is not None else []
        out += ["</a>"] if link is not None else []
        return "".join(out)

    def pieces(self, translation: str) -> List[list]:
        """The translated html() as [text, the run whose formatting it takes, its link or None], in order."""
        from .markup import tag_name

        pieces: List[list] = []
        spans: List[int] = []
        link = None
        for is_text, part in html_parts(translation):
            name = "" if is_text else tag_name(part)
            if is_text or name == "br":
                text = part if is_text else "\t" if "data-tab" in part.lower() else "\n"
                run = spans[-1] if spans else self.base.get(link, self.base.get(None, 0))
                if pieces and pieces[-1][1:] == [run, link]:
                    pieces[-1][0] += text
                elif text:
                    pieces.append([text, run, link])
                continue
            marks = re.search(r'data-(?:run|link)="(\d+)"', part, re.I)
            if part.startswith("</"):
                if name == "span" and spans:
                    spans.pop()
                link = None if name == "a" else link
            elif marks and name == "span" and int(marks.group(1)) < len(self.runs):
                spans.append(int(marks.group(1)))
            elif marks and name == "a" and int(marks.group(1)) < len(self.links):
                link = int(marks.group(1))
        return pieces

    def write(self, translation: str):
        """The paragraph with ``translation`` (html() translated) in place of its text."""
        import copy

        from docx.oxml import OxmlElement
        from docx.oxml.ns import qn

        anchor = self.runs[0]
        while anchor.getparent() is not self.p:
            anchor = anchor.getparent()
        at, made = self.p.index(anchor), None  # new runs go where the first text was; made: (J, its copy)
        for text, run, j in self.pieces(translation):
            new = OxmlElement("w:r")
            properties = self.runs[run].find(qn("w:rPr"))
            if properties is not None:
                new.append(copy.deepcopy(properties))
            new.text = text
            if j is None:
                self.p.insert(at, new)
                at, made = at + 1, None
                continue
            if made is None or made[0] != j:
                hyperlink = copy.deepcopy(self.links[j])
                for child in list(hyperlink):
                    hyperlink.remove(child)
                self.p.insert(at, hyperlink)
                at, made = at + 1, (j, hyperlink)
            made[1].append(new)
        # what a run's text is, and where Word's layout last broke a page in it (recomputed when it lays out)
        kinds = {qn("w:t"), qn("w:tab"), qn("w:cr"), qn("w:noBreakHyphen"), qn("w:ptab"), qn("w:lastRenderedPageBreak")}
        for r in self.runs:
            for child in [c for c in r if c.tag in kinds or (c.tag == qn("w:br") and c.get(qn("w:type")) in
                                                              (None, "textWrapping"))]:
                r.remove(child)
            if all(c.tag == qn("w:rPr") for c in r):
                r.getparent().remove(r)
        for hyperlink in self.links:
            if hyperlink.find(".//" + qn("w:r")) is None and hyperlink.getparent() is not None:
                hyperlink.getparent().remove(hyperlink)


def run_format(r) -> bytes:
    """A run's formatting: its properties (w:rPr) as XML."""
    from docx.oxml.ns import qn
    from lxml import etree

    properties = r.find(qn("w:rPr"))
    return b"" if properties is None else etree.tostring(properties)
