"""The fused rotation (--rope-rotation triton, fused_rotary.py) against eq. 34 in float64, forward and
backward, and a model with it against the eager model. On a CPU the kernel runs under Triton's
interpreter (TRITON_INTERPRET=1, set in conftest.py before triton is imported): float32 and float16
only (the interpreter has no bfloat16 arithmetic); tests/test_cuda.py runs it on a GPU."""

import logging
import os
import shutil
import subprocess
import sys

import pytest
import torch

from fairseq_rope.rope import fused_rotary, rotary
from fairseq_rope.rope.fused_rotary import TRITON_INSTALLED
from fairseq_rope.rope import RopeOptions
from fairseq_rope.rope.rotary import RotaryEmbedding

from conftest import INTERPRETER, random_tokens

pytestmark = pytest.mark.skipif(not (TRITON_INSTALLED and (INTERPRETER or torch.cuda.is_available())),
                                reason="Triton is not installed (a CPU-only torch build): no kernel to test")


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    """The kernel on CPU tensors through Triton's interpreter (built for it in conftest.py), for this
    module's tests only; every probe verdict and warning of "auto" forgotten before each test."""
    monkeypatch.setattr(fused_rotary, "INTERPRET", INTERPRETER)
    if INTERPRETER:  # (Triton's interpreter reads it at each launch as well)
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(rotary, "PROBED", {})
    monkeypatch.setattr(rotary, "SAID", set())

# float32 arithmetic in the kernel, one rounding to x's dtype on the store (bfloat16: on a GPU only)
TOLERANCES = {torch.float32: dict(rtol=1e-6, atol=1e-6), torch.float16: dict(rtol=1e-3, atol=1e-3),
              torch.bfloat16: dict(rtol=8e-3, atol=8e-3)}


def eq34(x, angles, layout):
    """Eq. 34 pair by pair in float64: x (B x H x T x D), angles (B x T x rot/2) = m theta_i; channel
    pairs (2i, 2i+1) or (i, i + rot/2); channels from rot on pass unchanged."""
    half = angles.size(-1)
    i = torch.arange(half)
    first, second = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + half)
    cos, sin = angles.cos()[:, None], angles.sin()[:, None]
    x1, x2 = x[..., first], x[..., second]
    out = x.clone()
    out[..., first], out[..., second] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    return out


def packed_qk(B, H, T, D, dtype, seed=0):
    """q and k as the attention hands them over: B x 2H x T x D, a strided view of a T x B x 3H x D
    projection (v's heads beside them)."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(T, B, 3 * H, D, generator=g).to(dtype)
    return qkv.permute(1, 2, 0, 3)[:, :2 * H].detach().requires_grad_()


def check_forward_backward(rotate, x, angles, layout):
    """rotate(x) = eq. 34 within x's rounding; its gradient = eq. 34's (float64 autograd) likewise.
    ``angles`` on x's device."""
    out = rotate(x)
    assert out.dtype == x.dtype and out.shape == x.shape
    x64 = x.detach().double().requires_grad_()
    want = eq34(x64, angles, layout)
    torch.testing.assert_close(out.double(), want, **TOLERANCES[x.dtype])
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(x.device, x.dtype)
    out.backward(grad)
    want.backward(grad.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, **TOLERANCES[x.dtype])


