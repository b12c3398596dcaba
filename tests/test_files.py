"""Files translated by their format (fairseq_rope_text.files): .txt, .html, .srt, .vtt and .docx read into
units and written back, with a translator that changes nothing (the file comes back as it was) and one
that marks every unit (each translated once, the structure kept); damaged files named; then the same files
through fairseq-rope-translate and the server's POST /translate_file and GET /download_file with
test_serve's tiny model, each unit as the in-process API translates it."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_main
from fairseq_rope_text.markup import pieces_of
from fairseq_rope_text.files import (FileError, file_format, read_document, supported, translate_bytes,
                                     translate_file, wrap)
from test_serve import SENTENCES, Live, model  # noqa: F401 (model: the fixture, test_serve's served model)

S = SENTENCES
HALVES = (" ".join(S[1].split()[:3]), " ".join(S[1].split()[3:]))  # a sentence on two lines
SRT = (f"\ufeff1\r\n00:00:01,000 --> 00:00:04,000\r\n{S[0]}\r\n\r\n"
       f"2\r\n00:00:05,000 --> 00:00:07,500 X1:40 X2:600\r\n{HALVES[0]}\r\n{HALVES[1]}\r\n\r\n"
       "3\r\n00:00:08,000 --> 00:00:09,000\r\n\r\n"  # a cue without text
       f"4\r\n00:00:10,000 --> 00:00:12,000\r\n- {S[2]}\r\n- {S[3]}\r\n\r\n"  # a dialogue: a unit a line
       f"5\r\n01:00:00,000 --> 01:00:02,000\r\n\u00dcber caf\u00e9 \u266a {S[4]}\r\n")
SRT_UNITS = [S[0], S[1], f"- {S[2]}\n- {S[3]}", f"\u00dcber caf\u00e9 \u266a {S[4]}"]
VTT = (f"WEBVTT - a talk\nKind: captions\nLanguage: en\n\nNOTE written by hand\nsecond line of the note\n\n"
       f"STYLE\n::cue {{ color: yellow }}\n\nREGION\nid:left width:40%\n\n"
       f"intro\n00:01.000 --> 00:04.000 align:start position:10% line:0\n{S[0]}\n\n"
       f"00:00:05.000 --> 00:00:07.000\n{HALVES[0]}\n{HALVES[1]}\n\n"
       f"2\n00:00:08.000 --> 00:00:09.000 region:left\n{S[5]}")
VTT_UNITS = [S[0], S[1], S[5]]


def html_of(a, b, c, d, title):
    """A page with these texts between its tags (S[2] in a comment and S[3] in pre: not translated)."""
    return (f"<!DOCTYPE html>\n<html><head><title>{title}</title><style>p {{ color: red }}</style></head>\n"
            f"<body>\n  <p class=\"x\">{a} <b>{b}</b></p>\n  <!-- {S[2]} -->\n  <pre>{S[3]}</pre>\n"
            f"  <ul><li>{c}</li><li>{d} &amp; 42</li></ul>\n</body></html>\n")


HTML = html_of(S[0], S[1], S[4], S[5], S[6])
HTML_UNITS = [S[6], f"{S[0]} <b>{S[1]}</b>", S[4], f"{S[5]} &amp; 42"]  # paragraphs as HTML, inline tags in them
TXT = f"Shopping list:\n- {S[0]}\n- {S[1]}\n\n{S[2]} {S[3]}\r\n"


class Marking:
    """A translator of units that upper-cases each and records every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, units, markup):
        self.calls.append(list(units))
        return [upper(unit) for unit in units]


def upper(unit):
    """The unit upper-cased, its tags and character references (HTML's) as they are."""
    return re.sub(r"(<[^>]*>|&#?\w+;)|([^<&]+|[<&])", lambda m: m.group(1) or m.group(2).upper(), unit)


def same(units, markup):
    return list(units)


def structure(data, fmt):
    """What a subtitle file keeps: every line that is not a cue's text, and the number of each cue's lines."""
    from fairseq_rope_text.files import decode, read_subtitles

    layout = read_subtitles(decode(data, "x")[1], fmt, "x")
    return [item if isinstance(item, str) else len(item.lines) for item in layout]


@pytest.mark.parametrize("fmt, text, units", [("srt", SRT, SRT_UNITS), ("vtt", VTT, VTT_UNITS),
                                              ("html", HTML, HTML_UNITS), ("txt", TXT, [TXT])])
def test_a_text_format_comes_back_byte_for_byte_and_each_unit_is_translated_once(fmt, text, units):
    data = text.encode("utf-8")
    assert read_document(data, fmt, f"x.{fmt}").units == units
    assert translate_bytes(data, fmt, f"x.{fmt}", same) == data
    marking = Marking()
    out = translate_bytes(data, fmt, f"x.{fmt}", marking)
    assert marking.calls == [units]  # one call, every unit once, in order
    assert read_document(out, fmt, "y").units == [upper(u) for u in units]
    if fmt in ("srt", "vtt"):
        assert structure(out, fmt) == structure(data, fmt)  # numbers, timings, settings, header, blocks
        assert out.count(b"\r\n") == data.count(b"\r\n") and out.startswith(data[:3])  # CRLF, the BOM
    if fmt == "html":
        assert out == html_of(*(S[i].upper() for i in (0, 1, 4, 5, 6))).encode()  # tags, comment, style, pre kept
    if fmt == "txt":
        assert out == TXT.upper().encode()


