"""Options for inputs longer than the training ones: --rope-scaling and --rope-random-positions."""

import math

import pytest
import torch

from conftest import random_tokens
from fairseq_rope.attention import RotaryMultiheadAttention
from fairseq_rope.rotary import RotaryEmbedding
from test_model import decode_step_by_step_equals_full_pass

D, THETA = 16, 10000.0


def paper_frequencies(d=D, base=THETA):
    return [base ** (-2 * (i - 1) / d) for i in range(1, d // 2 + 1)]


def reference_frequencies(scaling, factor, original=None, d=D):
    """Each scaling as its paper defines it, in float64 Python arithmetic."""
    if scaling == "none":
        return paper_frequencies(d)
    if scaling == "linear":  # position interpolation: R(m / F) = R with theta_i / F
        return [f / factor for f in paper_frequencies(d)]
    if scaling == "ntk":  # NTK-aware: a larger base, b' = b * F^(d / (d - 2))
        return paper_frequencies(d, THETA * factor ** (d / (d - 2)))
    assert scaling == "yarn"  # NTK-by-parts with alpha = 1, beta = 32 on r = L / wavelength
    out = []
    for f in paper_frequencies(d):
        r = original / (2 * math.pi / f)
        gamma = 0.0 if r < 1 else 1.0 if r > 32 else (r - 1) / 31
        out.append((1 - gamma) * f / factor + gamma * f)
    return out


SCALINGS = [("none", 1.0, None), ("linear", 4.0, None), ("ntk", 4.0, None), ("yarn", 4.0, 64), ("yarn", 2.5, 1000)]


@pytest.mark.parametrize("scaling,factor,original", SCALINGS)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_scaled_rotation_equals_its_definition_in_float64(scaling, factor, original, layout):
    """The rotation of q at position m: the block-diagonal matrix of eq. 15 with each scaling's
    theta_i (and YaRN's factor 0.1 ln F + 1 on q and k), built from the definitions in float64."""
    rotary = RotaryEmbedding(D, layout=layout, scaling=scaling, factor=factor, original_positions=original).double()
    freqs = reference_frequencies(scaling, factor, original)
    torch.testing.assert_close(rotary.inv_freq(), torch.tensor(freqs, dtype=torch.float64), rtol=1e-15, atol=0)
    magnitude = 0.1 * math.log(factor) + 1 if scaling == "yarn" else 1.0
    positions = torch.tensor([0, 1, 7, 63, 500, 4095])
    x = torch.randn(len(positions), D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    rotated = rotary(x, positions)
    pairs = [(2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + D // 2) for i in range(D // 2)]
    for row, m in enumerate(positions.tolist()):
        R = torch.zeros(D, D, dtype=torch.float64)
        for (a, b), f in zip(pairs, freqs):
            c, s = math.cos(m * f), math.sin(m * f)
            R[a, a], R[a, b], R[b, a], R[b, b] = c, -s, s, c
        torch.testing.assert_close(rotated[row], magnitude * R @ x[row], rtol=0, atol=1e-12)


def test_scaling_none_is_the_unscaled_model(dict_dir, build):
    """--rope-scaling none (the default) computes exactly what the model computed before the option."""
    plain, task = build(dict_dir, "rope_transformer")
    none, _ = build(dict_dir, "rope_transformer", "--rope-scaling", "none", "--rope-scaling-factor", "1")
    src, lengths = random_tokens(task, [12, 7], seed=1)
    prev, _ = random_tokens(task, [9, 9], seed=2, left_pad=False)
    with torch.no_grad():
        assert torch.equal(plain(src, lengths, prev)[0], none(src, lengths, prev)[0])


@pytest.mark.parametrize("flags", [["--rope-scaling", "linear", "--rope-scaling-factor", "3"],
                                   ["--rope-scaling", "ntk", "--rope-scaling-factor", "3"],
                                   ["--rope-scaling", "yarn", "--rope-scaling-factor", "3",
                                    "--rope-original-max-positions", "16", "--rope-layout", "half"],
                                   ["--rope-random-positions", "128"]])
def test_options_reach_every_self_attention_and_decoding_is_exact(dict_dir, build, flags):
    """Every rotary module gets the option; incremental decoding with the KV cache (and beam
    reorders) equals the full pass under it, random positions included (they are off in eval)."""
    model, task = build(dict_dir, "rope_transformer", *flags)
    modules = [m for m in model.modules() if isinstance(m, RotaryMultiheadAttention)]
    assert len(modules) == 4
    for m in modules:
        if "--rope-scaling" in flags:
            assert m.rotary.scaling == flags[1] and m.rotary.factor == 3.0
            assert m.rotary.original_positions == (16 if flags[1] == "yarn" else None)
    src, lengths = random_tokens(task, [9, 5, 7], seed=6)  # left-padded
    prev, _ = random_tokens(task, [10, 4, 10], seed=7, left_pad=False)  # right-padded
    with torch.no_grad():
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev)
        beams, beam_lengths = src[:1].repeat(3, 1), lengths[:1].repeat(3)  # the beams of one sentence
        decode_step_by_step_equals_full_pass(model, model.encoder(beams, src_lengths=beam_lengths), prev,
                                             reorders=[(4, torch.tensor([2, 0, 0]))])


def test_random_positions_only_in_training(dict_dir, build):
    """In training each sentence gets sorted random positions below N, the same in every layer, and
    outputs change from one forward to the next; in evaluation the model is the unscaled one,
    deterministic and equal to a model without the option."""
    model, task = build(dict_dir, "rope_transformer", "--rope-random-positions", "64", "--dropout", "0")
    plain, _ = build(dict_dir, "rope_transformer", "--dropout", "0")
    src, lengths = random_tokens(task, [12, 7], seed=1)
    prev, _ = random_tokens(task, [9, 9], seed=2, left_pad=False)
    seen = []
    for m in model.modules():
        if isinstance(m, RotaryMultiheadAttention):
            rotary_forward = m.rotary.forward

            def record(x, positions, forward=rotary_forward):
                seen.append(positions)
                return forward(x, positions)

            m.rotary.forward = record
    model.train()
    with torch.no_grad():
        first, second = model(src, lengths, prev)[0], model(src, lengths, prev)[0]
    assert not torch.allclose(first, second)
    # per forward: every call of the 2 encoder layers (B x 1 x T_src) with one set; the decoder's another
    encoder_positions = [p.reshape(p.size(0), -1) for p in seen[: len(seen) // 2] if p.size(-1) == src.size(1)]
    assert len(encoder_positions) >= 2
    assert all(torch.equal(p, encoder_positions[0]) for p in encoder_positions)
    positions = encoder_positions[0]  # B x T
    assert positions.shape == src.shape and positions.max() < 64
    assert (positions[:, 1:] > positions[:, :-1]).all()  # distinct and sorted: order is kept
    assert not torch.equal(positions, torch.arange(src.size(1)).expand_as(positions))
    model.eval()
    seen.clear()
    with torch.no_grad():
        out, again, reference = model(src, lengths, prev)[0], model(src, lengths, prev)[0], plain(src, lengths, prev)[0]
    assert not seen and torch.equal(out, again) and torch.equal(out, reference)


@pytest.mark.parametrize("flags,message", [
    (["--rope-scaling", "cubic"], "--rope-scaling must be one of none, linear, ntk, yarn; got 'cubic'"),
    (["--rope-scaling-factor", "2"], "--rope-scaling-factor 2 needs a --rope-scaling (linear, ntk or yarn)"),
    (["--rope-scaling", "linear", "--rope-scaling-factor", "0.5"], "--rope-scaling-factor must be >= 1"),
    (["--rope-scaling", "yarn", "--rope-scaling-factor", "2"], "--rope-scaling yarn needs --rope-original-max-positions"),
    (["--rope-scaling", "ntk", "--rope-scaling-factor", "2", "--rope-dim", "2"],
     "--rope-scaling ntk needs at least 4 rotated channels"),
    (["--rope-scaling", "yarn", "--rope-scaling-factor", "2", "--rope-original-max-positions", "64",
      "--rope-attention", "linear"], "--rope-scaling yarn scales the softmax's logits"),
    (["--rope-random-positions", "-1"], "--rope-random-positions must be >= 0"),
    (["--rope-random-positions", "64", "--rope-attention", "linear"], "--rope-random-positions is not supported"),
])
def test_option_errors_name_the_flag(dict_dir, build, flags, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        build(dict_dir, "rope_transformer", *flags)


def test_random_positions_shorter_than_a_batch_are_refused(dict_dir, build):
    model, task = build(dict_dir, "rope_transformer", "--rope-random-positions", "8")
    src, lengths = random_tokens(task, [12, 7], seed=1)
    prev, _ = random_tokens(task, [5, 5], seed=2, left_pad=False)
    model.train()
    with pytest.raises(ValueError, match=r"--rope-random-positions 8 is less than the length of a training batch \(12"):
        model(src, lengths, prev)
