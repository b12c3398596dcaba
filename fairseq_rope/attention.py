"""Rotary self-attention: fairseq's MultiheadAttention with RoPE on queries and keys.

A drop-in for the self-attention of fairseq's encoder and decoder layers: same forward
signature, same parameters (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), same
incremental state (``prev_key``, ``prev_value``, ``prev_key_padding_mask``), so a trained
``transformer`` checkpoint loads into it unchanged.

fairseq's own fast path hands the projections to ``F.multi_head_attention_forward``, which
leaves no place to rotate q and k; here the projections are done in the open and q and k are
rotated (eq. 34). Two paths, kept equal (outputs and gradients) by tests/test_speed_paths.py:
  * fast (the default): one GEMM for q, k and v (the three weights stacked; three GEMMs while
    decoding one token at a time), q and k rotated in one call as a complex product, attention
    by ``F.scaled_dot_product_attention``;
  * plain (``self.fast = False``, or whenever the caller asks for attention weights:
    ``need_weights``, ``before_softmax``): three projections, eq. 34 written out for q then k,
    and the score matrix formed explicitly.

Positions (what m and n are in eq. 16):
  * a token's position is the number of real (non-padding) tokens before it in its
    sentence, so left-padded source batches rotate every sentence from 0;
  * while decoding incrementally the new token's position continues after the cached
    keys, which are cached already rotated; beam reordering is fairseq's
    ``reorder_incremental_state`` on those buffers.
"""

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

from .rotary import RotaryEmbedding


