"""Documents: data with context, translation in context, the contrastive pronoun test, d-BLEU.

One document-level model is trained once, through the recipe (sample_documents.sh on a small
generated corpus, context 2), and the tests check what a user relies on with it: the recipe's
table, translation in context equal to translating one sentence at a time with the same forced
context, the pronoun test's scores equal to log-probabilities computed by hand.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import BIN, run_tool
from test_recipes import RECIPE, forked_commands, lines, recipe_env, step

from fairseq_rope_text.documents import (SEPARATOR, DocumentError, contrastive_accuracy, document_spans, in_context,
                                        read_documents)

CONTEXT = 2
MODEL = ("--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 64 --decoder-embed-dim 64 --encoder-ffn-embed-dim 256 "
         "--decoder-ffn-embed-dim 256 --encoder-attention-heads 4 --decoder-attention-heads 4")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """sample_documents.sh for RoPE with context 2 and sentence-level (K = 0, the row every document study
    has) on 200 generated documents: small models, 250 updates."""
    work = tmp_path_factory.mktemp("documents")
    env = recipe_env(work, CONTEXTS=f"0 {CONTEXT}", ARCHS="rope_transformer", TRAIN_DOCUMENTS=200, VALID_DOCUMENTS=8,
                     TEST_DOCUMENTS=16, BPE_MERGES=300, MODEL_ARGS=MODEL, MAX_UPDATE=250, LR=5e-3, WARMUP_UPDATES=50,
                     DROPOUT=0, TOKENS_PER_UPDATE=1000, MAX_TOKENS_PER_GPU=1000, SAVE_INTERVAL_UPDATES=20, LOG_INTERVAL=100)
    proc = step("sample_documents.sh", forked_commands(env), timeout=900)
    name = f"rope_transformer_k{CONTEXT}"
    base = work / f"context{CONTEXT}"
    return dict(work=work, raw=work / "raw", proc=proc, data_bin=base / "data-bin", eval=base / "eval" / name,
                checkpoint=base / "checkpoints" / name / "checkpoint_avg_last5.pt")


@pytest.fixture(scope="module")
def translator(run):
    from fairseq_rope.hub import load_translator

    hub = load_translator(str(run["checkpoint"].parent), str(run["data_bin"]), checkpoint_file=run["checkpoint"].name,
                          bpe_codes=str(run["data_bin"] / "codes"), device="cpu")
    hub.check_context(CONTEXT)
    return hub


def documents_of(raw, split="test"):
    sentences, docids = lines(raw / f"{split}.en"), lines(raw / f"{split}.docids")
    return [sentences[a:b] for a, b in document_spans(docids)]


# --------------------------------------------------------------------------- the recipe

def test_recipe_prints_pronoun_accuracy_by_distance_beside_bleu(run):
    terminal = (run["proc"].stdout + run["proc"].stderr).splitlines()
    assert len(terminal) <= 80 and max(map(len, terminal)) <= 300, "\n".join(terminal)
    table = (run["work"] / "sample_documents.md").read_text()
    head = table.splitlines()[0]
    for column in ("sacreBLEU", "chrF", "d-BLEU", "s / document", "pronouns right, % (distance 0/1/2/3)"):
        assert column in head, head
    assert table in run["proc"].stdout
    result = json.loads((run["eval"] / "result.json").read_text())
    entries = json.loads((run["raw"] / "pronouns.json").read_text())
    assert result["contrastive"]["total"]["total"] == len(entries) > 0
    assert sorted(result["contrastive"]["by_distance"]) == ["0", "1", "2", "3"]
    assert result["n_documents"] == 16 and result["context"] == CONTEXT and result["seconds_per_document"] > 0
    # one translation per source line, in order; the model is trained: it translates most of the sentences
    sources = lines(run["raw"] / "test.en")
    hyps = lines(run["eval"] / "hyps.documents.de")
    assert len(hyps) == len(sources) and hyps == lines(result["hyps_detok"])
    assert result["sacrebleu"] > 30 and len(set(hyps)) > len(hyps) / 2, hyps[:10]
    # what the model was trained on: every sentence with up to 2 previous sentences of its document
    train = lines(run["work"] / f"context{CONTEXT}" / "prep" / "bpe" / f"train.context{CONTEXT}.en")
    assert len(train) == len(lines(run["raw"] / "train.en"))
    assert max(line.count(f" {SEPARATOR} ") for line in train) == CONTEXT


def test_the_sentence_level_run_is_translated_and_scored_as_the_default_translator_does(run):
    """The recipe's K = 0 run went through fairseq-rope-doc-translate and fairseq-rope-contrastive (which ask
    for fairseq) with ctranslate2 installed: its translations are what load_translator's default (CTranslate2
    here) gives the test documents, and its pronoun-test scores are that translator's score() of the same
    lines, within float32 rounding."""
    from fairseq_rope.hub import load_translator

    base = run["work"] / "context0"
    checkpoint = base / "checkpoints" / "rope_transformer_k0" / "checkpoint_avg_last5.pt"
    mt = load_translator(checkpoint.parent, base / "data-bin", checkpoint_file=checkpoint.name, device="cpu")
    assert mt.engine == "ctranslate2" and mt.preprocessing.context == 0
    evaluated = base / "eval" / "rope_transformer_k0"
    hyps = lines(evaluated / "hyps.documents.de")
    assert hyps == [t for doc in mt.translate_documents(documents_of(run["raw"])) for t in doc]
    text = {lang: lines(run["raw"] / f"pronouns.text.{lang}") for lang in ("en", "de")}
    scores = [-float(x) for x in lines(evaluated / "contrastive.scores")]
    assert len(scores) == len(text["en"]) > 0
    assert scores == pytest.approx(mt.score(text["en"], text["de"]), rel=1e-5, abs=1e-4)
    result = json.loads((evaluated / "result.json").read_text())
    assert result["context"] == 0 and result["contrastive"]["total"]["total"] > 0


# --------------------------------------------------------------------------- translation in context

def test_translation_in_context_equals_one_sentence_at_a_time_with_the_same_forced_context(translator, run):
    """translate_documents translates the i-th sentences of all documents together; each equals
    the sentence translated alone, its source the subwords of its previous sentences and itself
    joined by the separator (as prepare.sh wrote the training data) and its target forced to begin
    with the model's own previous translations."""
    hub, documents = translator, documents_of(run["raw"])[:6]
    batched = translator.translate_documents_ids(documents, batch_size=16)
    src_dict, tgt_dict = hub.task.source_dictionary, hub.task.target_dictionary
    sep = tgt_dict.index(SEPARATOR)
    for doc, outputs in zip(documents, batched):
        pieces = [hub.preprocessing.encode(s, "en") for s in doc]
        previous = []
        for i, (ids, score) in enumerate(outputs):
            source = src_dict.encode_line(f" {SEPARATOR} ".join(pieces[max(0, i - CONTEXT):i + 1]),
                                          add_if_not_exist=False).long().tolist()
            prefix = []
            for out in previous[-CONTEXT:]:
                prefix += out + [sep]
            [(alone, alone_score)] = translator.translate_batch([(source, prefix)])
            assert alone == ids and alone_score == pytest.approx(score, abs=1e-5)
            previous.append(alone)
    # the documents' sentences got different translations (a trained model)
    assert len({tuple(ids) for doc in batched for ids, _ in doc}) > 10
    # the Python API and the command translate alike (the recipe's output of the same model)
    api = hub.translate_documents(documents, context=CONTEXT)
    flat = [t for doc in api for t in doc]
    assert flat == lines(run["eval"] / "hyps.documents.de")[:len(flat)]


