"""Sentence i in context is one thing in training, translation and scoring, at every context size.

For every K in 0..6, documents of 1..K+3 sentences (one with an empty line, a one-sentence document,
the longest first and last), translated in batches of 1 and of all: the source the model is fed for
each sentence is the line training's context step (fairseq-rope-prep context) writes for it, and its
forced target prefix is the model's own translations of the previous sentences in training's format;
scoring feeds the training lines on both sides. The expected lines are built here, from the
definition (up to K previous sentences of the document, all when there are fewer, " <sep> " between
every two), not with the code under test. Tiny untrained models: token ids, not quality.
"""

import collections

import pytest
import torch

from conftest import run_main, untrained_checkpoint

from fairseq_rope.encodings import ENCODINGS
from fairseq_rope.hub import load_translator
from fairseq_rope_cli import doc_translate, prep
from fairseq_rope_text.documents import DocumentError, without_padding
from fairseq_rope_text.preprocessing import Preprocessing

SEP = "<sep>"
CONTEXTS = range(0, 7)


def source(d, i):
    return f"a{d % 3} s{d}x{i} b"


def target(d, i):
    return f"t{d}x{i} c"


def documents_for(k):
    """Documents of K+3, 1, 2, ..., K+2, K+3 sentences; the first has an empty line (both sides) second."""
    lengths = [k + 3] + list(range(1, k + 3)) + [k + 3]
    src = [[source(d, i) for i in range(n)] for d, n in enumerate(lengths)]
    tgt = [[target(d, i) for i in range(n)] for d, n in enumerate(lengths)]
    src[0][1] = tgt[0][1] = ""
    return src, tgt


