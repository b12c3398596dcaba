"""ALiBi: attention with linear biases (Press, Smith & Lewis, "Train Short, Test Long", ICLR 2022).

No position embeddings; each head h adds a fixed penalty proportional to the distance to the logits:

    softmax(q_i k_j^T / sqrt(d) - m_h |i - j|)

with slopes m_h a geometric sequence starting at 2^(-8/H) with that ratio (H heads; section 3 of the
paper): for 8 heads 1/2, 1/4, ..., 1/256. For H not a power of two the paper's code takes the 2^n
slopes of the largest power of two below H and then every other slope of the 2^(n+1) sequence.

Encoder-decoder variant (the paper has decoder-only language models): the decoder's self-attention
uses the paper's causal form, -m_h (i - j) for j <= i. The encoder's uses the symmetric form
-m_h |i - j|: the same penalty to the left and to the right, with no parameters. Symmetric means
the encoder cannot tell left from right: reversing a source reverses its encoder states, and
cross-attention (fairseq's, without positions) cannot tell the two apart; word order reaches the
decoder only through the words themselves. ``--add-token-positional-embeddings`` adds fairseq's
sinusoidal positions to both stacks for a model that needs the direction. The bias is the same
function of positions in every layer of a stack: one :class:`ALiBiBias` per stack, evaluated by each layer.
Registered as ``alibi_transformer`` and its sizes.
"""

import math
from dataclasses import dataclass
from typing import List

import torch
from torch import Tensor, nn
from fairseq.models import register_model

from .encodings import EncodingTransformerModel, StackBias, register_architectures


def alibi_slopes(num_heads: int) -> List[float]:
    """m_1 .. m_H of Press et al.: geometric from 2^(-8/n) with ratio 2^(-8/n) for n = H a power of
    two; otherwise those of the power of two below H, then every other one of twice that."""
    def geometric(n):
        return [2 ** (-8 * (h + 1) / n) for h in range(n)]

    below = 2 ** int(math.floor(math.log2(num_heads)))
    return geometric(below) + geometric(2 * below)[0::2][:num_heads - below]


class ALiBiBias(nn.Module):
    """-m_h |i - j| (symmetric, encoder) or -m_h (i - j) (causal, decoder) for queries at past .. past+T-1
    and keys 0 .. S-1, 1 x H x T x S in the dtype of the model: the product is formed in float32 and
    rounded once (in bfloat16 a distance of 257 is not representable). No parameters: the slopes are
    a buffer that checkpoints do not store."""

    def __init__(self, num_heads: int, causal: bool):
        super().__init__()
        self.causal = causal
        self.register_buffer("slopes", torch.tensor(alibi_slopes(num_heads)), persistent=False)

    def forward(self, past: int, T: int, S: int) -> Tensor:
        i = torch.arange(past, past + T, device=self.slopes.device)
        j = torch.arange(S, device=self.slopes.device)
        distance = i[:, None] - j[None, :]  # T x S
        # causal: j > i is masked by the decoder's future mask, whatever its bias
        distance = distance.clamp(min=0) if self.causal else distance.abs()
        bias = -(self.slopes.float()[:, None, None] * distance.float())
        return bias.to(self.slopes.dtype).unsqueeze(0)


@dataclass(frozen=True)
class ALiBi(StackBias):
    """ALiBi has no options: its slopes follow from the number of heads."""

    prefix = "alibi"
    title = "ALiBi (Press et al. 2022): no options; the slopes follow from the heads"

    def build_position_bias(self, num_heads: int, causal: bool) -> nn.Module:
        return ALiBiBias(num_heads, causal)


@register_model("alibi_transformer")
class ALiBiTransformerModel(EncodingTransformerModel):
    """Transformer with ALiBi in encoder (symmetric) and decoder (causal) self-attention."""

    encoding = ALiBi


register_architectures(ALiBiTransformerModel)