class RotaryMultiheadAttention(MultiheadAttention):
    """Multi-head self-attention whose queries and keys are rotated by their positions.

    Args:
        embed_dim, num_heads, dropout, bias, q_noise, qn_block_size: as for fairseq's
            MultiheadAttention (self-attention only).
        rope_theta: base of the rotation frequencies (10000 in the paper).
        rope_layout: "interleaved" (the paper's eq. 34) or "half" (rotate_half).
        rope_dim: rotated channels per head (even, <= head_dim); None rotates all.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        q_noise: float = 0.0,
        qn_block_size: int = 8,
        rope_theta: float = 10000.0,
        rope_layout: str = "interleaved",
        rope_dim: Optional[int] = None,
    ):
        super().__init__(
            embed_dim,
            num_heads,
            dropout=dropout,
            bias=bias,
            self_attention=True,
            q_noise=q_noise,
            qn_block_size=qn_block_size,
        )
        rope_dim = self.head_dim if rope_dim is None else rope_dim
        if not 0 < rope_dim <= self.head_dim or rope_dim % 2:
            raise ValueError(
                f"--rope-dim must be an even number in [2, {self.head_dim}] "
                f"(the head dim), got {rope_dim}"
            )
        self.rotary = RotaryEmbedding(rope_dim, theta=rope_theta, layout=rope_layout)
        self.fast = True  # False: always the plain path (the reference the tests compare with)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """Input: query (T x B x C), key = value = query. Returns (T x B x C, weights)."""
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("RotaryMultiheadAttention is self-attention: key and value must be the query")
        if static_kv:
            raise ValueError("RotaryMultiheadAttention is self-attention: static_kv is not supported")
        need_weights = need_weights or need_head_weights
        plain = not self.fast or need_weights or before_softmax
        tgt_len, bsz, _ = query.size()

        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        prev_key, prev_value = saved.get("prev_key"), saved.get("prev_value")
        past = 0 if prev_key is None else prev_key.size(2)
        padding = self._full_padding_mask(saved.get("prev_key_padding_mask"), key_padding_mask, bsz, past, tgt_len, query.device)

        # eq. 34: rotate q and k by their positions, once; cached keys stay rotated
        cos, sin = self._cos_sin(padding, past, tgt_len, query.dtype)  # T x (B or 1) x 1 x d/2
        one_gemm = incremental_state is None
        q, k, v = self._project_and_rotate(query, cos, sin, fast=not plain, one_gemm=one_gemm)  # T x B x H x D each
        q, k, v = (x.permute(1, 2, 0, 3) for x in (q, k, v))  # B x H x T x D views
        if prev_key is not None:
            k = torch.cat([prev_key, k], dim=2)
            v = torch.cat([prev_value, v], dim=2)
        if incremental_state is not None:
            saved["prev_key"], saved["prev_value"], saved["prev_key_padding_mask"] = k, v, padding
            self._set_input_buffer(incremental_state, saved)

        if plain:
            return self._explicit_attention(q, k, v, padding, attn_mask, before_softmax, need_weights, need_head_weights)
        mask = self._sdpa_mask(padding, attn_mask, q.dtype)
        dropout_p = self.dropout_module.p if self.training or self.dropout_module.apply_during_inference else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return self._merge_heads(attn), None

    # -- projections -----------------------------------------------------------------

    def _project_and_rotate(self, x: Tensor, cos: Tensor, sin: Tensor, fast: bool, one_gemm: bool):
        """q, k, v (T x B x H x D) of x (T x B x C), q and k rotated (eq. 34).

        one_gemm (fast path, many tokens): one GEMM with the three weights stacked, then q and k
        rotated in one call. Otherwise three projections (decoding one token, the weights' copy
        would not pay off; or quant-noise hooks on q_proj/k_proj/v_proj, which the stacked GEMM
        would bypass), q rotated, then k. fast: rotations as complex products where they apply."""
        T, B, _ = x.shape
        H, D = self.num_heads, self.head_dim
        projections = (self.q_proj, self.k_proj, self.v_proj)
        if fast and one_gemm and not any(p._forward_pre_hooks or p._forward_hooks for p in projections):
            weight = torch.cat([p.weight for p in projections])
            bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
            # split/unbind, not indexing: their backward is one cat/stack, not zero-filled copies
            qk, v = F.linear(x, weight, bias).view(T, B, 3, H, D).split([2, 1], dim=2)
            q, k = self.rotary.rotate(qk, cos.unsqueeze(2), sin.unsqueeze(2), fast=True).unbind(2)  # over q and k
            return q, k, v.squeeze(2)
        q, k, v = (p(x).view(T, B, H, D) for p in projections)
        return self.rotary.rotate(q, cos, sin, fast=fast), self.rotary.rotate(k, cos, sin, fast=fast), v

    # -- positions -------------------------------------------------------------------

    @staticmethod
    def _full_padding_mask(prev_mask, mask, bsz, past, tgt_len, device) -> Optional[Tensor]:
        """B x (past + T) padding mask of all keys, or None when nothing is padding."""
        if prev_mask is None and mask is None:
            return None
        if prev_mask is None:
            prev_mask = torch.zeros(bsz, past, dtype=torch.bool, device=device)
        if mask is None:
            mask = torch.zeros(bsz, tgt_len, dtype=torch.bool, device=device)
        return torch.cat([prev_mask.bool(), mask.bool()], dim=1)

    def _cos_sin(self, padding: Optional[Tensor], past: int, tgt_len: int, dtype: torch.dtype):
        """cos/sin for the new tokens, T x B x 1 x d/2 (1: broadcast over heads), or T x 1 x 1 x d/2
        when shared by the batch."""
        if padding is None:  # positions past .. past+T-1 for every sentence
            cos, sin = self.rotary.cos_sin_range(past, past + tgt_len, dtype)
            return cos[:, None, None], sin[:, None, None]
        # the number of real tokens before each token; padding itself gets 0 (it is masked)
        positions = ((~padding).cumsum(dim=1) - 1).clamp(min=0)[:, past:]
        return self.rotary.cos_sin(positions.t().unsqueeze(-1), dtype, bound=past + tgt_len)

    # -- attention -------------------------------------------------------------------

    @staticmethod
    def _sdpa_mask(padding: Optional[Tensor], attn_mask: Optional[Tensor], dtype) -> Optional[Tensor]:
        """One mask for scaled_dot_product_attention: bool (True = attend) or additive float."""
        if attn_mask is None:
            return None if padding is None else ~padding[:, None, None, :]
        if attn_mask.dtype == torch.bool:  # fairseq's bool masks mark what is *not* attended
            attn_mask = torch.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device).masked_fill(attn_mask, float("-inf"))
        attn_mask = attn_mask.to(dtype)
        if padding is None:
            return attn_mask
        return attn_mask.masked_fill(padding[:, None, None, :], float("-inf"))

    def _explicit_attention(self, q, k, v, padding, attn_mask, before_softmax, need_weights, need_head_weights):
        """softmax(q k^T / sqrt(d)) v written out, for callers that want the weights."""
        bsz, H, tgt_len, D = q.shape
        src_len = k.size(2)
        scores = torch.matmul(q * self.scaling, k.transpose(2, 3))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask.to(scores.dtype)
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        if before_softmax:  # fairseq's shapes: (B*H) x T x S and (B*H) x S x D
            return scores.reshape(bsz * H, tgt_len, src_len), v.reshape(bsz * H, src_len, D)
        weights = F.softmax(scores, dim=-1, dtype=torch.float32).type_as(scores)
        attn = torch.matmul(self.dropout_module(weights), v)
        if need_weights:
            weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return self._merge_heads(attn), weights if need_weights else None

    def _merge_heads(self, attn: Tensor) -> Tensor:  # B x H x T x D -> T x B x C
        bsz, H, tgt_len, D = attn.shape
        return self.out_proj(attn.permute(2, 0, 1, 3).reshape(tgt_len, bsz, H * D))
