"""Rotary Position Embedding (RoFormer, Su et al., eq. 14-16 and 34).

A query or key x at position m is rotated pair by pair:

    (x_{2i-1}, x_{2i}) -> (x_{2i-1} cos m*theta_i - x_{2i} sin m*theta_i,
                           x_{2i-1} sin m*theta_i + x_{2i} cos m*theta_i),
    theta_i = base^(-2(i-1)/d),  i = 1 .. d/2,

so that <R_m q, R_n k> depends on m - n only (eq. 16). Eq. 34 writes the same rotation with two
element-wise products, which is how it is computed here:

    R_m x = x * cos(m theta) + swap(x) * sin(m theta),   swap(x) = (-x_2, x_1, -x_4, x_3, ...),

with cos and sin repeated for both channels of a pair. The table holds, per position m, that
``cos`` row and the ``sin`` row with swap's signs folded in, so a rotation is one copy (swap
without signs) and two fused multiply-adds, in the dtype of x.

Two pairings of the d dimensions (``RopeOptions.layout``):
  * "interleaved": pairs (0,1), (2,3), ... exactly as in eq. 15 and 34 of the paper;
  * "half": pairs (i, i + d/2), the "rotate_half" form of GPT-NeoX and most LLM code.
They differ by a fixed permutation of the head dimensions, so a model trained with one
can be converted to the other by permuting the rows of its q/k projections.

Angles m*theta_i are computed in float64 from integer positions, whatever the dtype of the
model (a float16 m*theta is off by whole radians at long positions), then cast once to the
table's dtype; the rows used are cast to the dtype of q and k (under autocast the module stays
float32 while q and k are float16/bfloat16). The table grows on demand and is never saved.

How the rotation runs (``RopeOptions.rotation``, decided once when the module is built): "eager",
the two element-wise products above (``apply_rotary``); "triton", one fused kernel per call,
forward and backward (fused_rotary.py); "compile", ``apply_rotary`` compiled by torch.compile;
"auto", the kernel wherever it runs (a CUDA or ROCm GPU where Triton is installed, or the CPU under
TRITON_INTERPRET=1) once it has proved itself there, else eager. All compute the same eq. 34 from the
same table.

A kernel proves itself before anyone depends on it: the first time a device and dtype ask for it, it
rotates a small probe (both layouts, a partial rotary dimension, an offset) forward and backward, and
the result must equal eq. 34 computed eagerly in float64 within the dtype's rounding. Where it cannot
compile or launch, or differs, "auto" takes the eager rotation and says why in one warning line (once
per device and dtype in a process); "triton", asked for by name, raises the reason instead.
"""

import logging
import math
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor, nn

from .fused_rotary import TRITON_INSTALLED, fused_rotation, kernel_available

logger = logging.getLogger(__name__)

# Scalings for inputs longer than the training lengths (RopeOptions.scaling; none = the paper's):
#   linear: theta_i / F                  position interpolation (Chen et al. 2023): m -> m / F
#   ntk:    base' = base * F^(d/(d-2))    NTK-aware scaling (bloc97 2023): low frequencies interpolated,
#                                         the highest kept
#   yarn:   (1 - g_i) theta_i / F + g_i theta_i, g_i = clamp((L / lambda_i - 1) / (32 - 1), 0, 1),
#           lambda_i = 2 pi / theta_i, and q, k scaled by 0.1 ln F + 1 (YaRN, Peng et al. 2023, with
#           its alpha = 1, beta = 32): dimensions that turn fewer than once over the training
#           length L are interpolated, those that turn 32+ times kept
#   auto:   per sentence, yarn with F = max(1, source tokens / L), L the longest training sequence
#           recorded by the model in training (or --rope-original-max-positions): sentences no
#           longer than in training are rotated as without scaling, longer ones get a factor that
#           grows with their length; the decoder keeps its source's factor for every step
YARN_ALPHA, YARN_BETA = 1.0, 32.0


