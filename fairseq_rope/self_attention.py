"""Self-attention with a position encoding: fairseq's MultiheadAttention, written once for every encoding.

A drop-in for the self-attention of fairseq's encoder and decoder layers: the same forward signature,
the same parameters (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``) and the same incremental state
(``prev_key``, ``prev_value``: B x H x S x D, ``prev_key_padding_mask``: B x S), so that fairseq's
``reorder_incremental_state`` reorders it for beam search. A position encoding subclasses it and
overrides one or more of three hooks, each a no-op here:

  * :meth:`position_queries_keys` (q and k before they are cached, as one B x 2H x T x D tensor: the
    queries' heads, then the keys'): RoPE rotates them in one call (attention.py);
  * :meth:`position_logits`: an additive term on the logits q k^T / sqrt(d), B (or 1) x H x T x S:
    Shaw's q a^K (shaw.py), T5's bucketed bias (t5_bias.py), ALiBi's linear penalty (alibi.py);
  * :meth:`position_values`: a term added to the output from the attention weights, Shaw's
    sum_j alpha_ij a^V_ij; an encoding that sets ``needs_weights`` always takes the written-out path.

The first two also receive this forward's position inputs (``inputs``, a :class:`PositionInputs`:
what the encoding's ``forward_inputs`` computed for the stack, e.g. RoPE's random positions in
training; how they get here is said there); a self-attention called alone has none.

Positions are slot indices: the T new queries are at past .. past+T-1 (past = cached keys), the S keys
at 0 .. S-1. Padding is masked, and every encoding here depends on i - j only, so a left-padded
sentence attends exactly as it would alone.

q, k and v come from one GEMM on the stacked weights of ``q_proj``, ``k_proj`` and ``v_proj`` (one
launch where fairseq's attention makes three; the checkpoint keeps fairseq's three projections), on a
GPU and in training; on the CPU without gradients (decoding) and with quant noise (which perturbs each
projection's weight through its own module) from the three projections.

Two ways to attend, chosen by one visible condition in :meth:`forward`:
  * ``F.scaled_dot_product_attention``, whenever neither the caller nor the encoding needs the weights
    (every fairseq layer): an additive position term goes in as its float mask, so that the
    memory-efficient kernel stays eligible on GPUs; a causal layer without padding or position term
    uses ``is_causal=True`` (Flash);
  * softmax(q k^T / sqrt(d) + logits) v written out, for callers that want the weights
    (``need_weights``, ``need_head_weights``) or the scores (``before_softmax``), as fairseq returns them.
"""

import dataclasses
from typing import ClassVar, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


@dataclasses.dataclass(frozen=True, eq=False)
class PositionInputs:
    """What one forward of an encoder or a decoder hands each of its self-attentions: made by its
    encoding (``PositionEncoding.forward_inputs``; an encoding with inputs of its own returns a
    subclass with them as fields, RoPE's ``RopeInputs``), read by the self-attention's hooks. None in a
    field: nothing for this forward.

    How they reach the self-attention, the one way there is: fairseq's stack calls its layers, and
    each layer its self-attention, with fixed arguments. So the stack (``Stack.run_layers_with``)
    registers a forward pre-hook on each of its layers for the duration of its forward, which adds
    ``position_inputs=`` to the layer's call (an argument, so that activation checkpointing's second
    run of the layer in the backward gets the same inputs), and only where a field holds something;
    the layer (``EncodingLayer.forward``) sets its self-attention's :attr:`SelfAttention.position_inputs`
    for the duration of fairseq's forward of the layer and clears it after; the self-attention passes
    them to its hooks (:meth:`SelfAttention.inputs`)."""

    # the stack's position bias (StackBias) by (past, T, S), each 1 x H x T x S: a cache that the stack
    # makes anew at each forward without gradients, so that its layers evaluate the bias once
    stack_bias: Optional[Dict[Tuple[int, int, int], Tensor]] = None

    def holds_nothing(self) -> bool:
        return all(getattr(self, field.name) is None for field in dataclasses.fields(self))


