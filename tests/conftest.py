"""Shared helpers: tiny fairseq translation tasks and models built through fairseq's own parsers."""

import contextlib
import io
import os
import random
import shutil
import socket
import subprocess
import sys

import pytest
import torch

# The fused rotation's Triton kernel (--rope-rotation triton) runs on CPU tensors through Triton's
# interpreter, which must be chosen before triton is imported (the kernel is built for it then). Where the
# interpreter is on, "auto" takes the kernel on the CPU too: far too slow for every model of the suite, so
# after the import it is off again (rope/fused_rotary.py's INTERPRET, and for the commands the tests start) and
# tests/test_fused_rotary.py turns it on for its own tests. A GPU machine runs the kernel natively
# (tests/test_cuda.py).
INTERPRETER = not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "1") == "1"
if INTERPRETER:
    os.environ["TRITON_INTERPRET"] = "1"

import fairseq_rope  # the installed plugin (pip install -e .); registers the model
import fairseq_rope.rope.fused_rotary

if INTERPRETER:
    del os.environ["TRITON_INTERPRET"]
    fairseq_rope.rope.fused_rotary.INTERPRET = False
import forked  # noqa: E402  (commands in new processes without a new interpreter)
import kerple  # a sixth encoding, the tests' own: every registry-driven test covers it
from fairseq import options, tasks