def test_a_cue_of_several_lines_is_one_unit_wrapped_back_into_as_many_lines():
    srt = "7\n00:00:01,000 --> 00:00:02,000\nThe dog sees\nthe red house\nand it runs.\n"
    german = "Der Hund sieht das rote Haus und er rennt weg."
    out = translate_bytes(srt.encode(), "srt", "a.srt", lambda units, markup: [german])
    # the lines broke after 12 and 26 of 39 characters: the spaces nearest 12/39 and 26/39 of the translation
    assert out.decode() == "7\n00:00:01,000 --> 00:00:02,000\nDer Hund sieht\ndas rote Haus und\ner rennt weg.\n"
    short = translate_bytes(srt.encode(), "srt", "a.srt", lambda units, markup: ["Ja."])  # fewer words than lines
    assert short.decode() == "7\n00:00:01,000 --> 00:00:02,000\nJa.\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.sampled_from("ab \u00e9"), min_size=1).map(str.strip).filter(bool), min_size=1, max_size=4))
def test_wrapping_a_cues_own_text_gives_back_its_lines(lines):
    assert wrap(" ".join(lines), [len(line) for line in lines]) == lines


@pytest.mark.parametrize("fmt, data, says", [
    ("srt", b"1\n00:00:01,000 -> 00:00:02,000\nHello\n", "bad.srt, line 2: expected a timing line (00:00:01,000 --> "),
    ("srt", b"1\n00:00:01,000 --> 00:00:02,000\nHello\n\nHello again\n", "bad.srt, line 5: expected a cue number"),
    ("srt", b"1\n00:00:01,000 --> 00:00:02,000\nA\n2\n00:00:03,000 --> 00:00:04,000\nB\n", "bad.srt, line 5: a timing"),
    ("srt", b"1\n", "bad.srt, line 2: expected a timing line"),
    ("vtt", b"00:01.000 --> 00:02.000\nHello\n", "bad.vtt, line 1: expected 'WEBVTT'"),
    ("vtt", b"WEBVTT\n\n00:01.000 --> 00:02\nHello\n", "bad.vtt, line 3: expected a timing line (00:00:01.000 -->"),
    ("txt", b"fine\ncaf\xe9\n", "bad.txt, line 2: not UTF-8 (byte 0xe9); expected UTF-8"),
    ("html", "<p>x</p>".encode("utf-16"), "bad.html is UTF-16"),
    ("docx", b"PK but not a zip", "bad.docx is not a Word document (.docx): expected a zip archive"),
    ("docx", None, "bad.docx is not a Word document (.docx): KeyError"),
])
def test_a_damaged_file_is_one_error_naming_the_file_and_what_was_expected(fmt, data, says):
    if data is None:  # a zip, but not a Word document
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as z:
            z.writestr("notes.txt", "hello")
        data = buffer.getvalue()
    with pytest.raises(FileError) as error:
        read_document(data, fmt, f"bad.{fmt}")
    assert says in str(error.value)


def test_the_format_is_the_extensions_and_an_unknown_one_names_the_supported_list(monkeypatch):
    assert [file_format(n) for n in ("a.TXT", "b.html", "c.htm", "d.srt", "e.vtt", "f.Docx")] == \
        ["txt", "html", "html", "srt", "vtt", "docx"]
    with pytest.raises(FileError, match=r"report.pdf: extension '.pdf' is not a format translated; the formats are "
                                        r"\.txt, \.html, \.htm, \.srt, \.vtt, \.docx"):
        file_format("report.pdf")
    assert supported() == [".txt", ".html", ".srt", ".vtt", ".docx"]
    monkeypatch.setitem(sys.modules, "docx", None)  # python-docx not installed
    assert supported() == [".txt", ".html", ".srt", ".vtt"]
    with pytest.raises(FileError, match=r"pip install 'fairseq-rope\[files\]'"):
        read_document(b"PK", "docx", "a.docx")


def make_docx():
    """A Word document with a heading, a list paragraph of three runs (one bold), a table (a merged cell,
    a number), an italic paragraph with a line break and a tab, a page break, a header and a footer."""
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    document.add_heading(S[0], 1)
    p = document.add_paragraph(S[1][:8], style="List Bullet")
    p.add_run(S[1][8:16]).bold = True
    p.add_run(S[1][16:])
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = S[2]
    table.cell(0, 0).merge(table.cell(0, 1))
    table.cell(1, 0).text = "42"
    table.cell(1, 1).text = S[3]
    p = document.add_paragraph()
    run = p.add_run(S[4])
    run.italic = True
    run.add_break()
    run.add_text("\t" + S[5])
    p.add_run().add_break(WD_BREAK.PAGE)
    document.sections[0].header.paragraphs[0].text = S[6]
    document.sections[0].footer.paragraphs[0].text = S[7]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# (the list paragraph's bold run a span; the italic paragraph one run: its break and tab as they are)
DOCX_UNITS = [S[0], f'{S[1][:8]}<span data-run="1">{S[1][8:16]}</span>{S[1][16:]}', S[2], "42", S[3],
              f"{S[4]}\n\t{S[5]}", S[6], S[7]]


def paragraphs_of(data):
    """[(style, text, [(run text, bold, italic)])] of the body and the table's cells, the header and footer."""
    import docx

    document = docx.Document(io.BytesIO(data))
    cells = {id(c._tc): c for row in document.tables[0].rows for c in row.cells}.values()
    found = [p for p in document.paragraphs] + [p for c in cells for p in c.paragraphs] + \
        document.sections[0].header.paragraphs + document.sections[0].footer.paragraphs
    return [(p.style.name, p.text, [(r.text, r.bold, r.italic) for r in p.runs]) for p in found]


