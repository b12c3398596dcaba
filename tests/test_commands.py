"""The fairseq-rope-* commands: installed next to the interpreter, each with a complete --help that
answers without importing torch or fairseq, and runnable as python -m fairseq_rope_cli.<module>."""

import os
import re
import subprocess
import sys

import pytest

BIN = os.path.dirname(sys.executable)
COMMANDS = {  # command: module, words its --help must show
    "fairseq-rope-average": ("average", ["--inputs", "--num-update-checkpoints", "--checkpoint-upper-bound", "weights_only"]),
    "fairseq-rope-prep": ("prep", ["tokenize", "detokenize", "clean", "sgm", "spm-train", "subwords", "record",
                                   "concat-pairs", "context"]),
    "fairseq-rope-score": ("score", ["--generate-output", "--ref", "compound-split", "--set", "--extra-file"]),
    "fairseq-rope-results": ("results", ["RESULT.json", "--output"]),
    "fairseq-rope-compare": ("compare", ["--hyp", "--result", "--buckets", "paired bootstrap"]),
    "fairseq-rope-plot-training": ("plot_training", ["NAME=PATH", "--loss", "--log-format json"]),
    "fairseq-rope-ct2": ("ct2_convert", ["--checkpoint", "--data-bin", "--output-dir", "--quantization", "int8", "--force",
                                 "--bpe-codes", "--sentencepiece-model", "weights_only"]),
    "fairseq-rope-ct2-generate": ("ct2_generate", ["CT2_DIR", "--data-bin", "--input", "--gen-subset", "--beam",
                                                   "--lenpen", "--remove-bpe", "--compute-type", "--threads",
                                                   "--info-json"]),
    "fairseq-rope-checkpoint": ("checkpoint", ["resume", "final-name", "fits", "SAVE_DIR"]),
    "fairseq-rope-progress": ("progress", ["--log", "--stdout", "--total", "--interval", "--verbose", "--max-update"]),
    "fairseq-rope-doc-translate": ("doc_translate", ["--checkpoint", "--data-bin", "--context", "--input", "--docids",
                                                     "--output", "--generate-output", "--info-json", "--batch-size"]),
    "fairseq-rope-contrastive": ("contrastive", ["--json", "--text", "--context-text", "--context-lines", "--scores",
                                                 "--out-json", "ContraPro"]),
    "fairseq-rope-translate": ("translate", ["--model-dir", "--data-bin", "--input", "--output", "--keep-line-breaks",
                                             "--backend", "sentencex", "Moses", "--sentences", "--nesting-limit"]),
    "fairseq-rope-serve": ("serve", ["--model", "MODEL_DIR", "DATA_BIN", "--host", "--port", "--char-limit",
                                     "--batch-limit", "--timeout", "--queue-size", "--max-tokens", "--api-keys",
                                     "--req-limit", "--nesting-limit", "--no-web-page", "LibreTranslate"]),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_is_installed_with_complete_help(command):
    module, words = COMMANDS[command]
    for argv in ([os.path.join(BIN, command), "--help"], [sys.executable, "-m", f"fairseq_rope_cli.{module}", "--help"]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: {command}"), done.stdout[:200]
        for word in words:
            assert word in done.stdout, (argv, word)


def test_prep_subcommands_have_their_own_help():
    for sub, flag in (("tokenize", "--lang"), ("clean", "--ratio"), ("sgm", "IN.sgm"), ("spm-train", "--vocab-size"),
                      ("subwords", "--record"), ("record", "--bpe-vocabulary-threshold"), ("concat-pairs", "--order"), ("context", "--keep-sentences")):
        done = subprocess.run([os.path.join(BIN, "fairseq-rope-prep"), sub, "--help"], capture_output=True, text=True)
        assert done.returncode == 0 and flag in done.stdout, (sub, done.stderr)


def test_commands_import_neither_torch_nor_fairseq_until_they_run():
    """What keeps every --help instant: the command modules import only the standard library."""
    modules = ", ".join(f"fairseq_rope_cli.{module}" for module, _ in COMMANDS.values())
    code = f"import sys, {modules}; print(sorted(m for m in ('torch', 'fairseq', 'fairseq_rope', 'sacrebleu', 'matplotlib') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def bad_inputs(tmp):
    """(command line, words the error must name) for each kind of bad input each command takes."""
    missing = str(tmp / "missing")
    damaged = tmp / "damaged.pt"
    damaged.write_bytes(b"PK\x03\x04" + bytes(20000))  # the start of a zip, cut short: a truncated checkpoint
    text = tmp / "a.txt"
    text.write_text("a b\nc d\n")
    one = tmp / "one.txt"
    one.write_text("a\n")
    not_json = tmp / "result.json"
    not_json.write_text("{not json")
    generate = tmp / "generate.out"
    generate.write_text("H-0\t-0.1\ta b\nH-1\t-0.2\tc d\n")
    no_key = tmp / "keys.txt"
    no_key.write_text("# a key a line, optionally its requests per minute\n\n")
    save = tmp / "run"
    save.mkdir()
    (save / "checkpoint_last.pt").write_bytes(damaged.read_bytes())
    return [
        (["fairseq-rope-average", "--inputs", missing, "--output", str(tmp / "avg.pt")], [missing]),
        (["fairseq-rope-average", "--inputs", str(damaged), "--output", str(tmp / "avg.pt")], [str(damaged), "not a readable checkpoint"]),
        (["fairseq-rope-prep", "tokenize", "--lang", "en", "-i", missing, "-o", str(tmp / "o")], ["-i", missing]),
        (["fairseq-rope-prep", "clean", "--src", str(text), "--tgt", str(one), "--out-src", str(tmp / "o1"),
          "--out-tgt", str(tmp / "o2")], [str(one), "differ in length"]),
        (["fairseq-rope-prep", "sgm", str(text), str(tmp / "o")], [str(text), "no <seg>"]),
        (["fairseq-rope-prep", "subwords", "--record", missing, "--lang", "en", "-i", str(text), "-o", str(tmp / "o")],
         [missing, "not found"]),
        (["fairseq-rope-prep", "record", "--dir", str(tmp / "r"), "--source-lang", "en", "--target-lang", "de",
          "--pretokenizer", "moses", "--bpe-vocabulary", str(text), str(text), "--bpe-vocabulary-threshold", "5"],
         ["--bpe-vocabulary goes with --bpe-codes"]),
        (["fairseq-rope-prep", "concat-pairs", "--src", str(text), "--tgt", str(text), "--out-src", str(tmp / "o1"),
          "--out-tgt", str(tmp / "o2"), "-k", "0"], ["-k", "got 0"]),
        (["fairseq-rope-score", "--generate-output", missing, "--ref", str(text), "--lang", "de", "--out-dir", str(tmp / "s")],
         ["--generate-output", missing]),
        (["fairseq-rope-score", "--generate-output", str(generate), "--ref", str(one), "--lang", "de", "--out-dir",
          str(tmp / "s")], [str(one)]),
        (["fairseq-rope-score", "--generate-output", str(generate), "--ref", str(text), "--lang", "de", "--out-dir",
          str(tmp / "s"), "--extra", "{beam: 4}"], ["--extra", "not valid JSON"]),
        (["fairseq-rope-score", "--generate-output", str(generate), "--ref", str(text), "--lang", "de", "--out-dir",
          str(tmp / "s"), "--set", "beam"], ["--set", "KEY=VALUE", "'beam'"]),
        (["fairseq-rope-score", "--generate-output", str(generate), "--ref", str(text), "--lang", "de", "--out-dir",
          str(tmp / "s"), "--extra-file", str(not_json)], ["--extra-file", str(not_json)]),
        (["fairseq-rope-results", missing], [missing]),
        (["fairseq-rope-results", str(not_json)], [str(not_json)]),
        (["fairseq-rope-compare", "--src", missing, "--ref", str(text), "--hyp", f"a={text}"], [missing]),
        (["fairseq-rope-compare", "--src", str(text), "--ref", str(text), "--hyp", f"a={text}", "--buckets", "5,2"],
         ["--buckets", "5,2"]),
        (["fairseq-rope-compare", "--src", str(text), "--ref", str(text), "--hyp", f"a={one}"], [str(one)]),
        (["fairseq-rope-plot-training", f"a={missing}", "--out", str(tmp / "p.png")], [missing]),
        (["fairseq-rope-ct2", "--checkpoint", missing, "--data-bin", str(tmp), "--output-dir", str(tmp / "c")], [missing]),
        (["fairseq-rope-ct2", "--checkpoint", str(damaged), "--data-bin", str(tmp), "--output-dir", str(tmp / "c")],
         [str(damaged), "not a readable checkpoint"]),
        (["fairseq-rope-ct2-generate", missing, "--input", str(text)], ["CT2_DIR", missing]),
        (["fairseq-rope-ct2-generate", str(tmp), "--input", str(text), "--beam", "0"], ["--beam", "got 0"]),
        (["fairseq-rope-checkpoint", "resume", missing], ["SAVE_DIR", missing]),
        (["fairseq-rope-checkpoint", "resume", str(save)], [str(save / "checkpoint_last.pt"), "is damaged",
                                                           "no complete checkpoint"]),
        (["fairseq-rope-checkpoint", "final-name", str(damaged), "--max-update", "5"], [str(damaged), "not a readable"]),
        (["fairseq-rope-checkpoint", "fits", str(damaged), "--data-bin", str(tmp)], [str(damaged), "not a readable"]),
        (["fairseq-rope-checkpoint", "fits", str(damaged), "--data-bin", missing], ["--data-bin", missing]),
        (["fairseq-rope-progress", "--log", str(tmp / "x.log")], ["no command given"]),
        (["fairseq-rope-progress", "--log", str(tmp / "x.log"), "--total", "0", "--", "true"], ["--total", "got 0"]),
        (["fairseq-rope-progress", "--log", str(tmp / "x.log"), "--", missing], [missing]),
        (["fairseq-rope-prep", "context", "--src", str(text), "--tgt", str(text), "--docids", str(one), "-k", "1",
          "--out-src", str(tmp / "o1"), "--out-tgt", str(tmp / "o2")], [str(one), "1 document ids", "2 lines"]),
        (["fairseq-rope-doc-translate", "--checkpoint", missing, "--data-bin", str(tmp), "--context", "0",
          "--input", str(text)], ["--checkpoint", missing]),
        (["fairseq-rope-doc-translate", "--checkpoint", missing, "--data-bin", str(tmp), "--context", "1",
          "--input", str(text), "--docids", str(one)], [str(one), "1 document ids", "2 lines"]),
        (["fairseq-rope-contrastive", "--checkpoint", missing, "--data-bin", str(tmp), "--context", "0",
          "--json", missing, "--text", str(tmp / "t")], ["--json", missing]),
        (["fairseq-rope-contrastive", "--checkpoint", missing, "--data-bin", str(tmp), "--context", "0",
          "--json", str(not_json), "--text", str(tmp / "t")], [str(not_json), "not JSON"]),
        (["fairseq-rope-translate", "--model-dir", missing, "--data-bin", str(tmp)], ["--model-dir", missing]),
        (["fairseq-rope-translate", "--model-dir", str(tmp), "--data-bin", str(tmp), "--nesting-limit", "-1"],
         ["--nesting-limit must be >= 0, got -1"]),
        (["fairseq-rope-translate", "--model-dir", str(tmp), "--data-bin", str(tmp), "--checkpoint-file", "x.pt"],
         [str(tmp / "x.pt"), "checkpoint not found"]),
        (["fairseq-rope-prep", "tokenize", "--lang", "en", "-i", str(text), "-o", str(save)],
         ["--output", str(save), "is a directory"]),
        (["fairseq-rope-prep", "tokenize", "--lang", "en", "-i", str(text), "-o", str(tmp / "no" / "out.txt")],
         ["--output", "its folder", "does not exist"]),
        (["fairseq-rope-prep", "clean", "--src", str(text), "--tgt", str(text), "--out-src", str(save), "--out-tgt",
          str(tmp / "t")], ["--out-src", "is a directory"]),
        (["fairseq-rope-prep", "spm-train", "--inputs", str(text), "--model-prefix", str(tmp / "no" / "spm")],
         ["--model-prefix", "does not exist"]),
        (["fairseq-rope-prep", "spm-train", "--inputs", str(text), "--model-prefix", str(tmp / "spm"), "--vocab-size",
          "50"], ["sentencepiece: Vocabulary size too high (50)", "--soft-vocab-limit"]),
        (["fairseq-rope-compare", "--src", str(text), "--hyp", f"a={text}", "--ref", str(text), "--out-md",
          str(tmp / "no" / "x.md")], ["--out-md", "does not exist"]),
        (["fairseq-rope-progress", "--log", str(save), "--", "true"], ["--log", str(save), "is a directory"]),
        (["fairseq-rope-serve", "--model", missing, str(tmp)], ["--model directory not found", missing]),
        (["fairseq-rope-serve", "--model", str(tmp)], ["no model.bin", "--model MODEL_DIR DATA_BIN"]),
        (["fairseq-rope-serve", "--model", str(tmp), str(tmp), "--checkpoint-file", "x.pt"],
         [str(tmp / "x.pt"), "checkpoint not found"]),
        (["fairseq-rope-serve", "--model", str(tmp), str(tmp), str(tmp)], ["MODEL_DIR and optionally DATA_BIN"]),
        (["fairseq-rope-serve", "--model", str(tmp), str(tmp), "--port", "70000"], ["--port must be 1 to 65535"]),
        (["fairseq-rope-serve", "--model", str(tmp), str(tmp), "--nesting-limit", "-1"],
         ["--nesting-limit must be >= 0, got -1"]),
        (["fairseq-rope-serve", "--model", str(tmp), str(tmp), "--api-keys", str(text)],
         [str(text), "line 1", "requests per minute"]),
        (["fairseq-rope-serve", "--model", str(tmp), str(tmp), "--api-keys", str(no_key)],
         ["--api-keys", str(no_key), "holds no key"]),
    ]


def test_every_command_reports_bad_input_as_one_error_line_with_status_1(tmp_path):
    """Each command given each kind of bad input it takes (a missing file, a damaged checkpoint,
    files that do not match, a bad value): ``PROG: error: ...`` naming the file, flag or value, exit
    status 1, no traceback, nothing on stdout; every installed command is tried. Run in this process
    through each command's main(argv) (an InputError is a SystemExit whose message Python prints on
    stderr with status 1, so this is what the installed command does; a few are also run as installed)."""
    import contextlib
    import importlib
    import io

    cases = bad_inputs(tmp_path)
    assert {argv[0] for argv, _ in cases} == set(COMMANDS)
    for argv, words in cases:
        where = " ".join(argv)
        main = importlib.import_module(f"fairseq_rope_cli.{COMMANDS[argv[0]][0]}").main
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as exit_:
            main(argv[1:])
        message = exit_.value.code
        assert isinstance(message, str), (where, message)  # a str: printed on stderr, status 1
        assert message.startswith(f"{argv[0]}: error: "), (where, message)
        for word in words:
            assert word in message, (where, word, message)
        assert stdout.getvalue() == "", (where, stdout.getvalue())
    for argv, words in cases[:: len(cases) // 4]:  # as installed: the same line on stderr, status 1
        done = subprocess.run([os.path.join(BIN, argv[0]), *argv[1:]], capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and f"{argv[0]}: error: " in done.stderr and "Traceback" not in done.stderr, \
            (argv, done.stderr[-2000:])
        assert all(word in done.stderr for word in words) and done.stdout == "", argv


def test_scripts_with_a_shebang_are_executable_and_nothing_edits_sys_path():
    """Every script meant to be run (a #! first line) in recipes/ and scripts/ has its executable
    bit; no Python file of the project changes sys.path (tools are installed commands or modules)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = [os.path.join(root, name) for top in ("recipes", "scripts", "fairseq_rope", "fairseq_rope_checkpoints", "fairseq_rope_cli", "tests")
             for root, _, names in os.walk(os.path.join(repo, top)) for name in names
             if name.endswith((".py", ".sh"))]
    assert len(files) > 30
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.startswith("#!"):
            assert os.access(path, os.X_OK), f"{path} has a shebang but is not executable"
        code = "\n".join(line.split("#")[0] for line in text.splitlines())
        assert not re.search(r"sys\.path\.(insert|append|extend)\(|sys\.path\s*(\+)?=", code), path