def in_training(sentences, i, k):
    """The definition: sentence i with up to k previous sentences of its document, " <sep> " between."""
    return f" {SEP} ".join(sentences[max(0, i - k):i + 1])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A data-bin per context size (dictionaries of every word and <sep>, a record of text used as it is
    with K sentences of context) and one untrained checkpoint on them."""
    base = tmp_path_factory.mktemp("context")
    words = sorted({w for k in CONTEXTS for side in documents_for(k) for doc in side for s in doc for w in s.split()})
    dirs = {}
    for k in CONTEXTS:
        d = base / f"k{k}"
        d.mkdir()
        for lang in ("src", "tgt"):
            (d / f"dict.{lang}.txt").write_text("".join(f"{w} 1\n" for w in words + [SEP]))
        Preprocessing(source_lang="src", target_lang="tgt", pretokenizer="none", subword="none", context=k).write(str(d))
        dirs[k] = d
    checkpoint = untrained_checkpoint(dirs[0], base / "model" / "checkpoint.pt", "src", "tgt")
    return dirs, checkpoint


def translator_for(data, k):
    dirs, checkpoint = data
    return load_translator(str(checkpoint.parent), str(dirs[k]), checkpoint_file=checkpoint.name, device="cpu",
                           backend="fairseq")  # (fairseq's model, for every context k)


@pytest.mark.parametrize("k", CONTEXTS)
def test_training_context_step_writes_the_definition(k, tmp_path):
    src, tgt = documents_for(k)
    for side, docs in (("src", src), ("tgt", tgt)):
        (tmp_path / f"in.{side}").write_text("".join(s + "\n" for doc in docs for s in doc))
    (tmp_path / "docids").write_text("".join(f"doc{d}\n" for d, doc in enumerate(src) for _ in doc))
    if k == 0:
        return  # a sentence-level model's data is the sentences as they are
    out = run_main(prep.main, "context", "--src", tmp_path / "in.src", "--tgt", tmp_path / "in.tgt", "--docids",
                   tmp_path / "docids", "--out-src", tmp_path / "out.src", "--out-tgt", tmp_path / "out.tgt", "-k", k)
    assert out.returncode == 0, out.stderr
    for side, docs in (("src", src), ("tgt", tgt)):
        expected = [in_training(doc, i, k) for doc in docs for i in range(len(doc))]
        assert (tmp_path / f"out.{side}").read_text().split("\n")[:-1] == expected


@pytest.mark.parametrize("batch_size", [1, 64])
@pytest.mark.parametrize("k", CONTEXTS)
def test_translation_feeds_each_sentence_as_training_wrote_it(data, k, batch_size, generation_inputs):
    translator = translator_for(data, k)
    src_dict, tgt_dict = translator.src_dict, translator.tgt_dict
    src, _ = documents_for(k)
    outputs = translator.translate_documents_ids(src, max_len_b=4, batch_size=batch_size)
    assert [len(doc) for doc in outputs] == [len(doc) for doc in src]
    sep = tgt_dict.index(SEP)
    expected = []
    for d, doc in enumerate(src):
        for i in range(len(doc)):
            fed = src_dict.encode_line(in_training(doc, i, k), add_if_not_exist=False).tolist()
            prefix = []  # the model's own previous translations, each followed by the separator
            for ids, _ in outputs[d][max(0, i - k):i]:
                prefix += ids + [sep]
            expected.append((fed, prefix))
    key = lambda row: (tuple(row[0]), tuple(row[1]))  # noqa: E731
    assert collections.Counter(map(key, generation_inputs)) == collections.Counter(map(key, expected))
    assert all(ids for doc in outputs for ids, _ in doc), "an empty translation"


@pytest.mark.parametrize("k", CONTEXTS)
def test_scoring_feeds_each_sentence_as_training_wrote_it_on_both_sides(data, k):
    translator = translator_for(data, k)
    src, tgt = documents_for(k)
    items = [(src[d][:i], tgt[d][:i], src[d][i], tgt[d][i]) for d in range(len(src)) for i in range(len(src[d]))]
    inputs = translator.score_inputs(items)
    n = 0
    for d in range(len(src)):
        for i in range(len(src[d])):
            fed_source, prefix, fed_target = inputs[n]
            n += 1
            assert fed_source == translator.src_dict.encode_line(in_training(src[d], i, k),
                                                                 add_if_not_exist=False).tolist()
            assert fed_target == translator.tgt_dict.encode_line(in_training(tgt[d], i, k),
                                                                 add_if_not_exist=False).tolist()
            scored = len(tgt[d][i].split()) + 1  # the sentence and its EOS
            assert prefix == fed_target[:len(fed_target) - scored]


def test_scoring_keeps_context_sentences_in_pairs(data):
    """An empty context sentence, on one side or both, stays a sentence on both (with its separators), as
    in training; only ContraPro's padding (leading lines empty on both sides) is no sentence."""
    translator = translator_for(data, 2)
    d = translator.src_dict
    (one_side, _, target_ids), (both, _, both_target) = translator.score_inputs([
        (["", "a0"], ["t0x0", "t0x1"], "b", "c"),
        (["", "a0"], ["", "t0x1"], "b", "c")])
    assert one_side == both == d.encode_line(f" {SEP} a0 {SEP} b", add_if_not_exist=False).tolist()
    assert target_ids == d.encode_line(f"t0x0 {SEP} t0x1 {SEP} c", add_if_not_exist=False).tolist()
    assert both_target == d.encode_line(f" {SEP} t0x1 {SEP} c", add_if_not_exist=False).tolist()
    with pytest.raises(DocumentError, match="2 source context sentences but 1 target"):
        translator.score_inputs([(["a0", "a1"], ["t0x0"], "b", "c")])
    assert without_padding(["", "", "a0", "", "a1"], ["", "", "t0", "", "t1"]) == (["a0", "", "a1"], ["t0", "", "t1"])
    assert without_padding(["", "a0"], ["t", "t0"]) == (["", "a0"], ["t", "t0"])


def test_no_empty_translation_after_a_forced_context(data):
    """A model that favours the end of sentence still writes at least one token for every sentence, as
    fairseq's --min-len 1 gives it alone (fairseq applies min_len only when no prefix is forced)."""
    translator = translator_for(data, 2)
    model = translator.models[0]
    eos = translator.tgt_dict.eos()
    projection = model.decoder.output_projection
    biased = torch.nn.Linear(projection.in_features, projection.out_features, bias=True)
    biased.weight = projection.weight
    with torch.no_grad():
        biased.bias.zero_()
        biased.bias[eos] = 50.0  # the end of sentence first by far, everywhere
    model.decoder.output_projection = biased
    src, _ = documents_for(2)
    outputs = translator.translate_documents_ids(src)
    assert all(len(ids) >= 1 for doc in outputs for ids, _ in doc)
    # the same model, alone and through fairseq's own min_len: one token, then the end
    alone = translator.translate_batch([(translator.source_ids(src[1][0]) + [translator.src_dict.eos()], [])])
    assert len(alone[0][0]) == 1


