"""The rotary self-attention against what a GPU user relies on: the dtype q and k reach attention in,
the masks scaled_dot_product_attention gets (Flash-eligible where nothing is padded), attention
weights equal to fairseq's MultiheadAttention, dropout."""

import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention

from conftest import random_tokens
from fairseq_rope.attention import RotaryMultiheadAttention, is_future_mask

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


def attention(**kwargs):
    torch.manual_seed(0)
    return RotaryMultiheadAttention(C, H, **kwargs).eval()


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
    attn = attention(rope_layout=layout)
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


def test_half_precision_model_rotates_in_its_dtype(sdpa_calls):
    """A model cast with .half()/.to(bfloat16): q, k, v reach SDPA in that dtype, and the cached
    cos/sin rows are float64 values rounded once to it."""
    positions = torch.arange(300, dtype=torch.float64)
    angles = positions[:, None] * 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    for dtype in (torch.float16, torch.bfloat16):
        sdpa_calls.clear()
        attn = attention().to(dtype)
        x = torch.randn(300, 2, C).to(dtype)
        with torch.no_grad():
            attn(x, x, x, need_weights=False)
        assert [call[name].dtype for call in sdpa_calls for name in "qkv"] == [dtype] * 3
        assert torch.equal(attn.rotary.cos_cached[:300, 0::2], angles.cos().to(dtype))
        assert torch.equal(attn.rotary.sin_cached[:300, 1::2], angles.sin().to(dtype))


def test_sdpa_gets_no_mask_where_nothing_is_padded(dict_dir, build, sdpa_calls):
    """Through the whole model: an unpadded batch reaches SDPA with attn_mask None in the encoder and
    is_causal=True (no mask tensor) in the decoder, so that the Flash and memory-efficient kernels
    are eligible; padding gets one explicit mask; a decoding step gets no mask (on a GPU; on a CPU
    a step's single query goes to two batched GEMMs instead, see test_speed_paths)."""
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
    assert [(c["attn_mask"], c["is_causal"]) for c in sdpa_calls] == [(None, False)] * 2  # the encoder only
    attn = model.decoder.layers[0].self_attn
    assert attn._sdpa_mask(None, None, 2, 1, torch.float32) == (None, False)  # what a GPU step gets


def test_future_mask_recognised_only_when_it_is_one():
    T = 6
    future = torch.triu(torch.full((10, 10), float("-inf")), 1)
    assert is_future_mask(future[:T, :T], T, past=0)
    assert is_future_mask(future[:T, :T], T, past=0)  # the second time without reading it
    assert is_future_mask(future[:T, :T].isinf(), T, past=0)  # fairseq's bool form
    assert not is_future_mask(future[:T, :T], T, past=2)  # keys from a cache: not square in T
    assert not is_future_mask(future[1 : T + 1, 1 : T + 1], T, past=0)  # not a top-left block
    assert not is_future_mask(torch.zeros(T, T), T, past=0)  # no masking at all
    assert not is_future_mask(torch.triu(torch.full((T, T), float("-inf"))), T, past=0)  # the diagonal too
    alibi = future + torch.arange(10.0)  # finite values below the diagonal are not causality alone
    assert not is_future_mask(alibi[:T, :T], T, past=0)
    future[2, 0] = float("-inf")  # changed in place after being checked: checked again
    assert not is_future_mask(future[:T, :T], T, past=0)


def identity_rotation(attn, length):
    """Makes the rotation of positions < length the identity (cos 1, sin 0)."""
    attn.rotary.cos_sin(0, length, torch.float32)
    attn.rotary.cos_cached.fill_(1.0)
    attn.rotary.sin_cached.zero_()
    attn.rotary.rotation_cached.copy_(torch.tensor([1.0, 0.0]))


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
    for name in ("cos_cached", "sin_cached", "rotation_cached"):
        setattr(attn.rotary, name, getattr(attn.rotary, name)[:0])
    with torch.no_grad():
        assert not torch.allclose(attn(x, x, x)[1], fairseq_attn(x, x, x)[1], atol=1e-3)


@pytest.mark.parametrize("fast", [True, False])
def test_attention_dropout_in_training_only_unless_applied_during_inference(fast):
    attn = attention(dropout=0.5)
    attn.fast = fast
    x = torch.randn(5, 2, C, generator=torch.Generator().manual_seed(3))
    need_weights = not fast
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
