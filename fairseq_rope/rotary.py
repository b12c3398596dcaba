"""Rotary Position Embedding (RoFormer, Su et al., eq. 14-16 and 34).

A query or key x at position m is rotated pair by pair:

    (x_{2i-1}, x_{2i}) -> (x_{2i-1} cos m*theta_i - x_{2i} sin m*theta_i,
                           x_{2i-1} sin m*theta_i + x_{2i} cos m*theta_i),
    theta_i = base^(-2(i-1)/d),  i = 1 .. d/2,

so that <R_m q, R_n k> depends on m - n only (eq. 16). Eq. 34 writes the same rotation with two
element-wise products, which is how it is computed here:

    R_m x = x * cos(m theta) + swap(x) * sin(m theta),   swap(x) = (-x_2, x_1, -x_4, x_3, ...),

with cos and sin repeated for both channels of a pair. The cache holds, per position m, that
``cos`` row and the ``sin`` row with swap's signs folded in, so a rotation is one copy (swap
without signs) and two fused multiply-adds, in any dtype.

Two pairings of the d dimensions are supported:
  * "interleaved": pairs (0,1), (2,3), ... exactly as in eq. 15 and 34 of the paper;
  * "half": pairs (i, i + d/2), the "rotate_half" form of GPT-NeoX and most LLM code.
They differ by a fixed permutation of the head dimensions, so a model trained with one
can be converted to the other by permuting the rows of its q/k projections.

Two implementations of the same rotation: :func:`apply_rotary` is eq. 34 (any layout and dtype);
:func:`apply_rotary_complex` is eq. 34 as one complex product x * e^{i m theta} over adjacent
pairs (interleaved layout, float32 only: there is no complex bfloat16), one kernel forward and one
backward, the fastest form on CPUs. The tests check that both agree, values and gradients.
:meth:`RotaryEmbedding.rotate_qkv` takes q, k and v stacked, as the attention's one projection
gives them, and in the complex form rotates all three in one product (v by 1).

Angles m*theta_i are computed in float64 from integer positions, whatever the dtype of the
model (a float16 m*theta is off by whole radians at long positions), then cast once to the
cache's dtype; callers cast the rows they use to the dtype of their q and k (under autocast the
module stays float32 while q and k are float16/bfloat16). The cache grows on demand and is
never saved in a state dict.
"""

import math

import torch
from torch import nn

LAYOUTS = ("interleaved", "half")
# Rotations for inputs longer than the training lengths (none = the paper's): theta_i' of
#   linear: theta_i / F                  position interpolation (Chen et al. 2023): m -> m / F
#   ntk:    base' = base * F^(d/(d-2))    NTK-aware scaling (bloc97 2023): low frequencies interpolated,
#                                         the highest kept
#   yarn:   (1 - g_i) theta_i / F + g_i theta_i, g_i = clamp((L / lambda_i - 1) / (32 - 1), 0, 1),
#           lambda_i = 2 pi / theta_i, and q, k scaled by 0.1 ln F + 1 (YaRN, Peng et al. 2023, with
#           its alpha = 1, beta = 32): dimensions that turn fewer than once over the training
#           length L are interpolated, those that turn 32+ times kept
SCALINGS = ("none", "linear", "ntk", "yarn")
YARN_ALPHA, YARN_BETA = 1.0, 32.0


