"""Files made by someone else, and a careless user's arguments: a record names files in its own
directory only, a checkpoint that would run code or is damaged is one line through every command
that loads one, and fairseq-rope-translate answers each wrong argument with one line
``fairseq-rope-translate: error: ...`` and status 1, before the translation starts."""

import io
import json
import os
import shutil
import sys

import pytest
import torch

from conftest import run_main, subword_nmt_data_bin, untrained_checkpoint
from fairseq_rope_cli import doc_translate, translate
from fairseq_rope_text.preprocessing import Preprocessing, PreprocessingError, read

WORDS = [f"w{i}" for i in range(30)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A data-bin (dictionaries, a subword-nmt record with codes and vocabularies) and an untrained
    checkpoint in its own folder."""
    base = tmp_path_factory.mktemp("doors")
    data_bin = subword_nmt_data_bin(base, WORDS, "src", "tgt")
    checkpoint = untrained_checkpoint(data_bin, base / "model" / "checkpoint_best.pt", "src", "tgt")
    (base / "text.txt").write_text("w1 w2 w3. w4 w5.\n")
    return base, data_bin, checkpoint


class RunsCode:
    """Unpickling this runs ``touch <path>``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


def one_error_line(out, prog="fairseq-rope-translate"):
    """The command's one error line (its progress lines, "[PROG] ...", aside), status 1, no traceback."""
    said = [line for line in out.stderr.strip().splitlines() if not line.startswith(f"[{prog}] ")]
    assert out.returncode == 1 and len(said) == 1 and said[0].startswith(f"{prog}: error: "), out.stderr
    return said[0]


def edited_record(data_bin, tmp_path, edit):
    """A copy of ``data_bin`` whose record ``edit`` changed (edit(record dict, copy's path))."""
    copy = tmp_path / "data-bin"
    copy.mkdir(parents=True)
    for name in os.listdir(data_bin):
        (copy / name).write_bytes((data_bin / name).read_bytes())
    record = json.loads((copy / "preprocessing.json").read_text())
    edit(record, copy)
    (copy / "preprocessing.json").write_text(json.dumps(record))
    return copy


def outside_by_link(record, copy):
    os.remove(copy / "vocab.src")
    os.symlink("/etc/hostname", copy / "vocab.src")


@pytest.mark.parametrize("edit, field, name", [
    (lambda r, c: r["subword"].update(codes="/etc/hostname"), "subword.codes", "/etc/hostname"),
    (lambda r, c: r["subword"]["vocabulary"].update(src="../../../etc/hostname"), "subword.vocabulary.src",
     "../../../etc/hostname"),
    (outside_by_link, "subword.vocabulary.src", "vocab.src"),
])
def test_a_record_naming_a_file_outside_its_directory_is_refused_everywhere(model, tmp_path, edit, field, name):
    """An absolute path, a '..' path and a link out: refused when the record is read, by the Python API
    and by fairseq-rope-translate, naming the field and the name; nothing outside is read."""
    base, data_bin, checkpoint = model
    copy = edited_record(data_bin, tmp_path, edit)
    message = f"field {field!r} names {name!r}, which lies outside {copy}"
    with pytest.raises(PreprocessingError, match="lies outside"):
        read(str(copy))
    from fairseq_rope.hub import load_translator

    with pytest.raises(ValueError) as error:
        load_translator(str(checkpoint.parent), str(copy), checkpoint_file=checkpoint.name, device="cpu")
    assert message in str(error.value)
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", copy, "--input", base / "text.txt")
    assert message in one_error_line(out)


def test_the_unedited_record_translates(model, tmp_path):
    """The fixture itself is usable: what the tests above refuse is their edit."""
    base, data_bin, checkpoint = model
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input",
                   base / "text.txt", "--output", tmp_path / "out.txt", "--device", "cpu")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out.txt").read_text().count("\n") == 1