def test_a_word_document_keeps_styles_cells_runs_formatting_and_breaks():
    data = make_docx()
    assert read_document(data, "docx", "a.docx").units == DOCX_UNITS
    assert paragraphs_of(translate_bytes(data, "docx", "a.docx", same)) == paragraphs_of(data)
    marking = Marking()
    out = translate_bytes(data, "docx", "a.docx", marking)
    assert marking.calls == [DOCX_UNITS]
    before, after = paragraphs_of(data), paragraphs_of(out)
    assert [style for style, _, _ in after] == [style for style, _, _ in before]  # Heading 1, List Bullet, ...
    assert [text for _, text, _ in after] == [text.upper() for _, text, _ in before]
    assert after[1][2] == [(S[1][:8].upper(), None, None), (S[1][8:16].upper(), True, None),
                           (S[1][16:].upper(), None, None)]  # the bold run's words bold
    assert after[2][2][0] == (f"{S[4]}\n\t{S[5]}".upper(), None, True)  # italic, its break and tab kept
    assert after[2][2][1] == ("", None, None)  # (the page break's run)
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        assert z.read("word/document.xml").count(b'w:type="page"') == 1  # the page break kept
    assert read_document(out, "docx", "b.docx").units == [upper(u) for u in DOCX_UNITS]


def reorder(units, markup):
    """A translator of units that puts each paragraph's last element first: "a <b>x</b> c." -> "<b>X</b> A C."."""
    out = []
    for unit in units:
        elements = re.findall(r"<(span|a)\b[^>]*>.*?</\1>", unit)
        last = re.search(rf"<({elements[-1]})\b[^>]*>.*?</\1>", unit) if elements else None
        rest = "" if last is None else (unit[:last.start()] + unit[last.end():]).strip()
        moved = unit if last is None else " ".join(filter(None, [last.group(0), rest]))
        out.append(upper(moved))
    return out


def test_a_word_paragraphs_bold_italic_and_links_land_on_the_words_they_marked():
    """A paragraph's runs formatted otherwise than most of it (bold, italic) and its hyperlinks are inline
    elements of its unit; written back, each piece of the translation takes the formatting (and the link, its
    target kept) of the words it translates, wherever the translation put them; runs of one formatting in a
    row are one element; a tab or a line break inside a formatted paragraph stays in place."""
    from conftest import word_document, word_runs

    data = word_document([
        ["The old man will open ", ("a beautiful box", {"bold": True}), " in the city."],
        ["See ", ("the manual", {"link": "https://example.org/manual"}), " and ", ("read", {"italic": True}),
         ("it", {"italic": True}), " now."],
        [("Name:", {"bold": True}), "\tvalue\nnext line"],
        [("All of it a link.", {"link": "https://example.org/all"})],
        ["Plain text & <angle brackets>\twith a tab."]])
    assert read_document(data, "docx", "a.docx").units == [
        'The old man will open <span data-run="1">a beautiful box</span> in the city.',
        'See <a data-link="0">the manual</a> and <span data-run="3">readit</span> now.',
        '<span data-run="0">Name:</span><br data-tab="">value<br>next line',
        '<a data-link="0">All of it a link.</a>',
        "Plain text &amp; &lt;angle brackets&gt;\twith a tab."]
    out = translate_bytes(data, "docx", "a.docx", reorder)
    assert word_runs(out) == [
        [("A BEAUTIFUL BOX", True, False, None), (" THE OLD MAN WILL OPEN  IN THE CITY.", False, False, None)],
        [("READIT", False, True, None), (" SEE ", False, False, None),
         ("THE MANUAL", False, False, "https://example.org/manual"), (" AND  NOW.", False, False, None)],
        [("NAME:", True, False, None), (" \tVALUE\nNEXT LINE", False, False, None)],  # (reorder's space)
        [("ALL OF IT A LINK.", False, False, "https://example.org/all")],
        [("PLAIN TEXT & <ANGLE BRACKETS>\tWITH A TAB.", False, False, None)]]
    unnumbered = lambda units: [re.sub(r' data-run="\d+"', "", unit) for unit in units]  # noqa: E731 (runs renumbered)
    assert unnumbered(read_document(out, "docx", "b.docx").units) == \
        unnumbered(reorder(read_document(data, "docx", "a.docx").units, "html"))
    assert word_runs(translate_bytes(data, "docx", "a.docx", same)) == word_runs(data)


def test_translate_file_writes_the_same_format(tmp_path):
    (tmp_path / "talk.srt").write_bytes(SRT.encode())
    assert translate_file(str(tmp_path / "talk.srt"), str(tmp_path / "talk.de.srt"), Marking()) == len(SRT_UNITS)
    assert read_document((tmp_path / "talk.de.srt").read_bytes(), "srt", "x").units == [u.upper() for u in SRT_UNITS]


# ---- fairseq-rope-translate ----------------------------------------------------------------------
SHORT = 12


@pytest.fixture(scope="module")
def mt(model):  # noqa: F811
    from fairseq_rope.hub import load_translator

    # the command's backend: the default (auto) of both; translations of at most SHORT subwords (the untrained
    # model's run to the length limit: 200, fairseq-generate's default, would make each file take minutes)
    return load_translator(model[0], model[1], device="cpu", max_len_b=SHORT)


