"""Inline markup carried across translation (fairseq_rope_text.markup): a paragraph with inline elements is
translated without them and each element is put back around the target words aligned to its own. First the
rules on given alignments (every rule, each output written out), then trained reversal models, whose
alignment is known (target word i is source word n - 1 - i): every tag on the right words on fairseq and on
CTranslate2, the text without tags the plain sentence's translation."""

import random
import re

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from fairseq_rope_text.html_text import TAG, html_parts, without_tags
from fairseq_rope_text.markup import (NESTING_LIMIT, Element, MarkupError, Translation, check_nesting, detag,
                                      inline_runs, join_pieces, pieces_of, project)


def words_of(subwords):
    """Every subword a word (no pretokenizer, no subword splitting)."""
    return list(subwords), list(range(len(subwords)))


def marked(fragment):
    [(translatable, run)] = [r for r in inline_runs(html_parts(fragment)) if r[0]]
    return detag(run)


def translated(fragment, target, alignment, source=None):
    """``fragment`` (one sentence) translated into the words ``target`` with ``alignment`` (target word ->
    source word), through pieces_of and join_pieces as every way in does."""
    [items] = pieces_of([fragment], "html", "en")
    [piece] = [item for item in items if not isinstance(item, str)]
    [sentence] = piece.sentences
    translation = Translation(" ".join(target), source or sentence.split(), target, alignment)
    return join_pieces(items, iter([translation]), words_of)


# ---- detag --------------------------------------------------------------------------------------

def test_detag_gives_the_plain_text_and_the_characters_each_element_encloses():
    m = marked('<p>Open  <b>a <i>big</i>\n box</b> in <a href="x?a=1&amp;b=2">the city</a>.<br>Now.</p>')
    assert m.text == "Open a big box in the city. Now."
    assert [(m.text[e.start:e.end], e.open, e.close) for e in m.elements] == [
        ("a big box", "<b>", "</b>"), ("big", "<i>", "</i>"), ("the city", '<a href="x?a=1&amp;b=2">', "</a>"),
        ("", "<br>", "")]


def test_code_and_notranslate_are_read_as_text_and_kept_verbatim():
    m = marked('<p>Run <code>a &lt; b</code> and <span translate="no">Foo <b>Bar</b></span> or <kbd>ls</kbd>.</p>')
    assert m.text == "Run a < b and Foo Bar or ls."
    assert [(m.text[e.start:e.end], e.verbatim) for e in m.elements] == [
        ("a < b", "<code>a &lt; b</code>"), ("Foo Bar", '<span translate="no">Foo <b>Bar</b></span>'),
        ("ls", "<kbd>ls</kbd>")]


def test_block_tags_script_and_pre_end_a_paragraph_inline_tags_do_not():
    runs = inline_runs(html_parts('<div>A <b>b</b><p>C</p><script>x = "<b>";</script><pre>D <i>e</i></pre>'
                                  ' F <em>g</em></div>'))
    assert [(translatable, "".join(part for _, part in run)) for translatable, run in runs] == [
        (False, "<div>"), (True, "A <b>b</b>"), (False, "<p>"), (True, "C"), (False, "</p>"),
        (False, '<script>x = "<b>";</script>'), (False, "<pre>D <i>e</i></pre>"),
        (True, " F <em>g</em>"), (False, "</div>")]


def test_unclosed_and_stray_tags_are_kept_as_void_elements():
    m = marked("<p>A <b>b c</p>")
    assert [(e.start, e.end, e.open, e.close) for e in m.elements] == [(2, 2, "<b>", "")]
    m = marked("<p>A </i>b</p>")
    assert [(e.start, e.end, e.open, e.close) for e in m.elements] == [(2, 2, "</i>", "")]


# ---- projection -----------------------------------------------------------------------------------

def test_a_tag_lands_on_the_target_words_aligned_to_its_words():
    out = translated("<p>The old man will open <b>a beautiful box</b> in the city.</p>",
                     "Der alte Mann wird eine schöne Kiste in der Stadt öffnen .".split(),
                     [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 4, 11],
                     source="The old man will open a beautiful box in the city .".split())
    assert out == "<p>Der alte Mann wird <b>eine schöne Kiste</b> in der Stadt öffnen .</p>"


