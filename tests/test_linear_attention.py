"""--rope-attention linear: RoPE with linear attention (RoFormer eq. 19, phi(x) = elu(x) + 1).

The reference below is written from the paper, independently of fairseq_rope/linear_attention.py:
explicit rotation matrices R_m built from theta_i = theta^(-2(i-1)/d), explicit loops over m and n,
float64. The implementation's only shared constant is the documented denominator epsilon."""

import logging
import math
import re

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.modules import MultiheadAttention
from fairseq.sequence_generator import SequenceGenerator

from conftest import USER_DIR, random_tokens
from fairseq_rope.rope.attention import RotaryMultiheadAttention
from fairseq_rope.rope.linear_attention import RotaryLinearAttention
from fairseq_rope.rope import RopeOptions
from fairseq_rope.rope.linear_attention import EPS, rope_linear_attention
from test_cli import TRAIN, data, hypotheses, run  # noqa: F401 (data is a fixture)

C, H = 32, 4
D = C // H


def rotation_matrix(m, d, rot, layout, theta):
    """R_m (eq. 15) as a d x d float64 matrix: the first ``rot`` channels rotated in pairs (2i, 2i+1)
    (interleaved) or (i, i + rot/2) (half) by m * theta^(-2(i-1)/rot), i = 1 .. rot/2; the rest fixed."""
    R = torch.eye(d, dtype=torch.float64)
    for i in range(rot // 2):
        angle = m * theta ** (-2 * i / rot)
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + rot // 2)
        R[a, a], R[a, b], R[b, a], R[b, b] = math.cos(angle), -math.sin(angle), math.sin(angle), math.cos(angle)
    return R


def phi(x):
    """elu(x) + 1, written out."""
    return torch.where(x > 0, x + 1, torch.exp(x))


def eq19_reference(attn, x, padding=None, causal=False, layout="interleaved", rot=D, theta=10000.0, rotate=True):
    """Eq. 19 for the module's weights on x (T x B x C, float64): for each m, the sum over the unpadded
    n (n <= m if causal) of (R_m phi(q_m))^T (R_n phi(k_n)) v_n over sum of phi(q_m)^T phi(k_n) (+ EPS)."""
    T, B, _ = x.shape
    proj = {name: (x @ getattr(attn, name).weight.T + getattr(attn, name).bias).view(T, B, H, D)
            for name in ("q_proj", "k_proj", "v_proj")}
    q, k, v = phi(proj["q_proj"]), phi(proj["k_proj"]), proj["v_proj"]
    R = [rotation_matrix(m if rotate else 0, D, rot, layout, theta) for m in range(T)]
    out = torch.zeros(T, B, H, D, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for m in range(T):
                num, den = torch.zeros(D, dtype=torch.float64), 0.0
                for n in range(T):
                    if (padding is not None and padding[b, n]) or (causal and n > m):
                        continue
                    num += ((R[m] @ q[m, b, h]) @ (R[n] @ k[n, b, h])) * v[n, b, h]
                    den += q[m, b, h] @ k[n, b, h]
                out[m, b, h] = num / (den + EPS)
    return out.reshape(T, B, C) @ attn.out_proj.weight.T + attn.out_proj.bias


def linear_attention(layout="interleaved", rope_dim=None, theta=10000.0, seed=0, causal=False):
    torch.manual_seed(seed)
    options = RopeOptions(layout=layout, dim=rope_dim, theta=theta, attention="linear")
    attn = RotaryLinearAttention(C, H, options, causal=causal).double().eval()
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            getattr(attn, name).bias.normal_()  # fairseq initialises them to 0: make them count
    return attn


def inputs(T=9, B=3, seed=1, scale=1.0):
    return scale * torch.randn(T, B, C, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


CONFIGS = [("interleaved", None, 10000.0), ("half", None, 10000.0), ("interleaved", 4, 100.0), ("half", 6, 500.0)]


@pytest.mark.parametrize("layout, rope_dim, theta", CONFIGS)
def test_encoder_output_equals_eq19_with_explicit_loops(layout, rope_dim, theta):
    """Non-causal: every query over every unpadded key; left padding as fairseq's encoder has it."""
    attn = linear_attention(layout, rope_dim, theta)
    x = inputs()
    padding = torch.zeros(3, 9, dtype=torch.bool)
    padding[1, :4] = padding[2, :1] = True
    with torch.no_grad():
        out, weights = attn(x, x, x, key_padding_mask=padding)
    want = eq19_reference(attn, x, padding, layout=layout, rot=rope_dim or D, theta=theta)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-10)
    assert weights is None  # no attention weights are formed (documented)
    # the rotation is what makes eq. 19 differ from eq. 18: the reference can tell
    assert not torch.allclose(out, eq19_reference(attn, x, padding, rotate=False), atol=1e-3)


@pytest.mark.parametrize("chunk", [64, 4, 1])
@pytest.mark.parametrize("layout, rope_dim, theta", CONFIGS)
def test_causal_decoder_output_equals_eq19_with_n_le_m(layout, rope_dim, theta, chunk):
    """Causal (fairseq's future mask, float and bool): n <= m, right padding; prefix sums by chunks of
    64 (one chunk here), 4 (three chunks, the last one padded) and 1."""
    attn = linear_attention(layout, rope_dim, theta, causal=True)
    attn.chunk = chunk
    x = inputs()
    padding = torch.zeros(3, 9, dtype=torch.bool)
    padding[1, -3:] = padding[2, -1:] = True
    future = torch.triu(torch.full((9, 9), float("-inf"), dtype=torch.float64), 1)
    want = eq19_reference(attn, x, padding, causal=True, layout=layout, rot=rope_dim or D, theta=theta)
    for mask in (future, future.isinf()):
        with torch.no_grad():
            out, _ = attn(x, x, x, key_padding_mask=padding, attn_mask=mask, need_weights=False)
        torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-10)
    # the same in two pieces, the second continuing from the first's incremental state
    state, pieces = {}, []
    with torch.no_grad():
        for a, b in ((0, 4), (4, 9)):
            piece = x[a:b]
            pieces.append(attn(piece, piece, piece, key_padding_mask=padding[:, a:b], attn_mask=future[: b - a, : b - a],
                               incremental_state=state)[0])
    torch.testing.assert_close(torch.cat(pieces), want, rtol=1e-10, atol=1e-10)


def test_masks_other_than_the_future_mask_and_before_softmax_are_refused():
    attn = linear_attention()
    x = inputs()
    with pytest.raises(ValueError, match="no attention mask other than the decoder's future mask"):
        attn(x, x, x, attn_mask=torch.zeros(9, 9, dtype=torch.float64))
    with pytest.raises(ValueError, match="before_softmax is not supported"):
        attn(x, x, x, before_softmax=True)


def build_linear(build, dict_dir, *flags, seed=0):
    model, task = build(dict_dir, "rope_transformer", "--rope-attention", "linear", *flags, seed=seed)
    return model.double(), task


def decode_step_by_step(model, enc, prev, reorders=(), reorder_state=True):
    """Feeds prev one token at a time through fairseq's decoder with incremental_state, reordering the
    hypotheses (and the state, unless told not to) at the given steps as beam search does; returns the
    largest difference of a step's output from the full teacher-forced pass on the same prefix, and
    the shapes the self-attention state had."""
    state, error, shapes = {}, 0.0, set()
    for t in range(prev.size(1)):
        for step, new_order in reorders:
            if step == t:
                if reorder_state:
                    model.decoder.reorder_incremental_state_scripting(state, new_order)
                prev = prev[new_order]
        incremental = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0][:, -1]
        full = model.decoder(prev[:, : t + 1], encoder_out=enc)[0][:, -1]
        error = max(error, (incremental - full).abs().max().item() / full.abs().max().item())
        for layer in model.decoder.layers:
            buffer = layer.self_attn._get_input_buffer(state)
            shapes.add(tuple((name, tuple(value.shape)) for name, value in sorted(buffer.items())))
    return error, shapes