class SelfAttention(MultiheadAttention):
    """Multi-head self-attention with hooks for a position encoding (none here).

    Args:
        embed_dim, num_heads, dropout, bias, q_noise, qn_block_size: as fairseq's MultiheadAttention.
        causal: whether the ``attn_mask`` this layer is given is fairseq's future mask (the decoder's
            self-attention); the encoder's is not causal.
    """

    needs_weights = False  # True: position_values needs the attention weights (no SDPA)
    # this forward's position inputs, set by the layer for the duration of its call (None: none)
    position_inputs: Optional[PositionInputs] = None
    no_inputs: ClassVar[PositionInputs] = PositionInputs()  # the hooks' inputs without any (a subclass's own type)

    def __init__(self, embed_dim: int, num_heads: int, causal: bool = False, dropout: float = 0.0,
                 bias: bool = True, q_noise: float = 0.0, qn_block_size: int = 8):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias, self_attention=True,
                         q_noise=q_noise, qn_block_size=qn_block_size)
        self.causal = causal
        self.packed = q_noise == 0  # one GEMM for q, k, v (see split_heads)

    def inputs(self) -> PositionInputs:
        """This call's position inputs (see :class:`PositionInputs`), or ``no_inputs``."""
        return self.no_inputs if self.position_inputs is None else self.position_inputs

    def position_queries_keys(self, qk: Tensor, past: int, inputs: PositionInputs) -> Tensor:
        """q and k (B x 2H x T x D: the queries' heads, then the keys') of the tokens at past .. past+T-1,
        as they are attended and cached."""
        return qk

    def position_logits(self, q: Tensor, past: int, S: int, inputs: PositionInputs) -> Optional[Tensor]:
        """Added to the logits (after the 1/sqrt(d) scaling): B or 1 x H x T x S, or None."""
        return None

    def position_values(self, weights: Tensor, past: int) -> Optional[Tensor]:
        """Added to the output: B x H x T x D from the weights (B x H x T x S), or None."""
        return None

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
        inputs = self.inputs()
        self.check_self_attention(query, key, value, static_kv, incremental_state, inputs)
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        past = 0 if saved.get("prev_key") is None else saved["prev_key"].size(2)
        qk, v = self.split_heads(query)  # B x 2H x T x D, B x H x T x D
        qk = self.position_queries_keys(qk, past, inputs)
        q, k = qk.split(self.num_heads, dim=1)
        padding = None if key_padding_mask is None else key_padding_mask.bool()  # B x T, True: padding
        if incremental_state is not None:  # all keys so far (fairseq's cache: concatenated)
            if past:
                k, v = torch.cat([saved["prev_key"], k], 2), torch.cat([saved["prev_value"], v], 2)
                padding = append_padding(saved.get("prev_key_padding_mask"), padding, past, query.size(0))
            saved["prev_key"], saved["prev_value"], saved["prev_key_padding_mask"] = k, v, padding
            self._set_input_buffer(incremental_state, saved)
        logits = self.position_logits(q, past, k.size(2), inputs)

        if need_weights or need_head_weights or before_softmax or self.needs_weights:
            return self.explicit_attention(q, k, v, padding, attn_mask, logits, past, before_softmax,
                                           need_weights or need_head_weights, need_head_weights)
        mask, is_causal = self.sdpa_mask(padding, attn_mask, logits, past, q.dtype)
        dropout_p = self.dropout_module.p if self.training or self.dropout_module.apply_during_inference else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
        return self.merge_heads(attn), None

    def check_self_attention(self, query, key, value, static_kv, incremental_state, inputs):
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError(f"{type(self).__name__} is self-attention: key and value must be the query")
        if static_kv:
            raise ValueError(f"{type(self).__name__} is self-attention: static_kv is not supported")

    def split_heads(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        """q and k (B x 2H x T x D: the queries' heads, then the keys') and v (B x H x T x D) of x
        (T x B x C), unscaled: views of one T x B x 3C projection."""
        T, B, _ = x.shape
        projections = (self.q_proj, self.k_proj, self.v_proj)
        # the stacked weights are a copy of 3 C^2 weights per call: paid back by fewer launches on a GPU and
        # by one GEMM in training (three projections train 7-10% slower per layer on a CPU; the copy is within
        # the noise: docs/benchmarks.md); on the CPU without gradients (a decoding step of a few rows) the
        # copy costs as much as the three products
        if self.packed and (x.is_cuda or torch.is_grad_enabled()):
            bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
            qkv = F.linear(x, torch.cat([p.weight for p in projections]), bias)
        else:
            qkv = torch.cat([p(x) for p in projections], dim=-1)
        qkv = qkv.view(T, B, 3 * self.num_heads, self.head_dim).permute(1, 2, 0, 3)  # B x 3H x T x D
        # split, not two slices: its backward concatenates the gradients where slices' add zero-filled copies
        return qkv.split([2 * self.num_heads, self.num_heads], dim=1)

    def merge_heads(self, attn: Tensor) -> Tensor:
        """B x H x T x D -> T x B x C, through the output projection."""
        B, H, T, D = attn.shape
        return self.out_proj(attn.permute(2, 0, 1, 3).reshape(T, B, H * D))

    def sdpa_mask(self, padding, attn_mask, logits, past, dtype) -> Tuple[Optional[Tensor], bool]:
        """(attn_mask, is_causal) for F.scaled_dot_product_attention: None where nothing is masked,
        is_causal for a causal layer's mask over fresh keys without padding or position logits,
        otherwise one mask (bool: True = attend, or additive float: the position logits with -inf
        where fairseq's mask or the padding exclude a key)."""
        if logits is None:
            if attn_mask is not None and self.causal and padding is None and past == 0:
                return None, True
            if attn_mask is None:
                return (None if padding is None else ~padding[:, None, None, :]), False
            if attn_mask.dtype == torch.bool:  # fairseq's bool masks mark what is *not* attended
                return ~(attn_mask if padding is None else attn_mask | padding[:, None, None, :]), False
            logits = attn_mask.to(dtype)
        else:
            logits = logits.to(dtype)
            if attn_mask is not None:
                logits = logits.masked_fill(attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                    else logits + attn_mask.to(dtype)
        if padding is None:
            return logits, False
        return logits.masked_fill(padding[:, None, None, :], float("-inf")), False

    def explicit_attention(self, q, k, v, padding, attn_mask, logits, past, before_softmax, need_weights,
                           need_head_weights):
        """softmax(q k^T / sqrt(d) + logits) v (+ position values) written out (batched GEMMs over B*H,
        as fairseq), softmax in float32 (or float64). Returns (output, weights: B x T x S averaged over heads, or
        H x B x T x S with ``need_head_weights``, or None), or fairseq's ``before_softmax`` pair (scores, v)."""
        B, H, T, D = q.shape
        S = k.size(2)
        scores = (q * self.scaling) @ k.transpose(2, 3)  # B x H x T x S
        if logits is not None:
            scores = scores + logits
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                else scores + attn_mask.to(scores.dtype)
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        if before_softmax:  # fairseq's shapes: (B*H) x T x S and (B*H) x S x D
            return scores.reshape(B * H, T, S), v.reshape(B * H, S, D)
        # a query whose keys are all masked (a left pad in the decoder) gets no weights and outputs 0, as
        # SDPA does, instead of softmax's NaN (which would reach every query through the gradient)
        alone = unattending_queries(padding, attn_mask)
        if alone is not None:
            scores = scores.masked_fill(alone, 0.0)
        weights = F.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(scores.dtype)
        if alone is not None:
            weights = weights.masked_fill(alone, 0.0)
        dropped = self.dropout_module(weights)
        attn = dropped @ v
        values = self.position_values(dropped, past)
        if values is not None:
            attn = attn + values
        if not need_weights:
            return self.merge_heads(attn), None
        weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return self.merge_heads(attn), weights


def unattending_queries(padding: Optional[Tensor], attn_mask: Optional[Tensor]) -> Optional[Tensor]:
    """B (or 1) x 1 x T (or 1) x 1: True for a query all of whose keys are padding or masked; None
    without masks."""
    masked = None if padding is None else padding[:, None, None, :]
    if attn_mask is not None:
        future = attn_mask if attn_mask.dtype == torch.bool else attn_mask.isneginf()
        masked = future if masked is None else masked | future
    return None if masked is None else masked.all(dim=-1, keepdim=True)


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