def test_reversed_words_nested_and_sibling_tags():
    # w0 w1 w2 w3 w4 -> w4 w3 w2 w1 w0
    source = "<p>w0 <b>w1 <i>w2</i></b> <a href='#'>w3</a> w4</p>"
    out = translated(source, ["w4", "w3", "w2", "w1", "w0"], [4, 3, 2, 1, 0])
    assert out == "<p>w4 <a href='#'>w3</a> <b><i>w2</i> w1</b> w0</p>"


def test_a_phrase_stays_whole_and_a_sibling_loses_the_words_an_earlier_one_took():
    # b's words align to target 0 and 2: it covers 0..2; i's word aligns to 1, inside b's range: i loses it,
    # and goes around the word at its place (after Y, the word of y, before z: the last word), inside b's, as
    # b took every word
    out = translated("<p><b>x y</b> <i>z</i></p>", ["X", "Z", "Y"], [0, 2, 1])
    assert out == "<p><b>X Z <i>Y</i></b></p>"


def test_a_child_is_clipped_to_its_parents_words():
    out = translated("<p><b>x <i>y</i></b> z</p>", ["X", "Z", "Y"], [0, 2, 1])
    # b covers X..Y (0..2); i (y -> Y) inside it
    assert out == "<p><b>X Z <i>Y</i></b></p>"
    # b (x, y -> T0, T2) loses T1 onwards to its earlier sibling a (w -> T1): b keeps T0, and its child i (y -> T2)
    # is clipped to b's words, none left: around the one word of b's
    out = translated('<p><a href="#">w</a> <b>x <i>y</i></b></p>', ["T0", "T1", "T2"], [1, 0, 2])
    assert out == '<p><b><i>T0</i></b> <a href="#">T1</a> T2</p>'


def test_an_element_whose_words_align_nowhere_goes_around_the_target_word_at_its_place():
    """Its place: after the target word aligned to the source word before it (the start where there is
    none); the word: the first that starts there, or the nearest one no sibling took."""
    out = translated("<p>x <b>y</b> z</p>", ["X", "Z"], [0, 2])
    assert out == "<p>X <b>Z</b></p>"
    out = translated("<p><b>y</b> z</p>", ["Z"], [1])
    assert out == "<p><b>Z</b></p>"
    out = translated("<p><b>x</b> <i>y</i> z</p>", ["X", "Z"], [0, 2])  # (X is b's: i takes the next word)
    assert out == "<p><b>X</b> <i>Z</i></p>"
    out = translated("<p>x <b>y</b> z</p>", ["Z", "X"], [None, None])  # no alignment at all: relative places
    assert out == "<p>Z <b>X</b></p>"


def test_void_elements_go_after_the_target_word_aligned_to_the_word_before_them():
    out = translated('<p>x y<img src="a.png"> z</p>', ["Z", "X", "Y"], [2, 0, 1])
    assert out == '<p>Z X Y<img src="a.png"></p>'


def test_code_replaces_the_words_aligned_to_it_and_comes_back_verbatim():
    out = translated("<p>run <code>ls -l</code> now</p>", ["jetzt", "LS", "L", "ausführen"], [3, 1, 2, 0],
                     source=["run", "ls", "-l", "now"])
    assert out == "<p>jetzt <code>ls -l</code> ausführen</p>"
    out = translated("<p>run <code>ls</code> now</p>", ["jetzt", "ausführen"], [2, 0])  # aligned nowhere
    assert out == "<p>jetzt ausführen<code>ls</code></p>"


def test_an_element_across_a_sentence_end_is_closed_and_opened_again():
    [items] = pieces_of(["<p>A x <b>y. B z</b> w.</p>"], "html", "en")
    [piece] = [item for item in items if not isinstance(item, str)]
    assert piece.sentences == ["A x y.", "B z w."]
    translations = [Translation("a x y .", ["A", "x", "y."], ["a", "x", "y", "."], [0, 1, 2, 2]),
                    Translation("b z w .", ["B", "z", "w."], ["b", "z", "w", "."], [0, 1, 2, 2])]
    assert join_pieces(items, iter(translations), words_of) == "<p>a x <b>y .</b> <b>b z</b> w .</p>"


