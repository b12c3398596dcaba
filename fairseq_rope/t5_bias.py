"""T5's relative attention bias (Raffel et al., JMLR 2020, section 2.1 "Model").

A learned scalar per head and per bucket of relative distance is added to the logits:

    softmax(q_i k_j^T / sqrt(d) + b_h[bucket(j - i)])

"32 embeddings ... with ranges that increase in size logarithmically up to an offset of 128 beyond
which we assign all relative positions to the same embedding"; each layer of a stack uses the same
embeddings. The buckets, as T5's code defines them: of B buckets, the first half are exact distances
0 .. B/2 - 1, the second half log-spaced up to ``max_distance``, every longer distance in the last.
The encoder is bidirectional: half of the buckets for keys before or at the query, half for keys
after it. The decoder looks back only: all B buckets for distances i - j >= 0. The log-spaced buckets are
computed in float32 exactly as CTranslate2 computes them (src/layers/attention.cc,
``get_relative_position_bucket``; T5's own code also works in float32), so that an exported model
puts every distance in the bucket it was trained with: in float64, distances whose log ratio is a
whole number of buckets (e.g. 8, 16 and 64 for 18 buckets up to 128) can land one bucket lower.

T5 computes the bias in the first layer of each stack and passes it to the others; here the table
belongs to the stack (:class:`T5RelativeBias`: ``encoder.position_bias``, ``decoder.position_bias``)
and each layer looks its bias up in it. As in fairseq, q k^T is scaled by 1/sqrt(d) (T5 folds that into its
initialisation). Registered as ``t5bias_transformer`` and its sizes.
"""

import functools
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from fairseq.models import register_model

from .encodings import EncodingTransformerModel, StackBias, register_architectures


def relative_position_bucket(relative_position: Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> Tensor:
    """T5's bucket of each relative position j - i (integer tensor), in 0 .. num_buckets-1, with the
    log-spaced ones in float32 as CTranslate2: int(exact + log(d / exact) / log(max_distance / exact)
    * (buckets - exact)), every operation rounded to float32 (the logs correctly rounded: taken in
    float64, so that the result is the same on every device)."""
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative_position > 0).long() * num_buckets  # keys after the query
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # keys before the query; later ones are masked
    exact = num_buckets // 2
    f32 = functools.partial(torch.tensor, dtype=torch.float32, device=relative_position.device)
    log_range = f32(math.log(f32(max_distance) / f32(exact)))
    log_ratio = torch.log((distance.float() / f32(exact)).double()).float()
    log_spaced = (f32(exact) + log_ratio / log_range * f32(num_buckets - exact)).long()  # truncated, as int32()
    log_spaced = log_spaced.clamp(max=num_buckets - 1)  # (NaN-free: used only where distance >= exact)
    return bucket + torch.where(distance < exact, distance, log_spaced)


class T5RelativeBias(nn.Module):
    """b_h[bucket(j - i)] for queries at past .. past+T-1 and keys 0 .. S-1: 1 x H x T x S."""

    def __init__(self, num_heads: int, options: "T5Bias", causal: bool):
        super().__init__()
        self.options, self.bidirectional = options, not causal
        self.relative_attention_bias = nn.Embedding(options.num_buckets, num_heads)
        nn.init.normal_(self.relative_attention_bias.weight, std=num_heads ** -0.5)  # as fairseq's Embedding()

    def forward(self, past: int, T: int, S: int) -> Tensor:
        device = self.relative_attention_bias.weight.device
        relative = torch.arange(S, device=device)[None, :] - torch.arange(past, past + T, device=device)[:, None]
        buckets = relative_position_bucket(relative, self.bidirectional, self.options.num_buckets,
                                           self.options.max_distance)
        return self.relative_attention_bias(buckets).permute(2, 0, 1).unsqueeze(0)  # 1 x H x T x S


@dataclass(frozen=True)
class T5Bias(StackBias):
    """The options of T5's relative bias; T5's values as defaults."""

    prefix = "t5bias"
    title = "T5 relative attention bias (Raffel et al. 2020)"
    tiny_model_variants = {"t5bias": ("--t5bias-num-buckets", "8", "--t5bias-max-distance", "9")}

    num_buckets: int = field(default=32, metadata={"help": "buckets of relative distance, even; the decoder "
                                                           "uses all for the past, the encoder half each way"})
    max_distance: int = field(default=128, metadata={"help": "distance from which all share the last bucket"})

    def __post_init__(self):
        if self.num_buckets < 4 or self.num_buckets % 2:
            self.fail("num_buckets", "must be an even number >= 4 (half of them per direction in the encoder)")
        if self.max_distance <= self.num_buckets // 2:
            self.fail("max_distance", f"must exceed half of --t5bias-num-buckets ({self.num_buckets // 2}): "
                                      "the distances below that have buckets of their own")

    def build_position_bias(self, num_heads: int, causal: bool) -> nn.Module:
        return T5RelativeBias(num_heads, self, causal)


@register_model("t5bias_transformer")
class T5BiasTransformerModel(EncodingTransformerModel):
    """Transformer with T5's relative attention bias in encoder and decoder self-attention."""

    encoding = T5Bias


register_architectures(T5BiasTransformerModel)