def expected(data, fmt, mt):
    """The file as translated unit by unit with the in-process API: translate_text, or for a unit with
    markup (HTML, a subtitle cue) translate_texts of that unit alone."""
    return translate_bytes(data, fmt, f"x.{fmt}", lambda units, markup: [
        mt.translate_text(u) if markup == "text" else mt.translate_texts([u], markup)[0][0] for u in units])


def translate(model, *flags):  # noqa: F811
    from fairseq_rope_cli.translate import main

    return run_main(main, "--model-dir", model[0], "--data-bin", model[1], "--device", "cpu",
                    "--max-len-b", SHORT, *flags)


@pytest.mark.parametrize("fmt", ["srt", "vtt", "html", "docx", "txt"])
def test_the_command_translates_each_format_unit_by_unit_as_the_api(model, mt, tmp_path, fmt):  # noqa: F811
    data = {"srt": SRT, "vtt": VTT, "html": HTML, "txt": TXT}[fmt].encode() if fmt != "docx" else make_docx()
    (tmp_path / f"talk.{fmt}").write_bytes(data)
    done = translate(model, "--input", tmp_path / f"talk.{fmt}", "--output", tmp_path / f"talk.de.{fmt}")
    assert done.returncode == 0, done.stderr
    out = (tmp_path / f"talk.de.{fmt}").read_bytes()
    if fmt == "docx":
        assert paragraphs_of(out) == paragraphs_of(expected(data, fmt, mt))
        assert [s for s, _, _ in paragraphs_of(out)] == [s for s, _, _ in paragraphs_of(data)]
    else:
        assert out == expected(data, fmt, mt)
    units = read_document(data, fmt, "x").units
    if fmt == "txt":
        assert out.decode() == mt.translate_text(TXT)  # today's behaviour
    else:
        assert f"({fmt}): " in done.stderr and f"in {len(units)} units" in done.stderr
    if fmt == "srt":  # the "done when": unit for unit, the structure as it was
        assert structure(out, fmt) == structure(data, fmt)
        assert read_document(out, fmt, "x").units == [mt.translate_text(u).strip() for u in units]


def test_the_command_reads_stdin_refuses_docx_on_stdout_names_a_damaged_file(model, mt, tmp_path,  # noqa: F811
                                                                            monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SRT.encode())))
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    from fairseq_rope_cli.translate import main

    main(["--model-dir", str(model[0]), "--data-bin", str(model[1]), "--device", "cpu", "--max-len-b", str(SHORT),
          "--format", "srt"])
    sys.stdout.flush()
    written = out.getvalue()
    monkeypatch.undo()
    assert written == expected(SRT.encode(), "srt", mt)
    (tmp_path / "a.docx").write_bytes(make_docx())
    refused = translate(model, "--input", tmp_path / "a.docx")
    assert refused.returncode == 1 and "give --output FILE.docx (not stdout)" in refused.stderr
    (tmp_path / "bad.srt").write_bytes(b"1\n00:00:01 --> 00:00:02\nHello\n")
    bad = translate(model, "--input", tmp_path / "bad.srt", "--output", tmp_path / "out.srt")
    assert bad.returncode == 1 and f"{tmp_path / 'bad.srt'}, line 2: expected a timing line" in bad.stderr
    assert not (tmp_path / "out.srt").exists()
    (tmp_path / "deep.html").write_text(nested(101))  # inline elements nested past --nesting-limit
    deep = translate(model, "--input", tmp_path / "deep.html", "--output", tmp_path / "deep.de.html")
    assert deep.returncode == 1 and deep.stderr.strip().splitlines()[-1] == (
        f"fairseq-rope-translate: error: {tmp_path / 'deep.html'}: inline elements nested deeper than the limit of "
        "100: '<b>' opens inside 100 others, at character 14 of a paragraph's text; --nesting-limit raises the "
        "limit (0: none)")
    assert not (tmp_path / "deep.de.html").exists()
    (tmp_path / "at.html").write_text(nested(100))
    at = translate(model, "--input", tmp_path / "at.html", "--output", tmp_path / "at.de.html")
    assert at.returncode == 0 and (tmp_path / "at.de.html").read_bytes() == expected(nested(100).encode(), "html", mt)
    raised = translate(model, "--input", tmp_path / "deep.html", "--output", tmp_path / "deep.de.html",
                       "--nesting-limit", "101")
    assert raised.returncode == 0 and (tmp_path / "deep.de.html").read_bytes() == \
        expected(nested(101).encode(), "html", mt)
    (tmp_path / "notes.md").write_text(TXT)  # another extension: plain text, as before
    plain = translate(model, "--input", tmp_path / "notes.md", "--output", tmp_path / "notes.de.md")
    assert plain.returncode == 0 and (tmp_path / "notes.de.md").read_bytes() == mt.translate_text(TXT).encode()


# ---- the server: POST /translate_file, GET /download_file ---------------------------------------
@pytest.fixture(scope="module")
def short_mt(model):  # noqa: F811
    """test_serve's model, its translations 10 subwords at most (the server's doors are tested here)."""
    from fairseq_rope.hub import load_translator

    return load_translator(model[0], model[1], device="cpu", max_len_b=10)