@pytest.mark.parametrize("flags, chunk", [([], 64), (["--rope-layout", "half", "--rope-dim", "4", "--rope-theta", "50"], 3)])
def test_incremental_decoding_equals_full_pass_with_beam_reorder(dict_dir, build, flags, chunk):
    """The whole rope_transformer: token-by-token decoding with the (S, z) state equals the full
    teacher-forced pass at every step, with beam reorders in the middle (3 beams of one sentence,
    one dropped and another doubled), and with right-padded decoder input. The state has a fixed
    size (B x H x d x d, B x H x d, B), whatever the number of tokens decoded."""
    model, task = build_linear(build, dict_dir, *flags)
    for layer in model.decoder.layers:
        layer.self_attn.chunk = chunk
    src, lengths = random_tokens(task, [9], seed=4)
    src, lengths = src.repeat(3, 1), lengths.repeat(3)  # the beams of one sentence
    prev, _ = random_tokens(task, [10, 10, 10], seed=5, left_pad=False)
    orders = [(4, torch.tensor([2, 0, 0])), (7, torch.tensor([1, 2, 0]))]
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        error, shapes = decode_step_by_step(model, enc, prev, orders)
        assert error < 1e-12
        assert shapes == {(("linear_S", (3, 4, 8, 8)), ("linear_length", (3,)), ("linear_z", (3, 4, 8)))}
        # the reorder of the state is what keeps them equal
        assert decode_step_by_step(model, enc, prev, orders, reorder_state=False)[0] > 1e-3

        src, lengths = random_tokens(task, [9, 5, 7], seed=6)
        padded, _ = random_tokens(task, [10, 4, 7], seed=7, left_pad=False)
        assert padded.eq(task.target_dictionary.pad()).any()
        enc = model.encoder(src, src_lengths=lengths)
        assert decode_step_by_step(model, enc, padded)[0] < 1e-12


