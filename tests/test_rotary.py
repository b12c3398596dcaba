"""The rotation itself against the paper's definitions (eq. 15, 16, 34)."""

import math

import pytest
import torch

from fairseq_rope.rope import RopeOptions
from fairseq_rope.rope.rotary import RotaryEmbedding


def rotary_matrix(m, d, theta=10000.0, layout="interleaved"):
    """Eq. 15: the block-diagonal d x d rotation for position m, in float64.

    For the "half" layout the same 2x2 blocks act on channel pairs (i, i + d/2)."""
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        angle = m * theta ** (-2 * i / d)
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
        R[a, a], R[a, b] = math.cos(angle), -math.sin(angle)
        R[b, a], R[b, b] = math.sin(angle), math.cos(angle)
    return R


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotation_is_eq15_block_diagonal_matrix(layout):
    d, T = 16, 40
    rope = RotaryEmbedding(d, RopeOptions(layout=layout)).double()
    x = torch.randn(3, T, d, dtype=torch.float64)
    out = rope.rotate_at(x, torch.arange(T))
    for m in range(T):
        expected = x[:, m] @ rotary_matrix(m, d, layout=layout).T
        torch.testing.assert_close(out[:, m], expected, rtol=1e-12, atol=1e-12)
    # the attention's method (positions start, start+1, ... along the second-last axis) is the same
    torch.testing.assert_close(rope.rotate(x, 0), out, rtol=0, atol=0)
    torch.testing.assert_close(rope.rotate(x[:, 5:], 5), out[:, 5:], rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [None, 10])
@pytest.mark.parametrize("start, T", [(0, 9), (13, 1), (600, 3)])
def test_float32_rotation_and_its_gradient_are_eq15_within_float32_rounding(layout, dim, start, T):
    """The eager rotation in float32, as the attention calls it (q and k of a T x B x 3H x D projection
    permuted to B x 2H x T x D, not contiguous; one query while decoding): eq. 15's R_m x, and its gradient
    R_m^T g, within a few float32 roundings of float64, whole or partial rotary dimensions."""
    D, H = 16, 2
    rot = dim or D
    rope = RotaryEmbedding(D, RopeOptions(layout=layout, dim=dim, rotation="eager"))
    g = torch.Generator().manual_seed(start + T)
    qkv = torch.randn(T, 3, 3 * H, D, generator=g).permute(1, 2, 0, 3)  # B x 3H x T x D
    x = qkv[:, :2 * H].detach().requires_grad_()
    grad = torch.randn(3, 2 * H, T, D, generator=g)
    out = rope.rotate(x, start)
    out.backward(grad)
    R = torch.eye(D, dtype=torch.float64)
    for t in range(T):
        R[:rot, :rot] = rotary_matrix(start + t, rot, layout=layout)
        x64, g64 = x[:, :, t].detach().double(), grad[:, :, t].double()
        tolerance = 4 * torch.finfo(torch.float32).eps * x64.abs().max().item()
        torch.testing.assert_close(out[:, :, t].double(), x64 @ R.T, rtol=0, atol=tolerance)
        tolerance = 4 * torch.finfo(torch.float32).eps * g64.abs().max().item()
        torch.testing.assert_close(x.grad[:, :, t].double(), g64 @ R, rtol=0, atol=tolerance)


