"""On a CUDA GPU (skipped elsewhere): half-precision decoding paths and the Flash kernel.

Run on a GPU machine with ``python -m pytest tests/test_cuda.py``; CI has no GPU and skips it.
"""

import pytest
import torch
import torch.nn.functional as F

from conftest import random_tokens
from test_model import decode_step_by_step_equals_full_pass

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
BASE = ["--dropout", "0", "--attention-dropout", "0", "--share-all-embeddings"]  # paper sizes: d=512, 8 heads


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_incremental_decoding_equals_full_pass_in_half_precision_on_cuda(dict_dir, build, dtype, layout):
    """A base-size model cast to fp16/bf16 on the GPU: step-by-step decoding with the KV cache
    (and beam reorders) equals the full pass within the half type's rounding, and the full pass
    stays within that rounding of float32."""
    model, task = build(dict_dir, "rope_transformer", *BASE, "--rope-layout", layout, tiny=False)
    model.cuda()
    src, lengths = random_tokens(task, [37, 21, 30], seed=1)  # left-padded
    prev, _ = random_tokens(task, [24, 24, 24], seed=2, left_pad=False)
    src, lengths, prev = src.cuda(), lengths.cuda(), prev.cuda()
    with torch.no_grad():
        reference = model(src, lengths, prev)[0].float()
        model.to(HALF[dtype])
        out = model(src, lengths, prev)[0]
        assert out.dtype == HALF[dtype]
        eps = torch.finfo(HALF[dtype]).eps
        scale = reference.abs().max().item()
        # measured on an H100: fp16 8.3e-4 / 7.0e-4, bf16 5.9e-3 / 6.3e-3 of max|fp32| (interleaved / half)
        assert (out.float() - reference).abs().max().item() < 2 * eps * scale
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev,
                                             rtol=0, atol=4 * eps * scale)
        beams, beam_lengths = src[:1].repeat(3, 1), lengths[:1].repeat(3)  # the beams of one sentence
        decode_step_by_step_equals_full_pass(model, model.encoder(beams, src_lengths=beam_lengths), prev,
                                             rtol=0, atol=4 * eps * scale,
                                             reorders=[(5, torch.tensor([2, 0, 0], device="cuda"))])


@pytest.mark.parametrize("dtype", HALF)
def test_self_attention_runs_on_flash_kernel_without_padding(dict_dir, build, monkeypatch, dtype):
    """With nothing padded, every self-attention call (encoder, decoder with its future mask,
    training and incremental steps) runs under SDPA restricted to the Flash backend, which
    raises if given an explicit mask; a padded batch still works (other kernels)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa, calls = F.scaled_dot_product_attention, []

    def flash_only(*args, **kwargs):
        calls.append(kwargs.get("attn_mask") is None)
        if kwargs.get("attn_mask") is not None:
            return sdpa(*args, **kwargs)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", flash_only)
    model, task = build(dict_dir, "rope_transformer", *BASE, tiny=False)
    model.cuda().to(HALF[dtype])
    src, lengths = random_tokens(task, [30, 30], seed=3)
    prev, _ = random_tokens(task, [20, 20], seed=4, left_pad=False)
    src, lengths, prev = src.cuda(), lengths.cuda(), prev.cuda()
    model.train()
    model(src, lengths, prev)[0].float().sum().backward()
    model.eval()
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        state = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
    assert calls and all(calls), "an explicit mask reached SDPA although nothing was padded"
    calls.clear()
    src, lengths = random_tokens(task, [30, 12], seed=5)
    with torch.no_grad():
        out = model(src.cuda(), lengths.cuda(), prev)[0]
    assert torch.isfinite(out).all() and not all(calls)



@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_fused_rotation_on_cuda_is_eq34(dtype, layout):
    """The Triton kernel compiled for the GPU (bfloat16 included, which the CPU interpreter lacks):
    eq. 34 in float64 within the dtype's rounding, forward and backward, at an offset, at explicit
    positions and with a partial rotation, on q and k as the packed projection lays them out."""
    from test_fused_rotary import angles_at, check_forward_backward
    from fairseq_rope.rope import RopeOptions
    from fairseq_rope.rope.rotary import RotaryEmbedding

    B, H, T, D = 4, 8, 37, 64
    for rot, start in ((64, 0), (64, 129), (32, 5)):
        rope = RotaryEmbedding(D, RopeOptions(layout=layout, dim=None if rot == D else rot, rotation="triton")).cuda()
        explicit = torch.sort(torch.randperm(1000)[:T * B].view(B, T), dim=1).values
        cases = [(lambda x: rope.rotate(x, start), torch.arange(start, start + T).expand(B, T)),
                 (lambda x: rope.rotate_at(x, explicit.cuda()[:, None, :]), explicit)]
        for rotate, positions in cases:
            qkv = torch.randn(T, B, 3 * H, D, device="cuda").to(dtype)
            x = qkv.permute(1, 2, 0, 3)[:, :2 * H].detach().requires_grad_()
            check_forward_backward(rotate, x, angles_at(positions, rot).cuda(), layout)

@pytest.mark.parametrize("dtype", HALF)
def test_default_rotation_on_cuda_is_the_kernel(dict_dir, build, monkeypatch, dtype):
    """--rope-rotation auto on a GPU rotates with the Triton kernel, never the eager eq. 34, and
    gives the eager model's outputs within the half type's rounding."""
    from fairseq_rope.rope import rotary

    calls = []
    apply_rotary = rotary.apply_rotary
    monkeypatch.setattr(rotary, "apply_rotary", lambda *a: calls.append(a[0].device.type) or apply_rotary(*a))
    model, task = build(dict_dir, "rope_transformer", *BASE, tiny=False)
    eager, _ = build(dict_dir, "rope_transformer", *BASE, "--rope-rotation", "eager", tiny=False)
    eager.load_state_dict(model.state_dict())
    model, eager = model.cuda().to(HALF[dtype]), eager.cuda().to(HALF[dtype])
    src, lengths = random_tokens(task, [37, 21, 30], seed=1)
    prev, _ = random_tokens(task, [24, 24, 24], seed=2, left_pad=False)
    src, lengths, prev = src.cuda(), lengths.cuda(), prev.cuda()
    with torch.no_grad():
        out = model(src, lengths, prev)[0].float()
        assert not calls
        want = eager(src, lengths, prev)[0].float()
        assert calls and set(calls) == {"cuda"}
    eps = torch.finfo(HALF[dtype]).eps
    assert (out - want).abs().max().item() < 4 * eps * want.abs().max().item()