@pytest.fixture
def files_dir(tmp_path, monkeypatch):
    """Where the server's temporary folder is made (tempfile's own folder for the test)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def served(short_mt, **limits):
    from starlette.testclient import TestClient

    from fairseq_rope_server.app import Limits, ServedModel, make_app

    return TestClient(make_app([ServedModel(short_mt)], Limits(**{"batch_wait": 0, "web_page": False, **limits})))


def send(client, name, data, **fields):
    return client.post("/translate_file", files={"file": (name, data)},
                       data={"source": "en", "target": "de", **fields})


def left_in(folder):
    return [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names]


@pytest.mark.parametrize("fmt", ["srt", "vtt", "html", "txt", "docx"])
def test_the_server_translates_a_file_and_gives_it_once(short_mt, files_dir, fmt):
    data = {"srt": SRT, "vtt": VTT, "html": HTML, "txt": TXT}[fmt].encode() if fmt != "docx" else make_docx()
    with served(short_mt) as client:
        settings = client.get("/frontend/settings").json()
        assert settings["filesTranslation"] is True
        assert settings["supportedFilesFormat"] == [".txt", ".html", ".srt", ".vtt", ".docx"]
        answer = send(client, f"report.{fmt}", data)
        assert answer.status_code == 200, answer.text
        counted = client.get("/health").json()["translated"]["en-de"]["sentences"]  # through /translate's queue
        document = read_document(data, fmt, "x")
        assert counted == sum(len(piece.sentences) for items in pieces_of(document.units, document.markup, "en")
                              for piece in items if not isinstance(piece, str))
        url = answer.json()["translatedFileUrl"]
        assert list(answer.json()) == ["translatedFileUrl"] and url.startswith("http://testserver/download_file/")
        assert len(left_in(files_dir)) == 1
        got = client.get(url)
        assert got.status_code == 200
        assert got.headers["content-disposition"] == f'attachment; filename="report.de.{fmt}"'
        want = expected(data, fmt, short_mt)
        if fmt == "docx":
            assert paragraphs_of(got.content) == paragraphs_of(want)
        else:
            assert got.content == want
        if fmt == "srt":  # unit for unit
            units = read_document(data, fmt, "x").units
            assert read_document(got.content, fmt, "x").units == [short_mt.translate_text(u).strip() for u in units]
            assert structure(got.content, fmt) == structure(data, fmt)
        assert left_in(files_dir) == []  # removed as it was sent
        again = client.get(url)
        assert again.status_code == 404 and "no translated file" in again.json()["error"]
    assert os.listdir(files_dir) == []  # the folder too, at shutdown


def test_the_server_answers_bad_files_and_limits_as_json_errors(short_mt, files_dir):
    with served(short_mt, char_limit=200, file_char_limit=250, file_limit=4000) as client:
        def error_of(answer, status):
            assert answer.status_code == status, answer.text
            assert answer.headers["content-type"] == "application/json" and list(answer.json()) == ["error"]
            return answer.json()["error"]
        assert "report.pdf: extension '.pdf' is not a format translated; the formats are .txt, .html, .htm, .srt, " \
               ".vtt, .docx" in error_of(send(client, "report.pdf", b"%PDF"), 400)
        assert "bad.docx is not a Word document (.docx): expected a zip archive" in \
            error_of(send(client, "bad.docx", b"not a zip"), 400)
        assert "bad.srt, line 2: expected a timing line" in error_of(send(client, "bad.srt", b"1\nnope\nx\n"), 400)
        big = ("1\n00:00:01,000 --> 00:00:02,000\n" + S[0] + "\n\n") * 10
        assert "the file's text (" in error_of(send(client, "big.srt", big.encode()), 400)
        assert "exceeds the file limit (250, --file-char-limit)" in error_of(send(client, "big.srt", big.encode()), 400)
        assert "larger than the limit (4000 bytes)" in error_of(send(client, "huge.txt", b"x" * 5000), 413)
        no_file = client.post("/translate_file", files={"source": (None, "en"), "target": (None, "de")})  # multipart
        assert "missing file parameter" in error_of(no_file, 400)
        assert "send the file as multipart/form-data" in error_of(client.post("/translate_file", json={"q": 1}), 400)
        assert "fr is not supported" in error_of(send(client, "a.txt", b"Hello", target="fr"), 400)
        assert "Not Found: no translated file" in error_of(client.get("/download_file/nothing.srt"), 404)
        assert left_in(files_dir) == []
    with served(short_mt, api_keys={"k": 0}) as client:
        assert send(client, "a.txt", S[0].encode()).status_code == 403
        assert send(client, "a.txt", S[0].encode(), api_key="k").status_code == 200


def nested(depth):
    """The issue's page: one sentence, its verb inside ``depth`` nested <b> elements."""
    return f"<html><body><p>The small dog {'<b>' * depth}sees{'</b>' * depth} the red house.</p></body></html>"


