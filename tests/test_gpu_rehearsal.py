"""The GPU path as users run it, rehearsed on the CPU. On a GPU ``--rope-rotation auto`` (the default)
takes the fused Triton kernel once it has passed its probe, and the first rotation of a process often
comes inside ``torch.no_grad()`` (generation, the hub, the server). Under ``TRITON_INTERPRET=1`` the
CPU takes the same path: each step below runs in a fresh process, as a user runs it, so that the
probe's first call happens where it would on a GPU, and each must give what the eager rotation gives
(the same process without the interpreter): fairseq-train (with validation) within float32 rounding,
then fairseq-rope-average, fairseq-generate, fairseq-rope-translate --backend fairseq,
load_translator(backend="fairseq") and one request to fairseq-rope-serve --backend fairseq, with
the same translations; and the rotation in bfloat16 inside no_grad, within one unit of eq. 34.""" 

import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import CLI_TRAIN, reversal_task, run_tool
from fairseq_rope.rope.fused_rotary import TRITON_INSTALLED
from fairseq_rope_text.preprocessing import resolve

pytestmark = pytest.mark.skipif(not TRITON_INSTALLED or torch.cuda.is_available(),
                                reason="Triton is not installed (a CPU-only torch build), or a GPU runs the kernel "
                                       "itself (tests/test_cuda.py)")

SMALL = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
         "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2",
         "--decoder-attention-heads", "2"]
KERNEL_USED = "--rope-rotation auto: the Triton kernel on cpu (float32), which passed its probe"
FELL_BACK = "--rope-rotation auto: the eager rotation on"


def environment(kernel: bool):
    """A user's environment on this machine: with ``kernel``, Triton's interpreter on (auto takes the
    kernel on the CPU as on a GPU), else off (auto rotates eagerly)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    if kernel:
        env["TRITON_INTERPRET"] = "1"
    return env


def kernel_or_eager(kernel: bool):
    """run_tool's arguments for a command with the kernel (a new interpreter in a user's environment with Triton's
    interpreter on) or without it: forked from the tests' server process, whose Triton was imported with its
    interpreter off (conftest), as in a user's environment without it; one thread either way."""
    return {"env": environment(True)} if kernel else {"threads": 1}


def both(tool, *args, **kwargs):
    """{kernel: the finished process} of an installed command run with the kernel and without it."""
    return {kernel: run_tool(tool, *args, **kernel_or_eager(kernel), **kwargs) for kernel in (True, False)}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A toy task (reverse the word order) with its data-bin's preprocessing record, and a small model
    trained eagerly until its translations differ (--rope-rotation auto in its checkpoint, as by default)."""
    root = tmp_path_factory.mktemp("rehearsal")
    raw = reversal_task(root, {"train": 400, "valid": 20, "test": 12}, max_words=6)
    resolve(str(root / "bin"), "src", "tgt", bpe_codes=str(root / "codes")).write(str(root / "bin"))
    (root / "test.raw").write_text("".join(line + "\n" for line in raw["test", "src"]))
    run_tool("fairseq-train", root / "bin", "--arch", "rope_transformer", *CLI_TRAIN, *SMALL, "--max-update", "300",
             "--keep-last-epochs", "5", "--disable-validation", "--save-dir", root / "model", threads=1)  # (forked: eager)
    run_tool("fairseq-rope-average", "--inputs", root / "model", "--num-epoch-checkpoints", "5", "--output",
             root / "model" / "checkpoint_best.pt", env=environment(True))
    return root


def train_log(stdout_and_err: str):
    """fairseq's json log lines: (kind, record) for train_inner and valid records."""
    out = []
    for line in stdout_and_err.splitlines():
        start = line.find("{")
        for kind in ("train_inner", "valid"):
            if f"| {kind} |" in line and start >= 0:
                out.append((kind, json.loads(line[start:])))
    return out


