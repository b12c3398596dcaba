"""RoPE with linear attention: RoFormer eq. 19 (Su et al., section 3.3).

    Attention(Q, K, V)_m = sum_n (R_m phi(q_m))^T (R_n phi(k_n)) v_n  /  sum_n phi(q_m)^T phi(k_n)

with the non-negative feature map phi(x) = elu(x) + 1 of Katharopoulos et al. (2020). The
rotation R (eq. 15, :class:`~fairseq_rope.rope.rotary.RotaryEmbedding`, any layout, --rope-dim,
--rope-theta) applies to the feature-mapped queries and keys of the numerator only; the
denominator stays unrotated, as the paper writes it ("to avoid the risk of dividing zero").
By associativity the numerator is (R_m phi(q_m))^T S with S = sum_n (R_n phi(k_n)) v_n^T, a d x d
matrix per head, and the denominator phi(q_m)^T z with z = sum_n phi(k_n): O(N) in the length.

  * non-causal (encoder): S and z over all keys, computed once;
  * causal (decoder, n <= m): prefix sums. z_m: a cumsum of phi(k_n) over positions. S_m: by
    chunks of ``chunk`` positions, the masked products within a chunk written out (chunk x chunk),
    across chunks the cumsum of each chunk's S, so that memory stays O(N * (chunk + d) + N/chunk *
    d * d) instead of the N x d x d of an S per position;
  * incremental decoding carries (S, z) of all earlier tokens as the state.

Other choices, stated: queries are not scaled by 1/sqrt(d) (phi is applied to the projections as
Katharopoulos et al. do); a padded key's phi(k) and v are zeroed, so it adds nothing to S or z;
the denominator gets ``EPS`` (1e-6) added, which only matters when every key is padding (then the
output is 0, not NaN); there is no attention dropout (no attention weights are formed).
"""

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import RotaryMultiheadAttention
from .rotary import RotaryEmbedding

EPS = 1e-6  # added to the denominator sum_n phi(q_m)^T phi(k_n)
CHUNK = 64  # positions per chunk of the causal prefix sums

State = Tuple[Tensor, Tensor]  # (S: B x H x d x d_v, z: B x H x d) over the keys seen so far