def test_without_an_alignment_each_target_word_goes_to_its_relative_place():
    element = Element(2, 3, "<b>", "</b>")
    out = project("a b c d", [element], Translation("A B C D", "a b c d".split(), "A B C D".split()), words_of)
    assert out == "A <b>B</b> C D"
    assert project("a b c d", [element], "A B C D E F G H", words_of) == "A B <b>C D</b> E F G H"  # (in context)


def test_text_is_escaped_and_tags_attributes_are_kept_as_written():
    out = translated('<p>x &amp; <a title="1 &lt; 2" href=\'y\'>y</a></p>', ["X", "&", "Y"], [0, 1, 2])
    assert out == "<p>X &amp; <a title=\"1 &lt; 2\" href='y'>Y</a></p>"


def test_a_paragraph_without_inline_tags_keeps_its_layout_as_running_text():
    text = "<p>\n  one two.\n  three four.\n</p>"
    [items] = pieces_of([text], "html", "en")
    [piece] = [item for item in items if not isinstance(item, str)]
    assert piece.marked is None and piece.sentences == ["one two.", "three four."]
    out = join_pieces(items, iter(s.upper() for s in piece.sentences), words_of)
    assert out == "<p>\n  ONE TWO.\n  THREE FOUR.\n</p>"


# ---- trained models: the alignment the engines give ------------------------------------------------------

def tagged_cases(sentences, seed=0):
    """For each sentence of 4+ words, a random phrase of it in <b>."""
    rng = random.Random(seed)
    cases = []
    for sentence in sentences:
        words = sentence.split()
        if len(words) >= 4:
            a = rng.randrange(len(words) - 1)
            cases.append((words, a, rng.randrange(a + 1, min(len(words), a + 4) + 1)))
    return cases


def test_both_engines_align_alike_and_a_tagged_sentence_translates_as_the_plain_one(reversal_models, tmp_path,
                                                                                   monkeypatch):
    """A trained reversal model on fairseq and on CTranslate2 (batches of sentences of several lengths):
    each translation's alignment the same, subword for subword; sentences with a phrase in <b> come back
    with one <b> element each, the same HTML on both engines, and without the tags the plain translation."""
    pytest.importorskip("ctranslate2")
    import shutil

    from fairseq_rope.hub import load_translator
    from fairseq_rope_text.preprocessing import resolve

    root, checkpoints = reversal_models
    (tmp_path / "model").mkdir()
    shutil.copyfile(checkpoints["interleaved"], tmp_path / "model" / "checkpoint_best.pt")
    shutil.copytree(root / "bin", tmp_path / "bin")
    resolve(str(tmp_path / "bin"), "src", "tgt", bpe_codes=str(root / "codes")).write(str(tmp_path / "bin"))
    monkeypatch.setenv("FAIRSEQ_ROPE_CT2_CACHE", str(tmp_path / "ct2"))
    engines = [load_translator(tmp_path / "model", tmp_path / "bin", backend=backend, threads=1)
               for backend in ("fairseq", "ctranslate2")]
    sentences = (root / "raw.src").read_text().splitlines()[:120]
    subwords = [engines[0].subwords(s) for s in sentences]
    fairseq, ct2 = ([nbest[0] for nbest in mt.translate_subwords(subwords, align=True)] for mt in engines)
    assert fairseq == ct2 and len(set(fairseq)) > 60
    assert [t.alignment for t in fairseq] == [t.alignment for t in ct2]
    assert all(len(t.alignment) == len(t.target) and t.source == s for t, s in zip(fairseq, subwords))
    cases = tagged_cases(sentences)
    pages = [f"<p>{' '.join(w[:a])} <b>{' '.join(w[a:b])}</b> {' '.join(w[b:])}</p>" for w, a, b in cases]
    html_fairseq, html_ct2 = (mt.translate_texts(pages, "html")[0] for mt in engines)
    assert html_fairseq == html_ct2
    plain = engines[0].translate_texts([" ".join(w) for w, _, _ in cases])[0]
    for page, out, text in zip(pages, html_fairseq, plain):
        assert out.startswith("<p>") and out.endswith("</p>") and out.count("<b>") == out.count("</b>") == 1, page
        assert " ".join(re.sub(r"</?(b|p)>", " ", out).split()) == text, (page, out)


