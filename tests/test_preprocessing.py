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
from test_recipes import forked_commands, lines, make_corpus, recipe_env, step

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
    # the German side read as French: French detokenization attaches elisions (Andrea' s -> Andrea's),
    # English rules would not, so the target language of the output side tells
    "moses_bpe_fr": (dict(TGT="fr"), None),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """prepare(branch) -> its data-bin, prepared once per module."""
    base = tmp_path_factory.mktemp("preprocessing")
    raw = punctuated_corpus(base / "raw")
    for split in ("train", "valid", "test"):
        shutil.copyfile(raw / f"{split}.de", raw / f"{split}.fr")
    done = {}

    def prepare(branch):
        if branch not in done:
            settings, given_by = BRANCHES[branch]
            settings = dict(settings)
            if given_by:
                given = prepare(given_by)
                settings.update({"BPE_CODES": given / "codes"} if (given / "codes").exists() else
                                {"SPM_MODEL": given / "spm.model"})
            step("prepare.sh", forked_commands(recipe_env(base / branch, RAW_DIR=raw, BPE_MERGES=400, **settings)))
            assert (base / branch / "data-bin" / f"dict.{settings.get('TGT', TGT)}.txt").exists()
            done[branch] = base / branch / "data-bin"
        return done[branch]

    prepare.raw = raw
    return prepare


def binarized(data_bin, lang, split="test", tgt=TGT):
    """The ids fairseq-preprocess wrote for ``split`` (each line with its EOS), and the dictionary."""
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(data_bin / f"dict.{lang}.txt"))
    dataset = data_utils.load_indexed_dataset(str(data_bin / f"{split}.{SRC}-{tgt}.{lang}"), dictionary)
    return [dataset[i].tolist() for i in range(len(dataset))], dictionary


