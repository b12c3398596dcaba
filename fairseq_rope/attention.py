"""Rotary self-attention: fairseq's MultiheadAttention with RoPE on queries and keys.

A drop-in for the self-attention of fairseq's encoder and decoder layers: same forward
signature, same parameters (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), the same
incremental state entries (``prev_key``, ``prev_value``: B x H x S x D, ``prev_key_padding_mask``),
so a trained ``transformer`` checkpoint loads into it unchanged. Unlike fairseq, the keys and
values are written in place into caches with room for more positions (``prev_key`` and
``prev_value`` are views of them), so that a decoding step copies only its own keys, not all
earlier ones, and a beam reorder copies into a spare buffer instead of allocating.

fairseq's own fast path hands the projections to ``F.multi_head_attention_forward``, which
leaves no place to rotate q and k; here the projections are done in the open and q and k are
rotated (eq. 34) in the dtype the projections give (float16/bfloat16 under autocast). Two paths,
kept equal (outputs and gradients) by tests/test_speed_paths.py:
  * fast (the default): one GEMM for q, k and v (the three weights are views of one tensor, see
    ``flatten_in_proj``), q and k rotated in one call (a complex product in float32), attention by
    ``F.scaled_dot_product_attention`` with no mask where nothing is masked and ``is_causal=True``
    for fairseq's future mask on an unpadded batch, so that its Flash and memory-efficient
    kernels stay eligible (on a CPU, one query, i.e. a decoding step, is two batched GEMMs, which
    beat SDPA's CPU kernel there);
  * plain (``self.fast = False``, or whenever the caller asks for attention weights:
    ``need_weights``, ``before_softmax``): three projections, q then k rotated, and the score
    matrix formed explicitly.
A beam search step on a CPU (one new token, nothing masked, no gradients; any dtype, layout and
--rope-dim) takes the fast path's arithmetic with the fewest operations (``_decoding_step``): in
float32 q's 1/sqrt(d) folded into its complex rotation, k and v copied straight into the cache, no
reshapes to SDPA's layout.

With ``rope_attention="linear"`` (``--rope-attention linear``) the module computes eq. 19 instead,
RoPE with linear attention (:mod:`fairseq_rope.linear_attention`), with its own incremental state.

Positions (what m and n are in eq. 16): the slot index, 0 .. T-1 along the time axis; while
decoding incrementally the new token continues after the cached keys, which are cached already
rotated (beam reordering is :meth:`RotaryMultiheadAttention.reorder_incremental_state`). Scores
depend on m - n only and padding is masked, so a left-padded sentence attends exactly as it
would alone: shifting all its positions by the number of pads changes no score.
"""

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

from .linear_attention import CHUNK, rope_linear_attention
from .rotary import RotaryEmbedding, apply_rotary_complex, complex_applies

ATTENTIONS = ("softmax", "linear")
CACHE_STEP = 16  # positions the key/value cache grows by when full (incremental decoding)
SPARE = "rope_attention_spare"  # the incremental state's entry for the beam reorder's spare buffer


def is_future_mask(attn_mask: Tensor, tgt_len: int, past: int) -> bool:
    """Whether ``attn_mask`` is fairseq's future mask over T fresh tokens (0 or False on and below
    the diagonal, -inf or True above): the mask SDPA applies itself with ``is_causal=True``.

    fairseq's decoder gives every layer a top-left [:T, :T] view of one cached square buffer. The
    buffer is read once (on a GPU, a device sync) and marked as checked together with its version
    counter, so that later views of it are recognised without reading it again."""
    if past or attn_mask.shape != (tgt_len, tgt_len):
        return False
    base = attn_mask if attn_mask._base is None else attn_mask._base
    if (base.dim() != 2 or base.size(0) != base.size(1)
            or attn_mask.storage_offset() != base.storage_offset() or attn_mask.stride() != base.stride()):
        return False
    if getattr(base, "_rope_future_mask_version", None) == base._version:
        return True
    above = torch.ones(base.shape, dtype=torch.bool, device=base.device).triu(1)
    if base.dtype == torch.bool:
        causal = torch.equal(base, above)
    else:
        causal = torch.equal(base.isneginf(), above) and not base.masked_fill(above, 0).any()
    if causal:
        base._rope_future_mask_version = base._version
    return causal


