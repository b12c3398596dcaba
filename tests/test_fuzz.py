"""Arbitrary Unicode through the text side (property-based, hypothesis): control and format characters,
combining marks, right-to-left text, emoji, no-break and zero-width spaces, Unicode's line separators,
very long words, lines of punctuation only. A fixed budget of examples per test, derandomized (the same
examples on every run); a failure prints the falsifying example and how to reproduce it."""

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fairseq_rope_text.preprocessing import Preprocessing
from fairseq_rope_text.running_text import join_text, split_text

BUDGET = settings(max_examples=120, deadline=None, derandomize=True, print_blob=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# what the strategies draw from beside any code point: the characters that break text tools
HOSTILE = ["\u00a0", "\u200b", "\u200d", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
           "\u202e", "\u05e9\u05dc\u05d5\u05dd", "\u0301", "e\u0301", "\U0001f600", "\U0001f469\u200d\U0001f52c",
           "\ufeff", "\t", "\r", ".", "...", "?!", "«", "»", "--", "&", "<", "@@", "\x00", "\ud7ff", "ﬁ"]
# any code point but "\n" (which ends a line; surrogates cannot be encoded as UTF-8)
WORD = st.one_of(st.text(st.characters(blacklist_characters="\n", blacklist_categories=["Cs"]), min_size=1, max_size=12),
                 st.sampled_from(HOSTILE), st.just("w" * 10_000))
LINE = st.lists(WORD, min_size=1, max_size=8).map(" ".join)


def texts(line):
    """Running text: lines of ``line``, blank lines, whitespace-only and indented lines."""
    return st.lists(st.one_of(line, st.just(""), st.just("   "), line.map(lambda s: "  " + s)), min_size=1,
                    max_size=8).map("\n".join)


TEXT = texts(LINE)
# for a model: the same without the 10,000-character word (its attention over 10,000 subwords takes
# seconds per example; the word is the preprocessing test's)
SHORT_TEXT = texts(st.lists(WORD.filter(lambda w: len(w) < 100), min_size=1, max_size=8).map(" ".join))
# where a line ends for fairseq and for this project's line files (decode_lines: "\n" only; fairseq's
# text-mode reads also at "\r"); U+2028, form feeds etc. are whitespace inside a line


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """The preprocessings prepare.sh can record: Moses + subword-nmt (codes with merges), Moses alone,
    and text as it is."""
    base = tmp_path_factory.mktemp("fuzz")
    (base / "codes").write_text("#version: 0.2\nt h\ne </w>\nth e</w>\na n\n")
    return [Preprocessing(source_lang="en", target_lang="de", pretokenizer="moses", subword="subword_nmt",
                          codes=str(base / "codes")),
            Preprocessing(source_lang="en", target_lang="de", pretokenizer="moses", subword="none"),
            Preprocessing(source_lang="en", target_lang="de", pretokenizer="none", subword="none")]


@BUDGET
@given(line=LINE)
@example(line="w" * 10_000)
@example(line="... ?! «»")
@example(line="a\u2028b\x85c")
def test_preprocessing_never_raises_and_keeps_one_line(records, line):
    """Every recorded preprocessing encodes any line into subwords that fairseq's dictionary reads as
    tokens (its whitespace split: ids of the dictionary, unknown ones as <unk>) and decodes the model's
    subwords back into one line: no sentence is lost or split."""
    from fairseq.data import Dictionary
    from fairseq.tokenizer import tokenize_line

    dictionary = Dictionary()
    for word in ("the", "a", "w", "."):
        dictionary.add_symbol(word)
    for record in records:
        encoded = record.encode(line, "en")
        assert "\n" not in encoded, (record.describe(), encoded)
        tokens = tokenize_line(encoded)
        assert all(token and not any(c.isspace() for c in token) for token in tokens)
        ids = dictionary.encode_line(encoded, add_if_not_exist=False, append_eos=True)
        assert len(ids) == len(tokens) + 1 and all(0 <= i < len(dictionary) for i in ids.tolist())
        decoded = record.decode(" ".join(tokens), "de")
        assert "\n" not in decoded and "\r" not in decoded, (record.describe(), decoded)


@BUDGET
@given(text=TEXT, keep_line_breaks=st.booleans())
@example(text="  indented\n\n\nw. x.\n   \n", keep_line_breaks=False)
def test_split_and_join_keep_every_blank_line_and_indentation(text, keep_line_breaks):
    """split_text then join_text of the sentences themselves: as many units back as went in, every
    blank (or whitespace) line in its place, each unit's indentation kept, every non-blank line's text
    in a unit; no sentence is empty."""
    layout, sentences = split_text(text, "en", keep_line_breaks)
    assert all(s.strip() for s in sentences)
    units = sum(n for item in layout if isinstance(item, tuple) for n in [item[1]])
    assert units == len(sentences)
    joined = join_text(layout, sentences)
    lines, out = text.split("\n"), joined.split("\n")
    blank_in = [i for i, line in enumerate(lines) if not line.strip()]
    if keep_line_breaks:
        assert len(out) == len(lines)
        assert [i for i, line in enumerate(out) if not line.strip()] == blank_in
        for a, b in zip(lines, out):
            assert b[: len(b) - len(b.lstrip())] == a[: len(a) - len(a.lstrip())]
    else:
        assert [line for line in out if not line.strip()] == [lines[i] for i in blank_in]
    words = lambda s: "".join(s.split())
    assert words(joined) == words(text)  # nothing dropped, nothing added but spaces


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    """An untrained model on a data-bin of words, its record Moses + subword-nmt; outputs of at most 6
    tokens (enough to tell one translation per sentence)."""
    from conftest import untrained_checkpoint
    from fairseq_rope.hub import load_translator

    base = tmp_path_factory.mktemp("fuzz_model")
    words = [f"w{i}" for i in range(40)] + [".", "?", "!", ",", "the", "a"]
    for lang in ("en", "de"):
        (base / f"dict.{lang}.txt").write_text("".join(f"{w} 1\n" for w in words))
    (base / "codes").write_text("#version: 0.2\nt h\n")
    Preprocessing(source_lang="en", target_lang="de", pretokenizer="moses", subword="subword_nmt",
                  codes=str(base / "codes")).write(str(base))
    checkpoint = untrained_checkpoint(base, base / "model" / "checkpoint_best.pt", "en", "de", seed=4)
    torch.manual_seed(0)
    return load_translator(str(checkpoint.parent), str(base), checkpoint_file=checkpoint.name, device="cpu",
                           beam=2, max_len_a=0, max_len_b=6)


@settings(max_examples=20, deadline=None, derandomize=True, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=SHORT_TEXT)
@example(text="w1 w2. w3?\n\n  \u202ew4 w5!\u2028w6")
def test_translate_text_returns_one_translation_per_sentence(translator, monkeypatch, text):
    """translate_text on any text: one non-empty translation per sentence that split_text finds, put
    in its place (the blank lines of the text as they were, in order)."""
    import fairseq_rope_text.running_text as running_text

    joined = []  # what translate_text hands join_text (the module's own function, imported above)
    monkeypatch.setattr(running_text, "join_text", lambda layout, translations, *ending: joined.append(translations)
                        or join_text(layout, translations, *ending))
    layout, sentences = split_text(text, "en")
    out = translator.translate_text(text, batch_size=8)
    translations = joined[-1]
    assert len(translations) == len(sentences) and all(t.strip() for t in translations), translations
    blank = lambda s: [line for line in s.split("\n") if not line.strip()]
    assert blank(out) == blank(text)
    assert out == join_text(layout, translations)