@pytest.mark.parametrize("damage", ["runs code", "truncated", "empty", "a log file"])
def test_a_bad_checkpoint_is_one_line_through_every_command_that_translates(model, tmp_path, damage):
    """fairseq-rope-translate and fairseq-rope-doc-translate: a pickle that would run code (nothing runs),
    a truncated or empty file, a text file given as the checkpoint: one line naming the file."""
    base, data_bin, checkpoint = model
    marker = tmp_path / "ran"
    bad = tmp_path / "models" / "checkpoint_best.pt"
    bad.parent.mkdir()
    if damage == "runs code":
        torch.save({"model": RunsCode(marker)}, bad)
    elif damage == "truncated":
        bad.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    elif damage == "empty":
        bad.write_bytes(b"")
    else:
        bad.write_text("2026-11-27 12:00:00 | INFO | fairseq_cli.train | epoch 001\n")
    expected = {"runs code": "refusing to load this checkpoint", "truncated": "not a readable checkpoint",
                "empty": "not a readable checkpoint", "a log file": "not a readable checkpoint"}[damage]
    out = run_main(translate.main, "--model-dir", bad.parent, "--data-bin", data_bin, "--input", base / "text.txt",
                   "--device", "cpu")
    line = one_error_line(out)
    assert str(bad) in line and expected in line
    lines = tmp_path / "lines.txt"
    lines.write_text("w1 w2\n")
    out = run_main(doc_translate.main, "--checkpoint", bad, "--data-bin", data_bin, "--input", lines, "--device", "cpu")
    line = one_error_line(out, "fairseq-rope-doc-translate")
    assert str(bad) in line and expected in line
    assert not marker.exists()


def test_careless_arguments_of_translate_are_one_line_each_before_translating(model, tmp_path, monkeypatch):
    """Each wrong argument: one line that says what to do, and no translation started (the model is
    never loaded where the arguments are wrong)."""
    base, data_bin, checkpoint = model
    loads = []
    from fairseq_rope_translation import loader

    load = loader.load_translator
    monkeypatch.setattr(loader, "load_translator", lambda *a, **k: loads.append(1) or load(*a, **k))
    (tmp_path / "utf16.txt").write_bytes("w1 w2.\n".encode("utf-16"))  # little-endian, with its mark
    (tmp_path / "utf16be.txt").write_bytes(b"\xfe\xff" + "w1 w2.\n".encode("utf-16-be"))
    (tmp_path / "train.log").write_text("log\n")
    good = ["--model-dir", checkpoint.parent, "--data-bin", data_bin]
    cases = [
        (["--output", tmp_path], f"--output {tmp_path} is a directory"),
        (["--output", tmp_path / "missing" / "out.txt"], f"its folder {tmp_path / 'missing'} does not exist"),
        (["--device", "gpu"], "--device: device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
        (["--input", tmp_path / "utf16.txt"], "is UTF-16 (it starts with a UTF-16 byte-order mark); convert it to "
                                              "UTF-8, e.g. with iconv -f utf-16 -t utf-8"),
        (["--input", tmp_path / "utf16be.txt"], "is UTF-16 (it starts with a UTF-16 byte-order mark)"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "--device: device 'cuda': torch"))
    for args, message in cases:
        argv = [*good, "--input", base / "text.txt", *args]
        line = one_error_line(run_main(translate.main, *argv))
        assert message in line, (args, line)
    swapped = ["--model-dir", data_bin, "--data-bin", checkpoint.parent, "--input", base / "text.txt"]
    assert f"checkpoint not found: {data_bin / 'checkpoint_best.pt'}" in one_error_line(run_main(translate.main, *swapped))
    (data_bin.parent / "model" / "train.log").write_text("log\n")
    no_dicts = ["--model-dir", checkpoint.parent, "--data-bin", checkpoint.parent, "--input", base / "text.txt"]
    assert "has no dict.*.txt: not a data-bin" in one_error_line(run_main(translate.main, *no_dicts))
    assert not loads
    line = one_error_line(run_main(translate.main, *good, "--checkpoint-file", "train.log", "--input",
                                   base / "text.txt", "--device", "cpu"))
    assert "train.log: not a readable checkpoint" in line


def test_input_dash_is_stdin(model, tmp_path, monkeypatch):
    base, data_bin, checkpoint = model
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"w1 w2 w3.\n\nw4.\n")))
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input", "-",
                   "--device", "cpu")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n") == 3 and out.stdout.split("\n")[1] == ""


