"""Running text to sentences and back (fairseq_rope_text.running_text) and fairseq-rope-translate's input
checks; translating it with trained models is tested in test_recipes.py (sentence level) and
test_documents.py (in context)."""

import pytest

from conftest import run_main

from fairseq_rope_cli import translate
from fairseq_rope_text.running_text import join_text, sentences_of, split_text


@pytest.mark.parametrize("lang, paragraph, sentences", [
    ("en", 'Dr. Smith paid $3.50 for the book, i.e. a bargain. He said "Wow!" and left... Then he came back.',
     ["Dr. Smith paid $3.50 for the book, i.e. a bargain.", 'He said "Wow!" and left...', "Then he came back."]),
    ("en", "The U.S. economy grew 2.5% in Q3. Mr. Jones, however, disagreed? Yes!",
     ["The U.S. economy grew 2.5% in Q3.", "Mr. Jones, however, disagreed?", "Yes!"]),
    ("de", "Am 3. Mai kam Dr. Müller. Er sagte: „Das ist z. B. gut.“ Dann ging er… Ende.",
     ["Am 3. Mai kam Dr. Müller.", "Er sagte: „Das ist z. B. gut.“", "Dann ging er… Ende."]),
    ("de", "Die Firma zahlte 3,5 Mio. Euro. Das war viel.", ["Die Firma zahlte 3,5 Mio. Euro.", "Das war viel."]),
    ("en", "no boundary at all, and it goes on", ["no boundary at all, and it goes on"]),
])
def test_paragraphs_split_as_sentencex_splits_them(lang, paragraph, sentences):
    """Abbreviations, numbers, quotes and ellipses as the chosen segmenter (sentencex) treats them; the
    German ellipsis before a capital stays inside its sentence."""
    assert sentences_of(paragraph, lang) == sentences


TEXT = ("  Title line\n"
        "\n"
        "First sentence. Second one\n"
        "goes on here. Third!\n"
        "   \n"
        "\n"
        "\tIndented paragraph. Its end.\n")


def test_layout_kept_blank_lines_indentation_and_paragraphs():
    layout, sentences = split_text(TEXT, "en")
    assert sentences == ["Title line", "First sentence.", "Second one goes on here.", "Third!",
                         "Indented paragraph.", "Its end."]
    upper = [s.upper() for s in sentences]
    assert join_text(layout, upper) == ("  TITLE LINE\n\nFIRST SENTENCE. SECOND ONE GOES ON HERE. THIRD!\n   \n\n"
                                        "\tINDENTED PARAGRAPH. ITS END.\n")
    assert join_text(layout, sentences) == TEXT.replace("Second one\ngoes", "Second one goes")
    with pytest.raises(ValueError, match="5 translations for a text of 6 sentences"):
        join_text(layout, sentences[:5])
    with pytest.raises(ValueError, match="7 translations for a text of 6 sentences"):  # none dropped either
        join_text(layout, sentences + ["extra"])


def test_keep_line_breaks_translates_every_line_on_its_own():
    layout, sentences = split_text(TEXT, "en", keep_line_breaks=True)
    assert sentences == ["Title line", "First sentence.", "Second one", "goes on here.", "Third!",
                         "Indented paragraph.", "Its end."]
    assert join_text(layout, sentences) == TEXT
    no_newline = "One. Two."
    assert join_text(*split_text(no_newline, "en")[:1], ["1.", "2."]) == "1. 2."


def test_bad_input_is_named_in_one_line(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("Grüße\n".encode("utf-8") + b"und mehr Caf\xe9\n")
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "checkpoint_best.pt").write_bytes(b"")  # the input is read before any model is loaded
    base = ["--model-dir", tmp_path, "--data-bin", tmp_path]
    for args, message in [
        (["--input", tmp_path / "latin1.txt"], f"{tmp_path / 'latin1.txt'}, line 2: not UTF-8 (byte 0xe9)"),
        (["--input", tmp_path], f"--input {tmp_path} is a directory"),
        (["--input", tmp_path / "empty.txt"], f"{tmp_path / 'empty.txt'} is empty: nothing to translate"),
        (["--input", tmp_path / "missing.txt"], f"--input file not found: {tmp_path / 'missing.txt'}"),
    ]:
        out = run_main(translate.main, *base, *args)
        said = out.stderr.strip().splitlines()
        assert out.returncode == 1 and len(said) == 1 and said[0].startswith(f"fairseq-rope-translate: error: {message}")
    out = run_main(translate.main, "--model-dir", tmp_path, "--input", tmp_path / "empty.txt")
    assert "--data-bin is needed with the fairseq backend" in out.stderr
    (tmp_path / "models").mkdir()
    out = run_main(translate.main, "--model-dir", tmp_path / "models", "--data-bin", tmp_path, "--input",
                   tmp_path / "empty.txt")
    assert f"checkpoint not found: {tmp_path / 'models' / 'checkpoint_best.pt'}" in out.stderr
