"""Rotary self-attention: fairseq's MultiheadAttention with RoPE on queries and keys.

A drop-in for the self-attention of fairseq's encoder and decoder layers: fairseq's projections,
incremental state and both ways to attend (SDPA, or the softmax written out when weights are asked
for) are :class:`~fairseq_rope.self_attention.SelfAttention`'s, so a trained ``transformer``
checkpoint loads into it unchanged and fairseq's ``reorder_incremental_state`` reorders it for beam
search. This module adds eq. 34: the queries and keys are rotated before they are attended and cached.

Positions (m and n of eq. 16) are the slot index 0 .. T-1 along the time axis; while decoding
incrementally the new token continues after the cached keys, which are cached already rotated.
Scores depend on m - n only and padding is masked, so a left-padded sentence attends exactly as
it would alone. Each forward's position inputs
(:meth:`~fairseq_rope.options.RopeOptions.forward_inputs`, given by the layer): in training with
``--rope-random-positions``, the ``positions`` (B x T) to rotate by instead; with ``--rope-scaling
auto``, each sentence's YaRN factor (``rope_scaling_factors``, B) and the training length
(``training_length``) where a sentence is longer than the training length.
"""

from typing import Any, Dict, Optional

from torch import Tensor

from .rotary import RotaryEmbedding
from .self_attention import SelfAttention


class RotaryMultiheadAttention(SelfAttention):
    """Multi-head self-attention whose queries and keys are rotated by their positions (eq. 34).

    Args:
        embed_dim, num_heads, dropout, bias, q_noise, qn_block_size: as fairseq's MultiheadAttention.
        options: the rotary options (:class:`~fairseq_rope.options.RopeOptions`, which imports this module).
        causal: whether the ``attn_mask`` this layer is given is fairseq's future mask (the
            decoder's self-attention); the encoder's is not causal.
    """

    def __init__(self, embed_dim: int, num_heads: int, options: "RopeOptions", causal: bool = False,
                 dropout: float = 0.0, bias: bool = True, q_noise: float = 0.0, qn_block_size: int = 8):
        super().__init__(embed_dim, num_heads, causal=causal, dropout=dropout, bias=bias, q_noise=q_noise,
                         qn_block_size=qn_block_size)
        self.options = options
        self.rotary = RotaryEmbedding(self.head_dim, options)

    def position_queries_keys(self, qk: Tensor, past: int, inputs: Dict[str, Any]) -> Tensor:
        """Eq. 34 on q and k (B x 2H x T x D), in one call: the keys are cached rotated."""
        return self.rotate(qk, past, inputs)

    def check_self_attention(self, query, key, value, static_kv, incremental_state, inputs):
        super().check_self_attention(query, key, value, static_kv, incremental_state, inputs)
        if inputs.get("positions") is not None and incremental_state is not None:
            raise ValueError("random positions are for training; incremental decoding uses the slot index")

    def rotate(self, x: Tensor, past: int, inputs: Optional[Dict[str, Any]] = None) -> Tensor:
        """x (B x H x T x D) rotated by positions past .. past+T-1, or by the forward's ``positions``
        (B x T), with each sentence's own frequencies where the forward has ``rope_scaling_factors``."""
        inputs = inputs or {}
        positions, factors = inputs.get("positions"), inputs.get("rope_scaling_factors")
        if positions is not None:
            return self.rotary.rotate_at(x, positions[:, None, :])
        if factors is not None:
            return self.rotary.rotate_per_sentence(x, past, factors, inputs["training_length"])
        return self.rotary.rotate(x, past)