class RotaryEmbedding(nn.Module):
    """Rotates the first ``dim`` channels of the last axis of q/k by their positions.

    Args:
        dim: number of rotated channels (even); channels past ``dim`` pass unchanged.
        theta: the base of eq. 15's frequencies (10000 in the paper).
        layout: "interleaved" (the paper's pairing) or "half" (rotate_half).
    """

    def __init__(self, dim: int, theta: float = 10000.0, layout: str = "interleaved", scaling: str = "none",
                 factor: float = 1.0, original_positions: int = None):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"rotary dim must be a positive even number, got {dim}")
        if not theta > 0:
            raise ValueError(f"rotary theta must be > 0, got {theta}")
        if layout not in LAYOUTS:
            raise ValueError(f"rotary layout must be one of {LAYOUTS}, got {layout!r}")
        check_scaling(scaling, factor, original_positions, dim)
        self.dim, self.theta, self.layout = dim, float(theta), layout
        self.scaling, self.factor, self.original_positions = scaling, float(factor), original_positions
        # for positions m < len(cache): eq. 34's cos and signed sin rows, and (cos, sin) of each angle,
        # the real view of e^{i m theta} for the complex form; buffers so that .to()/.half()/.cuda()
        # move them, non-persistent so that checkpoints never carry them.
        self.register_buffer("cos_cached", torch.empty(0, dim), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, dim), persistent=False)
        self.register_buffer("rotation_cached", torch.empty(0, dim // 2, 2), persistent=False)
        self._qkv_rotation = {}  # qkv_rotation's tables, one per q_scale, made from rotation_cached when needed

    def extra_repr(self):
        scaling = "" if self.scaling == "none" else f", scaling={self.scaling}, factor={self.factor:g}" + (
            f", original_positions={self.original_positions}" if self.scaling == "yarn" else "")
        return f"dim={self.dim}, theta={self.theta:g}, layout={self.layout}{scaling}"

    def inv_freq(self) -> torch.Tensor:
        """theta_i = theta^(-2(i-1)/d) for i = 1 .. d/2, in float64, after the scaling (SCALINGS)."""
        exponents = torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim
        freq = self.theta ** -exponents
        if self.scaling == "linear":
            return freq / self.factor
        if self.scaling == "ntk":
            return (self.theta * self.factor ** (self.dim / (self.dim - 2))) ** -exponents
        if self.scaling == "yarn":
            turns = self.original_positions * freq / (2 * math.pi)  # L / lambda_i
            kept = ((turns - YARN_ALPHA) / (YARN_BETA - YARN_ALPHA)).clamp(0, 1)
            return freq / self.factor * (1 - kept) + freq * kept
        return freq

    def magnitude(self) -> float:
        """What q and k are multiplied by with the rotation: YaRN's sqrt(1/t) = 0.1 ln F + 1, else 1."""
        return 0.1 * math.log(self.factor) + 1 if self.scaling == "yarn" else 1.0

    def _grow(self, length: int):
        """Makes the cache cover positions 0 .. length-1 (rounded up to a power of two).

        Angles are computed once, in float64 on the CPU, and only then cast to the
        cache's dtype and moved to its device."""
        if length <= self.cos_cached.size(0):
            return
        length = max(64, 1 << (length - 1).bit_length())
        angles = torch.outer(torch.arange(length, dtype=torch.float64), self.inv_freq())  # L x d/2
        cos, sin = angles.cos() * self.magnitude(), angles.sin() * self.magnitude()
        device, dtype = self.cos_cached.device, self.cos_cached.dtype
        self.rotation_cached = torch.stack((cos, sin), -1).to(device=device, dtype=dtype)
        if self.layout == "interleaved":  # channels (2i, 2i+1) share angle i; swap(x)_{2i} = -x_{2i+1}
            cos, sin = cos.repeat_interleave(2, -1), torch.stack((-sin, sin), -1).flatten(-2)
        else:  # channels (i, i + d/2) share angle i; swap(x)_i = -x_{i+d/2}
            cos, sin = torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)
        self.cos_cached = cos.to(device=device, dtype=dtype)
        self.sin_cached = sin.to(device=device, dtype=dtype)
        self._qkv_rotation = {}

    def _apply(self, fn, *args, **kwargs):
        """After .half()/.float()/.to(dtype) the cache is emptied and regrown from float64 angles,
        so that float32 after float16 has float32 accuracy again."""
        dtype = self.cos_cached.dtype
        super()._apply(fn, *args, **kwargs)
        self._qkv_rotation = {}
        if self.cos_cached.dtype != dtype:
            self.cos_cached, self.sin_cached, self.rotation_cached = (
                t[:0] for t in (self.cos_cached, self.sin_cached, self.rotation_cached))
        return self

    def cos_sin(self, start: int, end: int, dtype: torch.dtype):
        """Eq. 34's cos and signed sin rows of positions start .. end-1, each (end - start) x dim,
        in ``dtype`` (views of the cache when it has that dtype)."""
        self._grow(end)
        return self.cos_cached[start:end].to(dtype), self.sin_cached[start:end].to(dtype)

    def rotate(self, x: torch.Tensor, start: int = 0, fast: bool = False) -> torch.Tensor:
        """Rotates ``x`` (... x T x C, positions along the second-last axis as in B x H x T x D) at
        positions start .. start+T-1, in x's dtype: the T x C rows of the cache broadcast over the
        leading axes. ``fast``: as one complex product where :func:`apply_rotary_complex` applies."""
        end = start + x.size(-2)
        if fast and complex_applies(x, self):
            self._grow(end)
            return apply_rotary_complex(x, torch.view_as_complex(self.rotation_cached[start:end]))
        cos, sin = self.cos_sin(start, end, x.dtype)
        return apply_rotary(x, cos, sin, self.layout)

    def qkv_rotation(self, end: int, q_scale: float = 1.0) -> torch.Tensor:
        """(q_scale e^{i m theta}, e^{i m theta}, 1) for positions m < end and beyond, complex,
        L x 1 x 3 x 1 x C/2: what q, k and v are multiplied by in the complex form (:meth:`rotate_qkv`;
        the attention's decoding step folds its 1/sqrt(d) into q's with ``q_scale``). Made once per
        q_scale from the cache and kept until the cache grows or moves."""
        table = self._qkv_rotation.get(q_scale)
        if table is None or table.size(0) < end:
            self._grow(end)  # (empties _qkv_rotation when it grows)
            e = torch.view_as_complex(self.rotation_cached)
            table = torch.stack((e * q_scale, e, torch.ones_like(e)), 1)[:, None, :, None]
            self._qkv_rotation[q_scale] = table
        return table

    def rotate_qkv(self, qkv: torch.Tensor, start: int = 0, fast: bool = False):
        """q, k, v of ``qkv`` (T x B x 3 x H x C, as one projection of fairseq's T x B x C input gives
        them, positions along the first axis), q and k rotated as by :meth:`rotate`, v unchanged; each
        T x B x H x C. ``fast`` where the complex form applies: one complex product of all three with
        :meth:`qkv_rotation` (v times 1 is v, exactly), which costs fewer operations than separating v
        first; in a decoding step, per-operation overhead is most of the rotation's cost. Otherwise q
        and k are rotated in one call."""
        end = start + qkv.size(0)
        if fast and complex_applies(qkv, self):
            return apply_rotary_complex(qkv, self.qkv_rotation(end)[start:end]).unbind(2)
        qk, v = qkv.split([2, 1], dim=2)  # split, not indexing: its backward is one cat, not zero-filled copies
        cos, sin = (t.view(-1, 1, 1, 1, t.size(-1)) for t in self.cos_sin(start, end, qkv.dtype))
        q, k = apply_rotary(qk, cos, sin, self.layout).unbind(2)
        return q, k, v.squeeze(2)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotates ``x`` (..., T, C) by integer ``positions`` broadcastable to x[..., 0] (eq. 34)."""
        end = int(positions.max()) + 1 if positions.numel() else 0
        cos, sin = self.cos_sin(0, end, x.dtype)
        return apply_rotary(x, cos[positions], sin[positions], self.layout)


def check_scaling(scaling, factor, original_positions, dim):
    """Fails naming the flag: --rope-scaling, --rope-scaling-factor, --rope-original-max-positions."""
    if scaling not in SCALINGS:
        raise ValueError(f"--rope-scaling must be one of {', '.join(SCALINGS)}; got {scaling!r}")
    if scaling == "none":
        if factor != 1:
            raise ValueError(f"--rope-scaling-factor {factor:g} needs a --rope-scaling (linear, ntk or yarn)")
        return
    if not factor >= 1:
        raise ValueError(f"--rope-scaling-factor must be >= 1 (how many times longer than in training); got {factor:g}")
    if scaling == "ntk" and dim <= 2:
        raise ValueError("--rope-scaling ntk needs at least 4 rotated channels (its exponent is d/(d-2)); "
                         f"--rope-dim is {dim}")
    if scaling == "yarn" and not (original_positions or 0) >= 1:
        raise ValueError("--rope-scaling yarn needs --rope-original-max-positions, the longest training "
                         f"sequence in tokens; got {original_positions}")


def swap_pairs(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Each channel's partner in its rotation pair: (x_2, x_1, x_4, x_3, ...) or, for the half
    layout, (x_{d/2+1}, ..., x_d, x_1, ..., x_{d/2}). Eq. 34's signs are in the sin rows."""
    if layout == "interleaved":
        return x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    return x.roll(x.size(-1) // 2, dims=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Eq. 34, x * cos + swap(x) * sin, on the first cos.size(-1) channels of ``x``."""
    rot = cos.size(-1)
    if rot == x.size(-1):
        return torch.addcmul(x * cos, swap_pairs(x, layout), sin)
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    return torch.cat((torch.addcmul(x_rot * cos, swap_pairs(x_rot, layout), sin), x_pass), dim=-1)


def complex_applies(x: torch.Tensor, rotary: RotaryEmbedding) -> bool:
    """Whether :func:`apply_rotary_complex` can rotate ``x`` with ``rotary``'s complex table:
    interleaved pairs, every channel rotated, float32 (the table's precision), pairs adjacent in memory."""
    return (
        rotary.layout == "interleaved"
        and x.size(-1) == rotary.dim
        and x.dtype == rotary.rotation_cached.dtype == torch.float32
        and x.storage_offset() % 2 == 0
        and (x.is_contiguous() or x.stride(-1) == 1 and all(stride % 2 == 0 for stride in x.stride()[:-1]))
    )


def apply_rotary_complex(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Eq. 34 for the interleaved layout as (x_{2i-1} + i x_{2i}) * e^{i m theta_i}: a view of ``x``
    as complex numbers times ``rotation`` (broadcast over x): the same values as :func:`apply_rotary`."""
    return torch.view_as_real(torch.view_as_complex(x.view(*x.shape[:-1], -1, 2)) * rotation).flatten(-2)
