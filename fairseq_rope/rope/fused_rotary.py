"""Eq. 34 as one Triton kernel: each query and key head rotated in one pass, forward and backward.

The eager rotation (rotary.py) is several kernels each way: a copy for the pair swap, a multiply, a
fused multiply-add, and as many again in the backward. Here one program reads a token's heads once,
rotates each pair (x1, x2) of the first ``rot`` channels by its angle,

    (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin),

copies the other channels, and writes the result: one launch forward, one backward. The backward of
a rotation is the rotation by the opposite angle (R_m^T = R_{-m}), so it is the same kernel with
sin negated. Arithmetic is float32 whatever the dtype of x (bfloat16 and float16 are rounded once,
on the store).

Which row of the cos/sin table a token takes:
  * ``rotate(x, start)``: row start + t (incremental decoding continues after the cache);
  * ``positions`` (B x T integers): row positions[b, t] (--rope-random-positions);
  * per-sentence tables (B x T x rot, --rope-scaling auto): row b*T + t of the flattened table.

The tables are rotary.py's: eq. 34's cos rows and signed sin rows. The angle of pair i is read where
the layout puts it: "interleaved" pairs channels (2i, 2i+1), with cos at 2i and +sin at 2i+1;
"half" pairs (i, i + rot/2), with cos at i and +sin at i + rot/2.

Triton comes with torch's CUDA wheels; the kernel runs on CUDA tensors, or on CPU tensors under
``TRITON_INTERPRET=1`` (set before triton is imported: how the tests check it without a GPU).
"""

import os
from typing import Optional

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU-only torch build: the eager rotation only
    triton = None

TRITON_INSTALLED = triton is not None
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def kernel_available(x: Tensor) -> bool:
    """Whether the kernel can rotate ``x``: Triton is installed and x is on a CUDA GPU (or on the CPU
    under the interpreter)."""
    return triton is not None and (x.is_cuda or (INTERPRET and x.device.type == "cpu"))


if triton is not None:
    @triton.jit
    def rotation_kernel(x_ptr, out_ptr, cos_ptr, sin_ptr, pos_ptr,
                        T, H, start, table_b_stride, table_stride, pos_b_stride, pos_t_stride,
                        x_b_stride, x_h_stride, x_t_stride, o_b_stride, o_h_stride, o_t_stride,
                        HALF: tl.constexpr, PASS: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
                        BLOCK_PASS: tl.constexpr, INTERLEAVED: tl.constexpr, HAS_POSITIONS: tl.constexpr,
                        INVERSE: tl.constexpr):
        # one program per token (b, t), all its heads: H x rot/2 pairs
        token = tl.program_id(0)
        b, t = token // T, token % T
        if HAS_POSITIONS:
            row = tl.load(pos_ptr + b * pos_b_stride + t * pos_t_stride).to(tl.int64)
        else:
            row = start + b * table_b_stride + t
        i = tl.arange(0, BLOCK_HALF)
        if INTERLEAVED:
            first, second = 2 * i, 2 * i + 1
        else:
            first, second = i, i + HALF
        pair_ok = i < HALF
        cos = tl.load(cos_ptr + row * table_stride + first, mask=pair_ok, other=0.0).to(tl.float32)
        sin = tl.load(sin_ptr + row * table_stride + second, mask=pair_ok, other=0.0).to(tl.float32)
        if INVERSE:
            sin = -sin
        h = tl.arange(0, BLOCK_H)[:, None]
        ok = (h < H) & pair_ok[None, :]
        x_row = x_ptr + b * x_b_stride + t * x_t_stride + h * x_h_stride
        o_row = out_ptr + b * o_b_stride + t * o_t_stride + h * o_h_stride
        x1 = tl.load(x_row + first[None, :], mask=ok, other=0.0).to(tl.float32)
        x2 = tl.load(x_row + second[None, :], mask=ok, other=0.0).to(tl.float32)
        tl.store(o_row + first[None, :], (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=ok)
        tl.store(o_row + second[None, :], (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=ok)
        if PASS > 0:  # channels rot .. D pass unchanged
            j = 2 * HALF + tl.arange(0, BLOCK_PASS)[None, :]
            pass_ok = (h < H) & (j < 2 * HALF + PASS)
            tl.store(o_row + j, tl.load(x_row + j, mask=pass_ok, other=0.0), mask=pass_ok)


def launch(x: Tensor, cos: Tensor, sin: Tensor, positions: Optional[Tensor], start: int, interleaved: bool,
           inverse: bool) -> Tensor:
    """x (B x H x T x D, any strides, channels contiguous) rotated into a new contiguous tensor."""
    B, H, T, D = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty((B, H, T, D), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    rot = cos.size(-1)
    per_sentence = cos.dim() == 3  # B x T x rot
    cos, sin = cos.reshape(-1, rot).contiguous(), sin.reshape(-1, rot).contiguous()
    pos = positions if positions is not None else cos  # (unused without positions)
    rotation_kernel[(B * T,)](
        x, out, cos, sin, pos, T, H, start, T if per_sentence else 0, rot,
        positions.stride(0) if positions is not None else 0, positions.stride(1) if positions is not None else 0,
        x.stride(0), x.stride(1), x.stride(2), out.stride(0), out.stride(1), out.stride(2),
        HALF=rot // 2, PASS=D - rot, BLOCK_H=triton.next_power_of_2(H),
        BLOCK_HALF=triton.next_power_of_2(max(rot // 2, 1)), BLOCK_PASS=triton.next_power_of_2(max(D - rot, 1)),
        INTERLEAVED=interleaved, HAS_POSITIONS=positions is not None, INVERSE=inverse)
    return out


class FusedRotation(torch.autograd.Function):
    """Eq. 34 on x (B x H x T x D) by the tables' rows (see the module's docstring); the gradient
    flows to x only (the tables are constants of the positions)."""

    @staticmethod
    def forward(ctx, x, cos, sin, positions, start, interleaved):
        ctx.save_for_backward(cos, sin, positions)
        ctx.start, ctx.interleaved = start, interleaved
        return launch(x, cos, sin, positions, start, interleaved, inverse=False)

    @staticmethod
    def backward(ctx, grad):
        cos, sin, positions = ctx.saved_tensors
        return launch(grad, cos, sin, positions, ctx.start, ctx.interleaved, inverse=True), None, None, None, None, None


def fused_rotation(x: Tensor, cos: Tensor, sin: Tensor, layout: str, start: int = 0,
                   positions: Optional[Tensor] = None) -> Tensor:
    """x (B x H x T x D) rotated on its first cos.size(-1) channels at table rows start + t, or
    ``positions[b, t]`` (B x T), or, for B x T x rot tables, each sentence's own row t."""
    if positions is not None:
        positions = positions.expand(x.size(0), x.size(2))
    return FusedRotation.apply(x, cos, sin, positions, start, layout == "interleaved")
