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

Angles m*theta_i are computed in float64 from integer positions, whatever the dtype of the
model (a float16 m*theta is off by whole radians at long positions), then cast once to the
cache's dtype; callers cast the rows they use to the dtype of their q and k (under autocast the
module stays float32 while q and k are float16/bfloat16). The cache grows on demand and is
never saved in a state dict.
"""

import torch
from torch import nn

LAYOUTS = ("interleaved", "half")


class RotaryEmbedding(nn.Module):
    """Rotates the first ``dim`` channels of the last axis of q/k by their positions.

    Args:
        dim: number of rotated channels (even); channels past ``dim`` pass unchanged.
        theta: the base of eq. 15's frequencies (10000 in the paper).
        layout: "interleaved" (the paper's pairing) or "half" (rotate_half).
    """

    def __init__(self, dim: int, theta: float = 10000.0, layout: str = "interleaved"):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"rotary dim must be a positive even number, got {dim}")
        if not theta > 0:
            raise ValueError(f"rotary theta must be > 0, got {theta}")
        if layout not in LAYOUTS:
            raise ValueError(f"rotary layout must be one of {LAYOUTS}, got {layout!r}")
        self.dim, self.theta, self.layout = dim, float(theta), layout
        # for positions m < len(cache): eq. 34's cos and signed sin rows, and (cos, sin) of each angle,
        # the real view of e^{i m theta} for the complex form; buffers so that .to()/.half()/.cuda()
        # move them, non-persistent so that checkpoints never carry them.
        self.register_buffer("cos_cached", torch.empty(0, dim), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, dim), persistent=False)
        self.register_buffer("rotation_cached", torch.empty(0, dim // 2, 2), persistent=False)

    def extra_repr(self):
        return f"dim={self.dim}, theta={self.theta:g}, layout={self.layout}"

    def inv_freq(self) -> torch.Tensor:
        """theta_i = theta^(-2(i-1)/d) for i = 1 .. d/2, in float64."""
        return self.theta ** -(torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim)

    def _grow(self, length: int):
        """Makes the cache cover positions 0 .. length-1 (rounded up to a power of two).

        Angles are computed once, in float64 on the CPU, and only then cast to the
        cache's dtype and moved to its device."""
        if length <= self.cos_cached.size(0):
            return
        length = max(64, 1 << (length - 1).bit_length())
        angles = torch.outer(torch.arange(length, dtype=torch.float64), self.inv_freq())  # L x d/2
        cos, sin = angles.cos(), angles.sin()
        device, dtype = self.cos_cached.device, self.cos_cached.dtype
        self.rotation_cached = torch.stack((cos, sin), -1).to(device=device, dtype=dtype)
        if self.layout == "interleaved":  # channels (2i, 2i+1) share angle i; swap(x)_{2i} = -x_{2i+1}
            cos, sin = cos.repeat_interleave(2, -1), torch.stack((-sin, sin), -1).flatten(-2)
        else:  # channels (i, i + d/2) share angle i; swap(x)_i = -x_{i+d/2}
            cos, sin = torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)
        self.cos_cached = cos.to(device=device, dtype=dtype)
        self.sin_cached = sin.to(device=device, dtype=dtype)

    def _apply(self, fn, *args, **kwargs):
        """After .half()/.float()/.to(dtype) the cache is emptied and regrown from float64 angles,
        so that float32 after float16 has float32 accuracy again."""
        dtype = self.cos_cached.dtype
        super()._apply(fn, *args, **kwargs)
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
        """Rotates ``x`` (T x ... x C, time first as in fairseq) at positions start .. start+T-1, in
        x's dtype; ``fast``: as one complex product where :func:`apply_rotary_complex` applies."""
        T = x.size(0)
        if fast and complex_applies(x, self):
            self._grow(start + T)
            rotation = torch.view_as_complex(self.rotation_cached[start : start + T])
            return apply_rotary_complex(x, rotation.view(T, *[1] * (x.dim() - 2), -1))
        cos, sin = (rows.view(T, *[1] * (x.dim() - 2), -1) for rows in self.cos_sin(start, start + T, x.dtype))
        return apply_rotary(x, cos, sin, self.layout)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotates ``x`` (..., T, C) by integer ``positions`` broadcastable to x[..., 0] (eq. 34)."""
        end = int(positions.max()) + 1 if positions.numel() else 0
        cos, sin = self.cos_sin(0, end, x.dtype)
        return apply_rotary(x, cos[positions], sin[positions], self.layout)


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
        and x.stride(-1) == 1
        and x.storage_offset() % 2 == 0
        and all(stride % 2 == 0 for stride in x.stride()[:-1])
    )


def apply_rotary_complex(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Eq. 34 for the interleaved layout as (x_{2i-1} + i x_{2i}) * e^{i m theta_i}: a view of ``x``
    as complex numbers times ``rotation`` (broadcast over x): the same values as :func:`apply_rotary`."""
    return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * rotation).flatten(-2)