def code_running_checkpoint(path, marker):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": RunsCode(marker), "cfg": None}, path)
    return path


def test_every_torch_load_of_the_project_is_weights_only():
    """No code path of the packages, commands or scripts calls torch.load without weights_only=True, nor
    unpickles with pickle (a checkpoint or record could then run code)."""
    import ast

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    calls, checked = [], 0
    for top in ("fairseq_rope", "fairseq_rope_checkpoints", "fairseq_rope_cli", "fairseq_rope_text", "scripts"):
        for root, _, names in os.walk(os.path.join(repo, top)):
            for name in names:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(root, name)
                for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                        continue
                    owner = ast.unparse(node.func.value)
                    if node.func.attr == "load" and owner in ("torch", "torch.serialization"):
                        checked += 1
                        safe = any(k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                                   for k in node.keywords)
                        if not safe:
                            calls.append(f"{os.path.relpath(path, repo)}:{node.lineno}: {ast.unparse(node)}")
                    if node.func.attr in ("load", "loads", "Unpickler") and owner in ("pickle", "cPickle", "dill"):
                        calls.append(f"{os.path.relpath(path, repo)}:{node.lineno}: {ast.unparse(node)}")
    assert checked >= 1 and not calls, calls


@pytest.mark.parametrize("door", ["load_translator", "fairseq-rope-average", "fairseq-rope-ct2",
                                  "fairseq-rope-checkpoint fits", "fairseq-rope-checkpoint final-name",
                                  "fairseq-rope-checkpoint resume"])
def test_a_code_running_checkpoint_is_refused_at_every_door(model, tmp_path, door):
    """Each way a user hands the project a checkpoint: refused, nothing in it runs, and a command says so
    in one line with status 1. (fairseq-rope-translate and -doc-translate: the test above; fairseq's own
    commands through the plugin: tests/test_cli.py.)"""
    from fairseq_rope_cli import average, checkpoint as checkpoint_cli, ct2_convert

    base, data_bin, _ = model
    marker = tmp_path / "ran"
    bad = code_running_checkpoint(tmp_path / "run" / "checkpoint_1_10.pt", marker)
    if door == "load_translator":
        from fairseq_rope_checkpoints import UnsafeCheckpointError
        from fairseq_rope.hub import load_translator

        # fairseq's hub calls torch.load without weights_only: the environment variable would make that
        # load run the pickle; load_translator reads the file weights-only first
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
        try:
            with pytest.raises(UnsafeCheckpointError, match="refusing to load this checkpoint"):
                load_translator(str(bad.parent), str(data_bin), checkpoint_file=bad.name, source_lang="src",
                                target_lang="tgt", device="cpu")
        finally:
            del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
    else:
        runs = {
            "fairseq-rope-average": (average.main, ["--inputs", bad, shutil.copy(bad, tmp_path / "run" / "checkpoint_1_20.pt"),
                                                    "--output", tmp_path / "avg.pt"]),
            "fairseq-rope-ct2": (ct2_convert.main, ["--checkpoint", bad, "--data-bin", data_bin, "--output-dir",
                                                    tmp_path / "ct2"]),
            "fairseq-rope-checkpoint fits": (checkpoint_cli.main, ["fits", bad, "--data-bin", data_bin]),
            "fairseq-rope-checkpoint final-name": (checkpoint_cli.main, ["final-name", bad, "--max-update", "10"]),
            "fairseq-rope-checkpoint resume": (checkpoint_cli.main, ["resume", bad.parent]),
        }
        main, args = runs[door]
        if door.endswith("resume"):
            bad.rename(bad.parent / "checkpoint_last.pt")
            bad = bad.parent / "checkpoint_last.pt"
        out = run_main(main, *args)
        if door.endswith("resume"):  # a checkpoint_last.pt that cannot be loaded is damaged: restored or an error
            assert out.returncode == 1 and "refusing to load this checkpoint" in out.stderr
            assert out.stderr.strip().splitlines()[-1].startswith(f"fairseq-rope-checkpoint: error: {bad} is damaged")
        else:
            line = one_error_line(out, door.split()[0])
            assert str(bad) in line and "refusing to load this checkpoint: its pickle needs posix.system" in line, line
            assert "(torch's safe loader: Trying to load unsupported GLOBAL posix.system" in line
    assert not marker.exists()
    assert not (tmp_path / "avg.pt").exists() and not (tmp_path / "ct2").exists()


