"""The recipe's text tools through their command lines: cleaning, tokenization round trip,
SGML extraction, the hypothesis/reference count check, the results table and the sample corpus."""

import filecmp
import json
import os
import re
import subprocess
import sys

import pytest
import sacrebleu
from sacremoses import MosesTokenizer

from fairseq_rope_cli.prep import keep_pair
from fairseq_rope_cli.score import compound_split

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(REPO, "recipes", "wmt14_en_de")
SAMPLE = os.path.join(RECIPE, "sample")
BIN = os.path.dirname(sys.executable)


def tool(name, *args, ok=True, cwd=None):
    """Runs an installed command (fairseq-rope-*, next to this interpreter) or a recipe script (*.py)."""
    command = [sys.executable, os.path.join(RECIPE, name)] if name.endswith(".py") else [os.path.join(BIN, name)]
    proc = subprocess.run([*command, *map(str, args)], capture_output=True, text=True, cwd=cwd or REPO)
    if ok:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0, f"expected {name} to fail:\n{proc.stdout}\n{proc.stderr}"
    return proc


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read(path):
    return path.read_text(encoding="utf-8").splitlines()


# ----------------------------------------------------------------------------- cleaning

def test_keep_pair_rules():
    assert keep_pair(["a"], ["b"])
    assert not keep_pair([], ["b"])  # empty side
    assert not keep_pair(["a"] * 251, ["b"] * 251)  # > 250 tokens
    assert keep_pair(["a"] * 250, ["b"] * 250)
    assert keep_pair(["a"] * 3, ["b"] * 2)  # ratio 1.5 is kept
    assert not keep_pair(["a"] * 4, ["b"] * 2)  # ratio 2
    assert not keep_pair(["a"] * 2, ["b"] * 4)  # in both directions
    assert not keep_pair(["a" * 1001], ["b"])  # word longer than 1000 characters
    assert not keep_pair(["a"] * 3, ["b"] * 3, min_len=4)


def test_clean_corpus_cli(tmp_path):
    src = write(tmp_path / "in.en", ["a b c", "", "a  b   c d e f", "  x  y  ", " ".join(["w"] * 300), "one"])
    tgt = write(tmp_path / "in.de", ["A B", "leer", "A B", "X\tY", " ".join(["W"] * 300), "eins"])
    out_en, out_de = tmp_path / "out.en", tmp_path / "out.de"
    proc = tool("fairseq-rope-prep", "clean", "--src", src, "--tgt", tgt, "--out-src", out_en, "--out-tgt", out_de)
    # kept: ratio 1.5, whitespace collapsed; dropped: empty side, ratio 3, 300 tokens
    assert read(out_en) == ["a b c", "x y", "one"]
    assert read(out_de) == ["A B", "X Y", "eins"]
    assert "kept 3 of 6" in proc.stderr
    assert not list(tmp_path.glob("*.tmp"))


def test_clean_corpus_refuses_unequal_line_counts(tmp_path):
    src = write(tmp_path / "in.en", ["a", "b", "c"])
    tgt = write(tmp_path / "in.de", ["a", "b"])
    proc = tool("fairseq-rope-prep", "clean", "--src", src, "--tgt", tgt, "--out-src", tmp_path / "o.en",
                "--out-tgt", tmp_path / "o.de", ok=False)
    assert f"{src} has 3 lines" in proc.stderr and f"{tgt} has 2 lines" in proc.stderr
    assert not (tmp_path / "o.en").exists()


# ----------------------------------------------------------------------------- tokenization