def test_a_page_nested_past_the_limit_is_refused_naming_the_file_and_the_limit(short_mt, files_dir):
    """--nesting-limit (Limits.nesting_limit, 100 by default): a file or an HTML text whose inline elements
    nest deeper is a 400 naming the file and the limit; one at the limit is translated as the API translates
    it, and with 0 (no limit) so is the issue's page of 20,000."""
    with served(short_mt) as client:
        answer = send(client, "deep.html", nested(101).encode())
        assert answer.status_code == 400 and list(answer.json()) == ["error"]
        assert answer.json()["error"] == (
            "Invalid request: deep.html: inline elements nested deeper than the limit of 100: '<b>' opens inside "
            "100 others, at character 14 of a paragraph's text (--nesting-limit; 0: no limit)")
        text = client.post("/translate", json={"q": nested(101), "source": "en", "target": "de", "format": "html"})
        assert text.status_code == 400 and "nested deeper than the limit of 100" in text.json()["error"]
        cue = "1\n00:00:01,000 --> 00:00:02,000\n" + "<i>" * 101 + "The dog." + "</i>" * 101 + "\n"
        answer = send(client, "deep.srt", cue.encode())
        assert answer.status_code == 400 and "deep.srt: inline elements nested deeper than the limit of 100: '<i>'" \
            in answer.json()["error"]
        answer = send(client, "at.html", nested(100).encode())
        assert answer.status_code == 200, answer.text
        got = client.get(answer.json()["translatedFileUrl"]).content
        assert got == expected(nested(100).encode(), "html", short_mt)
        assert left_in(files_dir) == []
    with served(short_mt, nesting_limit=0) as client:
        answer = send(client, "deep.html", nested(20000).encode())
        assert answer.status_code == 200, answer.text
        got = client.get(answer.json()["translatedFileUrl"]).content
        assert got == expected(nested(20000).encode(), "html", short_mt) and got.count(b"<b>") == 20000


def test_a_file_longer_than_the_text_box_and_the_queue_goes_through_in_parts(short_mt, files_dir):
    """The text box's --char-limit is not a file's (--file-char-limit is), and a file of more sentences than
    --queue-size goes through the queue in parts, the same file as translated unit by unit."""
    srt = "".join(f"{n + 1}\n00:00:0{n},000 --> 00:00:0{n},500\n{S[n]} {S[n + 1]}\n\n" for n in range(9))
    with served(short_mt, char_limit=100, queue_size=5) as client:
        answer = send(client, "long.srt", srt.encode())
        assert answer.status_code == 200, answer.text
        assert client.get(answer.json()["translatedFileUrl"]).content == expected(srt.encode(), "srt", short_mt)
        assert client.get("/health").json()["translated"]["en-de"]["sentences"] == 18
        too_many = client.post("/translate", json={"q": "The dog runs. " * 6, "source": "en", "target": "de"})
        assert too_many.status_code == 400 and "send the text in parts" in too_many.json()["error"]


