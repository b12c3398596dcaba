"""The fairseq-rope-* commands: installed next to the interpreter, each with a complete --help that
answers without importing torch or fairseq, and runnable as python -m fairseq_rope_cli.<module>."""

import os
import subprocess
import sys

import pytest

BIN = os.path.dirname(sys.executable)
COMMANDS = {  # command: module, words its --help must show
    "fairseq-rope-average": ("average", ["--inputs", "--num-update-checkpoints", "--checkpoint-upper-bound", "weights_only"]),
    "fairseq-rope-prep": ("prep", ["tokenize", "detokenize", "clean", "sgm", "spm-train", "spm-encode"]),
    "fairseq-rope-score": ("score", ["--generate-output", "--ref", "compound-split"]),
    "fairseq-rope-results": ("results", ["RESULT.json", "--output"]),
    "fairseq-rope-compare": ("compare", ["--hyp", "--result", "--buckets", "paired bootstrap"]),
    "fairseq-rope-plot-training": ("plot_training", ["NAME=PATH", "--loss", "--log-format json"]),
    "fairseq-rope-ct2": ("ct2", ["--checkpoint", "--data-bin", "--output-dir", "--quantization", "int8", "--force",
                                 "--bpe-codes", "--sentencepiece-model", "weights_only"]),
    "fairseq-rope-ct2-generate": ("ct2_generate", ["CT2_DIR", "--data-bin", "--input", "--gen-subset", "--beam",
                                                   "--lenpen", "--remove-bpe", "--compute-type", "--threads"]),
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
                      ("spm-encode", "--model")):
        done = subprocess.run([os.path.join(BIN, "fairseq-rope-prep"), sub, "--help"], capture_output=True, text=True)
        assert done.returncode == 0 and flag in done.stdout, (sub, done.stderr)


def test_commands_import_neither_torch_nor_fairseq_until_they_run():
    """What keeps every --help instant: the command modules import only the standard library."""
    modules = ", ".join(f"fairseq_rope_cli.{module}" for module, _ in COMMANDS.values())
    code = f"import sys, {modules}; print(sorted(m for m in ('torch', 'fairseq', 'fairseq_rope', 'sacrebleu', 'matplotlib') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