def pytest_configure(config):
    """Gives each test process its share of the cores instead of torch's default of all of them:
    with pytest -n 2 on the 2-core CI machine, 2 workers x 2 threads made the command-line tests
    (fairseq commands in subprocesses, which inherit OMP_NUM_THREADS) ~1.6x slower. An
    OMP_NUM_THREADS set by the caller is kept. The xdist controller runs no tests."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None and getattr(config.option, "numprocesses", None):
        return
    workers = workerinput["workercount"] if workerinput else 1
    threads = os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    torch.set_num_threads(int(threads))


USER_DIR = os.path.dirname(fairseq_rope.__file__)


def encoding_variants():
    """Every registered encoding in each of its tiny-model variants, in the registry's order:
    [(variant name, model name, flags)]; an encoding that declares none has one, named after its model."""
    from fairseq_rope.encodings import ENCODINGS

    return [(variant, name, list(flags)) for name, encoding in ENCODINGS.items()
            for variant, flags in (encoding.tiny_model_variants or {name.removesuffix("_transformer"): ()}).items()]

# fairseq's commands in a subprocess with the tests' encoding too (it imports the plugin)
TEST_ENCODING_USER_DIR = os.path.dirname(kerple.__file__)
BIN = os.path.dirname(sys.executable)  # the venv's commands: fairseq-*, fairseq-rope-*

VOCAB = [f"w{i}" for i in range(40)]

TINY = [
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--dropout", "0", "--attention-dropout", "0", "--share-all-embeddings",
]


@pytest.fixture(scope="session")
def dict_dir(tmp_path_factory):
    """A data directory with only dictionaries: enough for fairseq to set up a translation task."""
    path = tmp_path_factory.mktemp("dicts")
    for lang in ("src", "tgt"):
        with open(path / f"dict.{lang}.txt", "w") as f:
            f.writelines(f"{word} {100 - i}\n" for i, word in enumerate(VOCAB))
    return str(path)


@pytest.fixture(scope="session")
def build():
    """build(dict_dir, arch, *flags, seed=0) -> (model, task), parsed exactly as fairseq-train would."""

    def _build(data_dir, arch="rope_transformer", *flags, seed=0, tiny=True):
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(
            parser,
            [data_dir, "--arch", arch, "--source-lang", "src", "--target-lang", "tgt", "--user-dir", USER_DIR,
             *(TINY if tiny else []), *flags],
        )
        task = tasks.setup_task(args)
        torch.manual_seed(seed)
        model = task.build_model(args)
        model.eval()
        return model, task

    return _build


def random_tokens(task, lengths, seed=0, left_pad=True):
    """A padded batch (B x T) of random sentences ending in EOS, and their lengths."""
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    T = max(lengths)
    batch = torch.full((len(lengths), T), d.pad(), dtype=torch.long)
    for i, n in enumerate(lengths):
        sentence = torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])
        if left_pad:
            batch[i, T - n:] = sentence
        else:
            batch[i, :n] = sentence
    return batch, torch.tensor(lengths)


# command-line runs: a model 2+2 layers, d = 64, trained with the paper's optimiser settings
CLI_MODEL = ("--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 64 --decoder-embed-dim 64 "
             "--encoder-ffn-embed-dim 128 --decoder-ffn-embed-dim 128 --encoder-attention-heads 4 "
             "--decoder-attention-heads 4 --share-all-embeddings").split()
CLI_TRAIN = [*CLI_MODEL, "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "5e-3",
             "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "10", "--warmup-init-lr", "1e-7",
             "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "2000",
             "--cpu", "--seed", "1", "--no-progress-bar", "--user-dir", USER_DIR, "--num-workers", "0"]


def free_port():
    """A TCP port of 127.0.0.1 free now (for a distributed rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_of(path):
    """The weights of a fairseq checkpoint, loaded weights_only."""
    from fairseq_rope_checkpoints import load_checkpoint

    return load_checkpoint(str(path))["model"]


def run_tool(tool, *args, check=True, threads=None, **kwargs):
    """Runs an installed command in a new process: forked (tests/forked.py: no new interpreter, torch with
    ``threads``, by default this process's), or, where ``env`` or ``cwd`` is given, started as a user starts
    it; ``input``: its standard input. With check, a failure raises with the end of its output."""
    if set(kwargs) <= {"input", "timeout"}:
        result = forked.run(tool, args, threads=threads, **kwargs)
    else:
        result = subprocess.run([os.path.join(BIN, tool), *map(str, args)], capture_output=True, text=True,
                                **kwargs)
    if check and result.returncode:
        raise AssertionError(f"{tool} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def run_main(main, *args):
    """Runs a fairseq-rope-* command's ``main(argv)`` in this process (no new interpreter: importing
    torch and fairseq again costs seconds per command): a CompletedProcess with its exit status,
    stdout and stderr, SystemExit handled as the interpreter does (None: 0; a message: printed to
    stderr, status 1). The installed commands themselves are run by test_commands.py and the recipes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(arg) for arg in args])
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def reversal_task(root, sizes, max_words):
    """A toy translation task in ``root`` (a pathlib.Path): reverse the order of 2..max_words words
    drawn from 30; ``sizes`` = {split: sentences}. BPE'd with subword-nmt (root/codes, root/SPLIT.src|tgt),
    binarized with a joined dictionary (root/bin). Returns the raw sentences {(split, "src"|"tgt"): lines}."""
    from subword_nmt.apply_bpe import BPE
    from subword_nmt.learn_bpe import learn_bpe

    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    raw = {}
    for split, n in sizes.items():
        sentences = [rng.choices(words, k=rng.randint(2, max_words)) for _ in range(n)]
        raw[split, "src"] = [" ".join(s) for s in sentences]
        raw[split, "tgt"] = [" ".join(reversed(s)) for s in sentences]
    with open(root / "codes", "w") as codes:
        learn_bpe(raw["train", "src"] + raw["train", "tgt"], codes, num_symbols=15)
    with open(root / "codes") as codes:
        bpe = BPE(codes)
    for (split, lang), lines in raw.items():
        (root / f"{split}.{lang}").write_text("".join(bpe.process_line(line) + "\n" for line in lines))
    run_tool("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
             *[arg for split in sizes for arg in (f"--{split}pref", root / split)],
             "--destdir", root / "bin", "--workers", "1")
    return raw


def subword_nmt_data_bin(base, words, source_lang, target_lang):
    """``base``/data-bin with a dictionary of ``words`` for each language and a subword-nmt record (codes
    of one merge, vocabularies of every word, written in ``base`` and copied in by the record)."""
    from fairseq_rope_text.preprocessing import Preprocessing

    data_bin = base / "data-bin"
    data_bin.mkdir()
    for lang in (source_lang, target_lang):
        (data_bin / f"dict.{lang}.txt").write_text("".join(f"{w} 1\n" for w in words))
        (base / f"vocab.{lang}").write_text("".join(f"{w} 100\n" for w in words))
    (base / "codes").write_text("#version: 0.2\nw 1\n")
    Preprocessing(source_lang=source_lang, target_lang=target_lang, pretokenizer="none", subword="subword_nmt",
                  codes=str(base / "codes"),
                  vocabulary={lang: str(base / f"vocab.{lang}") for lang in (source_lang, target_lang)},
                  vocabulary_threshold=1).write(str(data_bin))
    return data_bin


def untrained_checkpoint(data_bin, path, source_lang, target_lang, arch="rope_transformer", seed=0, flags=()):
    """A checkpoint of a small model on ``data_bin``'s dictionaries (and fairseq-train's ``flags``), saved as
    fairseq-train saves one: enough to read what the entry points feed a model (ids do not depend on weights)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data_bin), "--arch", arch, "--user-dir", USER_DIR, "--task", "translation_resumable",
        "--source-lang", source_lang, "--target-lang", target_lang, "--encoder-layers", "1", "--decoder-layers", "1",
        "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
        "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2", *flags])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = task.build_model(cfg.model)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"args": None, "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
                "model": model.state_dict(), "extra_state": {},
                "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                                       "lr_scheduler_state": {}, "num_updates": 0}]}, path)
    return path


