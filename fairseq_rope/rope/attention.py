"""Rotary self-attention: fairseq's MultiheadAttention with RoPE on queries and keys.

A drop-in for the self-attention of fairseq's encoder and decoder layers: fairseq's projections,
incremental state and both ways to attend (SDPA, or the softmax written out when weights are asked
for) are :class:`~fairseq_rope.self_attention.SelfAttention`'s, so a trained ``transformer``
checkpoint loads into it unchanged and fairseq's ``reorder_incremental_state`` reorders it for beam
search. This module adds eq. 34: the queries and keys are rotated before they are attended and cached.

Positions (m and n of eq. 16) are the slot index 0 .. T-1 along the time axis; while decoding
incrementally the new token continues after the cached keys, which are cached already rotated.
Scores depend on m - n only and padding is masked, so a left-padded sentence attends exactly as
it would alone. Each forward's position inputs are a :class:`RopeInputs`, made by
:meth:`~fairseq_rope.rope.options.RopeOptions.forward_inputs` and given by the layer.
"""

from dataclasses import dataclass
from typing import Optional

from torch import Tensor

from ..self_attention import PositionInputs, SelfAttention
from .rotary import RotaryEmbedding


@dataclass(frozen=True, eq=False)
class RopeInputs(PositionInputs):
    """RoPE's position inputs of one forward of a stack, the same for all its self-attentions."""

    # --rope-random-positions, in training: the positions to rotate by instead of the slot index, B x T
    positions: Optional[Tensor] = None
    # --rope-scaling auto, where a sentence is longer than the training length: each sentence's YaRN
    # factor, B (float64), and that training length L
    scaling_factors: Optional[Tensor] = None
    training_length: Optional[int] = None


class RotaryMultiheadAttention(SelfAttention):
    """Multi-head self-attention whose queries and keys are rotated by their positions (eq. 34).

    Args:
        embed_dim, num_heads, dropout, bias, q_noise, qn_block_size: as fairseq's MultiheadAttention.
        options: the rotary options, a :class:`~fairseq_rope.rope.options.RopeOptions`.
        causal: whether the ``attn_mask`` this layer is given is fairseq's future mask (the
            decoder's self-attention); the encoder's is not causal.
    """

    no_inputs = RopeInputs()

    def __init__(self, embed_dim: int, num_heads: int, options: "RopeOptions", causal: bool = False,
                 dropout: float = 0.0, bias: bool = True, q_noise: float = 0.0, qn_block_size: int = 8):
        super().__init__(embed_dim, num_heads, causal=causal, dropout=dropout, bias=bias, q_noise=q_noise,
                         qn_block_size=qn_block_size)
        self.options = options
        self.rotary = RotaryEmbedding(self.head_dim, options)

    def position_queries_keys(self, qk: Tensor, past: int, inputs: RopeInputs) -> Tensor:
        """Eq. 34 on q and k (B x 2H x T x D), in one call: the keys are cached rotated."""
        return self.rotate(qk, past, inputs)

    def check_self_attention(self, query, key, value, static_kv, incremental_state, inputs: RopeInputs):
        super().check_self_attention(query, key, value, static_kv, incremental_state, inputs)
        if inputs.positions is not None and incremental_state is not None:
            raise ValueError("random positions are for training; incremental decoding uses the slot index")

    def rotate(self, x: Tensor, past: int, inputs: RopeInputs = no_inputs) -> Tensor:
        """x (B x H x T x D) rotated by positions past .. past+T-1, or by the forward's ``positions``
        (B x T), with each sentence's own frequencies where the forward has ``scaling_factors``."""
        if inputs.positions is not None:
            return self.rotary.rotate_at(x, inputs.positions[:, None, :])
        if inputs.scaling_factors is not None:
            return self.rotary.rotate_per_sentence(x, past, inputs.scaling_factors, inputs.training_length)
        return self.rotary.rotate(x, past)