class RotaryEmbedding(nn.Module):
    """Rotates the first ``options.rotary_dim(head_dim)`` channels of q or k by their positions;
    the other channels pass unchanged. ``options``: a :class:`~fairseq_rope.rope.options.RopeOptions`.

    ``rotate(x, start)``: positions start, start+1, ... along x's second-last axis (the slot index);
    ``rotate_at(x, positions)``: given integer positions (random positions in training);
    ``rotate_per_sentence(x, start, factors, length)``: each sentence with its own YaRN factor (auto)."""

    def __init__(self, head_dim: int, options: "RopeOptions"):
        super().__init__()
        self.options = options
        self.dim = options.rotary_dim(head_dim)
        # eq. 34's cos and signed sin rows of positions 0 .. len-1; buffers so that .to()/.half()/.cuda()
        # move them, non-persistent so that checkpoints never carry them
        self.register_buffer("cos_table", torch.empty(0, self.dim), persistent=False)
        self.register_buffer("sin_table", torch.empty(0, self.dim), persistent=False)
        self.eager = compiled_rotary() if options.rotation == "compile" else apply_rotary

    def extra_repr(self):
        return f"dim={self.dim}, {self.options}"

    def inv_freq(self) -> Tensor:
        """theta_i = theta^(-2(i-1)/d) for i = 1 .. d/2, in float64, after the scaling (auto: none
        here; its per-sentence frequencies are made by :meth:`rotate_per_sentence`)."""
        o = self.options
        if o.scaling == "auto":
            return frequencies(o.theta, self.dim)
        return frequencies(o.theta, self.dim, o.scaling, o.scaling_factor, o.original_max_positions)

    def magnitude(self) -> float:
        """What q and k are multiplied by with the rotation: YaRN's sqrt(1/t) = 0.1 ln F + 1, else 1."""
        return yarn_magnitude(self.options.scaling_factor) if self.options.scaling == "yarn" else 1.0

    def _grow(self, length: int):
        """Makes the table cover positions 0 .. length-1 (rounded up to a power of two), from
        float64 angles computed on the CPU, then cast to the table's dtype and device."""
        if length <= self.cos_table.size(0):
            return
        length = max(64, 1 << (length - 1).bit_length())
        angles = torch.outer(torch.arange(length, dtype=torch.float64), self.inv_freq())  # L x d/2
        cos, sin = signed_rows(angles.cos() * self.magnitude(), angles.sin() * self.magnitude(), self.options.layout)
        device, dtype = self.cos_table.device, self.cos_table.dtype
        self.cos_table, self.sin_table = cos.to(device, dtype), sin.to(device, dtype)

    def _apply(self, fn, *args, **kwargs):
        """After .half()/.float()/.to(dtype) the table is emptied and regrown from float64 angles,
        so that float32 after float16 has float32 accuracy again."""
        dtype = self.cos_table.dtype
        super()._apply(fn, *args, **kwargs)
        if self.cos_table.dtype != dtype:
            self.cos_table, self.sin_table = self.cos_table[:0], self.sin_table[:0]
        return self

    def cos_sin(self, start: int, end: int, dtype: torch.dtype) -> Tuple[Tensor, Tensor]:
        """Eq. 34's cos and signed sin rows of positions start .. end-1, each (end - start) x dim,
        in ``dtype`` (views of the table when it has that dtype)."""
        self._grow(end)
        return self.cos_table[start:end].to(dtype), self.sin_table[start:end].to(dtype)

    def use_kernel(self, x: Tensor) -> bool:
        """Whether ``x`` (B x H x T x C) goes through the fused kernel: "auto" and "triton" wherever the
        kernel runs (a GPU, or the CPU under TRITON_INTERPRET=1) and has passed its probe on x's device
        and dtype; otherwise "auto" rotates eagerly (with one warning when the probe failed) and
        "triton" raises."""
        rotation = self.options.rotation
        if rotation not in ("auto", "triton") or x.dim() != 4:
            return False
        if not kernel_available(x):
            if rotation == "auto":
                return False
            raise RuntimeError(f"--rope-rotation triton: the Triton kernel cannot rotate a {x.device.type} tensor "
                               f"({'Triton is not installed' if not TRITON_INSTALLED else 'a CUDA GPU is needed'}; "
                               "TRITON_INTERPRET=1 runs it on the CPU, slowly); use --rope-rotation auto or eager")
        failure = kernel_failure(x.device, x.dtype)
        where = f"{x.device} ({str(x.dtype).replace('torch.', '')})"
        if failure is None:
            if (x.device, x.dtype) not in SAID:
                SAID.add((x.device, x.dtype))
                logger.info(f"--rope-rotation {rotation}: the Triton kernel on {where}, which passed its probe")
            return True
        if rotation == "triton":
            raise RuntimeError(f"--rope-rotation triton: the Triton kernel on {where}: {failure}; "
                               "use --rope-rotation auto or eager")
        if (x.device, x.dtype) not in SAID:
            SAID.add((x.device, x.dtype))
            logger.warning(f"--rope-rotation auto: the eager rotation on {where}, not the Triton kernel: {failure}")
        return False

    def rotate(self, x: Tensor, start: int = 0) -> Tensor:
        """``x`` (... x T x C) rotated at positions start .. start+T-1 along its second-last axis,
        in x's dtype: the T x C rows broadcast over the leading axes."""
        if self.use_kernel(x):
            self._grow(start + x.size(-2))
            return fused_rotation(x, self.cos_table, self.sin_table, self.options.layout, start=start)
        cos, sin = self.cos_sin(start, start + x.size(-2), x.dtype)
        return self.eager(x, cos, sin, self.options.layout)

    def rotate_at(self, x: Tensor, positions: Tensor) -> Tensor:
        """``x`` (..., T, C) rotated by integer ``positions`` broadcastable to x[..., 0] (the kernel:
        x B x H x T x C and positions B x 1 x T, the same for every head)."""
        end = int(positions.max()) + 1 if positions.numel() else 0
        if positions.dim() == 3 and positions.size(1) == 1 and self.use_kernel(x):
            self._grow(end)
            return fused_rotation(x, self.cos_table, self.sin_table, self.options.layout, positions=positions[:, 0])
        cos, sin = self.cos_sin(0, end, x.dtype)
        return self.eager(x, cos[positions], sin[positions], self.options.layout)

    def rotate_per_sentence(self, x: Tensor, start: int, factors: Tensor, length: int) -> Tensor:
        """``x`` (B x H x T x C) rotated at positions start .. start+T-1 with sentence b's own
        frequencies: YaRN at factor ``factors[b]`` (>= 1; 1 = unscaled) over training length
        ``length`` (--rope-scaling auto). Angles and magnitudes in float64 from integer positions,
        computed on x's device for this call (no table): a factor of 1 gives the table's values."""
        factors = factors.to(x.device, torch.float64)[:, None]  # B x 1
        freq = frequencies(self.options.theta, self.dim, "yarn", factors, length)  # B x d/2
        positions = torch.arange(start, start + x.size(-2), dtype=torch.float64, device=x.device)
        angles = positions[None, :, None] * freq[:, None, :]  # B x T x d/2
        magnitude = yarn_magnitude(factors)[:, :, None]  # B x 1 x 1
        cos, sin = signed_rows(angles.cos() * magnitude, angles.sin() * magnitude, self.options.layout)
        if self.use_kernel(x):  # B x T x rot tables, float32
            return fused_rotation(x, cos.float(), sin.float(), self.options.layout)
        return self.eager(x, cos[:, None].to(x.dtype), sin[:, None].to(x.dtype), self.options.layout)


