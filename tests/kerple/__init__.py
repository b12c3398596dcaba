"""A sixth position encoding, registered by the tests only: KERPLE-log (Chi, Fan, Ramadge & Rudnicky,
"KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation", NeurIPS 2022), a logit bias
with two learned positive parameters per head,

    softmax(q_i k_j^T / sqrt(d) - r1_h log(1 + r2_h |i - j|))

(the decoder: i - j for j <= i; the encoder: |i - j|). It is one module, written as a user would write
one from docs/design.md: an options class, its bias, the model and its registration; it imports from the
scaffold only. Importing it (conftest.py does, and ``--user-dir tests/kerple`` for fairseq's commands)
puts ``kerple_transformer`` into every registry-driven test: the formula, padding, decoding and
precision tests, the feature matrix, the generated documentation table and the CTranslate2 refusal.
"""

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from fairseq.models import register_model

from fairseq_rope.encodings import EncodingTransformerModel, StackBias, register_architectures


class KerpleLogBias(nn.Module):
    """-r1_h log(1 + r2_h d) for queries at past .. past+T-1 and keys 0 .. S-1: 1 x H x T x S."""

    def __init__(self, num_heads: int, causal: bool, initial: float):
        super().__init__()
        self.causal = causal
        self.r1 = nn.Parameter(torch.full((num_heads,), initial))
        self.r2 = nn.Parameter(torch.linspace(0.5, 2.0, num_heads))

    def forward(self, past: int, T: int, S: int) -> Tensor:
        i = torch.arange(past, past + T, device=self.r1.device)
        j = torch.arange(S, device=self.r1.device)
        distance = i[:, None] - j[None, :]
        distance = (distance.clamp(min=0) if self.causal else distance.abs()).to(self.r1.dtype)
        r1, r2 = self.r1.abs()[:, None, None], self.r2.abs()[:, None, None]  # kept positive, as the paper's clamp
        return -(r1 * torch.log1p(r2 * distance)).unsqueeze(0)


@dataclass(frozen=True)
class KerpleLog(StackBias):
    """The options of KERPLE-log."""

    prefix = "kerple"
    title = "KERPLE-log (Chi et al. 2022), registered by the tests"

    initial_r1: float = field(default=1.0, metadata={"help": "initial r1 of every head (> 0)"})

    def __post_init__(self):
        if not self.initial_r1 > 0:
            self.fail("initial_r1", "must be > 0")

    def build_position_bias(self, num_heads: int, causal: bool) -> nn.Module:
        return KerpleLogBias(num_heads, causal, self.initial_r1)

    @staticmethod
    def reference_position_logits(coder, T: int, causal: bool) -> Tensor:
        """The paper's bias written out with loops in float64: H x T x T (queries and keys 0 .. T-1)."""
        bias = coder.position_bias
        r1, r2 = bias.r1.detach().double().abs().tolist(), bias.r2.detach().double().abs().tolist()
        return torch.tensor([[[-a * math.log(1 + b * (max(i - j, 0) if causal else abs(i - j))) for j in range(T)]
                              for i in range(T)] for a, b in zip(r1, r2)], dtype=torch.float64)


@register_model("kerple_transformer")
class KerpleTransformerModel(EncodingTransformerModel):
    """Transformer with KERPLE-log in encoder and decoder self-attention."""

    encoding = KerpleLog


register_architectures(KerpleTransformerModel)
