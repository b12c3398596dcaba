"""Rotary self-attention: fairseq's MultiheadAttention with RoPE on queries and keys.

A drop-in for the self-attention of fairseq's encoder and decoder layers: the same forward
signature, the same parameters (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``) and the same
incremental state (``prev_key``, ``prev_value``: B x H x S x D, ``prev_key_padding_mask``: B x S),
so a trained ``transformer`` checkpoint loads into it unchanged and fairseq's
``reorder_incremental_state`` reorders it for beam search.

Positions (m and n of eq. 16) are the slot index 0 .. T-1 along the time axis; while decoding
incrementally the new token continues after the cached keys, which are cached already rotated.
Scores depend on m - n only and padding is masked, so a left-padded sentence attends exactly as
it would alone. In training with ``--rope-random-positions`` the encoder or decoder sets
``positions`` (B x T) for one forward instead; with ``--rope-scaling auto`` it sets each sentence's
YaRN factor (``sentence_scaling``) where a sentence is longer than the training length.

Two ways to attend, chosen by one visible condition in :meth:`forward`:
  * ``F.scaled_dot_product_attention``, whenever the caller asks for no attention weights (every
    fairseq layer): the decoder declares its self-attention ``causal`` when it builds it, so that
    its future mask becomes ``is_causal=True`` on an unpadded batch and the Flash and
    memory-efficient kernels stay eligible on GPUs;
  * softmax(q k^T / sqrt(d)) v written out, for callers that want the weights (``need_weights``,
    ``need_head_weights``) or the scores (``before_softmax``), as fairseq returns them.
"""

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

from .options import RopeOptions
from .rotary import RotaryEmbedding

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