def test_a_file_not_downloaded_in_time_is_removed(short_mt, files_dir):
    with served(short_mt, file_keep=0.3) as client:
        url = send(client, "a.srt", SRT.encode()).json()["translatedFileUrl"]
        assert len(left_in(files_dir)) == 1
        deadline = time.monotonic() + 10
        while left_in(files_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left_in(files_dir) == []  # removed by the server itself, no request needed
        assert client.get(url).status_code == 404
        send(client, "b.srt", SRT.encode())  # left for the shutdown
    assert os.listdir(files_dir) == []


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_the_docs_curl_commands_translate_a_subtitle_file(short_mt, files_dir, tmp_path):
    """docs/serving.md's Files commands on a server over HTTP (uvicorn): the subtitles come back unit for unit."""
    from fairseq_rope_server.app import Limits, ServedModel, make_app

    live = Live(make_app([ServedModel(short_mt)], Limits(batch_wait=0)))
    try:
        (tmp_path / "talk.srt").write_bytes(SRT.encode())
        answer = subprocess.run(["curl", "-s", "-F", "file=@talk.srt", "-F", "source=en", "-F", "target=de",
                                 f"{live.url}/translate_file"], cwd=tmp_path, capture_output=True, check=True)
        url = json.loads(answer.stdout)["translatedFileUrl"]
        assert url.startswith(live.url + "/download_file/")
        subprocess.run(["curl", "-s", "-OJ", url], cwd=tmp_path, check=True)  # saved as its name: talk.de.srt
        out = (tmp_path / "talk.de.srt").read_bytes()
        assert out == expected(SRT.encode(), "srt", short_mt)
        assert read_document(out, "srt", "x").units == [short_mt.translate_text(u).strip() for u in SRT_UNITS]
        assert structure(out, "srt") == structure(SRT.encode(), "srt")
    finally:
        live.stop()


def test_a_self_closing_script_tag_leaves_the_text_after_it_to_translate():
    """``<script src="..."/>`` has no content and no closing tag: the text after it is text to translate,
    not script kept as it is (a script with content still is)."""
    page = f'<head><script src="a.js"/></head><body><p>{S[0]}</p><script>var x = "{S[1]}";</script></body>'
    assert read_document(page.encode(), "html", "a.html").units == [S[0]]
    out = translate_bytes(page.encode(), "html", "a.html", Marking())
    assert out.decode() == page.replace(f"<p>{S[0]}</p>", f"<p>{S[0].upper()}</p>")


def test_a_translation_with_blank_lines_never_writes_a_blank_line_inside_a_cue():
    """A blank line ends a cue in SubRip and WebVTT: a translation's empty lines (a dialogue's, or a
    trailing line break) are left out, so that the next cue's number and timing still follow a blank line."""
    srt = ("1\n00:00:01,000 --> 00:00:02,000\n- Yes.\n- No.\n\n"
           "2\n00:00:03,000 --> 00:00:04,000\nThe dog runs.\n")
    out = translate_bytes(srt.encode(), "srt", "a.srt", lambda units, markup: ["- Ja.\n\n- Nein.\n", "Der Hund\n\nrennt.\n"])
    assert out.decode() == ("1\n00:00:01,000 --> 00:00:02,000\n- Ja.\n- Nein.\n\n"
                            "2\n00:00:03,000 --> 00:00:04,000\nDer Hund\nrennt.\n")
    assert read_document(out, "srt", "b.srt").units == ["- Ja.\n- Nein.", "Der Hund rennt."]


def test_a_wrapped_line_breaks_at_the_space_nearest_the_proportional_break_not_one_character_later():
    """Lines of 4 and 4 characters joined by a space break after character 4 of 9; a translation of 9
    characters with spaces at 3 and 6 breaks at 3 (1 away from 4; 6 is 2 away). Three lines of 2, 2, 2
    (joined: breaks at 2 and 5 of 8) on "a bc de f" (spaces 1, 4, 7; 9 characters: wanted 2.25 and 5.625)
    break at 1 (1.25 away; 4 is 1.75) and 7 (1.375 away; 4 is 1.625)."""
    assert wrap("abc de fg", [4, 4]) == ["abc", "de fg"]
    assert wrap("a bc de f", [2, 2, 2]) == ["a", "bc de", "f"]
    srt = "1\n00:00:01,000 --> 00:00:02,000\nabcd\nefgh\n"
    out = translate_bytes(srt.encode(), "srt", "a.srt", lambda units, markup: ["abc de fg"])
    assert out.decode() == "1\n00:00:01,000 --> 00:00:02,000\nabc\nde fg\n"


def test_a_page_in_the_charset_it_declares_is_read_and_written_in_it(short_mt, files_dir):
    """A Latin-1 page that says so (<meta charset> or http-equiv) is read in it and written back in it, its
    declaration still true; a character Latin-1 lacks comes back as a character reference; the server's
    download says the charset. A page that declares what its bytes are not is one line naming the line."""
    for head in ('<meta charset="ISO-8859-1">', '<meta http-equiv="Content-Type" content="text/html; charset=latin1">'):
        page = f"<html><head>{head}</head><body><p>Caf\u00e9 \u00fcber alles.</p><p>Stra\u00dfe.</p></body></html>"
        data = page.encode("latin-1")
        document = read_document(data, "html", "a.html")
        assert document.encoding == "iso8859-1" and document.units == ["Caf\u00e9 \u00fcber alles.", "Stra\u00dfe."]
        out = document.write(["\u00c9t\u00e9 \u2192 gr\u00fcn.", "Stra\u00dfe."])
        assert out == page.replace("Caf\u00e9 \u00fcber alles.", "\u00c9t\u00e9 &#8594; gr\u00fcn.").encode("latin-1")
    with served(short_mt) as client:
        url = send(client, "a.html", data).json()["translatedFileUrl"]
        got = client.get(url)
        assert got.headers["content-type"] == "text/html; charset=iso8859-1" and head.encode() in got.content
    utf8 = '<meta charset="utf-8"><p>Caf\u00e9</p>'.encode()
    assert read_document(utf8, "html", "b.html").encoding == "utf-8"
    with pytest.raises(FileError, match=r"c.html, line 2: not cp1252 as it declares \(byte 0x81\)"):
        read_document(b'<meta charset="windows-1252">\n<p>\x81</p>', "html", "c.html")
    with pytest.raises(FileError, match="d.html declares charset 'klingon', an encoding not known here"):
        read_document(b'<meta charset="klingon"><p>x</p>', "html", "d.html")


def test_a_webvtt_cue_that_runs_into_the_next_timing_line_ends_there_as_webvtts_parser_reads_it():
    """WebVTT's parsing rules end a cue's text at a line with "-->" and start a new cue there (no blank line
    between them); SubRip's files keep the blank line, and one without it stays an error naming the line."""
    vtt = "WEBVTT\n\n00:01.000 --> 00:02.000\nA b.\n00:03.000 --> 00:04.000\nC d.\nE f.\n"
    document = read_document(vtt.encode(), "vtt", "x.vtt")
    assert document.units == ["A b.", "C d. E f."]
    assert document.write(["X.", "Y z w v."]).decode() == \
        "WEBVTT\n\n00:01.000 --> 00:02.000\nX.\n00:03.000 --> 00:04.000\nY z\nw v.\n"
    with pytest.raises(FileError, match="x.vtt, line 5: expected a timing line"):
        read_document(b"WEBVTT\n\n00:01.000 --> 00:02.000\nA\n00:03 --> 00:04\n", "vtt", "x.vtt")


OTHER_PROJECTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "other_projects")
REAL_FILES = sorted(os.path.join(project, name) for project in ("pygments", "python-docx", "webvtt-py")
                    for name in os.listdir(os.path.join(OTHER_PROJECTS, project)) if "." in name and name != "LICENSE")