def test_a_tokenizer_beside_the_recorded_preprocessing_is_refused(model):
    """fairseq-interactive --bpe recorded --tokenizer moses would tokenize twice: refused, naming both
    (fairseq-interactive's own building of its tokenizer and BPE from the parsed command line)."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from conftest import USER_DIR

    base, data_bin, checkpoint = model

    def bpe(*flags):
        parser = options.get_interactive_generation_parser()
        args = options.parse_args_and_arch(parser, [str(data_bin), "--user-dir", USER_DIR, "--path", str(checkpoint),
                                                    "--source-lang", "src", "--target-lang", "tgt", *flags])
        cfg = convert_namespace_to_omegaconf(args)
        task = tasks.setup_task(cfg.task)
        return task.build_tokenizer(cfg.tokenizer), task.build_bpe(cfg.bpe)

    with pytest.raises(ValueError) as error:
        bpe("--bpe", "recorded", "--tokenizer", "moses")
    assert str(error.value).endswith("error: --bpe recorded applies the data's recorded pretokenization itself: "
                                     "leave out --tokenizer moses (the text would be tokenized twice)")
    tokenizer, recorded = bpe("--bpe", "recorded")
    assert tokenizer is None and recorded.encode("w1 w2") == recorded.record.encode("w1 w2", "src")


def test_a_checkpoint_of_another_data_bin_is_named(model, tmp_path):
    """A checkpoint trained on other dictionaries: check_fits and fairseq-rope-checkpoint fits name the
    checkpoint, the dictionary and both sizes, whichever is larger."""
    from fairseq_rope_checkpoints import CheckpointError, check_fits
    from fairseq_rope_cli import checkpoint as checkpoint_cli

    base, data_bin, checkpoint = model
    small = tmp_path / "small"
    small.mkdir()
    for lang in ("src", "tgt"):
        (small / f"dict.{lang}.txt").write_text("".join(f"{w} 1\n" for w in WORDS[:20]))
    other = untrained_checkpoint(small, tmp_path / "other" / "checkpoint_best.pt", "src", "tgt")
    for ckpt, bin_, sizes in ((checkpoint, small, "34 embeddings, the dictionary 24 symbols"),
                              (other, data_bin, "24 embeddings, the dictionary 34 symbols")):
        with pytest.raises(CheckpointError, match=f"does not fit the dictionary .*: its encoder has {sizes}"):
            check_fits(str(ckpt), str(bin_), "src", "tgt")
        line = one_error_line(run_main(checkpoint_cli.main, "fits", ckpt, "--data-bin", bin_, "--source-lang", "src",
                                       "--target-lang", "tgt"), "fairseq-rope-checkpoint")
        assert f"{ckpt} does not fit the dictionary" in line and sizes in line
    out = run_main(checkpoint_cli.main, "fits", checkpoint, "--data-bin", data_bin, "--source-lang", "src",
                   "--target-lang", "tgt")
    assert out.returncode == 0 and json.loads(out.stdout)["fits"] is True


@pytest.mark.parametrize("overrides", ["{", "[1]", "{[]: 1}", "rope_scaling=yarn"])
def test_bad_model_overrides_are_one_line(model, tmp_path, overrides):
    base, data_bin, checkpoint = model
    lines = tmp_path / "lines.txt"
    lines.write_text("w1 w2\n")
    out = run_main(doc_translate.main, "--checkpoint", checkpoint, "--data-bin", data_bin, "--input", lines,
                   "--device", "cpu", "--model-overrides", overrides)
    assert f"--model-overrides must be a Python dict, got {overrides!r}" in one_error_line(out, "fairseq-rope-doc-translate")


def test_a_record_that_is_not_utf8_or_lacks_a_threshold_is_named(model, tmp_path):
    """A record with a byte that is not UTF-8, and one with a subword vocabulary but no threshold (the
    vocabulary filter would silently keep every subword): refused by the reader, naming the file; one line
    through fairseq-rope-doc-translate."""
    base, data_bin, checkpoint = model
    latin1 = edited_record(data_bin, tmp_path / "a", lambda r, c: r.update(note="caf\u00e9"))
    path = latin1 / "preprocessing.json"
    path.write_bytes(path.read_bytes().replace("caf\\u00e9".encode(), b"caf\xe9"))
    with pytest.raises(PreprocessingError, match="is not a JSON preprocessing record"):
        read(str(latin1))
    lines = tmp_path / "lines.txt"
    lines.write_text("w1 w2\n")
    out = run_main(doc_translate.main, "--checkpoint", checkpoint, "--data-bin", latin1, "--input", lines,
                   "--device", "cpu")
    assert f"{path} is not a JSON preprocessing record" in one_error_line(out, "fairseq-rope-doc-translate")
    no_threshold = edited_record(data_bin, tmp_path / "b", lambda r, c: r["subword"].pop("vocabulary_threshold"))
    with pytest.raises(PreprocessingError, match="a subword vocabulary needs its vocabulary_threshold"):
        read(str(no_threshold))
    with pytest.raises(PreprocessingError, match="a subword vocabulary needs its vocabulary_threshold"):
        Preprocessing(source_lang="src", target_lang="tgt", pretokenizer="none", subword="subword_nmt",
                      codes=str(base / "codes"), vocabulary={"src": str(base / "vocab.src")})


@pytest.mark.parametrize("flag", ["--output", "--generate-output", "--info-json"])
def test_doc_translate_checks_its_outputs_before_translating(model, tmp_path, flag):
    """Each output of fairseq-rope-doc-translate: a directory or a file in a missing folder is one line
    before the model is loaded."""
    base, data_bin, checkpoint = model
    lines = tmp_path / "lines.txt"
    lines.write_text("w1 w2\n")
    common = ["--checkpoint", checkpoint, "--data-bin", data_bin, "--input", lines, "--device", "cpu"]
    for path, message in ((tmp_path, f"{flag} {tmp_path} is a directory"),
                          (tmp_path / "missing" / "out", f"its folder {tmp_path / 'missing'} does not exist")):
        line = one_error_line(run_main(doc_translate.main, *common, flag, path), "fairseq-rope-doc-translate")
        assert message in line


@pytest.mark.parametrize("flag", ["--scores", "--out-json"])
def test_contrastive_checks_its_outputs_before_scoring(model, tmp_path, flag):
    from fairseq_rope_cli import contrastive

    base, data_bin, checkpoint = model
    (tmp_path / "contrapro.json").write_text("[]")
    out = run_main(contrastive.main, "--checkpoint", checkpoint, "--data-bin", data_bin, "--json",
                   tmp_path / "contrapro.json", "--text", tmp_path / "text", "--device", "cpu", flag, tmp_path)
    assert f"{flag} {tmp_path} is a directory" in one_error_line(out, "fairseq-rope-contrastive")


@pytest.mark.parametrize("command", ["fairseq-rope-translate", "fairseq-rope-average"])
def test_a_command_killed_while_writing_leaves_the_old_file_or_the_whole_new_one(model, tmp_path, command):
    """SIGKILL at seeded random moments of a run that replaces an existing output: afterwards the output
    is the old file or the complete new one (what an uninterrupted run writes), never a part."""
    import random
    import time

    import forked

    base, data_bin, checkpoint = model
    output = tmp_path / ("out.txt" if command.endswith("translate") else "avg.pt")
    if command.endswith("translate"):
        (tmp_path / "in.txt").write_text("w1 w2. w3.\n\n" * 40)
        args = ["--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input", tmp_path / "in.txt",
                "--output", output, "--device", "cpu"]
    else:
        inputs = [shutil.copy(checkpoint, tmp_path / f"checkpoint_1_{u}.pt") for u in (10, 20, 30)]
        args = ["--inputs", *inputs, "--output", output]
    # the command forked from a process that imported torch and fairseq (tests/forked.py): its run is its
    # work, so that every kill falls in it, none in a new interpreter's imports
    assert forked.run(command, args).returncode == 0
    complete = output.read_bytes()
    old = b"the old file\n"
    start = time.perf_counter()
    assert forked.run(command, args).returncode == 0
    seconds = time.perf_counter() - start
    rng = random.Random(7)
    for at in sorted(rng.uniform(0.3, 1.0) * seconds for _ in range(3)):
        output.write_bytes(old)
        running = forked.Command(command, args)
        time.sleep(at)
        running.process.kill()  # SIGKILL
        running.wait()
        assert output.read_bytes() in (old, complete), f"killed after {at:.2f} s of {seconds:.2f} s"


def test_every_file_the_commands_write_goes_through_atomic_output():
    """Outside fairseq_rope_cli/common.py (atomic_output, write_lines, write_json), no code of the packages
    opens a file for writing, except the two listed with their reason: what the kill test above shows for
    translate and averaging then holds for every command that writes (prep's steps, score, compare, ...)."""
    import ast

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    allowed = {
        # logs written line by line as the command runs (a kill leaves the lines so far: what a log is)
        ("fairseq_rope_cli/progress.py", "open(args.log, 'a', encoding='utf-8')"),
        ("fairseq_rope_cli/progress.py", "open(out_path, 'w', encoding='utf-8')"),
        ("fairseq_rope_cli/progress.py", "open(os.devnull, 'w')"),
        # into the export's staging directory, renamed into place when complete
        ("fairseq_rope_translation/ct2_export.py", "open(os.path.join(staging, METADATA), 'w', encoding='utf-8')"),
        # written to .tmp, then os.replace (the record's own atomic write, in the standard-library-only package)
        ("fairseq_rope_text/preprocessing.py", "open(out + '.tmp', 'w', encoding='utf-8')"),
    }
    found = set()
    for top in ("fairseq_rope", "fairseq_rope_checkpoints", "fairseq_rope_translation", "fairseq_rope_cli",
                "fairseq_rope_text"):
        for name in sorted(os.listdir(os.path.join(repo, top))):
            path = f"{top}/{name}"
            if not name.endswith(".py") or path == "fairseq_rope_cli/common.py":
                continue
            for node in ast.walk(ast.parse(open(os.path.join(repo, path), encoding="utf-8").read())):
                if isinstance(node, ast.Call) and ast.unparse(node.func) in ("open", "io.open", "os.open"):
                    modes = [a for a in node.args[1:2]] + [k.value for k in node.keywords if k.arg == "mode"]
                    if any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax+") for m in modes):
                        found.add((path, ast.unparse(node)))
                if isinstance(node, ast.Call) and ast.unparse(node.func).endswith((".write_text", ".write_bytes")):
                    found.add((path, ast.unparse(node)))
    assert found == allowed, found ^ allowed


def test_a_checkpoint_in_torchs_legacy_format_still_loads(model, tmp_path):
    """load_translator reads each checkpoint weights-only first, with its tensors mapped; a checkpoint in
    torch's legacy (pre-zip) format cannot be mapped and is read whole instead, and translates."""
    from fairseq_rope_checkpoints import load_checkpoint
    from fairseq_rope.hub import load_translator

    base, data_bin, checkpoint = model
    legacy = tmp_path / "legacy" / "checkpoint_best.pt"
    legacy.parent.mkdir()
    torch.save(load_checkpoint(str(checkpoint)), legacy, _use_new_zipfile_serialization=False)
    mt = load_translator(str(legacy.parent), str(data_bin), checkpoint_file=legacy.name, device="cpu")
    reference = load_translator(str(checkpoint.parent), str(data_bin), checkpoint_file=checkpoint.name, device="cpu")
    assert mt.translate_text("w1 w2 w3.") == reference.translate_text("w1 w2 w3.")


@pytest.mark.parametrize("name, content, says", [
    ("dict.src.txt", b"\x00\xff\xfe w1 1\n", "not a fairseq dictionary (UTF-8, a symbol and its count a line)"),
    ("dict.src.txt", b"w1\nw2\n", "not a fairseq dictionary (UTF-8, a symbol and its count a line)"),
    ("dict.tgt.txt", b"w1 one\n", "not a fairseq dictionary (UTF-8, a symbol and its count a line)"),
    ("codes", b"#version: 0.2\n\xff\xfe\n", "not subword-nmt codes"),
    ("codes", b"#version: 0.2\nw 1 2\n", "not subword-nmt codes"),
    ("vocab.src", b"\xff w1 100\n", "not a subword-nmt vocabulary"),
])
def test_a_damaged_file_of_the_data_bin_is_one_line_naming_it(model, tmp_path, name, content, says):
    """A dictionary that is not UTF-8 or lacks its counts, codes or a vocabulary that is not what
    subword-nmt writes: fairseq-rope-translate names the file in one line, status 1."""
    base, data_bin, checkpoint = model
    copy = tmp_path / "data-bin"
    shutil.copytree(data_bin, copy)
    (copy / name).write_bytes(content)
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", copy, "--input", base / "text.txt",
                   "--device", "cpu")
    assert f"{copy / name}: {says}" in one_error_line(out)