# ---- subtitles --------------------------------------------------------------------------------------

def translated_file(data, fmt, translations):
    """A subtitle file through read_document, pieces_of and join_pieces with given translations (one per
    sentence, in order) and the alignment each carries."""
    from fairseq_rope_text.files import read_document

    document = read_document(data.encode(), fmt, f"x.{fmt}")
    assert document.markup == fmt
    texts = pieces_of(document.units, fmt, "en")
    left = iter(translations)
    return document.write([join_pieces(items, left, words_of) for items in texts]).decode()


def test_a_cues_tags_land_on_the_aligned_words_and_speaker_and_position_stay_at_its_start():
    vtt = ("WEBVTT\n\n00:01.000 --> 00:04.000\n<v Anna>x y\n<i>z w</i> v.\n\n"
           "00:05.000 --> 00:06.000\n- a <c.yellow>b c</c>.\n- d &amp; e.\n")
    out = translated_file(vtt, "vtt", [
        Translation("V Z W X Y.", ["x", "y", "z", "w", "v."], ["V", "Z", "W", "X", "Y."], [4, 2, 3, 0, 1]),
        Translation("B C A.", ["a", "b", "c."], ["B", "C", "A."], [1, 2, 0]),
        "D & E."])
    assert out == ("WEBVTT\n\n00:01.000 --> 00:04.000\n<v Anna>V <i>Z\nW</i> X Y.\n\n"
                   "00:05.000 --> 00:06.000\n- <c.yellow>B C</c> A.\n- D &amp; E.\n")
    srt = "1\n00:00:01,000 --> 00:00:02,000\n{\\an8}<font color=\"red\">x y</font> & z.\n"
    out = translated_file(srt, "srt", [Translation("Z & X Y.", ["x", "y", "&", "z."], ["Z", "&", "X", "Y."],
                                                   [3, 2, 0, 1])])
    assert out == "1\n00:00:01,000 --> 00:00:02,000\n{\\an8}Z & <font color=\"red\">X Y.</font>\n"


def test_a_cue_line_never_breaks_inside_a_tag():
    from fairseq_rope_text.files import wrap

    assert wrap('<font color="red">aaaa bbbb</font> cccc', [9, 4]) == ['<font color="red">aaaa bbbb</font>', "cccc"]
    assert wrap('<font color="red">aaaa</font> bbbb', [4, 4]) == ['<font color="red">aaaa</font>', "bbbb"]
    assert wrap("<v Joe Smith>aaaa bbbb", [2, 7]) == ["<v Joe Smith>aaaa", "bbbb"]  # (the tag's spaces are nearer)


def test_words_are_found_in_the_text_whatever_their_case_and_letters_that_lower_case_to_two():
    from fairseq_rope_text.markup import word_spans

    text = "Diese große Mutter, İstanbul's MAUS."
    spans = word_spans(["diese", "große", "Mutter", ",", "İstanbul", "'s", "maus", "."], text)
    assert [text[a:b] for a, b in spans] == ["Diese", "große", "Mutter", ",", "İstanbul", "'s", "MAUS", "."]


def test_a_format_pieces_of_does_not_read_is_an_error_naming_it():
    with pytest.raises(ValueError, match="format 'htm' is not one of: text, html, srt, vtt"):
        pieces_of(["<p>x</p>"], "htm", "en")


