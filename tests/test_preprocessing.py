"""Every way into a model reads what it read in training.

For each branch of prepare.sh (Moses + learned BPE with its vocabulary filter, given BPE codes, text as it
is + BPE, Moses + learned sentencepiece, text as it is + a given sentencepiece model, documents with two
sentences of context), on a generated corpus whose sentences carry what tells preprocessings apart (curly
and German quotes, dashes, an ellipsis, non-breaking and zero-width spaces, ``&``, ``[5]``, ``'s``, HTML
entities, rare names, an empty line), the source ids of every entry point (the Python API,
fairseq-interactive's ``--bpe recorded``, CTranslate2, the document path) are compared with the ground
truth: the binarized test split prepare.sh wrote. On the output side every path's text of the binarized
references is compared with what fairseq-rope-score makes of them.
"""

import os
import random
import shutil

import pytest
import torch

from conftest import USER_DIR, run_main, untrained_checkpoint
from test_recipes import make_corpus, lines, recipe_env, step

from fairseq_rope_text import preprocessing
from fairseq_rope_text.documents import document_spans

SRC, TGT = "en", "de"

# (English, German): what a Moses tokenizer with escaping, one without normalization, English detokenization
# rules on German, or a BPE without its vocabulary filter each turns into other ids or other text
TEMPLATES = [
    ("“{s}” – {name} said…", "„{s}“ – sagte {name} …"),
    ("{name}'s note [5]: {s}", "{name}'s Notiz [5]: {s}"),
    ("{s} & {name} — ok?!", "{s} & {name} — gut?!"),
    ("{name}\u00a0(Dr.) wrote: {s}", "{name}\u00a0(Dr.) schrieb: {s}"),
    ("{s} Write &amp; and &lt;b&gt; in HTML, {name}.", "{s} Schreib &amp; und &lt;b&gt; in HTML, {name}."),
    ("{s}\u200b «{name}»", "{s}\u200b «{name}»"),
    ("{s}", "{s}"),
]


def rare_name(rng):
    syllables = ["ris", "del", "luq", "uo", "vant", "rex", "zé", "bul", "mør", "kvik", "oth", "ny", "qua"]
    return "".join(rng.choice(syllables) for _ in range(rng.randint(3, 5))).capitalize()


def punctuated_corpus(path):
    """The sample grammar's pairs with punctuation and rare names around every other training pair and
    every test pair (one test pair empty on both sides); document ids of 1-5 lines for every split."""
    make_corpus(path, train=500, valid=12, test=40)
    rng = random.Random(3)
    for split in ("train", "valid", "test"):
        en, de = lines(path / f"{split}.en"), lines(path / f"{split}.de")
        for i in range(len(en)):
            if split == "train" and i % 2:
                continue
            t_en, t_de = TEMPLATES[i % len(TEMPLATES)]
            name = rare_name(rng)
            en[i], de[i] = t_en.format(s=en[i], name=name), t_de.format(s=de[i], name=name)
        if split == "test":
            en[5] = de[5] = ""
        (path / f"{split}.en").write_text("".join(line + "\n" for line in en), encoding="utf-8")
        (path / f"{split}.de").write_text("".join(line + "\n" for line in de), encoding="utf-8")
        docids, n = [], 0
        while len(docids) < len(en):
            docids += [f"{split}-doc{n}"] * (n % 5 + 1)
            n += 1
        (path / f"{split}.docids").write_text("".join(d + "\n" for d in docids[:len(en)]))
    return path


# branch -> (prepare.sh settings, the branch whose subword model it is given)
BRANCHES = {
    "moses_bpe": (dict(), None),
    "moses_bpe_codes": (dict(), "moses_bpe"),
    "none_bpe": (dict(PRETOKENIZER="none"), None),
    "moses_spm": (dict(TOKENIZER="spm", SPM_VOCAB_SIZE=400), None),
    "none_spm_model": (dict(PRETOKENIZER="none", TOKENIZER="spm"), "moses_spm"),
    "moses_bpe_context2": (dict(CONTEXT=2), None),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """prepare(branch) -> its data-bin, prepared once per module."""
    base = tmp_path_factory.mktemp("preprocessing")
    raw = punctuated_corpus(base / "raw")
    done = {}

    def prepare(branch):
        if branch not in done:
            settings, given_by = BRANCHES[branch]
            settings = dict(settings)
            if given_by:
                given = prepare(given_by)
                settings.update({"BPE_CODES": given / "codes"} if (given / "codes").exists() else
                                {"SPM_MODEL": given / "spm.model"})
            step("prepare.sh", recipe_env(base / branch, RAW_DIR=raw, BPE_MERGES=400, **settings))
            done[branch] = base / branch / "data-bin"
        return done[branch]

    prepare.raw = raw
    return prepare


def binarized(data_bin, lang, split="test"):
    """The ids fairseq-preprocess wrote for ``split`` (each line with its EOS), and the dictionary."""
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(data_bin / f"dict.{lang}.txt"))
    dataset = data_utils.load_indexed_dataset(str(data_bin / f"{split}.{SRC}-{TGT}.{lang}"), dictionary)
    return [dataset[i].tolist() for i in range(len(dataset))], dictionary