def test_a_damaged_sentencepiece_model_is_one_line_naming_it(model, tmp_path):
    base, data_bin, checkpoint = model
    copy = tmp_path / "data-bin"
    copy.mkdir()
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(data_bin / name, copy / name)
    (tmp_path / "spm.model").write_bytes(b"\x0a\x05not a model" * 10)
    Preprocessing(source_lang="src", target_lang="tgt", pretokenizer="none", subword="sentencepiece",
                  sentencepiece_model=str(tmp_path / "spm.model")).write(str(copy))
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", copy, "--input", base / "text.txt",
                   "--device", "cpu")
    assert f"{copy / 'spm.model'}: not a sentencepiece model" in one_error_line(out)


@pytest.mark.parametrize("name, damage, says", [
    ("model.bin", lambda data: data[:len(data) // 2], "CTranslate2 cannot load it"),
    ("model.bin", lambda data: b"", "CTranslate2 cannot load it"),
    ("fairseq_rope_ct2.json", lambda data: b"{", "not the JSON fairseq-rope-ct2 writes"),
])
def test_a_damaged_ctranslate2_export_is_one_line_naming_the_file(model, tmp_path, name, damage, says):
    pytest.importorskip("ctranslate2")
    from fairseq_rope.ct2 import METADATA, export

    base, data_bin, checkpoint = model
    out_dir = tmp_path / "ct2"
    export(str(checkpoint), str(data_bin), str(out_dir))
    assert name in ("model.bin", METADATA)
    path = out_dir / name
    path.write_bytes(damage(path.read_bytes()))
    out = run_main(translate.main, "--model-dir", out_dir, "--backend", "ctranslate2", "--input", base / "text.txt",
                   "--device", "cpu")
    assert f"{path}: {says}" in one_error_line(out)


def test_a_checkpoint_whose_target_dictionary_differs_is_named(model, tmp_path):
    """Only the target dictionary differs (the source one fits): check_fits, and so fairseq-rope-translate,
    name the decoder and dict.tgt.txt with both sizes."""
    from fairseq_rope_checkpoints import CheckpointError, check_fits

    base, data_bin, checkpoint = model
    copy = tmp_path / "data-bin"
    shutil.copytree(data_bin, copy)
    (copy / "dict.tgt.txt").write_text("".join(f"{w} 1\n" for w in WORDS[:20]))
    says = f"does not fit the dictionary {copy / 'dict.tgt.txt'}: its decoder has 34 embeddings, the dictionary 24 symbols"
    with pytest.raises(CheckpointError) as error:
        check_fits(str(checkpoint), str(copy), "src", "tgt")
    assert says in str(error.value)
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", copy, "--input", base / "text.txt",
                   "--device", "cpu")
    assert says in one_error_line(out)


@pytest.mark.parametrize("device", ["meta", "mps", "xpu:0"])
def test_a_device_torch_names_but_that_is_not_cpu_or_cuda_is_one_line(model, device):
    """torch.device accepts "meta", "mps", "xpu", ...: check_device refuses them by name, and
    fairseq-rope-translate says so in one line before loading the model."""
    from fairseq_rope.hub import check_device

    base, data_bin, checkpoint = model
    with pytest.raises(ValueError, match=f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}"):
        check_device(device)
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input",
                   base / "text.txt", "--device", device)
    assert f"--device: device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}" in one_error_line(out)