@pytest.fixture
def generation_inputs(monkeypatch):
    """Every row fairseq's SequenceGenerator.generate is given from now on, as (source ids with the EOS,
    forced target prefix ids), padding removed: what a translation path feeds the model."""
    from fairseq.sequence_generator import SequenceGenerator

    rows, generate = [], SequenceGenerator.generate

    def recording(self, models, sample, prefix_tokens=None, **kwargs):
        pad = self.tgt_dict.pad()
        for r, source in enumerate(sample["net_input"]["src_tokens"].tolist()):
            prefix = [] if prefix_tokens is None else [t for t in prefix_tokens[r].tolist() if t != pad]
            rows.append(([t for t in source if t != pad], prefix))
        return generate(self, models, sample, prefix_tokens=prefix_tokens, **kwargs)

    monkeypatch.setattr(SequenceGenerator, "generate", recording)
    return rows


def shared_dir(tmp_path_factory):
    """A directory of this test run that every xdist worker sees (its workers' temporary directories are
    side by side in it); without xdist, the run's own temporary directory."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


# the trained reversal models that several files use, each trained once per test run (fairseq-train's flags)
REVERSAL_MODELS = {
    # validated once, at the end, with --eval-bleu (the numpy counts it keeps in the checkpoint: test_cli.py)
    "interleaved": ["--arch", "rope_transformer", "--eval-bleu", "--eval-bleu-args", '{"beam": 2}',
                    "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric"],
    "baseline": ["--arch", "transformer"],
    # Shaw's RPE with a clip that sentences of 12 words exceed; T5's bias with 18 buckets up to 128,
    # whose encoder puts distance 8 in bucket 5 in float32 (CTranslate2's arithmetic) and 4 in float64
    "rpe": ["--arch", "rpe_transformer", "--rpe-max-relative-position", "4"],
    "t5bias": ["--arch", "t5bias_transformer", "--t5bias-num-buckets", "18", "--t5bias-max-distance", "128"],
}
REVERSAL_UPDATES = 250
# validation once, after the last update (fairseq validates when it stops): the weights are those of a run
# without it; the last two of an epoch checkpoint every 5 epochs kept (about 20 updates apart)
REVERSAL_TRAIN = [*CLI_TRAIN, "--max-update", str(REVERSAL_UPDATES), "--validate-interval", "1000",
                  "--save-interval", "5", "--keep-last-epochs", "2"]


@pytest.fixture(scope="session")
def reversal_models(tmp_path_factory):
    """(root, {name: checkpoint}): the toy task of reversal_task (600 training sentences of up to 12 words,
    200 test, BPE'd with root/codes, binarized in root/bin, the raw test source in root/raw.src) and the
    models of REVERSAL_MODELS trained on it for 250 updates (their translations differ between sentences;
    in root/NAME, checkpoint_last.pt, checkpoint_best.pt and the last two epoch checkpoints of every 5th),
    two at a time with one thread each: trained once per test run, whichever worker asks first, the other
    waiting for them (a lock beside the directory). Read them; write what a test makes elsewhere."""
    from concurrent.futures import ThreadPoolExecutor

    from filelock import FileLock

    root = shared_dir(tmp_path_factory) / "reversal-models"
    checkpoints = {name: root / name / "checkpoint_last.pt" for name in REVERSAL_MODELS}
    with FileLock(f"{root}.lock"):
        if not (root / "complete").exists():
            root.mkdir(exist_ok=True)
            raw = reversal_task(root, {"train": 600, "valid": 20, "test": 200}, max_words=12)
            (root / "raw.src").write_text("".join(line + "\n" for line in raw["test", "src"]))

            def train(name):
                run_tool("fairseq-train", root / "bin", *REVERSAL_MODELS[name], *REVERSAL_TRAIN, "--save-dir",
                         root / name, threads=1)

            with ThreadPoolExecutor(2) as pool:
                list(pool.map(train, REVERSAL_MODELS))
            (root / "complete").write_text("")
    return root, checkpoints


def reversal_subset(root, own, n_test):
    """``own``: the reversal task of ``root`` (conftest.reversal_models) with a test set of its first ``n_test``
    test sentences: codes, {train,valid,test}.{src,tgt} and bin/ binarized with root's dictionaries (so
    that the shared models read it), as reversal_task writes them. Returns ``own``."""
    shutil.copyfile(root / "codes", own / "codes")
    for split in ("train", "valid", "test"):
        for lang in ("src", "tgt"):
            lines = (root / f"{split}.{lang}").read_text().splitlines()[:n_test if split == "test" else None]
            (own / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))
    run_tool("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--srcdict",
             root / "bin" / "dict.src.txt", "--tgtdict", root / "bin" / "dict.tgt.txt",
             *[arg for split in ("train", "valid", "test") for arg in (f"--{split}pref", own / split)],
             "--destdir", own / "bin", "--workers", "1")
    return own


def word_document(paragraphs):
    """A .docx (bytes) of ``paragraphs``, each a list of runs: a text, or (text, how) with ``how`` a dict of
    run properties ({"bold": True}, {"italic": True}) and/or {"link": URL} (the run inside a hyperlink to URL,
    a relationship of the document's part, as Word writes one)."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    for runs in paragraphs:
        p = document.add_paragraph()
        for item in runs:
            text, how = (item, {}) if isinstance(item, str) else item
            run = p.add_run(text)
            for name, value in how.items():
                if name != "link":
                    setattr(run, name, value)
            if "link" in how:
                hyperlink = OxmlElement("w:hyperlink")
                hyperlink.set(qn("r:id"), document.part.relate_to(how["link"], RELATIONSHIP_TYPE.HYPERLINK,
                                                                    is_external=True))
                run._r.addprevious(hyperlink)
                hyperlink.append(run._r)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def word_runs(data):
    """Each body paragraph of a .docx (bytes) as [(text, bold, italic, the URL of its hyperlink or None)], a
    tuple per run with text, hyperlinks' runs included."""
    import docx
    from docx.oxml.ns import qn

    document = docx.Document(io.BytesIO(data))
    found = []
    for p in document.paragraphs:
        runs = []
        for r in p._p.iter(qn("w:r")):
            up = r.getparent()
            url = document.part.rels[up.get(qn("r:id"))].target_ref if up.tag == qn("w:hyperlink") else None
            properties = r.find(qn("w:rPr"))
            bold = properties is not None and properties.find(qn("w:b")) is not None
            italic = properties is not None and properties.find(qn("w:i")) is not None
            if r.text:
                runs.append((r.text, bold, italic, url))
        found.append(runs)
    return found