def test_fairseq_train_with_the_kernel_equals_eager_training_validation_included(data, tmp_path):
    """fairseq-train --rope-rotation auto, 6 updates with validation every 3: the kernel taken after its probe
    (said once), every logged training and validation loss the eager run's (fairseq rounds them to 3
    decimals), and the weights after 6 Adam updates within float32 rounding of the eager ones."""
    runs = {}
    for kernel in (True, False):
        save = tmp_path / ("kernel" if kernel else "eager")
        result = run_tool("fairseq-train", data / "bin", "--arch", "rope_transformer", "--rope-rotation", "auto",
                          *CLI_TRAIN, *SMALL, "--max-update", "6", "--max-tokens", "120", "--validate-interval-updates",
                          "3", "--log-format", "json", "--log-interval", "1", "--no-epoch-checkpoints",
                          "--save-dir", save, **kernel_or_eager(kernel))
        runs[kernel] = (result.stdout + result.stderr, save / "checkpoint_last.pt")
    assert KERNEL_USED in runs[True][0] and FELL_BACK not in runs[True][0]
    assert KERNEL_USED not in runs[False][0]
    logs = {kernel: train_log(runs[kernel][0]) for kernel in runs}
    assert [kind for kind, _ in logs[True]].count("valid") >= 2 and len(logs[True]) >= 8, logs[True]
    def losses(log):
        prefix = {"train_inner": "", "valid": "valid_"}
        return [(kind, record[prefix[kind] + "loss"], record[prefix[kind] + "nll_loss"]) for kind, record in log]

    assert losses(logs[True]) == losses(logs[False])
    kernel_weights, eager_weights = (torch.load(runs[k][1], weights_only=False)["model"] for k in (True, False))
    # (the cross-attention's key bias adds one constant to all scores of a query: softmax cancels it, its
    # gradient is rounding noise, which Adam's normalised step turns into steps of the learning rate's size)
    for name, weight in eager_weights.items():
        if not name.endswith("encoder_attn.k_proj.bias"):
            torch.testing.assert_close(kernel_weights[name], weight, rtol=0, atol=1e-5, msg=name)


def generated(stdout: str):
    """fairseq-generate's H (hypothesis) and P (positional scores) lines: {id: (text, [scores])}."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            name, score, text = line.split("\t")
            out.setdefault(name[2:], [None, []])[0] = text
            out[name[2:]][1].insert(0, float(score))
        elif line.startswith("P-"):
            name, scores = line.split("\t")
            out.setdefault(name[2:], [None, []])[1].extend(map(float, scores.split()))
    return out


def test_fairseq_generate_with_the_kernel_inside_no_grad_equals_eager(data):
    """fairseq-generate (evaluate.sh's beam 4): its first rotation comes inside no_grad; the kernel is taken
    after its probe, every hypothesis is the eager rotation's and its scores within float32 rounding."""
    runs = both("fairseq-generate", data / "bin", "--user-dir", os.path.dirname(__import__("fairseq_rope").__file__),
                "--path", data / "model" / "checkpoint_best.pt", "--gen-subset", "test", "--beam", "4", "--lenpen",
                "0.6", "--remove-bpe", "--cpu", "--batch-size", "4")
    assert KERNEL_USED in runs[True].stderr and FELL_BACK not in runs[True].stderr
    assert KERNEL_USED not in runs[False].stderr
    kernel, eager = generated(runs[True].stdout), generated(runs[False].stdout)
    sources = [line for line in runs[False].stdout.splitlines() if line.startswith("S-")]
    assert len(eager) == len(sources) >= 8 and len({text for text, _ in eager.values()}) > 3
    assert {n: text for n, (text, _) in kernel.items()} == {n: text for n, (text, _) in eager.items()}
    for n, (_, scores) in eager.items():
        torch.testing.assert_close(kernel[n][1], scores, rtol=1e-5, atol=1e-5, msg=n)


def test_fairseq_rope_translate_on_fairseq_with_the_kernel_equals_eager(data):
    """fairseq-rope-translate --backend fairseq, running text in, with the kernel: exit 0, the eager text out."""
    runs = both("fairseq-rope-translate", "--model-dir", data / "model", "--data-bin", data / "bin", "--input",
                data / "test.raw", "--backend", "fairseq", "--device", "cpu")
    assert FELL_BACK not in runs[True].stderr
    assert runs[True].stdout == runs[False].stdout and len(set(runs[True].stdout.splitlines())) > 3


SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO)
from fairseq_rope.hub import load_translator
mt = load_translator(sys.argv[1], sys.argv[2], backend="fairseq", device="cpu")
for line in open(sys.argv[3]):
    print(mt.translate(line.strip()))