def test_a_data_bin_reached_through_a_link_to_its_directory_is_read(model, tmp_path):
    """A data-bin reached through a symbolic link to its directory (a shared disk linked into a home):
    its record's own files lie inside it, so it is read and translates; only links that lead out of
    the directory are refused."""
    base, data_bin, checkpoint = model
    link = tmp_path / "linked-data-bin"
    os.symlink(data_bin, link)
    assert read(str(link)).codes == str(link / "codes")
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", link, "--input", base / "text.txt",
                   "--output", tmp_path / "out.txt", "--device", "cpu")
    assert out.returncode == 0, out.stderr


def test_outputs_named_without_a_folder_are_written_in_the_current_one(model, tmp_path, monkeypatch):
    """--output out.txt and --sentences pairs.tsv (no folder in the name): the current folder's, which
    exists; not refused as a file whose folder ("") does not exist."""
    base, data_bin, checkpoint = model
    monkeypatch.chdir(tmp_path)
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input",
                   base / "text.txt", "--output", "out.txt", "--sentences", "pairs.tsv", "--device", "cpu")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out.txt").read_text().count("\n") == 1
    assert [line.split("\t")[0] for line in (tmp_path / "pairs.tsv").read_text().splitlines()] == ["w1 w2 w3.", "w4 w5."]