# the probe's verdict per (device, dtype) in this process: None = the kernel proved itself, else why not
PROBED: Dict[Tuple[torch.device, torch.dtype], Optional[str]] = {}
SAID = set()  # (device, dtype) for which the rotation said which way it rotates (kernel or eager)


def kernel_failure(device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """Why the fused kernel is not to be used on ``device`` in ``dtype``, or None when it passed its probe
    there (probed on the first call for each device and dtype): ``probe_kernel``."""
    key = (device, dtype)
    if key not in PROBED:
        PROBED[key] = probe_kernel(device, dtype)
    return PROBED[key]


def probe_kernel(device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """Rotates a small probe (B 2, 2H 4, T 5, D 12 with 8 rotary channels, positions 3 .. 7) with the fused
    kernel in ``dtype`` on ``device``, forward and backward, for both layouts, and compares with eq. 34
    computed eagerly in float64 (``apply_rotary``, and its gradient by autograd). Returns None when every
    value is within 8 units of the dtype's rounding of the probe's magnitude, else the reason: the
    kernel's error (cannot compile or launch) or its largest difference."""
    try:  # in the caller's grad mode or not (no_grad, inference_mode, autocast): the probe needs autograd
        with torch.inference_mode(False), torch.enable_grad(), torch.autocast(device.type, enabled=False):
            return compare_with_eager(device, dtype)
    except Exception as error:  # Triton's compiler, a launch on an unsupported GPU, a missing driver ...
        return f"it failed on its probe ({type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]})"


def compare_with_eager(device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """probe_kernel's comparison, with autograd on; an error of the kernel (or of the probe) propagates."""
    g = torch.Generator().manual_seed(0)
    x64, grad64 = (torch.randn(2, 4, 5, 12, generator=g, dtype=torch.float64) for _ in range(2))
    x64, grad64 = x64.to(dtype).double(), grad64.to(dtype).double()  # values the dtype holds exactly
    tolerance = 8 * torch.finfo(dtype).eps * float(torch.cat([x64, grad64]).abs().max())
    angles = torch.outer(torch.arange(8, dtype=torch.float64), frequencies(10000.0, 8))
    for layout in ("interleaved", "half"):
        cos, sin = signed_rows(angles.cos(), angles.sin(), layout)  # 8 x 8: positions 0 .. 7
        reference = x64.clone().requires_grad_()
        want = apply_rotary(reference, cos[3:], sin[3:], layout)
        want.backward(grad64)
        x = x64.to(device, dtype).requires_grad_()
        out = fused_rotation(x, cos.to(device, torch.float32), sin.to(device, torch.float32), layout, start=3)
        out.backward(grad64.to(device, dtype))
        difference = max(float((out.detach().double().cpu() - want.detach()).abs().max()),
                         float((x.grad.double().cpu() - reference.grad).abs().max()))
        if not difference <= tolerance:  # (NaN too)
            return (f"its probe ({layout} layout) differs from the eager rotation by {difference:.3g}, more than "
                    f"the {tolerance:.3g} that {str(dtype).replace('torch.', '')} rounding allows")
    return None


def frequencies(theta: float, dim: int, scaling: str = "none", factor=1.0, length=None) -> Tensor:
    """theta_i = theta^(-2(i-1)/dim), i = 1 .. dim/2, in float64, after ``scaling`` by ``factor``
    (for yarn, with training length ``length``). For yarn, ``factor`` may be a B x 1 float64
    tensor: one row of frequencies per sentence."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    freq = theta ** -exponents
    if scaling == "linear":
        return freq / factor
    if scaling == "ntk":
        return (theta * factor ** (dim / (dim - 2))) ** -exponents
    if scaling == "yarn":
        if torch.is_tensor(factor):
            freq = freq.to(factor.device)
        turns = length * freq / (2 * math.pi)  # L / lambda_i
        kept = ((turns - YARN_ALPHA) / (YARN_BETA - YARN_ALPHA)).clamp(0, 1)
        scaled = freq / factor * (1 - kept) + freq * kept
        return torch.where(factor == 1, freq, scaled) if torch.is_tensor(factor) else scaled
    return freq


def yarn_magnitude(factor):
    """YaRN's sqrt(1/t) = 0.1 ln F + 1 (a number, or a tensor of factors)."""
    return 0.1 * (factor.log() if torch.is_tensor(factor) else math.log(factor)) + 1


def signed_rows(cos: Tensor, sin: Tensor, layout: str) -> Tuple[Tensor, Tensor]:
    """Eq. 34's cos and signed sin rows (... x d) of the angles' cos and sin (... x d/2)."""
    if layout == "interleaved":  # channels (2i, 2i+1) share angle i; swap(x)_{2i} = -x_{2i+1}
        return cos.repeat_interleave(2, -1), torch.stack((-sin, sin), -1).flatten(-2)
    return torch.cat((cos, cos), -1), torch.cat((-sin, sin), -1)  # channels (i, i + d/2); swap(x)_i = -x_{i+d/2}


def swap_pairs(x: Tensor, layout: str) -> Tensor:
    """Each channel's partner in its rotation pair: (x_2, x_1, x_4, x_3, ...) or, for the half
    layout, (x_{d/2+1}, ..., x_d, x_1, ..., x_{d/2}). Eq. 34's signs are in the sin rows."""
    if layout == "interleaved":  # (a copy of two strided views: flip's kernel is slower on the CPU)
        return torch.stack((x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x.roll(x.size(-1) // 2, dims=-1)


def compiled_rotary() -> Callable:
    """``apply_rotary`` compiled by torch.compile (Inductor fuses it, forward and backward), for
    every shape (dynamic)."""
    return torch.compile(apply_rotary, dynamic=True)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """Eq. 34, x * cos + swap(x) * sin, on the first cos.size(-1) channels of ``x``."""
    rot = cos.size(-1)
    if rot == x.size(-1):
        return torch.addcmul(x * cos, swap_pairs(x, layout), sin)
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    return torch.cat((torch.addcmul(x_rot * cos, swap_pairs(x_rot, layout), sin), x_pass), dim=-1)
