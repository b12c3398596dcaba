"""Running text to sentences and back (fairseq_rope_text.running_text) and fairseq-rope-translate's input
checks; translating it with trained models is tested in test_recipes.py (sentence level) and
test_documents.py (in context)."""

import pytest

from conftest import run_main

from fairseq_rope_cli import translate
from fairseq_rope_text.running_text import join_text, line_ending, sentences_of, split_text


@pytest.mark.parametrize("lang, paragraph, sentences", [
    ("en", 'Dr. Smith paid $3.50 for the book, i.e. a bargain. He said "Wow!" and left... Then he came back.',
     ["Dr. Smith paid $3.50 for the book, i.e. a bargain.", 'He said "Wow!" and left...', "Then he came back."]),
    ("en", "The U.S. economy grew 2.5% in Q3. Mr. Jones, however, disagreed? Yes!",
     ["The U.S. economy grew 2.5% in Q3.", "Mr. Jones, however, disagreed?", "Yes!"]),
    ("de", "Am 3. Mai kam Dr. Müller. Er sagte: „Das ist z. B. gut.“ Dann ging er… Ende.",
     ["Am 3. Mai kam Dr. Müller.", "Er sagte: „Das ist z. B. gut.“", "Dann ging er…", "Ende."]),
    ("en", "“We did not wait.” – Anna said… Their bus came. It was late… but fine.",
     ["“We did not wait.” – Anna said…", "Their bus came.", "It was late… but fine."]),
    ("de", "Die Firma zahlte 3,5 Mio. Euro. Das war viel.", ["Die Firma zahlte 3,5 Mio. Euro.", "Das war viel."]),
    ("en", "no boundary at all, and it goes on", ["no boundary at all, and it goes on"]),
])
def test_abbreviations_numbers_quotes_and_ellipses_split_right(lang, paragraph, sentences):
    """Abbreviations, numbers, quotes and ellipses; a German sentence ending inside „...“ before a
    capital ends there; "…" before a capital ends a sentence, as Moses' rules treat "..." (not before
    a lower-case word)."""
    assert sentences_of(paragraph, lang) == sentences


@pytest.mark.parametrize("paragraph, sentences", [
    # a pronoun before the full stop ends the sentence (sentencex and pysbd take "me." for an abbreviation)
    ("Five young grandmothers will cook their warm soup for me. I can carry the newspaper, although we help her.",
     ["Five young grandmothers will cook their warm soup for me.", "I can carry the newspaper, although we help her."]),
    ("Thank you for helping me. I appreciate it.", ["Thank you for helping me.", "I appreciate it."]),
    ("Please call me. I will explain everything.", ["Please call me.", "I will explain everything."]),
    ("Excuse me. I have a question.", ["Excuse me.", "I have a question."]),
    ("Trust me. Everything will be fine.", ["Trust me.", "Everything will be fine."]),
    # an abbreviation inside a sentence does not end it
    ("The new clinic charges approx. 40 dollars", ["The new clinic charges approx. 40 dollars"]),
    ("They came over on Sat. evening", ["They came over on Sat. evening"]),
    ("He bought 2 kg. of rice", ["He bought 2 kg. of rice"]),
    ("The fee, incl. 20 percent tax, is due.", ["The fee, incl. 20 percent tax, is due."]),
    # a sentence in brackets ends at its bracket
    ("(This is in brackets.) And this is not.", ["(This is in brackets.)", "And this is not."]),
    # a numbered item's label stays with its sentence; a number ending a sentence does not
    ("1. You may copy it. You may not sell it.", ["1. You may copy it.", "You may not sell it."]),
    ("It was built in 2003. Now it is gone.", ["It was built in 2003.", "Now it is gone."]),
])
def test_english_regression_cases_split_right(paragraph, sentences):
    assert sentences_of(paragraph, "en") == sentences


@pytest.mark.parametrize("lang, paragraph, sentences", [
    ("de", "Er sagte: »Das ist gut.« Dann ging er.", ["Er sagte: »Das ist gut.«", "Dann ging er."]),
    ("de", "Das kostet inkl. Steuern 40 Euro. Hr. Meier zahlt.", ["Das kostet inkl. Steuern 40 Euro.", "Hr. Meier zahlt."]),
    ("de_DE", "Es regnet. Wir bleiben.", ["Es regnet.", "Wir bleiben."]),
    ("pt-BR", "Está chovendo. Vamos ficar.", ["Está chovendo.", "Vamos ficar."]),
    # no Moses list for these: sentencex's rules
    ("ja", "今日は雨です。明日は晴れます。", ["今日は雨です。", "明日は晴れます。"]),
    ("hi", "आज बारिश है। कल धूप होगी।", ["आज बारिश है।", "कल धूप होगी।"]),
    ("eo", "Pluvas hodiaŭ. Morgaŭ estos sune.", ["Pluvas hodiaŭ.", "Morgaŭ estos sune."]),
])
def test_every_language_splits_with_rules_or_the_fallback(lang, paragraph, sentences):
    assert sentences_of(paragraph, lang) == sentences


MANUAL = "/usr/share/doc/debian-edu-doc-{}/debian-edu-bookworm-manual.html"


@pytest.mark.skipif(not all(__import__("os").path.isfile(MANUAL.format(lang)) for lang in ("en", "de")),
                    reason="needs Debian's debian-edu-doc-en and debian-edu-doc-de (apt-get install them)")
def test_splitting_of_the_debian_edu_manual_holds_its_measured_figures():
    """The known boundaries of real prose (scripts/sentence_splitters.py, docs/serving.md): the project's
    splitter keeps the figures it was chosen for, and beats sentencex, its fallback, on English."""
    from scripts.sentence_splitters import table

    results = table()
    ours_en, ours_de = results["en"]["fairseq-rope"], results["de"]["fairseq-rope"]
    assert (ours_en["boundaries"], ours_de["boundaries"]) == (445, 421)
    assert ours_en["found"] >= 441 and ours_en["wrong"] == 0
    assert ours_de["found"] >= 418 and ours_de["wrong"] <= 1
    assert ours_en["paragraphs_exact"] > results["en"]["sentencex"]["paragraphs_exact"]


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


def test_crlf_text_comes_back_with_crlf_and_mixed_endings_as_lf():
    text = "One. Two.\r\n\r\n  Three.\r\n"
    layout, sentences = split_text(text, "en")
    assert sentences == ["One.", "Two.", "Three."]
    assert line_ending(text) == "\r\n" and line_ending("a\r\nb\n") == "\n" and line_ending("a") == "\n"
    assert join_text(layout, sentences, line_ending(text)) == text
    assert join_text(layout, [s.upper() for s in sentences], "\r\n") == "ONE. TWO.\r\n\r\n  THREE.\r\n"


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


def test_a_paragraph_keeps_the_indentation_of_its_first_line_not_of_its_others():
    """A first-line indent (its other lines flush left) stays; an indented continuation line does not
    indent its paragraph."""
    text = "    Indented first line. It goes\non here.\n\nPlain. Then\n    an indented continuation.\n"
    layout, sentences = split_text(text, "en")
    assert sentences == ["Indented first line.", "It goes on here.", "Plain.", "Then an indented continuation."]
    assert join_text(layout, [s.upper() for s in sentences]) == \
        "    INDENTED FIRST LINE. IT GOES ON HERE.\n\nPLAIN. THEN AN INDENTED CONTINUATION.\n"