def test_a_context_that_contradicts_the_record_is_refused(data, tmp_path):
    dirs, checkpoint = data
    translator = translator_for(data, 2)
    with pytest.raises(DocumentError, match=r"context 3, but .*k2/preprocessing.json records 2 sentences"):
        translator.translate_documents([["a0 b"]], context=3)
    (tmp_path / "in.src").write_text("a0 b\n")
    (tmp_path / "docids").write_text("d\n")
    out = run_main(doc_translate.main, "--checkpoint", checkpoint, "--data-bin", dirs[2], "--context", 1,
                   "--input", tmp_path / "in.src", "--docids", tmp_path / "docids")
    assert out.returncode == 1
    assert "context 1, but the record has 2 (the model was trained with it)" in out.stderr
    assert str(dirs[2] / "preprocessing.json") in out.stderr


@pytest.mark.parametrize("k", [0, 2])
@pytest.mark.parametrize("arch", ["transformer", *ENCODINGS])
def test_batched_translation_equals_one_sentence_at_a_time(data, arch, k, tmp_path):
    """Translations and scores do not depend on the batch, with every registered encoding and fairseq's
    transformer (untrained, 1 + 1 layers): each row gets fairseq's length limits after its own forced
    prefix (the untrained model runs into the limit of 4 tokens, where a batch's longest prefix would give
    shorter prefixes more), results go back to their own sentences, and every sentence, the empty one too,
    gets a translation."""
    dirs, _ = data
    checkpoint = untrained_checkpoint(dirs[0], tmp_path / "checkpoint.pt", "src", "tgt", arch=arch, seed=3)
    translator = load_translator(str(tmp_path), str(dirs[k]), checkpoint_file=checkpoint.name, device="cpu",
                                 backend="fairseq")  # (fairseq's model, for every context k)
    src, tgt = documents_for(k)
    batched = translator.translate_documents_ids(src, max_len_b=4, batch_size=64)
    alone = translator.translate_documents_ids(src, max_len_b=4, batch_size=1)
    assert [[ids for ids, _ in doc] for doc in batched] == [[ids for ids, _ in doc] for doc in alone]
    assert [s for doc in batched for _, s in doc] == pytest.approx([s for doc in alone for _, s in doc], abs=1e-5)
    assert max(len(ids) for doc in batched for ids, _ in doc) <= 4
    assert [len(doc) for doc in batched] == [len(doc) for doc in src] and all(ids for doc in batched for ids, _ in doc)
    items = [(src[d][:i], tgt[d][:i], src[d][i], tgt[d][i]) for d in range(len(src)) for i in range(len(src[d]))]
    assert translator.score_in_context(items, batch_size=64) == pytest.approx(
        translator.score_in_context(items, batch_size=1), abs=1e-4)


def test_scores_are_the_sentences_log_probabilities_in_any_batch(data):
    """score() sums the log-probabilities of the sentence and its end of sentence only (not its context),
    computed here with one forward pass of the model per item, and each item's score is its own in a
    batch as alone."""
    translator = translator_for(data, 2)
    src, tgt = documents_for(2)
    items = [(src[d][:i], tgt[d][:i], src[d][i], tgt[d][i]) for d in range(len(src)) for i in range(len(src[d]))]
    batched = translator.score_in_context(items, batch_size=64)
    assert batched == pytest.approx([translator.score_in_context([item], batch_size=1)[0] for item in items], abs=1e-4)
    model = translator.models[0]
    by_hand = []
    for (source, prefix, target), (_, _, _, sentence) in zip(translator.score_inputs(items), items):
        previous = [translator.tgt_dict.eos()] + target[:-1]
        with torch.no_grad():
            logits, _ = model(torch.tensor([source]), torch.tensor([len(source)]), torch.tensor([previous]))
        lprobs = torch.log_softmax(logits.float(), dim=-1)[0].gather(-1, torch.tensor(target)[:, None])[:, 0]
        assert len(target) - len(prefix) == len(sentence.split()) + 1
        by_hand.append(lprobs[len(prefix):].sum().item())
    assert batched == pytest.approx(by_hand, abs=1e-4)


def test_a_translation_is_what_follows_the_last_separator():
    from fairseq_rope_translation.fairseq_engine import last_segment

    assert last_segment([5, 9, 6, 9, 7, 8], 9) == [7, 8]
    assert last_segment([5, 6], 9) == [5, 6]
    assert last_segment([5, 9], 9) == []
