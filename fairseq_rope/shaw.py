"""Relative position representations (Shaw, Uszkoreit & Vaswani, NAACL 2018): the "RPE" of RoFormer's Table 1.

Each layer learns two tables of d-dimensional vectors, a^K and a^V, indexed by the clipped relative
distance clip(j - i, -k, k) and shared by the heads of the layer (Shaw section 3.2). They enter the
compatibility and the output of self-attention (Shaw eq. 4 and 3; RoFormer section 5.2, eq. 32):

    e_ij = q_i (k_j + a^K_ij)^T / sqrt(d),    z_i = sum_j alpha_ij (v_j + a^V_ij)

k defaults to 16, the clipping distance of Shaw's experiments (section 4.1; section 4.3 varies it).
The decoder looks back only, so its tables hold the k + 1 distances -k .. 0; the encoder's hold 2k + 1.
``--rpe-keys-only`` drops a^V: Shaw's ablation (section 4.3, Table 4), and then the a^K term is an
additive logit term that goes to SDPA as its float mask.

Computed as Shaw's efficient implementation (section 3.3): the a^K term as T batched GEMMs of the
B*H queries of a position against its S relative keys, the a^V term as T batched GEMMs of the
weights against the S relative values; no loop over positions. Positions are slot indices (queries
at past .. past+T-1, keys 0 .. S-1), so a left-padded sentence attends as it would alone.
Registered as ``rpe_transformer`` and its sizes.
"""

from dataclasses import dataclass, field
import torch
from torch import Tensor, nn
from fairseq.models import register_model

from .encodings import EncodingTransformerModel, PositionEncoding, register_architectures
from .self_attention import SelfAttention


class RelativePositionAttention(SelfAttention):
    """Self-attention with Shaw's a^K (and a^V unless ``keys_only``) of this layer."""

    def __init__(self, embed_dim: int, num_heads: int, options: "ShawRPE", causal: bool = False, **fairseq_args):
        super().__init__(embed_dim, num_heads, causal=causal, **fairseq_args)
        self.max_relative_position = k = options.max_relative_position
        distances = k + 1 if causal else 2 * k + 1
        self.relative_keys = nn.Embedding(distances, self.head_dim)  # a^K: row r is distance r - k
        self.relative_values = None if options.keys_only else nn.Embedding(distances, self.head_dim)  # a^V
        self.needs_weights = not options.keys_only
        for table in (self.relative_keys, self.relative_values):
            if table is not None:
                nn.init.normal_(table.weight, std=self.head_dim ** -0.5)  # as fairseq's Embedding()

    def distance_rows(self, past: int, T: int, S: int, device) -> Tensor:
        """T x S: the table row of clip(j - i, -k, k) (decoder: at most 0) for queries at past..past+T-1."""
        k = self.max_relative_position
        relative = torch.arange(S, device=device)[None, :] - torch.arange(past, past + T, device=device)[:, None]
        return relative.clamp(-k, 0 if self.causal else k) + k

    def position_logits(self, q: Tensor, past: int, S: int, inputs) -> Tensor:
        """q_i a^K_ij^T / sqrt(d): per query position t, (B*H x D) @ (D x S). Returns B x H x T x S."""
        B, H, T, D = q.shape
        a_k = self.relative_keys(self.distance_rows(past, T, S, q.device))  # T x S x D
        logits = torch.bmm((q * self.scaling).permute(2, 0, 1, 3).reshape(T, B * H, D), a_k.transpose(1, 2))
        return logits.view(T, B, H, S).permute(1, 2, 0, 3)

    def position_values(self, weights: Tensor, past: int) -> Tensor:
        """sum_j alpha_ij a^V_ij: per query position t, (B*H x S) @ (S x D). Returns B x H x T x D."""
        if self.relative_values is None:
            return None
        B, H, T, S = weights.shape
        a_v = self.relative_values(self.distance_rows(past, T, S, weights.device))  # T x S x D
        values = torch.bmm(weights.permute(2, 0, 1, 3).reshape(T, B * H, S), a_v)
        return values.view(T, B, H, -1).permute(1, 2, 0, 3)


@dataclass(frozen=True)
class ShawRPE(PositionEncoding):
    """The options of Shaw's relative position representations; Shaw's values as defaults."""

    prefix = "rpe"
    title = "Relative position representations (Shaw et al. 2018)"
    tiny_model_variants = {"rpe": ("--rpe-max-relative-position", "3"),
                           "rpe keys-only": ("--rpe-max-relative-position", "3", "--rpe-keys-only")}

    max_relative_position: int = field(default=16, metadata={
        "help": "clipping distance k: relative distances beyond +-k share a representation (Shaw section 4.1)"})
    keys_only: bool = field(default=False, metadata={
        "help": "a^K only, no a^V in the values (Shaw's ablation, section 4.3)"})

    def __post_init__(self):
        if self.max_relative_position < 1:
            self.fail("max_relative_position", "must be >= 1 (the clipping distance k)")

    def build_self_attention(self, embed_dim: int, num_heads: int, causal: bool, **fairseq_args) -> SelfAttention:
        return RelativePositionAttention(embed_dim, num_heads, self, causal=causal, **fairseq_args)


@register_model("rpe_transformer")
class ShawRPETransformerModel(EncodingTransformerModel):
    """Transformer with Shaw's relative position representations in encoder and decoder self-attention."""

    encoding = ShawRPE


register_architectures(ShawRPETransformerModel)