def test_the_words_that_subwords_make_are_the_pretokenized_words_for_every_subword_type(tmp_path):
    """Preprocessing.words, what projection reads: subword-nmt's pieces joined at their separator (Moses'
    "@-@" back to "-"), sentencepiece's at each "\u2581", no subwords: each a word of its own."""
    from fairseq_rope_text.preprocessing import Preprocessing

    (tmp_path / "codes").write_text("#version: 0.2\n")
    (tmp_path / "spm.model").write_bytes(b"")
    bpe = Preprocessing("en", "de", codes=str(tmp_path / "codes"))
    assert bpe.words(["Re@@", "ad", "the", "e@@", "-@@", "mail", "@-@", "box", "."]) == \
        (["Read", "the", "e-mail", "-", "box", "."], [0, 0, 1, 2, 2, 2, 3, 4, 5])
    spm = Preprocessing("en", "de", pretokenizer="none", subword="sentencepiece",
                        sentencepiece_model=str(tmp_path / "spm.model"))
    assert spm.words(["\u2581Re", "ad", "\u2581the", "\u2581box", "."]) == (["Read", "the", "box."], [0, 0, 1, 2, 2])
    none = Preprocessing("en", "de", pretokenizer="none", subword="none")
    assert none.words(["a", "b@@"]) == (["a", "b@@"], [0, 1])


def test_a_list_marker_before_a_paragraphs_inline_tags_is_kept_and_not_translated():
    """As running text keeps a list item's marker, a paragraph with inline tags keeps "a)" or "1.1." as it is."""
    [items] = pieces_of(["<li>a) The <b>dog</b> runs.</li>"], "html", "en")
    [piece] = [item for item in items if not isinstance(item, str)]
    assert piece.pieces == [("a)", False), ("The dog runs.", True)] and piece.sentences == ["The dog runs."]
    out = join_pieces(items, iter([Translation("Der Hund rennt.", ["The", "dog", "runs."], ["Der", "Hund", "rennt."],
                                               [0, 1, 2])]), words_of)
    assert out == "<li>a) Der <b>Hund</b> rennt.</li>"


# ---- deep and long markup: refused past the limit, otherwise each element in place ---------------------

def nested(depth, tag="b"):
    """The hostile page of the issue: one sentence, its verb inside ``depth`` nested elements."""
    return f"<p>The small dog {f'<{tag}>' * depth}sees{f'</{tag}>' * depth} the red house.</p>"


REVERSED = "house. red the sees dog small The".split()  # nested()'s sentence, its words reversed


def test_elements_nested_past_the_limit_are_refused_naming_it_and_at_the_limit_each_lands_inside_its_parent():
    """pieces_of's nesting_limit (the server's and fairseq-rope-translate's --nesting-limit, 100 by default):
    a page one deeper is a MarkupError naming the limit (check_nesting finds it without splitting sentences;
    a subtitle cue's tags count too); at the limit, and with no limit 20,000 deep (the issue's page), every
    element comes back around the verb's translation, inside the others."""
    assert NESTING_LIMIT == 100
    says = r"inline elements nested deeper than the limit of 100: '<b>' opens inside 100 others, at character 14"
    with pytest.raises(MarkupError, match=says):
        pieces_of([nested(101)], "html", "en", nesting_limit=100)
    with pytest.raises(MarkupError, match=says):
        check_nesting(["<p>x</p>", nested(101)], "html", 100)
    with pytest.raises(MarkupError, match="deeper than the limit of 3: '<i>' opens inside 3 others"):
        check_nesting(["<i>a <i>b <i>c <i>d</i></i></i></i>"], "srt", 3)
    check_nesting([nested(101)], "html", 0)  # (0: no limit)
    check_nesting([nested(100)], "html", 100)
    for depth, limit in ((100, 100), (20000, 0)):
        [items] = pieces_of([nested(depth)], "html", "en", nesting_limit=limit)
        [piece] = [item for item in items if not isinstance(item, str)]
        assert piece.sentences == ["The small dog sees the red house."]
        translation = Translation(" ".join(REVERSED), "The small dog sees the red house.".split(), REVERSED,
                                  [6, 5, 4, 3, 2, 1, 0])
        assert join_pieces(items, iter([translation]), words_of) == \
            f"<p>house. red the {'<b>' * depth}sees{'</b>' * depth} dog small The</p>"


