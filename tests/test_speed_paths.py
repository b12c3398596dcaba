"""Every fast path of the rotary attention equals the plain path, in outputs and in gradients.

The plain path (``attn.fast = False``, or any call asking for attention weights) is the
reference: three projections, eq. 34 written out for q then k, softmax(q k^T / sqrt(d)) v
written out. The fast path: one GEMM for q/k/v (without gradients straight from the tensor the
three weights are views of), q and k rotated in one call (a complex product of q, k and v where it
applies), scaled_dot_product_attention (batched GEMMs for one query on a CPU).
"""

import pytest
import torch
import torch.nn.functional as F
from conftest import random_tokens

import fairseq_rope.attention as attention_module
from fairseq_rope.attention import CACHE_STEP, SPARE, RotaryMultiheadAttention
from fairseq_rope.rotary import RotaryEmbedding, complex_applies

T, B, C, H = 7, 3, 32, 4


def attention(**kwargs):
    torch.manual_seed(0)
    attn = RotaryMultiheadAttention(C, H, **kwargs)
    with torch.no_grad():  # non-zero biases, so that their gradients are compared too
        for p in (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj):
            p.bias.normal_()
    return attn


def masks():
    left = torch.zeros(B, T, dtype=torch.bool)
    left[1, :2] = left[2, :1] = True  # left-padded sources
    right = torch.zeros(B, T, dtype=torch.bool)
    right[1, -2:] = right[2, -1] = True  # right-padded targets
    causal = torch.triu(torch.full((T, T), float("-inf")), 1)
    return {
        "none": (None, None),
        "left padding": (None, left),
        "right padding": (None, right),
        "causal": (causal, None),
        "causal bool": (causal.isinf(), None),
        "causal + right padding": (causal, right),
        "causal bool + right padding": (causal.isinf(), right),
        "additive float": (torch.randn(T, T, generator=torch.Generator().manual_seed(1)), left),
    }


def run(attn, fast, x, attn_mask, key_padding_mask):
    """Output and the gradients of x and of every parameter, for a loss on real tokens only."""
    attn.fast = fast
    attn.zero_grad()
    x = x.detach().clone().requires_grad_(True)
    out, weights = attn(x, x, x, key_padding_mask=key_padding_mask, attn_mask=attn_mask, need_weights=False)
    assert weights is None
    real = torch.ones(T, B, 1) if key_padding_mask is None else (~key_padding_mask).t().unsqueeze(-1).float()
    (out * real * torch.linspace(-1, 1, C)).sum().backward()
    grads = {name: p.grad.clone() for name, p in attn.named_parameters()}
    return out.detach(), x.grad, grads


def assert_same(fast, plain, rtol=1e-5, atol=1e-5):
    out_f, gx_f, grads_f = fast
    out_p, gx_p, grads_p = plain
    torch.testing.assert_close(out_f, out_p, rtol=rtol, atol=atol)
    torch.testing.assert_close(gx_f, gx_p, rtol=rtol, atol=atol)
    assert set(grads_f) == set(grads_p)
    for name in grads_p:
        torch.testing.assert_close(grads_f[name], grads_p[name], rtol=rtol, atol=atol, msg=name)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("rope_dim", [None, 4])
@pytest.mark.parametrize("case", list(masks()))
def test_fast_attention_equals_plain(layout, rope_dim, case):
    attn = attention(rope_layout=layout, rope_dim=rope_dim)
    attn_mask, key_padding_mask = masks()[case]
    x = torch.randn(T, B, C, generator=torch.Generator().manual_seed(2))
    assert_same(run(attn, True, x, attn_mask, key_padding_mask), run(attn, False, x, attn_mask, key_padding_mask))


