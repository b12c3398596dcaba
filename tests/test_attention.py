"""The rotary self-attention against what a GPU user relies on: the dtype q and k reach attention in,
the masks scaled_dot_product_attention gets (Flash-eligible where nothing is padded), attention
weights equal to fairseq's MultiheadAttention, dropout."""


import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention

from conftest import random_tokens
from fairseq_rope.rope import rotary as rotary_module
from fairseq_rope.rope.attention import RotaryMultiheadAttention
from fairseq_rope.rope import RopeOptions
from fairseq_rope.rope.rotary import swap_pairs

C, H = 32, 4


@pytest.fixture
def sdpa_calls(monkeypatch):
    """Records what every call of F.scaled_dot_product_attention receives."""
    calls = []
    sdpa = F.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        calls.append(dict(q=q.detach().clone(), k=k.detach().clone(), v=v.detach().clone(), attn_mask=attn_mask,
                          is_causal=is_causal, dropout_p=dropout_p))
        return sdpa(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", recording)
    return calls


def attention(causal=False, dropout=0.0, **options):
    torch.manual_seed(0)
    return RotaryMultiheadAttention(C, H, RopeOptions(**options), causal=causal, dropout=dropout).eval()


def reference_rotation(x, positions, layout, theta=10000.0):
    """Eq. 15 in float64, from scratch: channel pairs (2i, 2i+1) or (i, i + d/2) of ``x`` (T x ... x D)
    rotated by positions[t] * theta^(-2i/d)."""
    D = x.size(-1)
    angles = positions.double()[:, None] * theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # T x D/2
    cos, sin = (f(angles).view(-1, *[1] * (x.dim() - 2), D // 2) for f in (torch.cos, torch.sin))
    x = x.double()
    a, b = (x[..., 0::2], x[..., 1::2]) if layout == "interleaved" else (x[..., : D // 2], x[..., D // 2 :])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    if layout == "interleaved":
        return torch.stack((ra, rb), -1).flatten(-2)
    return torch.cat((ra, rb), -1)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_autocast_bf16_rotates_q_and_k_in_bf16_with_exact_angles(sdpa_calls, layout):
    """Under torch.autocast the projections give bfloat16, and q, k, v reach SDPA in bfloat16 (no
    float32 detour), rotated by exact angles: at positions up to 400, q and k are within a few
    bfloat16 roundings of eq. 15 evaluated in float64. Angles taken in bfloat16 would be off by up
    to a radian there (bfloat16 steps by 2 between 256 and 512), far outside this tolerance."""
    attn = attention(causal=True, layout=layout)
    T = 400
    x = torch.randn(T, 2, C, generator=torch.Generator().manual_seed(1))
    causal = torch.triu(torch.full((T, T), float("-inf")), 1)
    with torch.no_grad():
        reference, _ = attn(x, x, x, attn_mask=causal, need_weights=False)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = attn(x, x, x, attn_mask=causal, need_weights=False)
        exact = {name: reference_rotation(proj(x.double()).view(T, 2, H, C // H), torch.arange(T), layout)
                 for name, proj in (("q", attn.q_proj.double()), ("k", attn.k_proj.double()))}
        exact["v"] = attn.v_proj.double()(x.double()).view(T, 2, H, C // H)
    fp32, bf16 = sdpa_calls
    for name in ("q", "k", "v"):
        assert fp32[name].dtype == torch.float32 and bf16[name].dtype == torch.bfloat16, name
        want = exact[name].permute(1, 2, 0, 3)
        scale = want.abs().max()
        assert (fp32[name] - want).abs().max() / scale < 1e-6, name
        error = (bf16[name].double() - want).abs().max() / scale
        assert error < 2 ** -6, (name, error.item())  # a few bfloat16 roundings (eps 2^-7)
    assert out.dtype == torch.bfloat16
    assert (out.float() - reference).abs().max() / reference.abs().max() < 2 ** -5


@pytest.fixture
def rotation_calls(monkeypatch):
    """Records the dtypes of what every eq. 34 call (rotary.apply_rotary) receives."""
    calls = []
    apply_rotary = rotary_module.apply_rotary

    def recording(x, cos, sin, layout):
        calls.append((x.dtype, cos.dtype, sin.dtype))
        return apply_rotary(x, cos, sin, layout)

    monkeypatch.setattr(rotary_module, "apply_rotary", recording)
    return calls


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_model_rotates_in_its_dtype(sdpa_calls, rotation_calls, dtype, layout):
    """A model cast with .half()/.to(bfloat16) rotates q and k in that dtype, not through float32:
    the rotation receives q, k and the table rows in it, and q reaching SDPA is eq. 34 evaluated in
    half arithmetic, bit for bit, on rows that are float64 values rounded once to it. (Rotating in
    float32 and casting back gives other bits here: checked, so that the test can tell.)"""
    T = 300
    positions = torch.arange(T, dtype=torch.float64)
    angles = positions[:, None] * 10000.0 ** (-torch.arange(0, C // H, 2, dtype=torch.float64) / (C // H))
    attn = attention(layout=layout).to(dtype)
    x = torch.randn(T, 2, C).to(dtype)
    with torch.no_grad():
        attn(x, x, x, need_weights=False)
        q = attn.q_proj(x).view(T, 2, H, C // H).permute(1, 2, 0, 3)
    assert rotation_calls == [(dtype, dtype, dtype)]  # q and k in one call
    assert [call[name].dtype for call in sdpa_calls for name in "qkv"] == [dtype] * 3
    cos, sin = attn.rotary.cos_table[:T], attn.rotary.sin_table[:T]
    pair = slice(0, None, 2) if layout == "interleaved" else slice(0, C // H // 2)
    partner = slice(1, None, 2) if layout == "interleaved" else slice(C // H // 2, None)
    assert torch.equal(cos[:, pair], angles.cos().to(dtype)) and torch.equal(sin[:, partner], angles.sin().to(dtype))
    in_half = torch.addcmul(q * cos, swap_pairs(q, layout), sin)
    via_float32 = torch.addcmul(q.float() * cos.float(), swap_pairs(q.float(), layout), sin.float()).to(dtype)
    assert torch.equal(sdpa_calls[0]["q"], in_half)
    assert not torch.equal(in_half, via_float32)


def test_autocast_rotation_receives_the_projections_dtype(rotation_calls):
    """Under autocast the projections give bfloat16 and the rotation takes them as they are."""
    attn = attention(causal=True)
    x = torch.randn(20, 2, C)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        attn(x, x, x, need_weights=False)
    assert rotation_calls == [(torch.bfloat16,) * 3]  # q and k in one call


def test_sdpa_gets_no_mask_where_nothing_is_padded(dict_dir, build, sdpa_calls):
    """Through the whole model: an unpadded batch reaches SDPA with attn_mask None in the encoder and
    is_causal=True (no mask tensor) in the decoder, so that the Flash and memory-efficient kernels
    are eligible; padding gets one explicit mask; a decoding step gets no mask."""
    model, task = build(dict_dir, "rope_transformer")
    src, lengths = random_tokens(task, [7, 7], seed=1)
    prev, _ = random_tokens(task, [5, 5], seed=2, left_pad=False)
    with torch.no_grad():
        model(src, lengths, prev)
    assert [(c["attn_mask"], c["is_causal"]) for c in sdpa_calls] == [(None, False)] * 2 + [(None, True)] * 2

    sdpa_calls.clear()
    src, lengths = random_tokens(task, [7, 4], seed=1)
    prev, _ = random_tokens(task, [5, 3], seed=2, left_pad=False)
    with torch.no_grad():
        model(src, lengths, prev)
    masks = [c["attn_mask"] for c in sdpa_calls]
    assert not any(c["is_causal"] for c in sdpa_calls)
    # encoder: padding only, bool (True = attend), one row per sentence
    assert all(m.dtype == torch.bool and m.shape == (2, 1, 1, 7) for m in masks[:2])
    assert torch.equal(masks[0][:, 0, 0], src.ne(task.source_dictionary.pad()))
    # decoder: the future mask with the padded keys added
    expected = torch.triu(torch.full((5, 5), float("-inf")), 1).expand(2, 1, 5, 5).clone()
    expected[1, :, :, 3:] = float("-inf")
    assert all(torch.equal(m, expected) for m in masks[2:])

    sdpa_calls.clear()
    src, lengths = random_tokens(task, [7, 7], seed=1)
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        state = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
    assert [(c["attn_mask"], c["is_causal"]) for c in sdpa_calls] == [(None, False)] * 2 + [(None, False)] * 6


def identity_rotation(attn, length):
    """Makes the rotation of positions < length the identity (cos 1, sin 0)."""
    attn.rotary.cos_sin(0, length, torch.float32)
    attn.rotary.cos_table.fill_(1.0)
    attn.rotary.sin_table.zero_()


def test_attention_weights_equal_fairseq_when_the_rotation_is_the_identity():
    """need_weights (averaged over heads), need_head_weights (per head) and before_softmax give
    what fairseq's MultiheadAttention gives with the same weights, once the rotation is the
    identity, with padding and causal masks (fairseq's attention code is the reference)."""
    T, B = 6, 3
    attn = attention()
    identity_rotation(attn, T)
    fairseq_attn = MultiheadAttention(C, H, self_attention=True).eval()
    fairseq_attn.load_state_dict(attn.state_dict())
    # fairseq's own attention code, not its call of F.multi_head_attention_forward, which ignores
    # need_head_weights and before_softmax
    fairseq_attn.skip_embed_dim_check = True
    x = torch.randn(T, B, C, generator=torch.Generator().manual_seed(2))
    right = torch.zeros(B, T, dtype=torch.bool)
    right[1, -2:] = right[2, -1] = True
    causal = torch.triu(torch.full((T, T), float("-inf")), 1)
    for attn_mask, kpm in [(None, None), (None, right), (causal, right)]:
        for kwargs in ({"need_weights": True}, {"need_head_weights": True}, {"before_softmax": True}):
            with torch.no_grad():
                ours = attn(x, x, x, key_padding_mask=kpm, attn_mask=attn_mask, **kwargs)
                theirs = fairseq_attn(x, x, x, key_padding_mask=kpm, attn_mask=attn_mask, **kwargs)
            for a, b in zip(ours, theirs):
                assert a.shape == b.shape, kwargs
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=str(kwargs))
    # and the rotation is what makes them differ otherwise
    for name in ("cos_table", "sin_table"):
        setattr(attn.rotary, name, getattr(attn.rotary, name)[:0])
    with torch.no_grad():
        assert not torch.allclose(attn(x, x, x)[1], fairseq_attn(x, x, x)[1], atol=1e-3)


@pytest.mark.parametrize("need_weights", [False, True])  # SDPA's dropout, the explicit path's
def test_attention_dropout_in_training_only_unless_applied_during_inference(need_weights):
    attn = attention(dropout=0.5)
    x = torch.randn(5, 2, C, generator=torch.Generator().manual_seed(3))
    no_dropout = attention()
    with torch.no_grad():
        reference = no_dropout(x, x, x, need_weights=need_weights)[0]
        evaluated = [attn(x, x, x, need_weights=need_weights)[0] for _ in range(2)]
        attn.train()
        trained = [attn(x, x, x, need_weights=need_weights)[0] for _ in range(2)]
        attn.eval()
        attn.dropout_module.apply_during_inference = True
        retained = [attn(x, x, x, need_weights=need_weights)[0] for _ in range(2)]
    assert torch.equal(evaluated[0], evaluated[1])
    torch.testing.assert_close(evaluated[0], reference, rtol=0, atol=0)
    for varied in (trained, retained):
        assert not torch.allclose(varied[0], varied[1]) and not torch.allclose(varied[0], reference)


@pytest.mark.parametrize("causal", [False, True])
def test_packed_projection_equals_the_three_projections(causal):
    """One GEMM on the stacked q/k/v weights (with gradients) = fairseq's three projections (without,
    on the CPU) to float32 rounding, outputs and the rotated keys cached, for q, k and v each (a wrong
    order of the stacked weights would swap them)."""
    attn = attention(causal=causal)
    for proj, scale in ((attn.q_proj, 1.0), (attn.k_proj, 2.0), (attn.v_proj, -3.0)):  # tell them apart
        proj.bias.data.fill_(scale)
    x = torch.randn(9, 2, C)
    mask = torch.triu(torch.full((9, 9), float("-inf")), 1) if causal else None
    packed_state, plain_state = {}, {}
    packed, _ = attn(x, x, x, attn_mask=mask, need_weights=False, incremental_state=packed_state)
    with torch.no_grad():
        plain, _ = attn(x, x, x, attn_mask=mask, need_weights=False, incremental_state=plain_state)
    torch.testing.assert_close(packed.detach(), plain, rtol=1e-6, atol=1e-6)
    saved = lambda state: next(iter(state.values()))
    for key in ("prev_key", "prev_value"):
        torch.testing.assert_close(saved(packed_state)[key].detach(), saved(plain_state)[key], rtol=1e-6, atol=1e-6)