def angles_at(positions, rot, theta=10000.0):
    """B x T x rot/2: positions (B x T) times theta_i = theta^(-2i/rot)."""
    freq = theta ** (-torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    return positions.double()[..., None] * freq


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("D, rot", [(10, 10), (10, 6)])  # whole head, partial (--rope-dim)
@pytest.mark.parametrize("start", [0, 5, 300])  # offsets of incremental decoding (300: the table grows)
def test_fused_rotation_is_eq34_at_an_offset(layout, dtype, D, rot, start):
    B, H, T = 2, 3, 7  # a head count and a length that are no powers of two
    rope = RotaryEmbedding(D, RopeOptions(layout=layout, dim=None if rot == D else rot, rotation="triton")).to(dtype)
    x = packed_qk(B, H, T, D, dtype)
    positions = torch.arange(start, start + T).expand(B, T)
    check_forward_backward(lambda x: rope.rotate(x, start), x, angles_at(positions, rot), layout)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_fused_rotation_is_eq34_at_explicit_positions(layout, dtype):
    """--rope-random-positions: each sentence its own sorted positions, the same for every head."""
    B, H, T, D = 3, 2, 5, 8
    positions = torch.tensor([[0, 3, 9, 100, 1023], [1, 2, 3, 4, 5], [7, 40, 41, 600, 601]])
    rope = RotaryEmbedding(D, RopeOptions(layout=layout, rotation="triton")).to(dtype)
    x = packed_qk(B, H, T, D, dtype, seed=2)
    check_forward_backward(lambda x: rope.rotate_at(x, positions[:, None, :]), x, angles_at(positions, D), layout)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("start", [0, 4])
def test_fused_rotation_per_sentence_factors_equals_eager_in_float64(layout, start):
    """--rope-scaling auto: each sentence its own YaRN frequencies and magnitude (B x T tables); the
    kernel in float32 = the eager rotation in float64 (whose formula tests/test_length_generalisation.py
    checks), forward and backward."""
    B, H, T, D = 3, 2, 7, 8
    factors, length = torch.tensor([1.0, 1.5, 4.0], dtype=torch.float64), 6
    fused = RotaryEmbedding(D, RopeOptions(layout=layout, scaling="auto", rotation="triton"))
    eager = RotaryEmbedding(D, RopeOptions(layout=layout, scaling="auto", rotation="eager")).double()
    x = packed_qk(B, H, T, D, torch.float32, seed=3)
    out = fused.rotate_per_sentence(x, start, factors, length)
    x64 = x.detach().double().requires_grad_()
    want = eager.rotate_per_sentence(x64, start, factors, length)
    torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-6)
    grad = torch.randn(out.shape, dtype=torch.float64)
    out.backward(grad.float())
    want.backward(grad)
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("flags", [[], ["--rope-layout", "half", "--rope-dim", "4"]])
def test_model_with_the_fused_rotation_equals_the_eager_model(dict_dir, build, flags):
    """A tiny model whose every rotation is the kernel: the same outputs and gradients as with the eager
    rotation, in one pass and decoding incrementally (the kernel at each step's offset)."""
    eager, task = build(dict_dir, "rope_transformer", "--rope-rotation", "eager", *flags)
    fused, _ = build(dict_dir, "rope_transformer", "--rope-rotation", "triton", *flags)
    fused.load_state_dict(eager.state_dict())
    src, lengths = random_tokens(task, [9, 6], seed=5)
    prev, _ = random_tokens(task, [7, 7], seed=6, left_pad=False)
    outs = []
    for model in (eager, fused):
        out = model(src, lengths, prev)[0]
        out.square().sum().backward()
        outs.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-5)
    for got, want in zip(outs[1][1], outs[0][1]):  # (float32 rounded in another order)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=5e-5)
    with torch.no_grad():
        encoder_out = fused.encoder(src, src_lengths=lengths)
        state = {}
        steps = [fused.decoder(prev[:, :t + 1], encoder_out=encoder_out, incremental_state=state)[0]
                 for t in range(prev.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), outs[0][0], rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                    reason="torch.compile's CPU backend needs a C++ compiler (g++)")
def test_compiled_rotation_equals_eager():
    """--rope-rotation compile: apply_rotary through torch.compile = eager, forward and backward."""
    x = packed_qk(2, 2, 9, 8, torch.float32, seed=4)
    x2 = x.detach().clone().requires_grad_()
    for layout in ("interleaved", "half"):
        compiled = RotaryEmbedding(8, RopeOptions(layout=layout, dim=6, rotation="compile"))
        eager = RotaryEmbedding(8, RopeOptions(layout=layout, dim=6, rotation="eager"))
        for start in (0, 3):
            out, want = compiled.rotate(x, start), eager.rotate(x2, start)
            torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
            out.sum().backward(), want.sum().backward()
            torch.testing.assert_close(x.grad, x2.grad, rtol=1e-6, atol=1e-6)