def test_a_forced_prefix_leaves_the_beam_its_distinct_hypotheses(translator, run):
    """All hypotheses begin with the forced context, and the beam holds distinct continuations
    of it (not copies of one), as after a first step."""
    doc = documents_of(run["raw"])[0]
    outputs = translator.translate_documents_ids([doc[:3]])[0]
    source = translator._source([translator.source_ids(s) for s in doc[:2]], translator.source_ids(doc[2]), "test")
    prefix = translator._prefix([ids for ids, _ in outputs[:2]])
    generator = translator._generator(4, 0.6, 200, [len(prefix)])
    with torch.no_grad():
        hypos = generator.generate(translator.models, translator._collate([source]),
                                   prefix_tokens=torch.tensor([prefix]))[0]
    nbest = [tuple(h["tokens"].tolist()) for h in hypos]
    assert len(prefix) > 4 and all(h[:len(prefix)] == tuple(prefix) for h in nbest)
    assert len(set(nbest)) == 4, nbest
    assert list(nbest[0][len(prefix):-1]) == outputs[2][0]


def test_sentences_in_context_of_their_own_document_only():
    assert in_context(["a", "b", "c", "d", "e"], document_spans(["x", "x", "x", "y", "y"]), 1) == \
        ["a", f"a {SEPARATOR} b", f"b {SEPARATOR} c", "d", f"d {SEPARATOR} e"]
    assert in_context(["a", "b", "c"], document_spans(["x", "x", "x"]), 5) == ["a", f"a {SEPARATOR} b", f"a {SEPARATOR} b {SEPARATOR} c"]
    assert in_context(["a", "b"], document_spans(["x", "y"]), 0) == ["a", "b"]