def views_of(tensors, flat: Tensor) -> bool:
    """Whether ``tensors`` lie one after the other in ``flat``, in its dtype (``flatten_in_proj``)."""
    start, size = flat.data_ptr(), flat.element_size()
    for t in tensors:
        if t.data_ptr() != start or t.dtype != flat.dtype:
            return False
        start += t.numel() * size
    return True


class RotaryMultiheadAttention(MultiheadAttention):
    """Multi-head self-attention whose queries and keys are rotated by their positions.

    Args:
        embed_dim, num_heads, dropout, bias, q_noise, qn_block_size: as for fairseq's
            MultiheadAttention (self-attention only).
        rope_theta: base of the rotation frequencies (10000 in the paper).
        rope_layout: "interleaved" (the paper's eq. 34) or "half" (rotate_half).
        rope_dim: rotated channels per head (even, <= head_dim); None rotates all.
        rope_attention: "softmax" (the default) or "linear": eq. 19, RoPE with linear attention
            (:mod:`fairseq_rope.linear_attention`), O(N) in the length, no attention dropout.
        rope_scaling, rope_scaling_factor, rope_original_max_positions: frequencies for inputs
            longer than in training (:data:`fairseq_rope.rotary.SCALINGS`); "none" is the paper's.
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
        rope_attention: str = "softmax",
        rope_scaling: str = "none",
        rope_scaling_factor: float = 1.0,
        rope_original_max_positions: Optional[int] = None,
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
        if rope_attention not in ATTENTIONS:
            raise ValueError(f"--rope-attention must be one of {', '.join(ATTENTIONS)}; got {rope_attention!r}")
        if rope_attention == "linear" and rope_scaling == "yarn":
            raise ValueError("--rope-scaling yarn scales the softmax's logits (its temperature); "
                             "it does not apply to --rope-attention linear")
        self.rotary = RotaryEmbedding(rope_dim, theta=rope_theta, layout=rope_layout, scaling=rope_scaling,
                                      factor=rope_scaling_factor, original_positions=rope_original_max_positions)
        self.rope_attention = rope_attention
        self.linear_chunk = CHUNK  # positions per chunk of the causal prefix sums (linear attention)
        self.fast = True  # False: always the plain path (the reference the tests compare with)
        # B x T positions of each sentence's slots, set by the encoder/decoder for one training
        # forward with --rope-random-positions; None: the slot index (past .. past+T-1)
        self.positions: Optional[Tensor] = None
        self.flatten_in_proj()

    def flatten_in_proj(self):
        """Makes the weights (and biases) of q_proj, k_proj and v_proj views of one 3C x C tensor
        (one 3C vector), as nn.LSTM.flatten_parameters does, so that without gradients q, k and v
        come from one GEMM without copying the weights first (decoding: once per token and layer).
        Called after construction and after .to()/.half()/.cuda() (:meth:`_apply`). Whatever else
        gives the parameters other storage (a deepcopy, FSDP, ``load_state_dict(assign=True)``)
        only makes :meth:`_in_proj` concatenate them again; in-place updates (optimizer steps,
        ``load_state_dict``) write into the shared tensor."""
        self._flat_in_proj = []
        for params in self._in_proj_params()[:2]:
            if params is None:
                self._flat_in_proj.append(None)
                continue
            flat = torch.cat([p.data for p in params])
            for p, view in zip(params, flat.split([len(p) for p in params])):
                p.data = view
            self._flat_in_proj.append(flat)

    def _in_proj_params(self):
        """[q, k, v weights], [q, k, v biases] (None without biases), and whether any of the three
        projections has forward hooks (quant noise). Read from the modules' dictionaries: this runs
        for every decoding step and layer, where nn.Module's attribute lookup would cost more than
        the rest of the check."""
        projections = [self._modules[name] for name in ("q_proj", "k_proj", "v_proj")]
        weights = [p._parameters["weight"] for p in projections]
        biases = [p._parameters["bias"] for p in projections]
        hooked = any(p._forward_pre_hooks or p._forward_hooks for p in projections)
        return weights, None if biases[0] is None else biases, hooked

    def _flat(self, params=None) -> bool:
        """Whether the q, k and v parameters (``params``: :meth:`_in_proj_params`) still are views of
        the tensors of :meth:`flatten_in_proj`."""
        weights, biases, _ = params or self._in_proj_params()
        flat_weight, flat_bias = self._flat_in_proj
        return views_of(weights, flat_weight) and (biases is None or views_of(biases, flat_bias))

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)
        if not self._flat():  # .half(), .to(device): each parameter got its own new tensor
            self.flatten_in_proj()
        return self

    def _in_proj(self) -> Optional[Tuple[Tensor, Optional[Tensor]]]:
        """(weight, bias) of q, k and v stacked: the tensors the three are views of, when no
        gradients are wanted and they still are; otherwise concatenated (autograd sees them).
        None when a projection has forward hooks, which one stacked GEMM would bypass."""
        params = weights, biases, hooked = self._in_proj_params()
        if hooked:
            return None
        if not torch.is_grad_enabled() and self._flat(params):
            return self._flat_in_proj[0], self._flat_in_proj[1]
        return torch.cat(weights), None if biases is None else torch.cat(biases)

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
        if self.rope_attention == "linear":
            return self._linear_attention(query, key_padding_mask, incremental_state, attn_mask, before_softmax)
        need_weights = need_weights or need_head_weights
        plain = not self.fast or need_weights or before_softmax
        tgt_len, bsz, _ = query.size()

        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        prev_key = saved.get("prev_key")
        past = 0 if prev_key is None else prev_key.size(2)
        if (tgt_len == 1 and incremental_state is not None and not plain and key_padding_mask is None
                and attn_mask is None and saved.get("prev_key_padding_mask") is None):
            out = self._decoding_step(query, saved, past)
            if out is not None:
                self._set_input_buffer(incremental_state, saved)
                return out, None
        padding = self._full_padding_mask(saved.get("prev_key_padding_mask"), key_padding_mask, bsz, past, tgt_len, query.device)

        # eq. 34: q and k rotated by their positions past .. past+T-1, once; cached keys stay rotated
        if self.positions is not None and incremental_state is not None:
            raise ValueError("random positions are for training; incremental decoding uses the slot index")
        q, k, v = self._project_and_rotate(query, past, fast=not plain)  # B x H x T x D each
        if incremental_state is not None:
            k, v = self._append_to_cache(saved, k, v, past)  # all keys and values so far
            saved["prev_key"], saved["prev_value"], saved["prev_key_padding_mask"] = k, v, padding
            self._set_input_buffer(incremental_state, saved)

        if plain or (tgt_len == 1 and query.device.type == "cpu"):  # one query: bmm beats SDPA's CPU kernel
            return self._explicit_attention(q, k, v, padding, attn_mask, before_softmax, need_weights, need_head_weights)
        mask, is_causal = self._sdpa_mask(padding, attn_mask, past, tgt_len, q.dtype)
        dropout_p = self.dropout_module.p if self.training or self.dropout_module.apply_during_inference else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
        return self._merge_heads(attn), None

    # -- incremental decoding: one step, the key/value cache -----------------------------

    def _decoding_step(self, query: Tensor, saved, past: int) -> Optional[Tensor]:
        """A beam search step on a CPU: one new token (1 x B x C) at position ``past``, nothing
        masked, in evaluation without gradients. The fast path's arithmetic in as few operations as
        it takes (per-operation overhead is most of a step's cost on a CPU): one GEMM for q, k and
        v; where the complex rotation applies (float32, interleaved, all channels) one complex
        product rotating q and k and scaling q, otherwise eq. 34 on q and k as the general path
        does it; k and v copied into the cache; two batched GEMMs for the attention (they beat
        SDPA's CPU kernel for one query). Returns the output, or None where a condition does not
        hold, decided before any work (the general path then runs)."""
        if (query.device.type != "cpu" or torch.is_grad_enabled() or self.positions is not None
                or (self.training or self.dropout_module.apply_during_inference) and self.dropout_module.p > 0):
            return None
        stacked = self._in_proj()
        if stacked is None:
            return None
        _, bsz, embed_dim = query.shape
        H, D = self.num_heads, self.head_dim
        qkv = F.linear(query, *stacked).view(bsz, 3, H, D)
        if complex_applies(qkv, self.rotary):  # B x H x D each, q times 1/sqrt(d)
            q, k, v = apply_rotary_complex(qkv, self.rotary.qkv_rotation(past + 1, self.scaling)[past, 0]).unbind(1)
        else:  # bfloat16/float16, the half layout, a partial --rope-dim
            q, k, v = (t[0] for t in self.rotary.rotate_qkv(qkv[None], past))
            q = q * self.scaling
        key_cache, value_cache = saved.get("key_cache"), saved.get("value_cache")
        if key_cache is not None and past < key_cache.size(2):  # beam search's reorder grew a full cache
            key_cache.select(2, past).copy_(k)
            value_cache.select(2, past).copy_(v)
            k, v = key_cache.narrow(2, 0, past + 1), value_cache.narrow(2, 0, past + 1)
        else:
            k, v = self._append_to_cache(saved, k[:, :, None], v[:, :, None], past)
        saved["prev_key"], saved["prev_value"], saved["prev_key_padding_mask"] = k, v, None
        src_len = past + 1
        scores = torch.bmm(q.reshape(bsz * H, 1, D), k.reshape(bsz * H, src_len, D).transpose(1, 2))
        attn = torch.bmm(F.softmax(scores, dim=-1), v.reshape(bsz * H, src_len, D))
        return self.out_proj(attn.view(1, bsz, embed_dim))

    def _append_to_cache(self, saved, k: Tensor, v: Tensor, past: int) -> Tuple[Tensor, Tensor]:
        """Writes k and v (B x H x T x D) at positions past .. past+T-1 of the caches in ``saved``
        (``key_cache``, ``value_cache``: B x H x capacity x D), in place: no copy of the earlier keys
        per step, as a concatenation makes (fairseq's MultiheadAttention). Full caches grow by
        CACHE_STEP positions at a time; a ``prev_key``/``prev_value`` pair set by someone else is
        copied in first. Returns all keys and values so far, B x H x (past+T) x D views of the
        caches, which are also kept as ``prev_key`` and ``prev_value``."""
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):  # autograd keeps the earlier
            saved.pop("key_cache", None), saved.pop("value_cache", None)  # keys: no writing over them
            if past:
                k, v = torch.cat([saved["prev_key"], k], dim=2), torch.cat([saved["prev_value"], v], dim=2)
            return k, v
        end = past + k.size(2)
        cached = []
        for name, prev, new in (("key_cache", "prev_key", k), ("value_cache", "prev_value", v)):
            cache = saved.get(name)
            if cache is None or cache.size(2) < end:
                bsz, heads, _, dim = new.shape
                grown = new.new_empty(bsz, heads, -(-end // CACHE_STEP) * CACHE_STEP, dim)
                if past:
                    grown.narrow(2, 0, past).copy_(saved[prev])
                saved[name] = cache = grown
            cache.narrow(2, past, end - past).copy_(new)
            cached.append(cache.narrow(2, 0, end))
        return cached[0], cached[1]

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Beam search's reorder (and selection) of the sentences in the cache: the cached keys are
        index_selected into a spare buffer, which becomes the key cache, and the old key cache
        becomes the spare; the same for the values. A full cache is grown here, by CACHE_STEP
        positions, so that the next step's key fits: the reorder's copy is the growth's copy too.
        One spare per incremental state (``incremental_state[SPARE]``), shared by all layers, which
        reorder one after the other: the caches then take about as much memory as fairseq's
        concatenated keys and values at their peak (one layer's more than all of them), and
        nothing is allocated while the number of sentences and the capacity stay the same."""
        saved = self._get_input_buffer(incremental_state)
        if saved.get("key_cache") is None:  # nothing cached yet, or linear attention's state
            return super().reorder_incremental_state(incremental_state, new_order)
        past = saved["prev_key"].size(2)
        shared = incremental_state.setdefault(SPARE, {})
        for name, prev in (("key_cache", "prev_key"), ("value_cache", "prev_value")):
            cache, spare = saved[name], shared.get("spare")
            _, heads, capacity, dim = cache.shape
            if past == capacity:
                capacity += CACHE_STEP
            if spare is None or spare.shape != (len(new_order), heads, capacity, dim) or spare.dtype != cache.dtype \
                    or spare.device != cache.device:
                spare = cache.new_empty(len(new_order), heads, capacity, dim)
            if capacity == cache.size(2):  # whole rows: one contiguous copy, as quick as of `past` positions
                torch.index_select(cache, 0, new_order, out=spare)
            else:
                torch.index_select(cache, 0, new_order, out=spare.narrow(2, 0, past))
            saved[prev] = spare.narrow(2, 0, past)
            saved[name], shared["spare"] = spare, cache
        if saved.get("prev_key_padding_mask") is not None:
            saved["prev_key_padding_mask"] = saved["prev_key_padding_mask"].index_select(0, new_order)
        return self._set_input_buffer(incremental_state, saved)

    # -- RoPE with linear attention (eq. 19) --------------------------------------------

    def _linear_attention(self, query, key_padding_mask, incremental_state, attn_mask, before_softmax):
        """Eq. 19 (see :mod:`fairseq_rope.linear_attention`). Causal when ``attn_mask`` is fairseq's
        future mask (decoder), over all keys when it is None (encoder, or one decoding step). Returns
        (output, None): no attention weights are formed, so none can be returned (fairseq's layers
        ask self-attention for none), and there is no attention dropout.

        Incremental state: ``linear_S`` (B x H x d x d, sum of R_n phi(k_n) v_n^T), ``linear_z``
        (B x H x d, sum of phi(k_n)) and ``linear_length`` (B, the number of tokens seen, i.e. the next
        position), all batch-first, so that fairseq's ``reorder_incremental_state`` reorders them."""
        if before_softmax:
            raise ValueError("--rope-attention linear forms no attention scores: before_softmax is not supported")
        tgt_len, bsz, _ = query.size()
        causal = attn_mask is not None
        if causal and not is_future_mask(attn_mask, tgt_len, 0):
            raise ValueError("--rope-attention linear supports no attention mask other than fairseq's future mask")
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        state, past = None, 0
        if saved.get("linear_S") is not None:
            state, past = (saved["linear_S"], saved["linear_z"]), int(saved["linear_length"][0])
        q, k, v = (p(query).view(tgt_len, bsz, self.num_heads, self.head_dim)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        padding = None if key_padding_mask is None else key_padding_mask.bool()
        attn, (S, z) = rope_linear_attention(q, k, v, self.rotary, past, padding, causal, state, self.linear_chunk)
        if incremental_state is not None:
            saved["linear_S"], saved["linear_z"] = S, z
            saved["linear_length"] = torch.full((bsz,), past + tgt_len, dtype=torch.long, device=query.device)
            self._set_input_buffer(incremental_state, saved)
        return self._merge_heads(attn), None

    # -- projections -----------------------------------------------------------------

    def _project_and_rotate(self, x: Tensor, past: int, fast: bool):
        """q, k, v (B x H x T x D) of x (T x B x C), q and k rotated (eq. 34) by positions
        past .. past+T-1 (or by ``self.positions``, random positions in training), in the dtype the
        projections produce (float16/bfloat16 under autocast).

        fast: one GEMM with the three weights stacked (:meth:`_in_proj`), then one rotation call
        (:meth:`RotaryEmbedding.rotate_qkv`). Otherwise, or with quant-noise hooks on
        q_proj/k_proj/v_proj (which the stacked GEMM would bypass): three projections, q rotated,
        then k."""
        T, B, _ = x.shape
        H, D = self.num_heads, self.head_dim
        stacked = self._in_proj() if fast else None
        if stacked is not None:
            qkv = F.linear(x, *stacked).view(T, B, 3, H, D)
            if self.positions is None:
                return [t.permute(1, 2, 0, 3) for t in self.rotary.rotate_qkv(qkv, past, fast=True)]
            q, k, v = qkv.permute(2, 1, 3, 0, 4).unbind(0)
        else:
            q, k, v = (p(x).view(T, B, H, D).permute(1, 2, 0, 3) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self._rotate(q, past, fast=fast), self._rotate(k, past, fast=fast), v

    def _rotate(self, x: Tensor, past: int, fast: bool) -> Tensor:
        """x (B x H x T x D) rotated by positions past .. past+T-1, or by ``self.positions`` (B x T,
        random positions in training: one sorted set per sentence)."""
        if self.positions is None:
            return self.rotary.rotate(x, past, fast=fast)
        return self.rotary(x, self.positions[:, None, :])

    # -- masks -----------------------------------------------------------------------

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

    def _sdpa_mask(self, padding, attn_mask, past, tgt_len, dtype) -> Tuple[Optional[Tensor], bool]:
        """(attn_mask, is_causal) for scaled_dot_product_attention: no mask where nothing is masked,
        is_causal for fairseq's future mask on an unpadded batch (so that the Flash and
        memory-efficient kernels stay eligible), one explicit mask otherwise (bool: True = attend,
        or additive float)."""
        if attn_mask is None:
            return (None if padding is None else ~padding[:, None, None, :]), False
        if padding is None and is_future_mask(attn_mask, tgt_len, past):
            return None, True
        if attn_mask.dtype == torch.bool:  # fairseq's bool masks mark what is *not* attended
            blocked = attn_mask if padding is None else attn_mask | padding[:, None, None, :]
            return ~blocked, False
        attn_mask = attn_mask.to(dtype)
        if padding is None:
            return attn_mask, False
        return attn_mask.masked_fill(padding[:, None, None, :], float("-inf")), False

    def _explicit_attention(self, q, k, v, padding, attn_mask, before_softmax, need_weights, need_head_weights):
        """softmax(q k^T / sqrt(d)) v written out (as fairseq's MultiheadAttention: batched GEMMs
        over B*H), for callers that want the weights, and for one query on a CPU."""
        bsz, H, tgt_len, D = q.shape
        src_len = k.size(2)
        k, v = k.reshape(bsz * H, src_len, D), v.reshape(bsz * H, src_len, D)
        scores = torch.bmm((q * self.scaling).reshape(bsz * H, tgt_len, D), k.transpose(1, 2))
        if attn_mask is not None or padding is not None:
            scores = scores.view(bsz, H, tgt_len, src_len)
            if attn_mask is not None:
                if attn_mask.dtype == torch.bool:
                    scores = scores.masked_fill(attn_mask, float("-inf"))
                else:
                    scores = scores + attn_mask.to(scores.dtype)
            if padding is not None:
                scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
            scores = scores.view(bsz * H, tgt_len, src_len)
        if before_softmax:  # fairseq's shapes: (B*H) x T x S and (B*H) x S x D
            return scores, v
        weights = F.softmax(scores, dim=-1, dtype=torch.float32)
        if weights.dtype != scores.dtype:
            weights = weights.to(scores.dtype)
        probs = self.dropout_module(weights) if self.training or self.dropout_module.apply_during_inference else weights
        attn = torch.bmm(probs, v).view(bsz, H, tgt_len, D)
        if need_weights:
            weights = weights.view(bsz, H, tgt_len, src_len)
            weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return self._merge_heads(attn), weights if need_weights else None

    def _merge_heads(self, attn: Tensor) -> Tensor:  # B x H x T x D -> T x B x C
        bsz, H, tgt_len, D = attn.shape
        return self.out_proj(attn.permute(2, 0, 1, 3).reshape(tgt_len, bsz, H * D))