def test_fast_path_fuses_projections_and_rotates_q_and_k_in_one_call(monkeypatch):
    """The fast path really is taken: one GEMM for q/k/v and one rotation call for the three, over a
    whole sequence and for a single decoding step; without gradients the GEMM reads the weights
    where they are (no copy), with gradients it concatenates them."""
    attn = attention().eval()
    calls = {"linear": [], "rotate": []}
    linear, rotate = F.linear, attn.rotary.rotate_qkv
    monkeypatch.setattr(F, "linear", lambda x, w, *a, **k: calls["linear"].append(w) or linear(x, w, *a, **k))
    monkeypatch.setattr(attn.rotary, "rotate_qkv", lambda x, *a, **k: calls["rotate"].append(tuple(x.shape)) or rotate(x, *a, **k))
    x = torch.randn(T, B, C)
    attn(x, x, x, attn_mask=masks()["causal"][0], need_weights=False)
    assert [tuple(w.shape) for w in calls["linear"]] == [(3 * C, C), (C, C)]  # q/k/v in one, out_proj
    assert calls["linear"][0].requires_grad and calls["rotate"] == [(T, B, 3, H, C // H)]
    complex_product = attention_module.apply_rotary_complex
    monkeypatch.setattr(attention_module, "apply_rotary_complex",
                        lambda x, *a: calls["rotate"].append(tuple(x.shape)) or complex_product(x, *a))
    for grad in (True, False):  # with gradients the general path; without, _decoding_step
        calls.update(linear=[], rotate=[])
        step = x[:1]
        with torch.set_grad_enabled(grad):
            attn(step, step, step, incremental_state={}, need_weights=False)
        weight = calls["linear"][0]
        assert tuple(weight.shape) == (3 * C, C)
        assert calls["rotate"] == [(1, B, 3, H, C // H)] if grad else [(B, 3, H, C // H)]
        assert (weight.data_ptr() == attn.q_proj.weight.data_ptr()) is not grad  # no copy without gradients


def test_projection_weights_stay_one_tensor_through_casts_loads_and_updates():
    """flatten_in_proj: q/k/v weights and biases are views of one tensor after construction and
    after .double()/.float(); a load_state_dict or an in-place update (optimizer step) writes into
    it, so the stacked GEMM sees the new values; a parameter given other storage (deepcopy,
    assign=True) is concatenated again. In every case the no-grad output equals a fresh module's
    with the same weights computed with gradients on (the concatenating path)."""
    import copy

    def flat(attn):
        return attn._flat() and attn.q_proj.weight.data_ptr() == attn._flat_in_proj[0].data_ptr()

    def check(attn):
        x = torch.randn(T, B, C, dtype=attn.q_proj.weight.dtype, generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            fast = attn(x, x, x, need_weights=False)[0]
        reference = attn(x, x, x, need_weights=False)[0].detach()  # gradients on: concatenated weights
        torch.testing.assert_close(fast, reference, rtol=0, atol=0)
        return fast

    attn = attention().eval()
    assert flat(attn)
    before = check(attn)
    attn.double()
    assert flat(attn) and attn._flat_in_proj[0].dtype == torch.float64
    check(attn)
    attn.float()
    assert flat(attn)
    other = attention().eval()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.5)
    attn.load_state_dict(other.state_dict())
    assert flat(attn)
    loaded = check(attn)
    assert not torch.allclose(loaded, before)
    with torch.no_grad():
        attn.k_proj.weight.mul_(-1)  # an in-place update of one projection
    assert not torch.allclose(check(attn), loaded)
    copied = copy.deepcopy(attn)
    assert not flat(copied)
    with torch.no_grad():
        copied.v_proj.bias.add_(1)  # the copy's own parameters, not its copy of the flat tensors
    assert not torch.allclose(check(copied), check(attn))
    attn.load_state_dict(attention().state_dict(), assign=True)
    assert not flat(attn)
    torch.testing.assert_close(check(attn), before, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_incremental_fast_equals_plain(layout):
    """Decoding token by token: outputs and the cached (rotated) keys and values agree."""
    x = torch.randn(T, B, C, generator=torch.Generator().manual_seed(3))
    results = []
    for fast in (True, False):
        attn = attention(rope_layout=layout).eval()
        attn.fast = fast
        state, outs = {}, []
        with torch.no_grad():
            for t in range(T):
                step = x[t : t + 1]
                outs.append(attn(step, step, step, incremental_state=state, need_weights=False)[0])
        saved = attn._get_input_buffer(state)
        results.append((torch.cat(outs), saved["prev_key"], saved["prev_value"]))
    for fast, plain in zip(*results):
        torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)


def decode(attn, steps, width, reorders=(), seed=8):
    """Feeds random tokens one at a time through ``attn`` with an incremental state, applying beam
    reorders {step: new_order} before the given steps; checks each step's output against a full
    causal pass over the (reordered) history. Returns the state's (key, value) caches at every step."""
    g = torch.Generator().manual_seed(seed)
    history, state, caches = torch.empty(0, width, C), {}, []
    for t in range(steps):
        if t in reorders:
            order = torch.tensor(reorders[t])
            attn.reorder_incremental_state(state, order)
            history = history[:, order]
        x = torch.randn(1, history.size(1), C, generator=g)
        history = torch.cat([history, x])
        out = attn(x, x, x, incremental_state=state, need_weights=False)[0]
        causal = torch.triu(torch.full((t + 1, t + 1), float("-inf")), 1)
        full = attn(history, history, history, attn_mask=causal, need_weights=False)[0][-1:]
        torch.testing.assert_close(out, full, rtol=1e-5, atol=1e-5, msg=f"step {t}")
        saved = attn._get_input_buffer(state)
        caches.append((saved.get("key_cache"), saved.get("value_cache")))
    return state, caches


def test_key_value_cache_written_in_place_through_growth_and_beam_reorders():
    """70 decoding steps (the cache grows every CACHE_STEP positions) with beam reorders that keep,
    drop and duplicate sentences, shrink the batch and grow it again: every step equals a full causal
    pass over the reordered history. Between reorders and growths the steps write into the same
    buffers, prev_key is a view of one, and reorders of the same batch size rotate the key and value
    caches among three buffers (theirs and the spare)."""
    attn = attention().eval()
    reorders = {3: [2, 0, 0], 5: [1, 2, 0], 7: [0, 0, 1], 10: [1, 2], 20: [0, 1, 1, 0], 66: [3, 2, 1, 0]}
    with torch.no_grad():
        state, caches = decode(attn, 70, B, reorders)
    pointers = [(k.data_ptr(), v.data_ptr()) for k, v in caches]
    assert len({p for pair in pointers[:10] for p in pair}) == 3 and pointers[3] != pointers[0]
    for t in range(1, 70):  # written in place wherever there was neither a reorder nor a growth
        if t not in reorders and caches[t][0].size(2) == caches[t - 1][0].size(2):
            assert pointers[t] == pointers[t - 1], f"step {t} reallocated"
    assert caches[-1][0].shape == (4, H, -(-70 // CACHE_STEP) * CACHE_STEP, C // H)
    assert caches[20][0].size(2) < caches[-1][0].size(2)  # it grew
    saved = attn._get_input_buffer(state)
    assert saved["prev_key"].data_ptr() == saved["key_cache"].data_ptr()
    assert saved["prev_key"].shape == (4, H, 70, C // H)


@pytest.mark.parametrize("dtype, kwargs", [(torch.float32, {}), (torch.float32, {"rope_layout": "half"}),
                                           (torch.float32, {"rope_dim": 4}), (torch.bfloat16, {})],
                         ids=["complex", "half layout", "partial rope-dim", "bf16"])
def test_decoding_step_projects_once_in_every_setting_and_equals_the_general_path(monkeypatch, dtype, kwargs):
    """Without gradients every decoding step takes _decoding_step, whatever the dtype, layout and
    --rope-dim: exactly one GEMM for q, k and v and one for out_proj per step (no projection
    thrown away on a condition found after it), with beam reorders and a cache growth on the way.
    Its outputs equal the general path's (_decoding_step switched off): bit for bit where both
    rotate by eq. 34, within float32 rounding where the complex product also scales q."""
    attn = attention(**kwargs).eval().to(dtype)
    steps, reorders = CACHE_STEP + 3, {4: [2, 0, 0], 9: [1, 1, 2], CACHE_STEP: [0, 2, 1]}
    g = torch.Generator().manual_seed(4)
    xs = [torch.randn(1, B, C, generator=g).to(dtype) for _ in range(steps)]

    gemms, linear = [], F.linear
    monkeypatch.setattr(F, "linear", lambda x, w, *a: gemms.append(tuple(w.shape)) or linear(x, w, *a))

    def outputs():
        state, out = {}, []
        with torch.no_grad():
            for t, x in enumerate(xs):
                if t in reorders:
                    attn.reorder_incremental_state(state, torch.tensor(reorders[t]))
                out.append(attn(x, x, x, incremental_state=state, need_weights=False)[0])
        return torch.cat(out)

    lean = outputs()
    assert gemms == [(3 * C, C), (C, C)] * steps
    monkeypatch.setattr(attn, "_decoding_step", lambda *a: None)  # the general path
    general = outputs()
    assert lean.dtype == dtype
    exact = not complex_applies(torch.zeros(B, 3, H, C // H, dtype=dtype), attn.rotary)
    torch.testing.assert_close(lean, general, rtol=0 if exact else 1e-6, atol=0 if exact else 1e-6)


def test_beam_reorder_grows_a_full_cache_so_that_no_step_allocates():
    """With a reorder before every step, as in beam search, a full cache is grown by the reorder's
    copy: every step writes into the buffers the reorder left, through two growths."""
    attn = attention().eval()
    after_reorder, reorder = [], attn.reorder_incremental_state

    def reorder_and_record(state, order):
        reorder(state, order)
        saved = attn._get_input_buffer(state)
        after_reorder.append((saved["key_cache"].data_ptr(), saved["value_cache"].data_ptr()))

    attn.reorder_incremental_state = reorder_and_record
    g = torch.Generator().manual_seed(3)
    steps = 2 * CACHE_STEP + 3
    reorders = {t: torch.randint(0, B, (B,), generator=g).tolist() for t in range(1, steps)}
    with torch.no_grad():
        _, caches = decode(attn, steps, B, reorders)
    assert [(k.data_ptr(), v.data_ptr()) for k, v in caches[1:]] == after_reorder
    assert [k.size(2) for k, _ in caches] == [CACHE_STEP * (1 + t // CACHE_STEP) for t in range(steps)]


def test_layers_share_one_spare_buffer():
    """Two layers decoding into one incremental state, the beams reordered at every step: their four
    caches (keys and values) and the one spare of the state rotate among five buffers, nothing else
    is allocated (one spare per layer would make it eight)."""
    layers = [attention().eval(), attention().eval()]
    state, seen = {}, set()
    with torch.no_grad():
        for _ in range(min(10, CACHE_STEP)):
            x = torch.randn(1, B, C)
            for attn in layers:
                x = attn(x, x, x, incremental_state=state, need_weights=False)[0]
            for attn in layers:
                attn.reorder_incremental_state(state, torch.tensor([2, 0, 1]))
                saved = attn._get_input_buffer(state)
                seen |= {saved["key_cache"].data_ptr(), saved["value_cache"].data_ptr()}
            seen.add(state[SPARE]["spare"].data_ptr())
    assert len(seen) == 5


def test_decoding_with_gradients_or_a_state_from_elsewhere_equals_the_full_pass():
    """With gradients on, the cache is concatenated (autograd keeps the earlier keys, which must not
    be written over) and backward works; a prev_key/prev_value pair put in the state by other code
    (B x H x S x D, as fairseq's MultiheadAttention keeps them) is copied into a new cache."""
    attn = attention().eval()
    state, _ = decode(attn, 4, B)  # with gradients
    saved = attn._get_input_buffer(state)
    assert "key_cache" not in saved and saved["prev_key"].requires_grad
    saved["prev_key"].sum().backward()
    assert attn.k_proj.weight.grad is not None
    with torch.no_grad():
        x = torch.randn(5, B, C)
        prefix = {}
        attn(x, x, x, incremental_state=prefix, need_weights=False)
        keys = {name: attn._get_input_buffer(prefix)[name].clone() for name in ("prev_key", "prev_value")}
        state = {}
        attn._set_input_buffer(state, dict(keys, prev_key_padding_mask=None))
        step = torch.randn(1, B, C)
        out = attn(step, step, step, incremental_state=state, need_weights=False)[0]
        history = torch.cat([x, step])
        causal = torch.triu(torch.full((6, 6), float("-inf")), 1)
        full = attn(history, history, history, attn_mask=causal, need_weights=False)[0][-1:]
    torch.testing.assert_close(out, full, rtol=1e-5, atol=1e-5)
    assert torch.equal(attn._get_input_buffer(state)["prev_key"][:, :, :5], keys["prev_key"])


def test_quant_noise_hooks_keep_separate_projections():
    """fairseq's quant-noise works through forward hooks on q_proj/k_proj/v_proj: the fused GEMM,
    which reads the weights directly, must not bypass them."""
    attn = attention(q_noise=0.5, qn_block_size=4)
    assert attn.q_proj._forward_pre_hooks
    attn.train()
    x = torch.randn(T, B, C)
    seen = []
    attn.q_proj.register_forward_hook(lambda module, inputs, output: seen.append(output.shape))
    attn(x, x, x, need_weights=False)
    assert seen == [(T, B, C)]


@pytest.mark.parametrize("shape", [(5, 3, 8), (6, 2, 2, 4, 8)])
def test_complex_rotation_equals_eq34(shape):
    """The complex product and eq. 34 (x * cos + swap(x) * sin): values and gradients, at positions
    37 .. 37+T-1."""
    g = torch.Generator().manual_seed(4)
    rotary = RotaryEmbedding(shape[-1])
    x = torch.randn(shape, generator=g)
    grad = torch.randn(shape, generator=g)
    assert complex_applies(x, rotary)
    outs = []
    for fast in (True, False):
        xx = x.clone().requires_grad_(True)
        out = rotary.rotate(xx, 37, fast=fast)
        out.backward(grad)
        outs.append((out.detach(), xx.grad))
    for fast, plain in zip(*outs):
        torch.testing.assert_close(fast, plain, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rotary,dtype", [(RotaryEmbedding(8), torch.float32), (RotaryEmbedding(8), torch.float64),
                                          (RotaryEmbedding(8, layout="half"), torch.float32),
                                          (RotaryEmbedding(4), torch.float32)])
def test_rotate_qkv_rotates_q_and_k_and_leaves_v_exactly(rotary, dtype):
    """rotate_qkv on a stacked projection (T x B x 3 x H x C, as the fused projection gives it): q
    and k as rotate() gives them (positions along T), v bit for bit, values and gradients; in float32
    with the interleaved layout (one complex product of all three, v times 1), and where it falls back
    (float64, the half layout, a partial rotation). At positions past the first table (64), so that
    it is remade."""
    g = torch.Generator().manual_seed(5)
    projected = torch.randn(6, 2, 3, 4, 8, generator=g, dtype=dtype)
    grad = torch.randn(6, 2, 3, 4, 8, generator=g, dtype=dtype)
    for start in (3, 90):
        results = []
        for stacked in (True, False):
            x = projected.clone().requires_grad_(True)
            if stacked:
                q, k, v = rotary.rotate_qkv(x, start, fast=True)
            else:  # rotate() wants positions along the second-last axis: B x H x T x C
                q, k = (rotary.rotate(x[:, :, i].permute(1, 2, 0, 3), start).permute(2, 0, 1, 3) for i in (0, 1))
                v = x[:, :, 2]
            torch.stack((q, k, v), 2).backward(grad)
            results.append((q.detach(), k.detach(), v.detach(), x.grad))
        (q, k, v, x_grad), (q_ref, k_ref, v_ref, x_grad_ref) = results
        torch.testing.assert_close(q, q_ref, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(k, k_ref, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(x_grad, x_grad_ref, rtol=1e-6, atol=1e-6)
        assert torch.equal(v, v_ref) and torch.equal(x_grad[:, :, 2], grad[:, :, 2])
        assert not torch.equal(q, projected[:, :, 0])  # rotated at all


def test_rotate_qkv_table_follows_the_cache():
    """rotate_qkv's complex table is made again from the cache when the cache moves (.to(device):
    here the meta device, where a stale CPU table would fail) and when it grows (checked by editing
    the grown cache to the identity rotation), and only then."""
    rotary, x = RotaryEmbedding(8), torch.randn(5, 2, 3, 1, 8)  # T x B x 3 x H x C
    rotary.rotate_qkv(x, 0, fast=True)
    rotary.to("meta")
    assert all(t.is_meta for t in rotary.rotate_qkv(x.to("meta"), 0, fast=True))
    rotary = RotaryEmbedding(8)
    rotary.rotate_qkv(x, 0, fast=True)
    table = rotary.qkv_rotation(8)
    assert rotary.qkv_rotation(8, q_scale=0.5) is not table
    rotary.rotate_qkv(x, 3, fast=True)
    assert rotary.qkv_rotation(8) is table and rotary.qkv_rotation(8, 0.5) is rotary.qkv_rotation(4, 0.5)  # kept
    rotary._grow(70)
    rotary.rotation_cached.copy_(torch.tensor([1.0, 0.0]))
    q, k, v = rotary.rotate_qkv(x, 0, fast=True)
    assert torch.equal(q, x[:, :, 0]) and torch.equal(k, x[:, :, 1]) and torch.equal(v, x[:, :, 2])


def test_complex_rotation_applies_only_where_it_can():
    rotary, x = RotaryEmbedding(8), torch.randn(4, 2, 3, 8)
    assert complex_applies(x, rotary)
    qkv = torch.randn(5, 2, 3, 4, 8).permute(2, 1, 3, 0, 4)  # the fused projection's T x B x 3 x H x D
    assert complex_applies(qkv[:2], rotary)  # its q and k, 2 x B x H x T x D
    assert not complex_applies(x, RotaryEmbedding(8, layout="half"))
    assert not complex_applies(x, RotaryEmbedding(4))  # partial rotation
    for dtype in (torch.bfloat16, torch.float16, torch.float64):
        assert not complex_applies(x.to(dtype), rotary)
        assert not complex_applies(x.to(dtype), RotaryEmbedding(8).to(dtype))
    assert not complex_applies(x.transpose(-1, -2).contiguous().transpose(-1, -2), rotary)
    assert not complex_applies(x.flatten(-2)[..., 1:9], rotary)  # odd offset


def test_cache_follows_dtype_changes_and_regains_precision():
    """.half() then .float(): the cache is float32 again with float32 accuracy (recomputed from float64
    angles, not float16 values cast back)."""
    rotary = RotaryEmbedding(8)
    x = torch.randn(300, 8)
    reference = rotary.rotate(x, 0)
    rotary.half()
    assert rotary.rotate(x.half(), 0).dtype == torch.float16 and rotary.cos_cached.dtype == torch.float16
    rotary.float()
    assert rotary.cos_cached.dtype == rotary.rotation_cached.dtype == torch.float32
    torch.testing.assert_close(rotary.rotate(x, 0), reference, rtol=0, atol=0)
    torch.testing.assert_close(rotary.rotate(x, 0, fast=True), reference, rtol=1e-6, atol=1e-6)


def test_bfloat16_fast_attention_equals_plain():
    """bfloat16 has no complex type: the fast path rotates by eq. 34 in bfloat16."""
    attn = attention().to(torch.bfloat16)
    attn_mask, key_padding_mask = masks()["causal + right padding"]
    x = torch.randn(T, B, C).to(torch.bfloat16)
    assert_same(run(attn, True, x, attn_mask, key_padding_mask), run(attn, False, x, attn_mask, key_padding_mask),
                rtol=0.05, atol=0.05)


def test_model_fast_equals_plain(dict_dir, build):
    """The whole rope_transformer: loss and every parameter's gradient, fast vs plain."""
    model, task = build(dict_dir, "rope_transformer")
    src, lengths = random_tokens(task, [9, 5, 7], seed=5)
    prev, _ = random_tokens(task, [6, 4, 6], seed=6, left_pad=False)
    target = torch.roll(prev, -1, dims=1)
    pad = task.target_dictionary.pad()
    attentions = [m for m in model.modules() if isinstance(m, RotaryMultiheadAttention)]
    assert len(attentions) == 4
    results = []
    for fast in (True, False):
        for m in attentions:
            m.fast = fast
        model.zero_grad()
        logits = model(src, lengths, prev)[0]
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (loss_f, grads_f), (loss_p, grads_p) = results
    torch.testing.assert_close(loss_f, loss_p)
    assert set(grads_f) == set(grads_p)
    for name in grads_p:
        torch.testing.assert_close(grads_f[name], grads_p[name], rtol=1e-4, atol=1e-5, msg=name)
