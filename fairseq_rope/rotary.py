"""Rotary Position Embedding (RoFormer, Su et al., eq. 14-16 and 34).

A query or key x at position m is rotated pair by pair:

    (x_{2i-1}, x_{2i}) -> (x_{2i-1} cos m*theta_i - x_{2i} sin m*theta_i,
                           x_{2i-1} sin m*theta_i + x_{2i} cos m*theta_i),
    theta_i = base^(-2(i-1)/d),  i = 1 .. d/2,

so that <R_m q, R_n k> depends on m - n only (eq. 16).

Two pairings of the d dimensions are supported:
  * "interleaved": pairs (0,1), (2,3), ... exactly as in eq. 15 and 34 of the paper;
  * "half": pairs (i, i + d/2), the "rotate_half" form of GPT-NeoX and most LLM code.
They differ by a fixed permutation of the head dimensions, so a model trained with one
can be converted to the other by permuting the rows of its q/k projections.

Two implementations of the same rotation: :func:`apply_rotary` writes eq. 34 out (the reference,
any layout and dtype); :func:`apply_rotary_complex` is eq. 34 as one complex product
x * e^{i m theta} over adjacent pairs (the interleaved layout, float32/float64), one kernel
forward and one backward instead of about eight. The attention's fast path uses the latter where
it applies; the tests check that both agree, values and gradients.

Angles m*theta_i are computed in float64 from integer positions, whatever the dtype of the
model (a float16 m*theta is off by whole radians at long positions); cos/sin are cached in
the module's dtype and device, grow on demand and are never saved in a state dict.
"""

from typing import Optional

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
        # cos/sin of m*theta_i for m < len(cache): buffers so that .to()/.half()/.cuda()
        # move them, non-persistent so that checkpoints never carry them.
        self.register_buffer("cos_cached", torch.empty(0, dim // 2), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, dim // 2), persistent=False)

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
        angles = torch.outer(torch.arange(length, dtype=torch.float64), self.inv_freq())
        like = self.cos_cached
        self.cos_cached = angles.cos().to(device=like.device, dtype=like.dtype)
        self.sin_cached = angles.sin().to(device=like.device, dtype=like.dtype)

    def cos_sin_range(self, start: int, end: int, dtype: torch.dtype):
        """cos/sin of positions start .. end-1, each (end - start) x dim/2."""
        self._grow(end)
        return self.cos_cached[start:end].to(dtype), self.sin_cached[start:end].to(dtype)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype, bound: Optional[int] = None):
        """cos/sin of integer ``positions``, each ``positions.shape + (dim/2,)``.

        ``bound`` (> every position) spares a device sync when the caller knows it.
        """
        if bound is None:
            bound = int(positions.max()) + 1 if positions.numel() else 0
        self._grow(bound)
        return self.cos_cached[positions].to(dtype), self.sin_cached[positions].to(dtype)

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, fast: bool = False) -> torch.Tensor:
        """Rotates ``x`` (..., C) by cos/sin from :meth:`cos_sin` (broadcast over x); ``fast``: as one
        complex product where :func:`apply_rotary_complex` applies."""
        if fast and complex_applies(x, cos, self.layout):
            return apply_rotary_complex(x, cos, sin)
        return apply_rotary(x, cos, sin, self.layout)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotates ``x`` (..., T, C) by integer ``positions`` broadcastable to x[..., 0]."""
        cos, sin = self.cos_sin(positions, x.dtype)
        return self.rotate(x, cos, sin)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Eq. 34: x * cos + rotate(x) * sin on the first 2*cos.size(-1) channels of ``x``."""
    rot = 2 * cos.size(-1)
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    if layout == "interleaved":
        x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    else:
        x1, x2 = x_rot[..., : rot // 2], x_rot[..., rot // 2 :]
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return torch.cat((out, x_pass), dim=-1) if x_pass.size(-1) else out


def complex_applies(x: torch.Tensor, cos: torch.Tensor, layout: str) -> bool:
    """Whether :func:`apply_rotary_complex` can rotate ``x``: interleaved pairs, every channel
    rotated, a real dtype with a complex counterpart (cos/sin's too), pairs adjacent in memory."""
    return (
        layout == "interleaved"
        and x.size(-1) == 2 * cos.size(-1)
        and x.dtype in (torch.float32, torch.float64)
        and cos.dtype == x.dtype
        and x.stride(-1) == 1
        and x.storage_offset() % 2 == 0
        and all(stride % 2 == 0 for stride in x.stride()[:-1])
    )


def apply_rotary_complex(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Eq. 34 for the interleaved layout as (x_{2i-1} + i x_{2i}) * (cos + i sin), a view of ``x``
    as complex numbers times e^{i m theta}: the same values as :func:`apply_rotary`."""
    rotation = torch.complex(cos, sin)
    return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * rotation).flatten(-2)