class RotaryMultiheadAttention(MultiheadAttention):
    """Multi-head self-attention whose queries and keys are rotated by their positions (eq. 34).

    Args:
        embed_dim, num_heads, dropout, bias, q_noise, qn_block_size: as fairseq's MultiheadAttention.
        options: the rotary options (:class:`~fairseq_rope.options.RopeOptions`).
        causal: whether the ``attn_mask`` this layer is given is fairseq's future mask (the
            decoder's self-attention); the encoder's is not causal.
    """

    def __init__(self, embed_dim: int, num_heads: int, options: RopeOptions = RopeOptions(), causal: bool = False,
                 dropout: float = 0.0, bias: bool = True, q_noise: float = 0.0, qn_block_size: int = 8):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias, self_attention=True,
                         q_noise=q_noise, qn_block_size=qn_block_size)
        self.options, self.causal = options, causal
        self.rotary = RotaryEmbedding(self.head_dim, options)
        # set by the encoder or decoder for one forward: positions B x T (--rope-random-positions, training),
        # or (factors B, training length L) for per-sentence frequencies (--rope-scaling auto)
        self.positions: Optional[Tensor] = None
        self.sentence_scaling: Optional[Tuple[Tensor, int]] = None

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[IncrementalState] = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """query: T x B x C (key = value = query). Returns (T x B x C, weights or None)."""
        self.check_self_attention(query, key, value, static_kv, incremental_state)
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        past = 0 if saved.get("prev_key") is None else saved["prev_key"].size(2)
        q, k, v = self.split_heads(query)  # B x H x T x D each
        q, k = self.rotate(q, past), self.rotate(k, past)
        padding = None if key_padding_mask is None else key_padding_mask.bool()  # B x T, True: padding
        if incremental_state is not None:  # all keys so far (fairseq's cache: concatenated, rotated)
            if past:
                k, v = torch.cat([saved["prev_key"], k], 2), torch.cat([saved["prev_value"], v], 2)
                padding = append_padding(saved.get("prev_key_padding_mask"), padding, past, query.size(0))
            saved["prev_key"], saved["prev_value"], saved["prev_key_padding_mask"] = k, v, padding
            self._set_input_buffer(incremental_state, saved)

        if need_weights or need_head_weights or before_softmax:
            return self.explicit_attention(q, k, v, padding, attn_mask, before_softmax, need_head_weights)
        mask, is_causal = self.sdpa_mask(padding, attn_mask, past, q.dtype)
        dropout_p = self.dropout_module.p if self.training or self.dropout_module.apply_during_inference else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
        return self.merge_heads(attn), None

    def check_self_attention(self, query, key, value, static_kv, incremental_state):
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError(f"{type(self).__name__} is self-attention: key and value must be the query")
        if static_kv:
            raise ValueError(f"{type(self).__name__} is self-attention: static_kv is not supported")
        if self.positions is not None and incremental_state is not None:
            raise ValueError("random positions are for training; incremental decoding uses the slot index")

    def split_heads(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """q, k, v of x (T x B x C), each B x H x T x D, unscaled."""
        T, B, _ = x.shape
        return tuple(p(x).view(T, B, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
                     for p in (self.q_proj, self.k_proj, self.v_proj))

    def rotate(self, x: Tensor, past: int) -> Tensor:
        """x (B x H x T x D) rotated by positions past .. past+T-1, or by ``positions`` (B x T), with
        each sentence's own frequencies where ``sentence_scaling`` is set."""
        if self.positions is not None:
            return self.rotary.rotate_at(x, self.positions[:, None, :])
        if self.sentence_scaling is not None:
            return self.rotary.rotate_per_sentence(x, past, *self.sentence_scaling)
        return self.rotary.rotate(x, past)

    def merge_heads(self, attn: Tensor) -> Tensor:
        """B x H x T x D -> T x B x C, through the output projection."""
        B, H, T, D = attn.shape
        return self.out_proj(attn.permute(2, 0, 1, 3).reshape(T, B, H * D))

    def sdpa_mask(self, padding, attn_mask, past, dtype) -> Tuple[Optional[Tensor], bool]:
        """(attn_mask, is_causal) for F.scaled_dot_product_attention: None where nothing is masked,
        is_causal for a causal layer's mask over fresh keys without padding, otherwise one mask
        (bool: True = attend, or additive float)."""
        if attn_mask is not None and self.causal and padding is None and past == 0:
            return None, True
        if attn_mask is None:
            return (None if padding is None else ~padding[:, None, None, :]), False
        if attn_mask.dtype == torch.bool:  # fairseq's bool masks mark what is *not* attended
            return ~(attn_mask if padding is None else attn_mask | padding[:, None, None, :]), False
        attn_mask = attn_mask.to(dtype)
        if padding is None:
            return attn_mask, False
        return attn_mask.masked_fill(padding[:, None, None, :], float("-inf")), False

    def explicit_attention(self, q, k, v, padding, attn_mask, before_softmax, need_head_weights):
        """softmax(q k^T / sqrt(d)) v written out (batched GEMMs over B*H, as fairseq), softmax in
        float32. Returns (output, weights: B x T x S averaged over heads, or H x B x T x S with
        ``need_head_weights``), or fairseq's ``before_softmax`` pair (scores, v)."""
        B, H, T, D = q.shape
        S = k.size(2)
        scores = (q * self.scaling) @ k.transpose(2, 3)  # B x H x T x S
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                else scores + attn_mask.to(scores.dtype)
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        if before_softmax:  # fairseq's shapes: (B*H) x T x S and (B*H) x S x D
            return scores.reshape(B * H, T, S), v.reshape(B * H, S, D)
        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
        attn = self.dropout_module(weights) @ v
        weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return self.merge_heads(attn), weights


def append_padding(prev: Optional[Tensor], new: Optional[Tensor], past: int, T: int) -> Optional[Tensor]:
    """The B x (past + T) padding mask of the cached keys and T new ones, or None without padding."""
    if prev is None and new is None:
        return None
    like = prev if prev is not None else new
    if prev is None:
        prev = like.new_zeros(like.size(0), past)
    if new is None:
        new = like.new_zeros(like.size(0), T)
    return torch.cat([prev, new], dim=1)