def test_sentence_alone_equals_inside_padded_batch(dict_dir, build):
    """A left-padded source (its positions shifted by its pads) encodes as it does alone, a
    right-padded target decodes (teacher forcing) as it does alone, and beam 4 finds the same."""
    model, task = build_linear(build, dict_dir)
    batch, lengths = random_tokens(task, [15, 6, 11], seed=6)  # sentence 1: 9 pads on the left
    alone = batch[1:2, -6:]
    prev, _ = random_tokens(task, [12, 5, 9], seed=7, left_pad=False)  # sentence 1: 7 pads on the right
    with torch.no_grad():
        enc_batch, enc_alone = model.encoder(batch, src_lengths=lengths), model.encoder(alone, src_lengths=lengths[1:2])
        torch.testing.assert_close(enc_batch["encoder_out"][0][-6:, 1], enc_alone["encoder_out"][0][:, 0],
                                   rtol=1e-10, atol=1e-10)
        dec_batch = model.decoder(prev, encoder_out=enc_batch)[0][1, :5]
        dec_alone = model.decoder(prev[1:2, :5], encoder_out=enc_alone)[0][0]
    # fairseq's cross-attention (softmax, kept) takes its softmax in float32 even in a float64 model,
    # and a sum over 15 slots (9 masked) rounds differently from one over 6: 6e-8 measured on AVX2
    torch.testing.assert_close(dec_batch, dec_alone, rtol=0, atol=1e-6)

    model.float()
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, len_penalty=0.6, max_len_b=20)
    with torch.no_grad():
        hyp_batch = generator.forward({"net_input": {"src_tokens": batch, "src_lengths": lengths}})[1]
        hyp_alone = generator.forward({"net_input": {"src_tokens": alone, "src_lengths": lengths[1:2]}})[0]
    assert len(hyp_batch) == 4
    for got, want in zip(hyp_batch, hyp_alone):
        assert torch.equal(got["tokens"], want["tokens"])
        torch.testing.assert_close(got["score"], want["score"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_finite_differences(causal):
    """Backward through eq. 19 (padding, several causal chunks) against finite differences, float64."""
    attn = linear_attention("half", rope_dim=4, causal=causal)
    attn.chunk = 2
    x = inputs(T=5, B=2).requires_grad_()
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, -2:] = True
    mask = torch.triu(torch.full((5, 5), float("-inf"), dtype=torch.float64), 1) if causal else None
    assert torch.autograd.gradcheck(lambda x: attn(x, x, x, key_padding_mask=padding, attn_mask=mask)[0], (x,))


@pytest.mark.parametrize("causal", [False, True])
def test_half_precision_on_long_inputs_stays_finite_and_close_to_float32(causal):
    """2000 tokens with large activations (|projections| up to ~90): under bf16 autocast the output and
    the gradients are finite and the output within bf16 rounding of float32, and so under float16
    autocast (its matmuls would give float16 sums); a float16 module
    (max 65504; the sums S reach ~2e5 here) is finite and within float16 rounding. Both hold because
    the sums run in float32."""
    torch.manual_seed(0)
    attn = RotaryLinearAttention(C, H, RopeOptions(attention="linear"), causal=causal).eval()
    T = 2000
    x = 30 * torch.randn(T, 2, C, generator=torch.Generator().manual_seed(3))
    padding = torch.zeros(2, T, dtype=torch.bool)
    padding[1, -300:] = True
    mask = torch.triu(torch.full((T, T), float("-inf")), 1) if causal else None
    with torch.no_grad():
        reference = attn(x, x, x, key_padding_mask=padding, attn_mask=mask)[0]
        q, k, v = (p(x).view(T, 2, H, D) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        S, z = rope_linear_attention(q, k, v, attn.rotary, padding=padding)[1]
        assert q.abs().max() > 60 and S.abs().max() > 2 * 65504  # past float16's range
    scale = reference.abs().max()

    for dtype, tolerance in ((torch.bfloat16, 2 ** -5), (torch.float16, 2 ** -7)):
        attn.zero_grad()
        x_grad = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=dtype):
            out = attn(x_grad, x_grad, x_grad, key_padding_mask=padding, attn_mask=mask)[0]
        assert out.dtype == dtype and out.isfinite().all()
        assert (out.float() - reference).abs().max() / scale < tolerance, dtype
        out.float().pow(2).mean().backward()
        assert x_grad.grad.isfinite().all() and all(p.grad.isfinite().all() for p in attn.parameters())

    attn.half()
    with torch.no_grad():
        x = x.half()
        out = attn(x, x, x, key_padding_mask=padding, attn_mask=None if mask is None else mask.half())[0]
    assert out.dtype == torch.float16 and out.isfinite().all()
    assert (out.float() - reference).abs().max() / scale < 2 ** -6


def test_option_reaches_every_self_attention_and_bad_values_fail(dict_dir, build, caplog):
    """--rope-attention linear: every encoder/decoder self-attention, cross-attention stays fairseq's
    softmax, the parameters are those of softmax; softmax by default; --attention-dropout > 0 is reported as applying to cross-attention
    only; a bad value fails at build naming the flag and the accepted values."""
    model, _ = build(dict_dir, "rope_transformer", "--rope-attention", "linear")
    layers = [*model.encoder.layers, *model.decoder.layers]
    assert [type(layer.self_attn) for layer in layers] == [RotaryLinearAttention] * 4
    assert [layer.self_attn.causal for layer in layers] == [False, False, True, True]
    assert all(type(layer.encoder_attn) is MultiheadAttention for layer in model.decoder.layers)
    linear_shapes = {name: value.shape for name, value in model.state_dict().items()}
    model, _ = build(dict_dir, "rope_transformer")
    assert {name: value.shape for name, value in model.state_dict().items()} == linear_shapes  # same parameters
    assert model.args.rope_attention == "softmax"
    assert [type(layer.self_attn) for layer in [*model.encoder.layers, *model.decoder.layers]] == [RotaryMultiheadAttention] * 4
    with caplog.at_level(logging.WARNING):
        build(dict_dir, "rope_transformer", "--rope-attention", "linear", "--attention-dropout", "0.1")
    assert "--attention-dropout 0.1 applies to cross-attention only" in caplog.text
    with pytest.raises(ValueError) as error:
        build(dict_dir, "rope_transformer", "--rope-attention", "bogus")
    assert "--rope-attention must be one of softmax, linear; got 'bogus'" in str(error.value)


def test_cli_train_generate_and_checkpoint_option(data, tmp_path):  # noqa: F811 (data: the fixture)
    """fairseq-train --arch rope_transformer --rope-attention linear, then fairseq-generate beam 4: the
    option is recorded in the checkpoint and used when loading; an older checkpoint without it
    loads as softmax."""
    save = tmp_path / "linear"
    out = run("fairseq-train", data / "bin", "--arch", "rope_transformer", "--rope-attention", "linear", *TRAIN,
              "--max-update", "40", "--max-tokens", "500", "--save-dir", save, "--save-interval", "1000",
              "--disable-validation")
    losses = [float(v) for v in re.findall(r"\| loss ([0-9.]+) \|", out.stdout + out.stderr)]
    assert losses and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], losses
    checkpoint = save / "checkpoint_last.pt"
    assert torch.load(checkpoint, weights_only=True)["cfg"]["model"].rope_attention == "linear"
    models, _ = checkpoint_utils.load_model_ensemble([str(checkpoint)])
    assert {type(layer.self_attn) for layer in [*models[0].encoder.layers, *models[0].decoder.layers]} == {RotaryLinearAttention}

    out = run("fairseq-generate", data / "bin", "--user-dir", USER_DIR, "--path", checkpoint, "--beam", "4", "--cpu",
              "--batch-size", "8", "--required-batch-size-multiple", "1", "--max-len-a", "1.2", "--max-len-b", "10")
    assert "Translated 25 sentences" in out.stderr
    assert sorted(hypotheses(out.stdout)) == list(range(25))

    state = torch.load(checkpoint, weights_only=True)
    del state["cfg"]["model"].rope_attention  # as saved before the option existed
    torch.save(state, tmp_path / "old.pt")
    models, _ = checkpoint_utils.load_model_ensemble([str(tmp_path / "old.pt")])
    assert type(models[0].encoder.layers[0].self_attn) is RotaryMultiheadAttention


def test_benchmark_script_runs_and_writes_its_reports(tmp_path):
    """python -m scripts.linear_attention_bench on tiny sizes (no timed assertions: the numbers mean nothing here)."""
    import json
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-m", "scripts.linear_attention_bench", "--lengths", "16,40", "--embed-dim", "32", "--heads", "4",
                           "--repeats", "1", "--warmup", "0", "--threads", "1", "--out-json", str(tmp_path / "b.json"),
                           "--out-md", str(tmp_path / "b.md")], capture_output=True, text=True, timeout=120, cwd=repo)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "b.json").read_text())
    assert set(report["results"]) == {"encoder_16", "encoder_40", "decoder_16", "decoder_40"}
    for result in report["results"].values():
        for kind in ("softmax", "linear"):
            assert result[kind]["forward_ms"] > 0 and result[kind]["forward_backward_ms"] > 0 and "peak_mib" in result[kind]
    table = (tmp_path / "b.md").read_text()
    assert "| 40 |" in table and "Command: `python -m scripts.linear_attention_bench" in table and table in done.stdout