@pytest.mark.parametrize("name", REAL_FILES)
def test_files_of_other_projects_keep_their_units_tags_and_links(name):
    """A page template of Pygments' tests (links inside bold text, line breaks, scripts, styles), Word
    documents of python-docx's tests (hyperlinks to pages and to a bookmark, character styles, font
    colours) and subtitles of webvtt-py's (cue tags, timestamps inside a cue, <font> and <c.colour> nested,
    STYLE blocks, a byte-order mark), translated by a translator that upper-cases each unit's text: as many
    units out as in, each one's tags the same, around the same words, and the rest of the file as it was
    (a subtitle file's every other line; a Word document's hyperlinks, with their targets, and its
    paragraphs' formatting)."""
    data = open(os.path.join(OTHER_PROJECTS, name), "rb").read()
    fmt = {"xhtml": "html"}.get(name.rsplit(".", 1)[1], name.rsplit(".", 1)[1])
    units = read_document(data, fmt, name).units
    assert units
    out = translate_bytes(data, fmt, name, Marking())
    unnumbered = lambda units: [re.sub(r' data-run="\d+"', "", unit) for unit in units]  # noqa: E731
    assert unnumbered(read_document(out, fmt, name).units) == unnumbered([upper(unit) for unit in units])
    if fmt in ("srt", "vtt"):
        assert structure(out, fmt) == structure(data, fmt)
        return
    if fmt == "html":  # every tag, comment, script and style as it was, in its place
        tags = r"<!--.*?-->|<script.*?</script>|<style.*?</style>|<[^>]+>"
        assert re.findall(tags, out.decode(), re.S) == re.findall(tags, data.decode(), re.S)
        return
    with zipfile.ZipFile(io.BytesIO(data)) as before, zipfile.ZipFile(io.BytesIO(out)) as after:
        links = [re.findall(rb"<w:hyperlink ([^>]*)>", z.read("word/document.xml")) for z in (before, after)]
        targets = [sorted(re.findall(rb"""Id=["'](\w+)["'][^>]*Target=["']([^"']*)""", z.read("word/_rels/document.xml.rels")))
                   for z in (before, after)]
    assert links[1] == links[0]  # each link's r:id (its target) or w:anchor (a bookmark), once
    assert targets[1] == targets[0]
    assert formatted_text(out) == [[(text.upper(), how) for text, how in p] for p in formatted_text(data)]


def formatted_text(data):
    """Each body paragraph of a .docx as [(text, its run properties' XML and its hyperlink's attributes)],
    consecutive text of the same formatting and link joined."""
    import docx
    from docx.oxml.ns import qn
    from lxml import etree

    found = []
    for p in docx.Document(io.BytesIO(data)).paragraphs:
        pieces = []
        for r in p._p.iter(qn("w:r")):
            link = r.getparent() if r.getparent().tag == qn("w:hyperlink") else None
            properties = r.find(qn("w:rPr"))
            how = (b"" if properties is None else etree.tostring(properties),
                   None if link is None else sorted(link.attrib.items()))
            if r.text and pieces and pieces[-1][1] == how:
                pieces[-1] = (pieces[-1][0] + r.text, how)
            elif r.text:
                pieces.append((r.text, how))
        found.append(pieces)
    return found


class Aligning:
    """A translator of units through the markup layer, as the engines' callers translate them (pieces_of, a
    Translation per sentence, join_pieces): each sentence becomes its words upper-cased in reverse order,
    each target word aligned to a source word drawn at random (seeded), or to none."""

    def __init__(self, alignment, seed=0):
        import random

        self.alignment, self.random = alignment, random.Random(seed)

    def __call__(self, units, markup):
        from fairseq_rope_text.markup import Translation, join_pieces

        texts = pieces_of(units, markup, "en")
        translations = []
        for items in texts:
            for item in items:
                for sentence in ([] if isinstance(item, str) else item.sentences):
                    words = sentence.split()
                    target = [w.upper() for w in reversed(words)]
                    alignment = [self.random.randrange(len(words)) if self.alignment == "random" else None
                                 for _ in target]
                    translations.append(Translation(" ".join(target), words, target, alignment))
        left = iter(translations)
        return [join_pieces(items, left, lambda subwords: (list(subwords), list(range(len(subwords)))))
                for items in texts]


def elements_of(units):
    """Every inline element of a file's units, by its opening tag (a Word run's number left out), and how
    many of them hold nothing (a Word document's spaces between formatted words come back as runs of
    their own: a space is something)."""
    import collections

    opened = collections.Counter(re.sub(r' data-run="\d+"', "", tag) for unit in units
                                 for tag in re.findall(r"<(?!/)[^>]*>", unit))
    empty = sum(len(re.findall(r"<([A-Za-z][\w.-]*)\b[^>]*></\1>", unit)) for unit in units)
    return opened, empty


@pytest.mark.parametrize("alignment", ["random", "none"])
@pytest.mark.parametrize("name", REAL_FILES)
def test_every_inline_element_comes_back_holding_words_whatever_the_alignment(name, alignment):
    """The real files of other projects (Pygments' page, python-docx's hyperlinks and character styles,
    webvtt-py's cue tags) through a translator whose alignment is arbitrary, or that aligns nothing: every
    inline element comes back (the same opening tags, at least as many of each), none that held words comes back
    empty (an element whose words align nowhere goes around the target word at its place), and a Word
    document keeps every hyperlink (python-docx's par-hyperlinks.docx lost one: its words aligned to none)."""
    data = open(os.path.join(OTHER_PROJECTS, name), "rb").read()
    fmt = {"xhtml": "html"}.get(name.rsplit(".", 1)[1], name.rsplit(".", 1)[1])
    units = read_document(data, fmt, name).units
    out = translate_bytes(data, fmt, name, Aligning(alignment))
    (before, empty_before), (after, empty_after) = elements_of(units), elements_of(read_document(out, fmt, name).units)
    # (an element across a sentence end comes back as two, one in each sentence's translation)
    assert set(after) == set(before) and all(after[tag] >= before[tag] for tag in before), (before, after)
    assert empty_after == empty_before
    if fmt == "docx":
        with zipfile.ZipFile(io.BytesIO(data)) as z_in, zipfile.ZipFile(io.BytesIO(out)) as z_out:
            links = [len(re.findall(rb"<w:hyperlink\b", z.read("word/document.xml"))) for z in (z_in, z_out)]
        assert links[1] == links[0]