def test_sentences_and_output_naming_one_file_are_refused_however_it_is_spelled(model, tmp_path, monkeypatch):
    """--sentences and --output that are one file (the same name, ./name, its absolute path): one line
    before translating, not one output overwriting the other."""
    base, data_bin, checkpoint = model
    monkeypatch.chdir(tmp_path)
    for sentences in ("out.txt", "./out.txt", tmp_path / "out.txt"):
        out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input",
                       base / "text.txt", "--output", "out.txt", "--sentences", sentences, "--device", "cpu")
        assert "--sentences and --output are the same file (out.txt); give two" in one_error_line(out), sentences
    assert not (tmp_path / "out.txt").exists()


def test_a_utf8_byte_order_mark_is_not_part_of_the_text(model, tmp_path):
    """A file some editors start with a UTF-8 byte-order mark translates as the same text without it
    (its first paragraph's indentation kept)."""
    base, data_bin, checkpoint = model
    text = "  w1 w2 w3. w4 w5.\n\nw6 w7.\n"
    (tmp_path / "plain.txt").write_text(text, encoding="utf-8")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    outputs = []
    for name in ("plain.txt", "bom.txt"):
        out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", data_bin, "--input",
                       tmp_path / name, "--output", tmp_path / f"{name}.out", "--device", "cpu")
        assert out.returncode == 0, out.stderr
        outputs.append((tmp_path / f"{name}.out").read_bytes())
    assert outputs[0] == outputs[1] and outputs[0].startswith(b"  ") and not outputs[1].startswith(b"\xef\xbb\xbf")


@pytest.mark.parametrize("threshold", ['"50"', "-1", "true", "2.5"])
def test_a_record_whose_vocabulary_threshold_is_not_a_whole_number_is_named(model, tmp_path, threshold):
    base, data_bin, checkpoint = model
    copy = edited_record(data_bin, tmp_path, lambda r, c: r["subword"].update(vocabulary_threshold=0))
    path = copy / "preprocessing.json"
    path.write_text(path.read_text().replace('"vocabulary_threshold": 0', f'"vocabulary_threshold": {threshold}'))
    with pytest.raises(PreprocessingError, match="vocabulary_threshold must be a whole number >= 0"):
        read(str(copy))
    out = run_main(translate.main, "--model-dir", checkpoint.parent, "--data-bin", copy, "--input", base / "text.txt",
                   "--device", "cpu")
    assert "vocabulary_threshold must be a whole number >= 0" in one_error_line(out)