def interactive_pipeline(data_bin, checkpoint, *flags):
    """fairseq-interactive's text pipeline for its command line (the code of fairseq_cli/interactive.py:
    the task's tokenizer and BPE from the parsed configuration, encode_fn, the source dictionary)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_interactive_generation_parser()
    args = options.parse_args_and_arch(parser, [str(data_bin), "--user-dir", USER_DIR, "--path", str(checkpoint),
                                                "--source-lang", SRC, "--target-lang", TGT, *flags])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    tokenizer, bpe = task.build_tokenizer(cfg.tokenizer), task.build_bpe(cfg.bpe)

    def encode(x):
        x = tokenizer.encode(x) if tokenizer is not None else x
        return task.source_dictionary.encode_line(bpe.encode(x) if bpe is not None else x,
                                                  add_if_not_exist=False).long().tolist()

    def decode(x):
        x = bpe.decode(x) if bpe is not None else x
        return tokenizer.decode(x) if tokenizer is not None else x

    return encode, decode


def scored_text(tmp_path, data_bin, targets, dictionary, record):
    """What fairseq-rope-score writes (hyps.detok) for target ids printed as fairseq-generate prints
    them with --remove-bpe: the text evaluate.sh scores."""
    from fairseq.data.data_utils import post_process

    from fairseq_rope_cli import score

    remove = {"subword_nmt": "@@ ", "sentencepiece": "sentencepiece"}.get(record.subword)
    gen = tmp_path / "gen.out"
    gen.write_text("".join(f"H-{i}\t-1.0\t{post_process(dictionary.string(torch.tensor(ids)), remove)}\n"
                           for i, ids in enumerate(targets)), encoding="utf-8")
    ref = tmp_path / "ref.txt"
    ref.write_text("x\n" * len(targets))
    out = run_main(score.main, "--generate-output", gen, "--ref", ref, "--lang", TGT, "--out-dir", tmp_path / "score",
                   "--tokenization", record.pretokenizer)
    assert out.returncode == 0, out.stderr
    return lines(tmp_path / "score" / f"hyps.detok.{TGT}")


@pytest.mark.parametrize("branch", [b for b in BRANCHES if "context" not in b])
def test_every_way_in_feeds_the_binarized_test_split_and_writes_the_scored_text(prepared, branch, tmp_path):
    from fairseq_rope.ct2 import CTranslate2Translator, export
    from fairseq_rope.documents import ContextTranslator
    from fairseq_rope.hub import load_translator

    data_bin = prepared(branch)
    raw = lines(prepared.raw / "test.en")
    expected, src_dict = binarized(data_bin, SRC)
    targets, tgt_dict = binarized(data_bin, TGT)
    targets = [ids[:-1] for ids in targets]  # without the EOS
    assert len(expected) == len(raw) == 40
    record = preprocessing.read(data_bin)
    checkpoint = untrained_checkpoint(data_bin, tmp_path / "model" / "checkpoint.pt", SRC, TGT)
    scored = scored_text(tmp_path, data_bin, targets, tgt_dict, record)

    mt = load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, device="cpu")
    assert [mt.encode(s).tolist() for s in raw] == expected, "the Python API"
    assert [mt.decode(torch.tensor(t)) for t in targets] == scored, "the Python API's output text"
    documents = ContextTranslator(mt)
    assert [documents.source_ids(s) + [src_dict.eos()] for s in raw] == expected, "the document path"
    assert [documents.detokenize(t) for t in targets] == scored, "the document path's output text"

    encode, decode = interactive_pipeline(data_bin, checkpoint, "--bpe", "recorded")
    assert [encode(s) for s in raw] == expected, "fairseq-interactive --bpe recorded"
    assert [decode(tgt_dict.string(torch.tensor(t))) for t in targets] == scored, "fairseq-interactive's D- lines"

    export(str(checkpoint), str(data_bin), str(tmp_path / "ct2"))
    ct2 = CTranslate2Translator(str(tmp_path / "ct2"))
    assert [[src_dict.index(p) for p in ct2.encode(s)] + [src_dict.eos()] for s in raw] == expected, "CTranslate2"
    assert [ct2.decode([tgt_dict[i] for i in t]) for t in targets] == scored, "CTranslate2's output text"