def test_triton_rotation_where_the_kernel_cannot_run_names_the_flag():
    """--rope-rotation triton on the CPU without the interpreter: an error naming the flag and what
    to use instead (auto keeps the CPU on the eager path)."""
    code = ("import torch\nfrom fairseq_rope.rope import RopeOptions\nfrom fairseq_rope.rope.rotary import "
            "RotaryEmbedding\nx = torch.randn(1, 2, 3, 8)\n"
            "print(RotaryEmbedding(8, RopeOptions(rotation='auto')).rotate(x).shape)\n"
            "RotaryEmbedding(8, RopeOptions(rotation='triton')).rotate(x)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "0"})
    assert done.returncode == 1 and "torch.Size([1, 2, 3, 8])" in done.stdout
    assert "RuntimeError: --rope-rotation triton: the Triton kernel cannot rotate a cpu tensor" in done.stderr
    assert "use --rope-rotation auto or eager" in done.stderr


def count_kernel_calls(monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return fused_rotary.fused_rotation(*args, **kwargs)

    monkeypatch.setattr(rotary, "fused_rotation", counted)
    return calls


def test_auto_takes_the_kernel_once_it_has_passed_its_probe(monkeypatch):
    """auto on the CPU under the interpreter: the probe runs once (both layouts), passes, and every rotation
    then goes through the kernel, equal to the eager rotation."""
    calls = count_kernel_calls(monkeypatch)
    x = packed_qk(2, 2, 6, 8, torch.float32, seed=3)
    auto, eager = RotaryEmbedding(8, RopeOptions(rotation="auto")), RotaryEmbedding(8, RopeOptions(rotation="eager"))
    torch.testing.assert_close(auto.rotate(x, 2), eager.rotate(x, 2), rtol=1e-6, atol=1e-6)
    assert rotary.PROBED == {(torch.device("cpu"), torch.float32): None}
    assert calls == [(2, 4, 5, 12), (2, 4, 5, 12), (2, 4, 6, 8)]  # the probe's two layouts, then x
    auto.rotate(x, 0)
    assert len(calls) == 4  # probed once


GRAD_MODES = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode,
              "autocast_bf16": lambda: torch.autocast("cpu", dtype=torch.bfloat16)}


@pytest.mark.parametrize("mode", GRAD_MODES)
def test_the_probe_gives_its_verdict_in_every_grad_mode_and_leaves_the_callers_mode(monkeypatch, mode):
    """The first rotation of a process may come inside no_grad (fairseq-generate, the hub, the server),
    inference_mode or autocast: the probe still passes there (it needs autograd for its backward), the
    caller's mode is the same after it, and the rotation goes through the kernel, equal to eager."""
    calls = count_kernel_calls(monkeypatch)
    x = packed_qk(2, 2, 6, 8, torch.float32, seed=3).detach()
    auto, eager = RotaryEmbedding(8, RopeOptions(rotation="auto")), RotaryEmbedding(8, RopeOptions(rotation="eager"))
    with GRAD_MODES[mode]():
        state = (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu"))
        assert rotary.kernel_failure(torch.device("cpu"), torch.float32) is None
        assert (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu")) == state
        out, want = auto.rotate(x, 2), eager.rotate(x, 2)
    torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
    assert calls[-1] == (2, 4, 6, 8) and len(calls) == 3  # the probe's two layouts, then x


def test_a_probe_that_itself_fails_falls_back_to_eager_with_one_warning(monkeypatch, caplog):
    """An error of the probe's own code (not the kernel's: e.g. its reference's backward) is a verdict too:
    auto rotates eagerly and says why once, instead of raising in the user's first rotation."""
    def broken(device, dtype):
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")

    monkeypatch.setattr(rotary, "compare_with_eager", broken)
    x = packed_qk(2, 2, 6, 8, torch.float32, seed=3).detach()
    auto, eager = RotaryEmbedding(8, RopeOptions(rotation="auto")), RotaryEmbedding(8, RopeOptions(rotation="eager"))
    with caplog.at_level(logging.WARNING, logger="fairseq_rope.rope.rotary"), torch.no_grad():
        for start in (0, 4):
            assert torch.equal(auto.rotate(x, start), eager.rotate(x, start))
    assert [r.getMessage() for r in caplog.records] == [
        "--rope-rotation auto: the eager rotation on cpu (float32), not the Triton kernel: it failed on its probe "
        "(RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn)"]


def wrong_by(epsilon):
    """A kernel that is off by ``epsilon`` on every value it writes, forward and backward."""
    right = fused_rotary.launch
    return lambda *args, **kwargs: right(*args, **kwargs) + epsilon


def failing(*args, **kwargs):
    raise RuntimeError("PTX .version 9.9 does not support .target sm_00\nmore lines of the compiler")


@pytest.mark.parametrize("kernel, reason", [
    (failing, "it failed on its probe (RuntimeError: PTX .version 9.9 does not support .target sm_00)"),
    (wrong_by(1e-3), "its probe (interleaved layout) differs from the eager rotation by 0.001, more than the "),
])
def test_a_kernel_that_fails_or_is_wrong_is_not_used_by_auto_and_is_an_error_by_name(monkeypatch, caplog, kernel,
                                                                                     reason):
    """The probe catches a kernel that cannot compile or launch, and one that is wrong by 1e-3 (far above
    float32 rounding): auto rotates eagerly and says so once, naming the device, dtype and reason; triton,
    asked for by name, raises the reason."""
    monkeypatch.setattr(fused_rotary, "launch", kernel)
    x = packed_qk(2, 2, 6, 8, torch.float32, seed=3)
    auto, eager = RotaryEmbedding(8, RopeOptions(rotation="auto")), RotaryEmbedding(8, RopeOptions(rotation="eager"))
    with caplog.at_level(logging.WARNING, logger="fairseq_rope.rope.rotary"):
        for start in (0, 4):
            assert torch.equal(auto.rotate(x, start), eager.rotate(x, start))
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("--rope-rotation auto: the eager rotation on cpu (float32), not the Triton kernel: "
                                  + reason)
    with pytest.raises(RuntimeError) as error:
        RotaryEmbedding(8, RopeOptions(rotation="triton")).rotate(x)
    assert str(error.value).startswith("--rope-rotation triton: the Triton kernel on cpu (float32): " + reason)


def test_a_kernel_wrong_by_less_than_float32_rounding_passes_its_probe(monkeypatch):
    """The probe's tolerance is the dtype's rounding: an error of 1e-7 on values of magnitude ~3 passes in
    float32 (8 eps x 3 ~ 3e-6), 1e-5 does not."""
    monkeypatch.setattr(fused_rotary, "launch", wrong_by(1e-7))
    assert rotary.probe_kernel(torch.device("cpu"), torch.float32) is None
    monkeypatch.setattr(fused_rotary, "launch", wrong_by(1e-5))
    assert "differs from the eager rotation" in rotary.probe_kernel(torch.device("cpu"), torch.float32)


def test_bad_rotation_names_the_flag():
    with pytest.raises(ValueError) as error:
        RopeOptions(rotation="cuda")
    assert "--rope-rotation must be one of auto, eager, triton, compile; got 'cuda'" in str(error.value)