def test_concat_pairs_writes_every_pair_then_joined_groups(tmp_path):
    """fairseq-rope-prep concat-pairs: every pair unchanged, then pairs 1+2, 3+4, ... (consecutive),
    or groups of a seeded permutation (random) joined alike on both sides; the pair left over is
    named on stderr; the same seed gives the same file."""
    src = write(tmp_path / "a.en", [f"s{i} x{i}" for i in range(5)])
    tgt = write(tmp_path / "a.de", [f"t{i}" for i in range(5)])
    out_src, out_tgt = tmp_path / "b.en", tmp_path / "b.de"
    proc = tool("fairseq-rope-prep", "concat-pairs", "--src", src, "--tgt", tgt, "--out-src", out_src,
                "--out-tgt", out_tgt, "-k", 2)
    assert read(out_src) == [*read(src), "s0 x0 s1 x1", "s2 x2 s3 x3"]
    assert read(out_tgt) == [*read(tgt), "t0 t1", "t2 t3"]
    assert "5 pairs + 2 concatenations of 2" in proc.stderr and "last 1 pair(s)" in proc.stderr and not proc.stdout
    tool("fairseq-rope-prep", "concat-pairs", "--src", src, "--tgt", tgt, "--out-src", out_src, "--out-tgt", out_tgt,
         "-k", 2, "--order", "random", "--seed", 7)
    joined_src, joined_tgt = read(out_src)[5:], read(out_tgt)[5:]
    assert read(out_src)[:5] == read(src) and len(joined_src) == len(joined_tgt) == 2
    groups = [[int(w[1:]) for w in line.split() if w.startswith("s")] for line in joined_src]
    assert [[int(w[1:]) for w in line.split()] for line in joined_tgt] == groups  # the same pairs on both sides
    assert len({i for g in groups for i in g}) == 4 and groups != [[0, 1], [2, 3]]  # disjoint, permuted
    first = read(out_src)
    tool("fairseq-rope-prep", "concat-pairs", "--src", src, "--tgt", tgt, "--out-src", out_src, "--out-tgt", out_tgt,
         "-k", 2, "--order", "random", "--seed", 7)
    assert read(out_src) == first
    for args, message in ((("-k", 1), "-k must be >= 2"), (("-k", 2, "--tgt", write(tmp_path / "c.de", ["t"])),
                                                            "parallel files differ in length")):
        flags = ["--src", src, "--tgt", tgt, "--out-src", out_src, "--out-tgt", out_tgt, *args]
        proc = tool("fairseq-rope-prep", "concat-pairs", *flags, ok=False)
        assert proc.returncode == 1 and proc.stderr.startswith("fairseq-rope-prep: error: ") and message in proc.stderr


def test_tokenize_detokenize_round_trip(tmp_path):
    """The detokenizer inverts the tokenizer on the sample test set and on news-like German."""
    news = [
        "Der E-Mail-Verkehr kostet 3,50 Euro pro Monat, sagte die 45-jährige Sprecherin.",
        "\"Wir sind bereit\", erklärte er am Dienstag (Ortszeit) in New York.",
        "Das Ergebnis: 10-15 Prozent weniger CO2 - und das bis 2020!",
    ]
    raw = write(tmp_path / "raw.de", news + read_sample("test.de")[:200])
    tok, detok = tmp_path / "tok.de", tmp_path / "detok.de"
    tool("fairseq-rope-prep", "tokenize", "--lang", "de", "-i", raw, "-o", tok, "--workers", 2)
    tokens = read(tok)
    assert tokens[0].startswith("Der E @-@ Mail @-@ Verkehr kostet 3,50 Euro pro Monat ,")
    assert "&quot;" not in tokens[1] and tokens[1].startswith('" Wir sind bereit " ,')  # escape=False
    tool("fairseq-rope-prep", "detokenize", "--lang", "de", "-i", tok, "-o", detok)
    assert read(detok) == read(raw)