def elu_feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1 > 0 (Katharopoulos et al. 2020)."""
    return F.elu(x) + 1


def rope_linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    rotary: RotaryEmbedding,
    past: int = 0,
    padding: Optional[Tensor] = None,
    causal: bool = False,
    state: Optional[State] = None,
    chunk: int = CHUNK,
) -> Tuple[Tensor, State]:
    """Eq. 19 for T new tokens at positions past .. past+T-1.

    Args:
        q, k, v: projections, T x B x H x d (time first, as fairseq), unscaled.
        rotary: the rotation R_m (eq. 15) of the feature-mapped queries and keys.
        padding: B x T, True where the key is padding (excluded from every sum), or None.
        causal: query m sees the new keys n <= m (else all T), plus the keys in ``state``.
        state: (S, z) of earlier keys, or None.
    Returns:
        the attention output, B x H x T x d_v in v's dtype, and (S, z) including the new keys.
    """
    dtype = v.dtype
    # Sums over thousands of keys overflow float16 (max 65504) once activations are large, and
    # lose most digits in bfloat16 (8-bit mantissa; a bf16 cumsum stops growing after ~256 similar
    # terms). So from the feature map to the division everything runs in float32 (float64 stays
    # float64), with autocast off, which would run the matmuls below in bfloat16/float16 again;
    # the output is cast back to the input dtype. The state is kept in that precision too.
    work = torch.promote_types(dtype, torch.float32)
    with torch.autocast(q.device.type, enabled=False):
        phi_q, phi_k, v = elu_feature_map(q.to(work)), elu_feature_map(k.to(work)), v.to(work)
        if padding is not None:
            padded = padding.t()[:, :, None, None]  # T x B x 1 x 1
            phi_k, v = phi_k.masked_fill(padded, 0.0), v.masked_fill(padded, 0.0)
        phi_q, phi_k, v = (x.permute(1, 2, 0, 3) for x in (phi_q, phi_k, v))  # B x H x T x d
        rot_q, rot_k = rotary.rotate(phi_q, past), rotary.rotate(phi_k, past)
        if causal:
            out, new_state = _causal(phi_q, phi_k, rot_q, rot_k, v, state, min(chunk, q.size(0)))
        else:
            S, z = rot_k.transpose(2, 3) @ v, phi_k.sum(2)  # B x H x d x d_v, B x H x d
            if state is not None:
                S, z = S + state[0], z + state[1]
            out = (rot_q @ S) / (phi_q @ z.unsqueeze(-1) + EPS)
            new_state = (S, z)
    return out.to(dtype), new_state


def _causal(phi_q, phi_k, rot_q, rot_k, v, state, chunk):
    """Causal eq. 19 (n <= m) on B x H x T x d tensors. Denominators: phi(q_m)^T z_m with z_m the
    cumulative sum of phi(k_n) over n <= m (B x H x T x d, the size of q). Numerators: by chunks of
    ``chunk`` positions, the masked products within a chunk written out, plus (R_m phi(q_m))^T S
    of all the keys before the chunk, from the cumulative sum of each chunk's S."""
    B, H, T, _ = phi_q.shape
    z = phi_k.cumsum(2)  # B x H x T x d
    if state is not None:
        z = z + state[1].unsqueeze(2)
    den = (phi_q * z).sum(-1, keepdim=True)
    n = -(-T // chunk)
    if n * chunk > T:  # zero keys add nothing; the padded queries' rows are dropped at the end
        rot_q, rot_k, v = (F.pad(x, (0, 0, 0, n * chunk - T)) for x in (rot_q, rot_k, v))
    rot_q, rot_k, v = (x.unflatten(2, (n, chunk)) for x in (rot_q, rot_k, v))  # B x H x n x chunk x d
    chunk_S = rot_k.transpose(3, 4) @ v  # each chunk's sum of R_n phi(k_n) v_n^T: B x H x n x d x d_v
    S = chunk_S.cumsum(2)  # up to the end of each chunk
    if state is not None:
        S = S + state[0].unsqueeze(2)
    within = (rot_q @ rot_k.transpose(3, 4)).tril_()  # n <= m inside the chunk
    num = (within @ v + rot_q @ (S - chunk_S)).flatten(2, 3)[:, :, :T]
    return num / (den + EPS), (S[:, :, -1], z[:, :, -1])


class RotaryLinearAttention(RotaryMultiheadAttention):
    """Self-attention by eq. 19 (``--rope-attention linear``): the parameters, options and checks of
    :class:`~fairseq_rope.rope.attention.RotaryMultiheadAttention`, a forward of its own. Causal in a
    ``causal`` layer given the decoder's future mask, over all keys otherwise (encoder, or one
    decoding step). Returns (output, None): no attention weights are formed, so none can be
    returned (fairseq's layers ask self-attention for none), and there is no attention dropout.

    Incremental state: ``linear_S`` (B x H x d x d, sum of R_n phi(k_n) v_n^T), ``linear_z``
    (B x H x d, sum of phi(k_n)) and ``linear_length`` (B, the tokens seen, i.e. the next
    position), all batch-first, so that fairseq's ``reorder_incremental_state`` reorders them."""

    chunk = CHUNK  # positions per chunk of the causal prefix sums

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=True,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        self.check_self_attention(query, key, value, static_kv, incremental_state, self.inputs())
        if before_softmax:
            raise ValueError("--rope-attention linear forms no attention scores: before_softmax is not supported")
        if attn_mask is not None and not self.causal:
            raise ValueError("--rope-attention linear supports no attention mask other than the decoder's future mask")
        T, B, _ = query.shape
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        state, past = None, 0
        if saved.get("linear_S") is not None:
            state, past = (saved["linear_S"], saved["linear_z"]), int(saved["linear_length"][0])
        q, k, v = (p(query).view(T, B, self.num_heads, self.head_dim) for p in (self.q_proj, self.k_proj, self.v_proj))
        padding = None if key_padding_mask is None else key_padding_mask.bool()
        attn, (S, z) = rope_linear_attention(q, k, v, self.rotary, past, padding, attn_mask is not None, state,
                                             self.chunk)
        if incremental_state is not None:
            saved["linear_S"], saved["linear_z"] = S, z
            saved["linear_length"] = torch.full((B,), past + T, dtype=torch.long, device=query.device)
            self._set_input_buffer(incremental_state, saved)
        return self.merge_heads(attn), None