# --------------------------------------------------------------------------- the pronoun test

def test_contrastive_accuracy_is_contrapros_rule():
    """Right when the reference scores strictly above every variant; by distance (>3 pooled) and pronoun."""
    entries = [
        {"src pronoun": "it", "ref pronoun": "er", "ante distance": 0, "errors": [{}, {}]},
        {"src pronoun": "it", "ref pronoun": "sie", "ante distance": 1, "errors": [{}, {}]},
        {"src pronoun": "It", "ref pronoun": "Sie", "ante distance": 5, "errors": [{}]},
        {"src pronoun": "it", "ref pronoun": "es", "ante distance": 1, "errors": [{}, {}]},
    ]
    scores = [-1.0, -2.0, -3.0,   # right
              -2.0, -1.5, -3.0,   # wrong: a variant scores higher
              -4.0, -5.0,         # right
              -1.0, -1.0, -2.0]   # wrong: a tie is not a win
    result = contrastive_accuracy(entries, scores)
    assert result["total"] == {"correct": 2, "total": 4, "accuracy": 0.5}
    assert result["by_distance"]["0"]["correct"] == 1 and result["by_distance"][">3"]["correct"] == 1
    assert result["by_distance"]["1"] == {"correct": 0, "total": 2, "accuracy": 0.0}
    assert result["by_pronoun"]["it:sie"] == {"correct": 1, "total": 2, "accuracy": 0.5}
    with pytest.raises(ValueError, match="10 scores for 4 entries with 11 translations"):
        contrastive_accuracy(entries, scores[:-1])


def test_contrastive_scores_are_the_log_probabilities_of_the_sentence_in_context(run, translator, tmp_path):
    """fairseq-rope-contrastive on two entries of the generated test, against the model's
    log-probabilities computed by hand: the source and target with their last 2 context sentences
    joined by the separator, one forward pass, the current sentence's tokens and EOS summed."""
    raw = run["raw"]
    entries = json.loads((raw / "pronouns.json").read_text())[:2]
    n = sum(1 + len(e["errors"]) for e in entries)
    (tmp_path / "two.json").write_text(json.dumps(entries))
    for part in ("text", "context"):
        for lang in ("en", "de"):
            keep = lines(raw / f"pronouns.{part}.{lang}")[:n * (3 if part == "context" else 1)]
            (tmp_path / f"two.{part}.{lang}").write_text("".join(line + "\n" for line in keep))
    proc = run_tool("fairseq-rope-contrastive", "--checkpoint", run["checkpoint"], "--data-bin", run["data_bin"],
                    "--bpe-codes", run["data_bin"] / "codes", "--context", CONTEXT, "--json", tmp_path / "two.json",
                    "--text", tmp_path / "two.text", "--context-text", tmp_path / "two.context", "--context-lines", 3,
                    "--scores", tmp_path / "scores", "--device", "cpu", timeout=300)
    scores = [-float(s) for s in lines(tmp_path / "scores")]
    hub = translator
    model = hub.models[0]  # in eval mode: fairseq's hub made it fast for generation
    src_dict, tgt_dict = hub.task.source_dictionary, hub.task.target_dictionary
    text = {lang: lines(tmp_path / f"two.text.{lang}") for lang in ("en", "de")}
    context = {lang: lines(tmp_path / f"two.context.{lang}") for lang in ("en", "de")}
    by_hand = []
    for i in range(n):
        pieces = {lang: [hub.preprocessing.encode(s, lang) for s in context[lang][3 * i:3 * i + 3][-CONTEXT:] if s]
                  + [hub.preprocessing.encode(text[lang][i], lang)] for lang in text}
        src = src_dict.encode_line(f" {SEPARATOR} ".join(pieces["en"]), add_if_not_exist=False).long()
        tgt = tgt_dict.encode_line(f" {SEPARATOR} ".join(pieces["de"]), add_if_not_exist=False).long()
        current = len(tgt_dict.encode_line(pieces["de"][-1], add_if_not_exist=False))  # its tokens and EOS
        previous = torch.cat([tgt.new_tensor([tgt_dict.eos()]), tgt[:-1]])
        with torch.no_grad():
            logits, _ = model(src[None], torch.tensor([len(src)]), previous[None])
        lprobs = torch.log_softmax(logits.float(), dim=-1)[0].gather(-1, tgt[:, None])[:, 0]
        by_hand.append(lprobs[-current:].sum().item())
    assert scores == pytest.approx(by_hand, abs=1e-4)
    assert len(set(round(s, 3) for s in scores)) == n  # the variants score differently
    right = [all(scores[a] > v for v in scores[a + 1:a + 3]) for a in (0, 3)]
    assert re.search(rf"^  all +{sum(right)} / 2 ", proc.stderr, re.M), proc.stderr