def test_several_files_in_one_call_are_each_what_a_call_of_its_own_writes(tmp_path):
    """tokenize and subwords (the code detokenize shares) with -i A B C -o X Y Z (what prepare.sh runs per
    language), two workers: each
    output is the file a call with that input alone writes, empty lines included, and each is named in a
    line; an -o count other than the -i count, an output named twice or an output that is an input are named
    before anything is written."""
    from fairseq_rope_text.preprocessing import Preprocessing

    texts = {"a": ["The dog's E-mail costs 3.50 euros, he said.", "", "\"Ready\", she said (today)."],
             "b": read_sample("test.en")[:40], "c": ["", "A single line-break test - and more."]}
    inputs = [write(tmp_path / f"{name}.en", lines) for name, lines in texts.items()]
    (tmp_path / "codes").write_text("#version: 0.2\nt h\nth e</w>\n")
    Preprocessing(source_lang="en", target_lang="de", pretokenizer="moses", subword="subword_nmt",
                  codes=str(tmp_path / "codes")).write(str(tmp_path))
    for mode, extra in (("tokenize", ["--lang", "en"]), ("subwords", ["--lang", "en", "--record", tmp_path])):
        alone = []
        for path in inputs:
            tool("fairseq-rope-prep", mode, *extra, "-i", path, "-o", tmp_path / f"{path.name}.{mode}.alone")
            alone.append(read(tmp_path / f"{path.name}.{mode}.alone"))
        outputs = [tmp_path / f"{path.name}.{mode}.together" for path in inputs]
        proc = tool("fairseq-rope-prep", mode, *extra, "-i", *inputs, "-o", *outputs, "--workers", 2)
        assert [read(path) for path in outputs] == alone
        for path, out, lines in zip(inputs, outputs, texts.values()):
            assert f"{path} -> {out}: {len(lines)} lines" in proc.stderr
        if mode == "tokenize":
            assert f"{inputs[0]} -> {outputs[0]}: 3 lines (1 empty, kept so that lines stay aligned: line 2)" \
                in proc.stderr
    fresh = tmp_path / "fresh.out"
    for args, message in ((["-i", *inputs, "-o", fresh], "-o needs a file for each of the 3 -i files, got 1"),
                          (["-i", inputs[0], inputs[1], "-o", fresh, fresh], f"-o names {fresh} twice"),
                          (["-i", inputs[0], inputs[1], "-o", fresh, inputs[0]], f"-o must differ from -i ({inputs[0]})")):
        proc = tool("fairseq-rope-prep", "tokenize", "--lang", "en", *args, ok=False)
        assert proc.returncode == 1 and message in proc.stderr and not fresh.exists(), proc.stderr


def read_sample(name):
    with open(os.path.join(SAMPLE, name), encoding="utf-8") as f:
        return f.read().splitlines()


def test_compound_split_as_perl():
    assert compound_split("E @-@ Mail") == "E @ ##AT##-##AT## @ Mail"
    assert compound_split("state-of-the-art") == "state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art"
    assert compound_split("a-b-c - d") == "a ##AT##-##AT## b-c - d"  # /g matches do not overlap


# ----------------------------------------------------------------------------- SGML

def test_sgm_extraction_matches_sacrebleu(tmp_path):
    from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

    sgm = tmp_path / "newstest.sgm"
    sgm.write_text(
        '<srcset setid="newstest2014" srclang="any">\n<doc sysid="ref" docid="1" genre="news" origlang="de">\n'
        "<p>\n<seg id=\"1\">  Gutach:  Noch mehr Sicherheit für Fußgänger </seg>\n"
        '<seg id="2">Sie stehen keine 100 Meter voneinander entfernt &amp; so.</seg>\n'
        "</p>\n</doc>\n</srcset>\n", encoding="utf-8")
    ours, theirs = tmp_path / "ours.txt", tmp_path / "theirs.txt"
    tool("fairseq-rope-prep", "sgm", sgm, ours)
    FakeSGMLDataset._convert_format(FakeSGMLDataset.__new__(FakeSGMLDataset), str(sgm), str(theirs))
    assert read(ours) == read(theirs) == ["Gutach: Noch mehr Sicherheit für Fußgänger",
                                          "Sie stehen keine 100 Meter voneinander entfernt &amp; so."]


# ----------------------------------------------------------------------------- scoring

GENERATE_OUTPUT = """S-1\tthe dog sleeps .
T-1\tder Hund schläft .
H-1\t-0.2\tder Hund schläft .
D-1\t-0.2\tder Hund schläft .
S-0\ta man @-@ made car .
H-0\t-0.3\tein Auto , das von Menschen @-@ gemacht ist .
S-2\tI see .
H-2\t-0.1\tich sehe .
"""


