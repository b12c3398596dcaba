"""Options for inputs longer than the training ones: --rope-scaling and --rope-random-positions."""

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import random_tokens
from fairseq_rope.rope.attention import RotaryMultiheadAttention
from fairseq_rope.rope import RopeOptions
from fairseq_rope.rope.rotary import RotaryEmbedding
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


def scaled_rotation_matrix(m, freqs, layout, d=D, rotated=D):
    """Eq. 15's block-diagonal matrix for position m with the given theta_i, on the first ``rotated``
    of d channels (identity on the rest), float64."""
    R = torch.eye(d, dtype=torch.float64)
    pairs = [(2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + rotated // 2) for i in range(rotated // 2)]
    for (a, b), f in zip(pairs, freqs):
        c, s = math.cos(m * f), math.sin(m * f)
        R[a, a], R[a, b], R[b, a], R[b, b] = c, -s, s, c
    return R


def options(scaling, factor, original, **more):
    return RopeOptions(scaling=scaling, scaling_factor=factor, original_max_positions=original, **more)


@pytest.mark.parametrize("scaling,factor,original", SCALINGS)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_scaled_rotation_equals_its_definition_in_float64(scaling, factor, original, layout):
    """The rotation of q at position m: the block-diagonal matrix of eq. 15 with each scaling's
    theta_i (and YaRN's factor 0.1 ln F + 1 on q and k), built from the definitions in float64,
    through both methods (given positions; consecutive positions from a start)."""
    rotary = RotaryEmbedding(D, options(scaling, factor, original, layout=layout)).double()
    freqs = reference_frequencies(scaling, factor, original)
    torch.testing.assert_close(rotary.inv_freq(), torch.tensor(freqs, dtype=torch.float64), rtol=1e-15, atol=0)
    magnitude = 0.1 * math.log(factor) + 1 if scaling == "yarn" else 1.0
    positions = torch.tensor([0, 1, 7, 63, 500, 4095])
    x = torch.randn(len(positions), D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    rotated = rotary.rotate_at(x, positions)
    for row, m in enumerate(positions.tolist()):
        want = magnitude * scaled_rotation_matrix(m, freqs, layout) @ x[row]
        torch.testing.assert_close(rotated[row], want, rtol=0, atol=1e-12)
        torch.testing.assert_close(rotary.rotate(x[row : row + 1], m)[0], want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scaling,factor,original", SCALINGS)
@pytest.mark.parametrize("layout, rope_dim", [("interleaved", None), ("half", None), ("interleaved", 8)])
def test_attention_rotates_q_and_k_by_the_scaled_definition(monkeypatch, scaling, factor, original, layout, rope_dim):
    """What the attention hands to SDPA in float32 (the model's own path: consecutive positions):
    q and k = magnitude * R_m (eq. 15 with the scaling's theta_i) of their projections, computed
    from the definitions in float64, to float32 rounding; v unrotated."""
    calls = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, k, v, **kw: calls.append((q, k, v)) or sdpa(q, k, v, **kw))
    torch.manual_seed(0)
    attn = RotaryMultiheadAttention(2 * D, 2, options(scaling, factor, original, layout=layout, dim=rope_dim)).eval()
    T = 300
    x = torch.randn(T, 2, 2 * D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        attn(x, x, x, need_weights=False)
    rotated = rope_dim or D
    freqs = reference_frequencies(scaling, factor, original, d=rotated)
    magnitude = 0.1 * math.log(factor) + 1 if scaling == "yarn" else 1.0
    R = torch.stack([scaled_rotation_matrix(m, freqs, layout, rotated=rotated) for m in range(T)])  # T x D x D
    scale = torch.ones(D, dtype=torch.float64)
    scale[:rotated] = magnitude
    (q, k, v), = calls
    for got, proj in ((q, attn.q_proj), (k, attn.k_proj)):
        heads = proj.double()(x.double()).view(T, 2, 2, D)  # T x B x H x D
        want = torch.einsum("tij,tbhj->bhti", R, heads) * scale
        assert (got.double() - want).abs().max() <= 1e-6 * want.abs().max(), scaling
    torch.testing.assert_close(v.double(), attn.v_proj.double()(x.double()).view(T, 2, 2, D).permute(1, 2, 0, 3),
                               rtol=1e-6, atol=1e-6)


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
            assert m.options.scaling == flags[1] and m.options.scaling_factor == 3.0
            assert m.options.original_max_positions == (16 if flags[1] == "yarn" else None)
    src, lengths = random_tokens(task, [9, 5, 7], seed=6)  # left-padded
    prev, _ = random_tokens(task, [10, 4, 10], seed=7, left_pad=False)  # right-padded
    with torch.no_grad():
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev)
        beams, beam_lengths = src[:1].repeat(3, 1), lengths[:1].repeat(3)  # the beams of one sentence
        decode_step_by_step_equals_full_pass(model, model.encoder(beams, src_lengths=beam_lengths), prev,
                                             reorders=[(4, torch.tensor([2, 0, 0]))])


def test_random_positions_only_in_training(dict_dir, build):
    """In training each sentence gets sorted random positions below N, one set for all encoder
    layers and one for all decoder layers of a forward, new at each forward, so outputs change from
    one forward to the next; in evaluation the model is the unscaled one, deterministic and equal to
    a model without the option."""
    model, task = build(dict_dir, "rope_transformer", "--rope-random-positions", "64", "--dropout", "0")
    plain, _ = build(dict_dir, "rope_transformer", "--dropout", "0")
    src, lengths = random_tokens(task, [12, 7], seed=1)
    prev, _ = random_tokens(task, [9, 9], seed=2, left_pad=False)
    seen = {"encoder": [], "decoder": []}
    for side in seen:
        for layer in getattr(model, side).layers:
            rotate_at = layer.self_attn.rotary.rotate_at

            def record(x, positions, rotate_at=rotate_at, calls=seen[side]):
                calls.append(positions.reshape(positions.size(0), -1))
                return rotate_at(x, positions)

            layer.self_attn.rotary.rotate_at = record
    model.train()
    with torch.no_grad():
        first = model(src, lengths, prev)[0]
        sets = {side: calls[:] for side, calls in seen.items()}
        second = model(src, lengths, prev)[0]
    assert not torch.allclose(first, second)
    for side, tokens in (("encoder", src), ("decoder", prev)):
        calls = sets[side]
        assert len(calls) == 2  # q and k together in each of 2 layers
        assert all(torch.equal(p, calls[0]) for p in calls), side  # one set for every layer
        positions = calls[0]  # B x T
        assert positions.shape == tokens.shape and positions.max() < 64, side
        assert (positions[:, 1:] > positions[:, :-1]).all(), side  # distinct and sorted: order is kept
        assert not torch.equal(positions, torch.arange(tokens.size(1)).expand_as(positions)), side
        assert not torch.equal(seen[side][2], positions), side  # drawn anew for the next forward
    model.eval()
    for calls in seen.values():
        calls.clear()
    with torch.no_grad():
        out, again, reference = model(src, lengths, prev)[0], model(src, lengths, prev)[0], plain(src, lengths, prev)[0]
    assert not any(seen.values()) and torch.equal(out, again) and torch.equal(out, reference)


@pytest.mark.parametrize("flags,message", [
    (["--rope-scaling", "cubic"], "--rope-scaling must be one of none, linear, ntk, yarn, auto; got 'cubic'"),
    (["--rope-scaling", "auto", "--rope-scaling-factor", "2"], "--rope-scaling-factor is chosen per sentence by "
                                                                "--rope-scaling auto"),
    (["--rope-scaling", "auto", "--rope-attention", "linear"], "--rope-scaling auto scales the softmax's logits"),
    (["--rope-scaling", "auto", "--rope-original-max-positions", "0"], "--rope-original-max-positions must be >= 1"),
    (["--rope-scaling-factor", "2"], "--rope-scaling-factor needs a --rope-scaling (linear, ntk or yarn); got 2.0"),
    (["--rope-scaling", "linear", "--rope-scaling-factor", "0.5"], "--rope-scaling-factor must be >= 1"),
    (["--rope-scaling", "yarn", "--rope-scaling-factor", "2"],
     "--rope-original-max-positions is needed by --rope-scaling yarn"),
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


@pytest.mark.parametrize("layout, rope_dim", [("interleaved", None), ("half", None), ("interleaved", 8)])
def test_auto_frequencies_per_sentence_equal_their_definition_in_float64(layout, rope_dim):
    """--rope-scaling auto: sentence b rotated at positions start.. by YaRN's definition with its own
    factor F_b (theta_i and the magnitude 0.1 ln F + 1), in float64; F = 1 is the unscaled table."""
    L, start, factors = 20, 5, [1.0, 1.7, 3.0]
    rotary = RotaryEmbedding(D, RopeOptions(scaling="auto", layout=layout, dim=rope_dim)).double()
    rotated = rope_dim or D
    x = torch.randn(len(factors), 2, 7, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    got = rotary.rotate_per_sentence(x, start, torch.tensor(factors, dtype=torch.float64), L)
    for b, factor in enumerate(factors):
        freqs = reference_frequencies("yarn", factor, L, d=rotated)
        scale = torch.ones(D, dtype=torch.float64)
        scale[:rotated] = 0.1 * math.log(factor) + 1
        for t in range(x.size(2)):
            want = scale * (scaled_rotation_matrix(start + t, freqs, layout, rotated=rotated) @ x[b, :, t].T).T
            torch.testing.assert_close(got[b, :, t], want, rtol=0, atol=1e-12)
    assert torch.equal(got[0], rotary.rotate(x[0], start))  # a factor of 1: the plain rotation, bit for bit


def auto_model(dict_dir, build, *flags):
    """A rope model that recorded training lengths 8 (source) and 9 (target) in one training forward,
    then switched to --rope-scaling auto for evaluation (as --model-overrides does)."""
    model, task = build(dict_dir, "rope_transformer", *flags)
    src, lengths = random_tokens(task, [8, 5], seed=11)
    prev, _ = random_tokens(task, [9, 6], seed=12, left_pad=False)
    model.train()
    model(src, lengths, prev)
    assert (int(model.encoder.original_max_positions), int(model.decoder.original_max_positions)) == (8, 9)
    auto, _ = build(dict_dir, "rope_transformer", "--rope-scaling", "auto", *flags)
    auto.load_state_dict(model.state_dict())
    return model.eval(), auto.eval(), task


def test_auto_gives_each_sentence_its_source_length_over_the_training_length(dict_dir, build, monkeypatch):
    """The encoder's factor per sentence is max(1, tokens / L) with L recorded in training; every
    self-attention of encoder and decoder rotates with it; sentences no longer than L translate as
    the plain model, bit for bit, even beside longer ones; --rope-original-max-positions overrides L."""
    plain, auto, task = auto_model(dict_dir, build)
    src, lengths = random_tokens(task, [4, 8, 12, 20], seed=13)
    prev, _ = random_tokens(task, [7, 9, 14, 22], seed=14, left_pad=False)
    seen = []
    rotate = RotaryEmbedding.rotate_per_sentence
    monkeypatch.setattr(RotaryEmbedding, "rotate_per_sentence",
                        lambda self, x, start, factors, length: seen.append((factors, length)) or
                        rotate(self, x, start, factors, length))
    with torch.no_grad():
        enc = auto.encoder(src, src_lengths=lengths)
        want = torch.tensor([1.0, 1.0, 12 / 8, 20 / 8], dtype=torch.float64)
        assert torch.equal(enc["rope_scaling_factors"][0], want)
        out = auto.decoder(prev, encoder_out=enc)[0]
        reference = plain.decoder(prev, encoder_out=plain.encoder(src, src_lengths=lengths))[0]
    layers = len(auto.encoder.layers) + len(auto.decoder.layers)
    assert len(seen) == layers  # q and k (together) of every self-attention
    assert all(torch.equal(f, want) for f, _ in seen)
    assert [length for _, length in seen] == [8] * len(auto.encoder.layers) + [9] * len(auto.decoder.layers)
    assert not torch.allclose(out[2:], reference[2:], atol=1e-3)  # longer sentences are scaled
    # sentences of at most L tokens: the plain model's outputs, alone and in this mixed batch
    torch.testing.assert_close(out[:2], reference[:2], rtol=1e-6, atol=1e-6)
    short, short_lengths = random_tokens(task, [4, 8], seed=15)
    with torch.no_grad():
        assert torch.equal(auto(short, short_lengths, prev[:2, :9])[0], plain(short, short_lengths, prev[:2, :9])[0])
    overridden, _ = build(dict_dir, "rope_transformer", "--rope-scaling", "auto", "--rope-original-max-positions", "4")
    overridden.load_state_dict(auto.state_dict())
    with torch.no_grad():
        enc = overridden.eval().encoder(src, src_lengths=lengths)
    assert torch.equal(enc["rope_scaling_factors"][0], torch.tensor([1.0, 2.0, 3.0, 5.0], dtype=torch.float64))


@pytest.mark.parametrize("flags", [[], ["--rope-layout", "half", "--rope-dim", "4"]])
def test_auto_incremental_decoding_equals_full_pass_with_beam_reorders(dict_dir, build, flags):
    """Under auto, a decoder fed one token at a time keeps each sentence's factor at every step, also
    when beam search reorders the hypotheses (2 beams each of a long and a short sentence), and
    equals the full pass; the encoder output's factors follow beam search's reorders."""
    _, auto, task = auto_model(dict_dir, build, *flags)
    src, lengths = random_tokens(task, [20, 20, 5, 5], seed=16)
    src[1], src[3] = src[0], src[2]  # two beams per sentence
    prev, _ = random_tokens(task, [12, 12, 12, 12], seed=17, left_pad=False)
    with torch.no_grad():
        enc = auto.encoder(src, src_lengths=lengths)
        assert torch.equal(auto.encoder.reorder_encoder_out(enc, torch.tensor([2, 0, 3, 1]))["rope_scaling_factors"][0],
                           torch.tensor([1.0, 2.5, 1.0, 2.5], dtype=torch.float64))
        decode_step_by_step_equals_full_pass(auto, enc, prev, reorders=[(4, torch.tensor([1, 1, 2, 2])),
                                                                        (7, torch.tensor([0, 1, 3, 2]))])


def test_auto_translates_a_sentence_alone_as_in_a_batch_of_other_lengths(dict_dir, build):
    """Beam search under auto: every sentence's hypothesis and score are the same alone and in one
    left-padded batch with sentences of other lengths (longer and shorter than training)."""
    from fairseq.sequence_generator import SequenceGenerator

    _, auto, task = auto_model(dict_dir, build)
    generator = SequenceGenerator([auto], task.target_dictionary, beam_size=4, max_len_b=30)
    src, lengths = random_tokens(task, [25, 6, 16, 3], seed=18)
    with torch.no_grad():
        batch = generator.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})
        for i, n in enumerate(lengths.tolist()):
            alone = generator.forward({"net_input": {"src_tokens": src[i : i + 1, -n:], "src_lengths": lengths[i : i + 1]}})
            assert torch.equal(alone[0][0]["tokens"], batch[i][0]["tokens"]), i
            torch.testing.assert_close(alone[0][0]["score"], batch[i][0]["score"], rtol=1e-5, atol=1e-5)


def test_auto_without_a_training_length_names_the_flag(dict_dir, build):
    """A model that recorded no training length (never trained, or saved before it was recorded)
    refuses auto with a message naming --rope-original-max-positions."""
    model, task = build(dict_dir, "rope_transformer", "--rope-scaling", "auto")
    src, lengths = random_tokens(task, [5], seed=19)
    with pytest.raises(ValueError, match="--rope-original-max-positions"):
        model.eval().encoder(src, src_lengths=lengths)