def test_many_elements_across_many_sentences_each_land_on_their_words():
    """A paragraph of 400 sentences, each word in its own element and the whole in one more (cut at every
    sentence end), translated word for word in reverse order: each word's element on its translation."""
    sentences = [[('W' if k == 0 else 'w') + f"{n}x{k}" for k in range(5)] for n in range(400)]
    page = "<p><i>" + " ".join(" ".join(f"<b>{w}</b>" for w in words[:-1]) + f" <b>{words[-1]}</b>."
                               for words in sentences) + "</i></p>"
    [items] = pieces_of([page], "html", "en")
    [piece] = [item for item in items if not isinstance(item, str)]
    assert piece.sentences == [" ".join(words) + "." for words in sentences]
    translations = [Translation(" ".join(words[::-1]) + " .", words[:-1] + [words[-1] + "."], words[::-1] + ["."],
                                [4, 3, 2, 1, 0, 4]) for words in sentences]
    out = join_pieces(items, iter(translations), words_of)
    assert out == "<p>" + " ".join("<i>" + " ".join(f"<b>{w}</b>" for w in words[::-1]) + " .</i>"
                                   for words in sentences) + "</p>"


T6 = [f"T{n}" for n in range(6)]


@pytest.mark.parametrize("page, translations, want", [
    # siblings in their order: <u> (T1..T5) loses T3..T4 to <b>, then T1..T2 to <i> (T0..T2), and nothing is left:
    # its place is after T2 (p's last word), T3 and T4 are b's, and T5 the nearest word no sibling took
    ("<p><b>q</b> <i>p</i> <u>c</u></p>", [(" ".join(T6), ["q", "p", "c"], T6, [1, 2, 1, 0, 0, 2])],
     "<p><i>T0 T1 T2</i> <b>T3 T4</b> <u>T5</u></p>"),
    # the empty <b> inside <i> has <i> as its parent, not the empty <b> before <i> at the same place
    ("<p>x <b></b><i><b></b>y</i></p>", [("Y X", ["x", "y"], ["Y", "X"], [1, 0])], "<p><i>Y</i><b></b> X<b></b></p>"),
    # a <br> at the start of the second sentence, inside a <b> across the two, goes with the first
    ("<p>y.<b><br>The </b>w.</p>",
     [("T0 T1", ["y."], ["T0", "T1"], [0, 0]), ("U0 U1", ["The", "w."], ["U0", "U1"], [1, 0])],
     "<p>T0 T1<br> U0 <b>U1</b></p>"),
    # a void element after the last of the target words its word before aligns to
    ("<p>z<br> y</p>", [("T0 T1 T2", ["z", "y"], ["T0", "T1", "T2"], [0, 1, 0])], "<p>T0 T1 T2<br></p>"),
])
def test_where_the_rules_order_decides(page, translations, want):
    [items] = pieces_of([page], "html", "en")
    assert join_pieces(items, iter(Translation(*t) for t in translations), words_of) == want


def test_a_stray_lt_and_a_quote_never_closed_are_text_and_the_tags_after_them_are_tags():
    """A "<" that opens no tag (its quote never closed, or no ">" after it) is text, the tags after it
    found as before; 20,000 of them in a row (the regex's search read the rest of the text from each, 40
    s for 80 KB) are text too."""
    assert html_parts('<p>x <a "y <b>z</b> w</p>') == [
        (False, "<p>"), (True, 'x <a "y '), (False, "<b>"), (True, "z"), (False, "</b>"), (True, " w"),
        (False, "</p>")]
    assert html_parts("<!-- a <b>c</b>") == [(False, "<!-- a <b>"), (True, "c"), (False, "</b>")]
    for stray in ("<a" * 20000, "<!--" * 20000, "<a '" * 20001):
        assert html_parts("<p>x <b>y</b> " + stray) == [
            (False, "<p>"), (True, "x "), (False, "<b>"), (True, "y"), (False, "</b>"), (True, " " + stray)]


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["<", ">", '"', "'", "a", " ", "<b>", "</b>", "<!--", "-->", "<![CDATA[", "]]>",
                                 "<!", "<?", "</", "<a \"", "x=\"1 > 2\"", "\n"]), max_size=40).map("".join))
def test_tags_are_what_the_tag_regex_finds(text):
    """html_text's linear tag search finds what TAG.search finds, from the same places."""
    assert without_tags(text) == TAG.sub("", text)