def test_score_translations_sorts_and_scores(tmp_path):
    gen = tmp_path / "gen.out"
    gen.write_text(GENERATE_OUTPUT, encoding="utf-8")
    ref = write(tmp_path / "ref.de", ["Ein Auto, das von Menschen-gemacht ist.", "Der Hund schläft.", "Ich sehe."])
    out = tmp_path / "eval"
    proc = tool("fairseq-rope-score", "--generate-output", gen, "--ref", ref, "--lang", "de", "--out-dir", out,
                "--arch", "transformer", "--checkpoint", "avg.pt", "--test-set", "toy")
    assert read(out / "hyps.tok.de") == ["ein Auto , das von Menschen @-@ gemacht ist .", "der Hund schläft .",
                                         "ich sehe ."]
    assert read(out / "hyps.detok.de") == ["ein Auto, das von Menschen-gemacht ist.", "der Hund schläft.",
                                           "ich sehe."]
    result = json.loads((out / "result.json").read_text())
    assert result["n_sentences"] == 3 and result["arch"] == "transformer" and result["test_set"] == "toy"
    assert result["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    # sacreBLEU of the detokenized hypotheses against the raw references; the paper's BLEU on Moses-tokenized
    # (-a, no escaping), compound-split text, whitespace tokens: both recomputed here from their definitions
    refs = read(ref)
    assert result["sacrebleu"] == round(sacrebleu.corpus_bleu(read(out / "hyps.detok.de"), [refs]).score, 2)
    moses = MosesTokenizer(lang="de")
    split = lambda line: re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", line)  # noqa: E731
    refs_tok = [split(moses.tokenize(r, aggressive_dash_splits=True, escape=False, return_str=True)) for r in refs]
    hyps_tok = [split(h) for h in read(out / "hyps.tok.de")]
    assert "##AT##-##AT##" in refs_tok[0] and "##AT##-##AT##" in hyps_tok[0]
    expected = sacrebleu.corpus_bleu(hyps_tok, [refs_tok], tokenize="none", force=True).score
    assert result["tokenized_bleu"] == round(expected, 2) and 0 < expected < 100  # lowercase first words
    assert result["tokenized_bleu"] != result["sacrebleu"]
    assert "signature: nrefs:1" in proc.stderr and "test set: toy" in proc.stderr  # progress and results: stderr, JSON
    assert "tokenized, compound-split BLEU (fairseq's convention)" in proc.stderr and proc.stdout == ""


def test_score_with_tokenization_none_scores_the_text_as_it_is(tmp_path):
    """--tokenization none (prepare.sh's PRETOKENIZER=none): no Moses detokenization of the hypotheses and
    no Moses tokenization of the references; the result records it."""
    gen = tmp_path / "gen.out"
    gen.write_text(GENERATE_OUTPUT, encoding="utf-8")
    refs = ["ein Auto , das von Menschen @-@ gemacht ist .", "der Hund schläft .", "Ich sehe ."]
    ref = write(tmp_path / "ref.de", refs)
    out = tmp_path / "eval"
    tool("fairseq-rope-score", "--generate-output", gen, "--ref", ref, "--lang", "de", "--out-dir", out,
         "--tokenization", "none")
    hyps = ["ein Auto , das von Menschen @-@ gemacht ist .", "der Hund schläft .", "ich sehe ."]
    assert read(out / "hyps.detok.de") == read(out / "hyps.tok.de") == hyps
    result = json.loads((out / "result.json").read_text())
    assert result["tokenization"] == "none"
    assert result["sacrebleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    split = lambda line: re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", line)  # noqa: E731
    expected = sacrebleu.corpus_bleu([split(h) for h in hyps], [[split(r) for r in refs]], tokenize="none", force=True)
    assert result["tokenized_bleu"] == round(expected.score, 2)


def test_reference_scores_give_the_test_nll_as_fairseqs_nll_loss_and_a_missing_sentence_is_named(tmp_path):
    """--reference-scores (fairseq-generate --score-reference's output): test_nll is minus the sum of every
    token's log2 probability over the test set divided by the number of tokens (a token-weighted mean, not the
    mean of the sentences' means); a file missing a sentence is refused naming it and the reference."""
    gen = tmp_path / "gen.out"
    gen.write_text(GENERATE_OUTPUT, encoding="utf-8")
    ref = write(tmp_path / "ref.de", ["Ein Auto, das von Menschen-gemacht ist.", "Der Hund schläft.", "Ich sehe."])
    scored = tmp_path / "scored.out"
    log2p = {0: [-0.5, -1.25, -2.0, -0.25], 1: [-3.0], 2: [-0.125, -0.875]}
    scored.write_text("".join(f"S-{i}\tx\nH-{i}\t{sum(v) / len(v)}\tx\nP-{i}\t{' '.join(map(str, v))}\n"
                              for i, v in sorted(log2p.items(), reverse=True)), encoding="utf-8")
    out = tmp_path / "eval"
    tool("fairseq-rope-score", "--generate-output", gen, "--ref", ref, "--lang", "de", "--out-dir", out,
         "--reference-scores", scored)
    result = json.loads((out / "result.json").read_text())
    assert result["test_nll"] == pytest.approx(8.0 / 7, abs=1e-12)  # 8 bits over 7 tokens (the mean of the sentences: 1.5)
    assert result["test_nll_tokens"] == 7 and result["reference_scores"] == str(scored)
    scored.write_text("P-0\t-1.0\nP-2\t-1.0\n", encoding="utf-8")
    proc = tool("fairseq-rope-score", "--generate-output", gen, "--ref", ref, "--lang", "de", "--out-dir", out,
                "--reference-scores", scored, ok=False)
    assert f"{scored} scores 2 sentences" in proc.stderr and f"{ref} has 3 lines" in proc.stderr


@pytest.mark.parametrize("n_ref", [2, 4])
def test_score_translations_refuses_count_mismatch(tmp_path, n_ref):
    gen = tmp_path / "gen.out"
    gen.write_text(GENERATE_OUTPUT, encoding="utf-8")
    ref = write(tmp_path / "ref.de", ["x"] * n_ref)
    proc = tool("fairseq-rope-score", "--generate-output", gen, "--ref", ref, "--lang", "de",
                "--out-dir", tmp_path / "eval", ok=False)
    assert f"3 hypotheses in {gen}" in proc.stderr and f"{n_ref} reference lines in {ref}" in proc.stderr
    assert not (tmp_path / "eval" / "result.json").exists()


def test_results_table(tmp_path):
    paths = []
    for name, tok, sacre in (("rope", 27.5, 26.6), ("base", 27.3, 26.4)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(dict(run_name=name, arch=name + "_arch", tokenized_bleu=tok, sacrebleu=sacre,
                                     n_sentences=3003, checkpoint="avg.pt", sacrebleu_signature="sig",
                                     test_set="newstest2014")))
        paths.append(p)
    proc = tool("fairseq-rope-results", *paths, "--output", tmp_path / "t.md")
    lines = proc.stdout.splitlines()
    assert lines[2] == "| rope | rope_arch | 27.50 | 26.60 | 3003 | avg.pt |"
    assert lines[3] == "| base | base_arch | 27.30 | 26.40 | 3003 | avg.pt |"
    assert "sacreBLEU signature: `sig`; test set: newstest2014" in proc.stdout
    assert (tmp_path / "t.md").read_text() == proc.stdout
    proc = tool("fairseq-rope-results", tmp_path / "missing.json", ok=False)
    assert "missing.json" in proc.stderr


# ----------------------------------------------------------------------------- sample corpus

def test_committed_sample_equals_generator_output(tmp_path):
    tool("make_sample_corpus.py", "--out-dir", tmp_path)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            name = f"{split}.{lang}"
            assert filecmp.cmp(tmp_path / name, os.path.join(SAMPLE, name), shallow=False), \
                f"{SAMPLE}/{name} differs from recipes/wmt14_en_de/make_sample_corpus.py output: regenerate and commit it"


def test_sample_corpus_shape():
    en, de = read_sample("train.en"), read_sample("train.de")
    assert len(en) == len(de)
    lengths = [len(line.split()) for line in en]
    assert min(lengths) <= 3 and max(lengths) >= 40
    assert len(set(en)) == len(en)  # no duplicates
    held_out = set(read_sample("test.en")) | set(read_sample("valid.en"))
    assert not held_out & set(en)
    # German agreement the grammar must get right, spot-checked on whole sentences
    pairs = dict(zip(en, de))
    assert all(line[-1] in ".?" for line in de)
    assert any(" dem " in d or " im " in d for d in de) and any(", weil " in d for d in de)
    assert len(pairs) == len(en)