"""


def test_load_translator_on_fairseq_with_the_kernel_equals_eager(data):
    """The Python API, backend="fairseq", in a fresh interpreter: the kernel taken inside the hub's no_grad,
    each translation the eager one."""
    runs = {kernel: subprocess.run([sys.executable, "-c", SCRIPT, data / "model", data / "bin", data / "test.raw"],
                                   capture_output=True, text=True, env=environment(kernel)) for kernel in (True, False)}
    for result in runs.values():
        assert result.returncode == 0, result.stderr[-3000:]
    assert KERNEL_USED in runs[True].stderr and FELL_BACK not in runs[True].stderr
    assert runs[True].stdout == runs[False].stdout and len(set(runs[True].stdout.splitlines())) > 3


def test_fairseq_rope_serve_on_fairseq_with_the_kernel_answers_as_eager(data):
    """One request to fairseq-rope-serve --backend fairseq with the kernel: the eager translate_text's answer."""
    from test_serve import Server

    text = "".join(data.joinpath("test.raw").read_text().splitlines(keepends=True)[:6])
    answers = {}
    for kernel in (True, False):
        server = Server((data / "model", data / "bin"), "--log-level", "info", backend="fairseq",
                        env=environment(True) if kernel else None)  # (None: forked, as both() runs the eager one)
        try:
            status, answer, _ = server.call("POST", "/translate", {"q": text, "source": "src", "target": "tgt"})
        finally:
            assert server.stop()
        err = server.log
        assert status == 200, answer
        assert (KERNEL_USED in err) == kernel and FELL_BACK not in err, err[-3000:]
        answers[kernel] = answer["translatedText"]
    assert answers[True] == answers[False] and len(set(answers[True].splitlines())) > 3


def test_bfloat16_with_the_kernel_inside_no_grad_is_eq34_within_one_rounding():
    """bfloat16, as --bf16 runs on a GPU: in a fresh process, inside no_grad, auto takes the kernel after its
    probe in bfloat16, and its rotation is within one bfloat16 unit of eq. 34 in float64 and no further
    from it than the eager rotation in bfloat16 (on a GPU the kernel computes in float32 and rounds once;
    the interpreter's bfloat16 arithmetic is its own)."""
    script = """
import torch
from fairseq_rope.options import RopeOptions
from fairseq_rope.rotary import RotaryEmbedding
x = torch.randn(2, 4, 6, 8, generator=torch.Generator().manual_seed(0)).bfloat16()
with torch.no_grad():
    kernel = RotaryEmbedding(8, RopeOptions(rotation="auto")).rotate(x, 3).double()
    eager = RotaryEmbedding(8, RopeOptions(rotation="eager")).rotate(x, 3).double()
    exact = RotaryEmbedding(8, RopeOptions(rotation="eager")).double().rotate(x.double(), 3)
ulp = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - 7)  # bfloat16: 8 significant bits
print(bool(((kernel - exact).abs() <= ulp + 1e-12).all()), float((kernel - exact).abs().max()),
      float((eager - exact).abs().max()))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment(True))
    assert result.returncode == 0, result.stderr[-3000:]
    within_a_unit, kernel_error, eager_error = result.stdout.split()
    assert "--rope-rotation auto: the Triton kernel on cpu (bfloat16), which passed its probe" in result.stderr
    assert within_a_unit == "True" and float(kernel_error) <= float(eager_error), result.stdout