def test_interleaved_is_the_paper_pairing():
    """Eq. 34: x * cos + (-x2, x1, -x4, x3, ...) * sin, with theta_i = 10000^(-2(i-1)/d)."""
    d = 8
    x = torch.randn(d, dtype=torch.float64)
    m = 7
    theta = torch.tensor([10000 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    cos, sin = (m * theta).cos().repeat_interleave(2), (m * theta).sin().repeat_interleave(2)
    swapped = torch.stack([-x[1::2], x[0::2]], dim=-1).flatten()
    expected = x * cos + swapped * sin
    out = RotaryEmbedding(d, RopeOptions()).double().rotate_at(x[None], torch.tensor([m]))[0]
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_norm_preserved_and_scores_depend_only_on_offset(layout):
    d = 32
    rope = RotaryEmbedding(d, RopeOptions(layout=layout)).double()
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)
    for m, n in [(0, 0), (3, 11), (100, 37), (1857, 1500)]:
        rq = rope.rotate_at(q[None], torch.tensor([m]))[0]
        rk = rope.rotate_at(k[None], torch.tensor([n]))[0]
        torch.testing.assert_close(rq.norm(), q.norm())
        for shift in torch.randint(0, 5000, (5,), generator=g).tolist():
            sq = rope.rotate_at(q[None], torch.tensor([m + shift]))[0]
            sk = rope.rotate_at(k[None], torch.tensor([n + shift]))[0]
            torch.testing.assert_close(sq @ sk, rq @ rk, rtol=1e-9, atol=1e-9)
    # and they do depend on the offset
    scores = [rope.rotate_at(q[None], torch.tensor([m]))[0] @ k for m in range(4)]
    assert len({round(float(s), 6) for s in scores}) == 4


def test_partial_rotation_leaves_the_rest_unchanged():
    rope = RotaryEmbedding(20, RopeOptions(dim=8)).double()
    x = torch.randn(5, 20, dtype=torch.float64)
    out = rope.rotate_at(x, torch.arange(5))
    torch.testing.assert_close(out[:, 8:], x[:, 8:], rtol=0, atol=0)
    torch.testing.assert_close(out[:, :8], rope.rotate_at(x[:, :8], torch.arange(5)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_half_precision_long_positions(dtype, layout):
    """fp16/bf16 inputs at positions 0..8192 stay within half-precision rounding of float64.

    Angles computed in half precision would be off by whole radians out there; the cache is
    computed in float32 even after the module is cast with .half()/.to(bfloat16)."""
    d, T = 64, 8193
    rope = RotaryEmbedding(d, RopeOptions(layout=layout)).to(dtype)
    x = torch.randn(T, d).to(dtype)
    out = rope.rotate_at(x, torch.arange(T))
    assert out.dtype == dtype and rope.cos_table.dtype == dtype
    reference = RotaryEmbedding(d, RopeOptions(layout=layout)).double().rotate_at(x.double(), torch.arange(T))
    eps = torch.finfo(dtype).eps
    error = (out.double() - reference).abs().max().item()
    assert error <= 4 * eps * x.abs().max().item(), error
    # the table: each entry the float64 value rounded once to the dtype
    angles = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pair = slice(0, None, 2) if layout == "interleaved" else slice(0, d // 2)
    partner = slice(1, None, 2) if layout == "interleaved" else slice(d // 2, None)
    assert torch.equal(rope.cos_table[:T, pair], angles.cos().to(dtype))
    assert torch.equal(rope.sin_table[:T, partner], angles.sin().to(dtype))
    assert torch.equal(rope.sin_table[:T, pair], (-angles.sin()).to(dtype))


def test_cache_grows_on_demand_follows_dtype_and_is_not_saved():
    rope = RotaryEmbedding(16, RopeOptions())
    assert rope.state_dict() == {}
    rope.rotate_at(torch.randn(10, 16), torch.arange(10))
    small = rope.cos_table.size(0)
    x = torch.randn(1, 16)
    out = rope.rotate_at(x, torch.tensor([100_000]))
    assert rope.cos_table.size(0) > 100_000 > small
    expected = x.double() @ rotary_matrix(100_000, 16).T
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-6)
    rope.half()
    assert rope.cos_table.dtype == torch.float16
    assert rope.state_dict() == {}


@pytest.mark.parametrize(
    "options, message",
    [({"dim": 7}, "--rope-dim must be an even number >= 2 (the rotated channels of each head); got 7"),
     ({"dim": 10}, "--rope-dim must be at most the head dim 8; got 10"),
     ({"theta": 0.0}, "--rope-theta must be > 0; got 0.0"),
     ({"layout": "spiral"}, "--rope-layout must be one of interleaved, half; got 'spiral'"),
     ({"scaling": "ntk", "scaling_factor": 2.0, "dim": 2}, "--rope-scaling ntk needs at least 4 rotated channels")],
)
def test_bad_options_name_the_flag(options, message):
    with pytest.raises(ValueError) as error:
        RotaryEmbedding(8, RopeOptions(**options))
    assert message in str(error.value)