def interactive_pipeline(data_bin, checkpoint, tgt, *flags):
    """fairseq-interactive's text pipeline for its command line (the code of fairseq_cli/interactive.py:
    the task's tokenizer and BPE from the parsed configuration, encode_fn, the source dictionary)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_interactive_generation_parser()
    args = options.parse_args_and_arch(parser, [str(data_bin), "--user-dir", USER_DIR, "--path", str(checkpoint),
                                                "--source-lang", SRC, "--target-lang", tgt, *flags])
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


def scored_text(tmp_path, targets, dictionary, record):
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
    out = run_main(score.main, "--generate-output", gen, "--ref", ref, "--lang", record.target_lang, "--out-dir",
                   tmp_path / "score", "--tokenization", record.pretokenizer)
    assert out.returncode == 0, out.stderr
    return lines(tmp_path / "score" / f"hyps.detok.{record.target_lang}")


@pytest.mark.parametrize("branch", [b for b in BRANCHES if "context" not in b])
def test_every_way_in_feeds_the_binarized_test_split_and_writes_the_scored_text(prepared, branch, tmp_path):
    from fairseq_rope.ct2 import CTranslate2Translator, export
    from fairseq_rope.hub import load_translator

    data_bin = prepared(branch)
    raw = lines(prepared.raw / "test.en")
    record = preprocessing.read(data_bin)
    tgt = record.target_lang
    expected, src_dict = binarized(data_bin, SRC, tgt=tgt)
    targets, tgt_dict = binarized(data_bin, tgt, tgt=tgt)
    targets = [ids[:-1] for ids in targets]  # without the EOS
    assert len(expected) == len(raw) == 40
    checkpoint = untrained_checkpoint(data_bin, tmp_path / "model" / "checkpoint.pt", SRC, tgt)
    scored = scored_text(tmp_path, targets, tgt_dict, record)
    if tgt == "fr":
        assert any("'s" in line for line in scored)  # (an elision that French rules attach, English ones not)

    mt = load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, device="cpu",
                         backend="fairseq")  # (fairseq's hub: CTranslate2's way in is checked on its own)
    assert [mt.encode(s).tolist() for s in raw] == expected, "the Python API"
    assert [mt.decode(torch.tensor(t)) for t in targets] == scored, "the Python API's output text"
    assert [mt.source_ids(s) + [src_dict.eos()] for s in raw] == expected, "the document path"
    assert [mt.detokenized(t) for t in targets] == scored, "the document path's output text"

    encode, decode = interactive_pipeline(data_bin, checkpoint, tgt, "--bpe", "recorded")
    assert [encode(s) for s in raw] == expected, "fairseq-interactive --bpe recorded"
    assert [decode(tgt_dict.string(torch.tensor(t))) for t in targets] == scored, "fairseq-interactive's D- lines"

    export(str(checkpoint), str(data_bin), str(tmp_path / "ct2"))
    ct2 = CTranslate2Translator(str(tmp_path / "ct2"))
    assert [[src_dict.index(p) for p in ct2.subwords(s)] + [src_dict.eos()] for s in raw] == expected, "CTranslate2"
    assert [ct2.encode(s).tolist() for s in raw] == expected, "CTranslate2's encode (ids, as fairseq's hub)"
    assert [ct2.detokenize([tgt_dict[i] for i in t]) for t in targets] == scored, "CTranslate2's output text"
    assert [ct2.decode(torch.tensor(t)) for t in targets] == scored, "CTranslate2's decode (ids, as fairseq's hub)"
    if branch == "moses_bpe":  # running text through the export: sentences as the segmenter gives them, in place
        from fairseq_rope_text.running_text import join_text, split_text

        text = f"{raw[0]} {raw[6]}\n\n   {raw[7]}\n"
        layout, sentences = split_text(text, SRC)
        assert len(sentences) >= 3
        assert ct2.translate_text(text) == join_text(layout, ct2.translate(sentences))


def test_documents_feed_the_binarized_test_split_with_its_context(prepared, generation_inputs):
    """CONTEXT=2: what translation in context feeds the model as source, and what scoring feeds on both
    sides, are the lines prepare.sh binarized for the test set (documents from test.docids)."""
    import collections

    from fairseq_rope.hub import load_translator

    data_bin = prepared("moses_bpe_context2")
    raw = {lang: lines(prepared.raw / f"test.{lang}") for lang in (SRC, TGT)}
    spans = document_spans(lines(prepared.raw / "test.docids"))
    sources, _ = binarized(data_bin, SRC)
    targets, _ = binarized(data_bin, TGT)
    checkpoint = untrained_checkpoint(data_bin, data_bin.parent / "model" / "checkpoint.pt", SRC, TGT)
    translator = load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, device="cpu")
    assert translator.context == 2  # from the record

    translator.translate_documents_ids([raw[SRC][a:b] for a, b in spans], max_len_b=3)
    assert collections.Counter(tuple(source) for source, _ in generation_inputs) == \
        collections.Counter(map(tuple, sources))
    items = [(raw[SRC][a:i], raw[TGT][a:i], raw[SRC][i], raw[TGT][i]) for a, b in spans for i in range(a, b)]
    fed = translator.score_inputs(items)
    assert [source for source, _, _ in fed] == sources
    assert [target for _, _, target in fed] == targets


def test_prepared_subwords_are_subword_nmts_with_its_vocabulary_filter(prepared):
    """prepare.sh's BPE step (the record's, which every way in applies) writes what subword-nmt's own
    apply-bpe writes with --vocabulary and --vocabulary-threshold."""
    import subprocess

    from conftest import BIN

    data_bin = prepared("moses_bpe")
    prep = data_bin.parent / "prep"
    for lang in (SRC, TGT):
        out = subprocess.run([os.path.join(BIN, "subword-nmt"), "apply-bpe", "-c", str(prep / "bpe" / "codes"),
                              "--vocabulary", str(prep / "bpe" / f"vocab.{lang}"), "--vocabulary-threshold", "50",
                              "-i", str(prep / "tok" / f"test.{lang}")], capture_output=True, text=True, check=True)
        assert out.stdout.splitlines() == lines(prep / "bpe" / f"test.{lang}")


@pytest.mark.parametrize("lang, raw, tokenized", [
    ("en", "He said: „Hello“ – it's 5 & [5] …", "He said : \" Hello \" - it 's 5 & [ 5 ] ..."),
    ("de", "„Andrea's Café“ — ok?!\u00a0&amp;", "\" Andrea ' s Café \" - ok ? ! & amp ;"),  # German: ' split
    ("en", "a\u200bb\u0007 «c»", "ab \" c \""),
])
def test_moses_step_normalizes_and_does_not_escape(lang, raw, tokenized):
    """The pretokenizer as written down (normalize-punctuation.perl with its unicode replacements and
    control-character removal, tokenizer.perl -a without escaping): the expected text is written here."""
    assert preprocessing.moses_tokenize(raw, lang) == tokenized


def test_a_data_bin_without_a_record_says_what_it_assumes_and_how_to_record_it(prepared, tmp_path, capfd):
    """A data-bin made before records: the API applies what it tells (its codes, recipe.env's PRETOKENIZER; no
    vocabulary filter: the vocabularies were not kept), says so in one line with the command that writes the
    record; with the record written by that command, every sentence is fed as prepare.sh binarized it."""
    import shlex

    from fairseq_rope.hub import load_translator
    from fairseq_rope_cli import prep

    data_bin = tmp_path / "old-data-bin"
    shutil.copytree(prepared("moses_bpe"), data_bin)
    for name in ("preprocessing.json", "vocab.en", "vocab.de"):
        (data_bin / name).unlink()
    expected, _ = binarized(data_bin, SRC)
    raw = lines(prepared.raw / "test.en")
    checkpoint = untrained_checkpoint(data_bin, tmp_path / "model" / "checkpoint.pt", SRC, TGT)
    capfd.readouterr()
    mt = load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, device="cpu",
                         backend="fairseq")  # (fairseq's hub: CTranslate2's way in is checked on its own)
    said = [line for line in capfd.readouterr().err.splitlines() if "preprocessing.json" in line]
    assert len(said) == 1 and f"{data_bin} has no preprocessing.json: applying Moses" in said[0], said
    assert "without a vocabulary filter" in said[0] and "fairseq-rope-prep record --dir" in said[0]
    assert [mt.encode(s).tolist() for s in raw] != expected  # the filter is missing

    command = shlex.split(said[0].split("record how once: ", 1)[1].replace(
        "[--bpe-vocabulary VOCAB.src VOCAB.tgt --bpe-vocabulary-threshold N]", ""))
    vocabularies = [str(prepared("moses_bpe").parent / "prep" / "bpe" / f"vocab.{lang}") for lang in (SRC, TGT)]
    out = run_main(prep.main, *command[1:], "--bpe-vocabulary", *vocabularies, "--bpe-vocabulary-threshold", "50")
    assert out.returncode == 0, out.stderr
    mt = load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, device="cpu",
                         backend="fairseq")  # (fairseq's hub: CTranslate2's way in is checked on its own)
    assert [mt.encode(s).tolist() for s in raw] == expected


def test_options_that_contradict_the_record_are_refused_naming_both(prepared, tmp_path):
    from fairseq_rope.ct2 import export
    from fairseq_rope.hub import load_translator

    data_bin = prepared("moses_bpe")
    checkpoint = untrained_checkpoint(data_bin, tmp_path / "model" / "checkpoint.pt", SRC, TGT)
    other = prepared("none_bpe") / "codes"
    with pytest.raises(ValueError, match=rf"{data_bin}/preprocessing.json records .* BPE codes {other}, but the "
                                         rf"record has {data_bin}/codes"):
        load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, bpe_codes=str(other))
    with pytest.raises(ValueError, match="pretokenizer 'none', but the record has 'moses'"):
        load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, tokenizer="none")
    with pytest.raises(ValueError, match="sentencepiece model .*, but the record has subword_nmt"):
        export(str(checkpoint), str(data_bin), str(tmp_path / "ct2"),
               sentencepiece_model=str(prepared("moses_spm") / "spm.model"))
    # agreeing ones are accepted
    load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name,
                    bpe_codes=str(data_bin / "codes"), tokenizer="moses")