# --------------------------------------------------------------------------- bad input

def test_document_ids_that_do_not_fit_their_text_are_named(tmp_path):
    (tmp_path / "a.docids").write_text("d1\nd1\nd2\n")
    with pytest.raises(DocumentError, match=r"a.docids has 3 document ids, but a.en has 4 lines"):
        read_documents(str(tmp_path / "a.docids"), 4, "a.en")
    with pytest.raises(DocumentError, match=r"document id 'd1' at line 4 appeared before"):
        document_spans(["d1", "d1", "d2", "d1"], "b.docids")
    for name, text in (("src", "a\nb\nc\nd\n"), ("tgt", "A\nB\nC\nD\n"), ("ids", "x\ny\nx\nx\n")):
        (tmp_path / name).write_text(text)
    proc = subprocess.run([os.path.join(BIN, "fairseq-rope-prep"), "context", "--src", str(tmp_path / "src"),
                           "--tgt", str(tmp_path / "tgt"), "--docids", str(tmp_path / "ids"), "-k", "1",
                           "--out-src", str(tmp_path / "o.src"), "--out-tgt", str(tmp_path / "o.tgt")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and f"{tmp_path / 'ids'}: document id 'x' at line 3 appeared before" in proc.stderr
    assert not (tmp_path / "o.src").exists()


def test_sgm_document_ids_are_kept(tmp_path):
    sgm = tmp_path / "test.sgm"
    sgm.write_text('<refset setid="x">\n<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">\n'
                   '<p>\n<seg id="1">One.</seg>\n<seg id="2">Two.</seg>\n</p>\n</doc>\n'
                   '<doc sysid="ref" docid="77-dw" genre="news" origlang="de">\n<seg id="1">Three.</seg>\n</doc>\n')
    subprocess.run([os.path.join(BIN, "fairseq-rope-prep"), "sgm", str(sgm), str(tmp_path / "out.txt"),
                    "--docids", str(tmp_path / "out.docids")], check=True, capture_output=True)
    assert lines(tmp_path / "out.txt") == ["One.", "Two.", "Three."]
    assert lines(tmp_path / "out.docids") == ["1012-bbc", "1012-bbc", "77-dw"]


def test_prepare_with_context_names_missing_or_misfit_document_ids(tmp_path):
    raw = tmp_path / "raw"
    subprocess.run([sys.executable, os.path.join(RECIPE, "make_sample_documents.py"), "--out-dir", str(raw),
                    "--train-documents", "5", "--valid-documents", "1", "--test-documents", "1"],
                   check=True, capture_output=True)
    env = recipe_env(tmp_path / "work", RAW_DIR=raw, CONTEXT=2)
    os.remove(raw / "valid.docids")
    proc = step("prepare.sh", env, ok=False)
    assert f"CONTEXT=2 needs document ids: {raw}/valid.docids not found" in proc.stderr
    (raw / "valid.docids").write_text("v1\n")
    proc = step("prepare.sh", env, ok=False)
    assert f"{raw}/valid.docids has 1 lines, {raw}/valid.en has {len(lines(raw / 'valid.en'))}" in proc.stderr
    proc = step("prepare.sh", dict(env, CONCAT_PAIRS="2"), ok=False)
    assert "CONTEXT=2 and CONCAT_PAIRS=2: choose one" in proc.stderr


def test_a_context_beyond_a_position_table_is_refused_and_relative_encodings_take_any(run, translator, dict_dir):
    """fairseq's transformer (a table of 16 positions here) refuses a source that its context makes
    longer, naming the sentence and the length; RoPE has no table: a whole document as context runs."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from conftest import TINY, USER_DIR
    from fairseq_rope.hub import Translator, load_translator
    from fairseq_rope_text.preprocessing import Preprocessing

    args = options.parse_args_and_arch(options.get_training_parser(), [
        dict_dir, "--arch", "transformer", "--source-lang", "src", "--target-lang", "tgt", "--user-dir", USER_DIR,
        *TINY, "--max-source-positions", "16", "--max-target-positions", "16"])
    task = tasks.setup_task(args)
    words = Preprocessing(source_lang="src", target_lang="tgt", pretokenizer="none", subword="none")
    table = Translator(convert_namespace_to_omegaconf(args), task, [task.build_model(args)], words)
    with pytest.raises(DocumentError, match=r"document 1, sentence 1: the source with its context is 17 tokens, "
                                            r"more than the model's 16 positions"):
        table.translate_documents_ids([["w1 " * 16]])
    doc = max(documents_of(run["raw"]), key=len)
    whole_document = dataclasses.replace(translator.preprocessing, context=50)  # the model read 2; any length runs
    hub = load_translator(str(run["checkpoint"].parent), str(run["data_bin"]), checkpoint_file=run["checkpoint"].name,
                          device="cpu", preprocessing=whole_document)
    whole = hub.translate_documents_ids([doc])[0]
    assert len(whole) == len(doc) and all(ids for ids, _ in whole)
    proc = run_tool("fairseq-rope-doc-translate", "--checkpoint", run["checkpoint"], "--data-bin", run["data_bin"],
                    "--input", run["raw"] / "test.en", check=False)
    assert proc.returncode == 1 and "the model takes 2 sentences of context" in proc.stderr, proc.stderr
    assert "give --docids" in proc.stderr


def test_document_bleu_is_sacrebleu_over_joined_documents(tmp_path):
    import sacrebleu

    refs = ["Das ist gut.", "Er war alt.", "Sie lachte.", "Es regnet heute."]
    hyps = ["Das ist gut .", "Sie war alt .", "Sie lachte .", "Es regnet ."]
    (tmp_path / "ref").write_text("".join(r + "\n" for r in refs))
    (tmp_path / "gen.out").write_text("".join(f"H-{i}\t-1.0\t{h}\n" for i, h in enumerate(hyps)))
    (tmp_path / "ids").write_text("a\na\nb\nb\n")
    subprocess.run([os.path.join(BIN, "fairseq-rope-score"), "--generate-output", str(tmp_path / "gen.out"),
                    "--ref", str(tmp_path / "ref"), "--lang", "de", "--out-dir", str(tmp_path / "eval"),
                    "--docids", str(tmp_path / "ids")], check=True, capture_output=True)
    result = json.loads((tmp_path / "eval" / "result.json").read_text())
    detok = lines(tmp_path / "eval" / "hyps.detok.de")
    joined = sacrebleu.corpus_bleu([" ".join(detok[:2]), " ".join(detok[2:])], [[" ".join(refs[:2]), " ".join(refs[2:])]])
    assert result["document_bleu"] == round(joined.score, 2) and result["n_documents"] == 2
    assert result["chrf"] == round(sacrebleu.corpus_chrf(detok, [refs]).score, 2)
    assert result["document_bleu"] != result["sacrebleu"]


def test_running_text_is_one_document_translated_in_context(translator, run):
    """translate_text on paragraphs of a model trained with context: the text's sentences are one
    document, each translated with its previous ones (across paragraphs), as translate_documents does."""
    from fairseq_rope_text.running_text import join_text, split_text

    documents = documents_of(run["raw"])[:3]
    text = "\n\n".join(" ".join(doc) for doc in documents) + "\n"
    layout, sentences = split_text(text, "en")
    assert sentences == [s for doc in documents for s in doc]
    in_context = translator.translate_documents([sentences])[0]
    assert translator.translate_text(text) == join_text(layout, in_context)
