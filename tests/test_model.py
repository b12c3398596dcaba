"""The rotary Transformer inside fairseq: positions, padding, decoding paths, precision, options."""

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from conftest import random_tokens
from fairseq_rope.rope.attention import RotaryMultiheadAttention
from fairseq_rope.rope.model import RoPETransformerModel
from fairseq_rope.rope.rotary import apply_rotary
from test_attention import reference_rotation


def test_architectures_match_fairseq_sizes(dict_dir, build):
    for rope_arch, fairseq_arch in [
        ("rope_transformer", "transformer"),
        ("rope_transformer_wmt_en_de", "transformer_wmt_en_de"),
        ("rope_transformer_iwslt_de_en", "transformer_iwslt_de_en"),
        ("rope_transformer_wmt_en_de_big", "transformer_wmt_en_de_big"),
        ("rope_transformer_vaswani_wmt_en_de_big", "transformer_vaswani_wmt_en_de_big"),
    ]:
        with torch.device("meta"):  # shapes only: no memory, no initialization (seconds per model on a CPU)
            rope, _ = build(dict_dir, rope_arch, tiny=False)
            base, _ = build(dict_dir, fairseq_arch, tiny=False)
        assert isinstance(rope, RoPETransformerModel)
        # every argument fairseq's architecture sets (sizes, dropouts, activation, norms, sharing) is
        # the same; the rope model differs in its own flags, its arch name and its positions only
        ours = {"arch", "no_token_positional_embeddings", "add_token_positional_embeddings"}
        differing = {key for key in {*vars(rope.args), *vars(base.args)} - ours if not key.startswith("rope_")
                     and getattr(rope.args, key, "absent") != getattr(base.args, key, "absent")}
        assert not differing, (rope_arch, {k: (getattr(rope.args, k, None), getattr(base.args, k, None)) for k in differing})
        # same parameters by name and shape, less the additive positions (pure RoPE), plus the
        # training length each side records (a scalar buffer)
        base_shapes = {k: v.shape for k, v in base.state_dict().items() if "embed_positions" not in k}
        base_shapes.update({f"{side}.original_max_positions": torch.Size([]) for side in ("encoder", "decoder")})
        assert {k: v.shape for k, v in rope.state_dict().items()} == base_shapes
        assert rope.encoder.embed_positions is None and rope.decoder.embed_positions is None
        for layer in [*rope.encoder.layers, *rope.decoder.layers]:
            assert isinstance(layer.self_attn, RotaryMultiheadAttention)
        assert not isinstance(rope.decoder.layers[0].encoder_attn, RotaryMultiheadAttention)
        del rope, base


def test_additive_positions_flag_and_no_length_limit(dict_dir, build):
    model, _ = build(dict_dir, "rope_transformer")
    assert model.max_positions() == (1_000_000, 1_000_000)
    model, _ = build(dict_dir, "rope_transformer", "--add-token-positional-embeddings")
    assert model.encoder.embed_positions is not None
    assert model.max_positions() == (1024, 1024)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--rope-dim", "3"], "--rope-dim must be an even number >= 2 (the rotated channels of each head); got 3"),
        (["--rope-dim", "10"], "--rope-dim must be at most the head dim 8; got 10"),
        (["--rope-theta", "0"], "--rope-theta must be > 0; got 0.0"),
        (["--rope-layout", "spiral"], "--rope-layout must be one of interleaved, half; got 'spiral'"),
        (["--add-token-positional-embeddings", "--no-token-positional-embeddings"], "contradicts"),
        (["--cross-self-attention"], "--cross-self-attention is not supported"),
    ],
)
def test_bad_options_fail_at_build_naming_the_flag(dict_dir, build, flags, message):
    with pytest.raises(ValueError) as error:
        build(dict_dir, "rope_transformer", *flags)
    assert message in str(error.value)


def test_rope_options_reach_every_self_attention(dict_dir, build):
    model, _ = build(dict_dir, "rope_transformer", "--rope-theta", "500", "--rope-dim", "4", "--rope-layout", "half")
    layers = [*model.encoder.layers, *model.decoder.layers]
    assert [(l.self_attn.rotary.options.theta, l.self_attn.rotary.dim, l.self_attn.rotary.options.layout)
            for l in layers] == [(500.0, 4, "half")] * 4
    assert [l.self_attn.causal for l in layers] == [False, False, True, True]
    model, _ = build(dict_dir, "rope_transformer")
    layers = [*model.encoder.layers, *model.decoder.layers]
    assert [(l.self_attn.rotary.options.theta, l.self_attn.rotary.dim, l.self_attn.rotary.options.layout)
            for l in layers] == [(10000.0, 8, "interleaved")] * 4


def encode(model, tokens, lengths):
    return model.encoder(tokens, src_lengths=lengths)["encoder_out"][0]  # T x B x C


def test_encoder_is_not_permutation_equivariant(dict_dir, build):
    """Position information is there although no additive embedding is: permuting the source
    changes the encoding beyond a permutation. (Sanity: fairseq's transformer without position
    embeddings is equivariant, so the test can tell the difference.)"""
    tokens, lengths = random_tokens(build(dict_dir)[1], [12], seed=1)
    perm = torch.cat([torch.randperm(11, generator=torch.Generator().manual_seed(0)), torch.tensor([11])])
    for arch, flags, equivariant in [("rope_transformer", [], False),
                                     ("transformer", ["--no-token-positional-embeddings"], True)]:
        model, _ = build(dict_dir, arch, *flags)
        with torch.no_grad():
            out, out_perm = encode(model, tokens, lengths), encode(model, tokens[:, perm], lengths)
        close = torch.allclose(out[perm], out_perm, atol=1e-5)
        assert close == equivariant, arch


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_translation_invariant_in_absolute_position(dict_dir, build, layout):
    """Self-attention scores depend on m - n only: a sequence attended at positions 500..506,
    after 500 cached keys that are all padding, gives what it gives at positions 0..6."""
    model, _ = build(dict_dir, "rope_transformer", "--rope-layout", layout)
    attn = model.encoder.layers[0].self_attn
    x = torch.randn(7, 2, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        at_zero, _ = attn(x, x, x, need_weights=False)
        filler = torch.randn(500, 2, 32, generator=torch.Generator().manual_seed(1))
        state = {}
        attn(filler, filler, filler, key_padding_mask=torch.ones(2, 500, dtype=torch.bool), incremental_state=state)
        at_500, _ = attn(x, x, x, incremental_state=state, need_weights=False)
        cached = attn._get_input_buffer(state)["prev_key"][:, :, 500:]  # B x H x 7 x D
        k = attn.k_proj(x).view(7, 2, 4, 8)
        k500, k0 = (attn.rotary.rotate_at(k, torch.arange(start, start + 7)[:, None, None]) for start in (500, 0))
    torch.testing.assert_close(at_500, at_zero, rtol=1e-5, atol=1e-5)
    # the keys really were rotated at positions 500.., which differs from 0..
    torch.testing.assert_close(cached, k500.permute(1, 2, 0, 3), rtol=1e-6, atol=1e-6)
    assert not torch.allclose(k500, k0, atol=0.1)


def test_interleaved_and_half_layouts_equal_after_permuting_qk_rows(dict_dir, build):
    inter, task = build(dict_dir, "rope_transformer", "--rope-layout", "interleaved")
    half, _ = build(dict_dir, "rope_transformer", "--rope-layout", "half", seed=1)
    H, D = 4, 8
    # half-layout channel j pairs with j + D/2; interleaved pairs 2j with 2j+1
    perm = torch.cat([torch.arange(0, D, 2), torch.arange(1, D, 2)])
    rows = torch.cat([h * D + perm for h in range(H)])
    state = inter.state_dict()
    for name in list(state):
        if ".self_attn.q_proj." in name or ".self_attn.k_proj." in name:
            state[name] = state[name][rows]
    half.load_state_dict(state)
    src, lengths = random_tokens(task, [9, 6, 4], seed=2)
    prev, _ = random_tokens(task, [8, 5, 7], seed=3, left_pad=False)
    with torch.no_grad():
        out_inter = inter(src, lengths, prev)[0]
        out_half = half(src, lengths, prev)[0]
    torch.testing.assert_close(out_half, out_inter, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        half.load_state_dict(inter.state_dict())
        assert not torch.allclose(half(src, lengths, prev)[0], out_inter, atol=1e-3)


def decode_step_by_step_equals_full_pass(model, enc, prev, reorders=(), rtol=1e-5, atol=1e-5):
    """Feeds prev one token at a time with a KV cache (reordering it at the given steps as beam
    search does) and checks every step's output against teacher forcing on the same prefix."""
    state = {}
    for t in range(prev.size(1)):
        for step, new_order in reorders:
            if step == t:
                model.decoder.reorder_incremental_state_scripting(state, new_order)
                prev = prev[new_order]
        incremental = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0][:, -1]
        full = model.decoder(prev[:, : t + 1], encoder_out=enc)[0][:, -1]
        torch.testing.assert_close(incremental, full, rtol=rtol, atol=atol, msg=f"step {t}")


@pytest.mark.parametrize("flags", [[], ["--rope-layout", "half", "--rope-dim", "4"]])
def test_incremental_decoding_equals_full_pass(dict_dir, build, flags):
    """Step-by-step decoding with the KV cache equals teacher forcing at every step: after beam
    search reorders the hypotheses (3 beams of one source sentence), for a left-padded batch of
    different sentences, and for right-padded decoder input (the cached padding mask at work),
    also reordered."""
    model, task = build(dict_dir, "rope_transformer", *flags)
    src, lengths = random_tokens(task, [9], seed=4)
    src, lengths = src.repeat(3, 1), lengths.repeat(3)  # the beams of one sentence
    prev, _ = random_tokens(task, [10, 10, 10], seed=5, left_pad=False)
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        # beam search reorders hypotheses, dropping one and doubling another
        decode_step_by_step_equals_full_pass(model, enc, prev, reorders=[(4, torch.tensor([2, 0, 0])),
                                                                        (7, torch.tensor([1, 2, 0]))])
    src, lengths = random_tokens(task, [9, 5, 7], seed=6)
    padded, _ = random_tokens(task, [10, 4, 7], seed=7, left_pad=False)
    assert padded.eq(task.target_dictionary.pad()).any()
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        decode_step_by_step_equals_full_pass(model, enc, prev)
        decode_step_by_step_equals_full_pass(model, enc, padded)
        # padded decoder input reordered by the beam search: the cached padding mask follows its rows
        beams, beam_lengths = src[:1].repeat(3, 1), lengths[:1].repeat(3)
        decode_step_by_step_equals_full_pass(model, model.encoder(beams, src_lengths=beam_lengths), padded,
                                             reorders=[(5, torch.tensor([1, 2, 0])), (8, torch.tensor([0, 0, 2]))])


def test_sentence_alone_equals_inside_left_padded_batch(dict_dir, build):
    model, task = build(dict_dir, "rope_transformer")
    batch, lengths = random_tokens(task, [15, 6, 11], seed=6)  # sentence 1 gets 9 pads on the left
    alone = batch[1:2, -6:]
    with torch.no_grad():
        enc_batch = encode(model, batch, lengths)[-6:, 1]
        enc_alone = encode(model, alone, lengths[1:2])[:, 0]
    torch.testing.assert_close(enc_batch, enc_alone, rtol=1e-5, atol=1e-5)

    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, len_penalty=0.6, max_len_b=20)
    with torch.no_grad():
        hyp_batch = generator.forward({"net_input": {"src_tokens": batch, "src_lengths": lengths}})[1]
        hyp_alone = generator.forward({"net_input": {"src_tokens": alone, "src_lengths": lengths[1:2]}})[0]
    for got, want in zip(hyp_batch, hyp_alone):
        assert torch.equal(got["tokens"], want["tokens"])
        torch.testing.assert_close(got["score"], want["score"], rtol=1e-5, atol=1e-5)


def test_long_source_is_encoded_exactly_and_translates(dict_dir, build):
    """2000 tokens, far past fairseq's default 1024 positions (RoPE itself sets no limit): the
    rotation at those positions equals eq. 15 in float64 to float32 rounding, the float32 encoding
    equals the float64 one, the sentence encodes and translates the same behind 300 pads in a
    batch, and beam search runs to EOS."""
    model, task = build(dict_dir, "rope_transformer")
    # the rotation out there against eq. 15 in float64: exact angles, cast once, give float32 rounding
    attn, T = model.encoder.layers[0].self_attn, 2000
    q = torch.randn(1, 4, T, 8, generator=torch.Generator().manual_seed(0))
    want = reference_rotation(q.permute(2, 0, 1, 3), torch.arange(T), "interleaved").permute(1, 2, 0, 3)
    error = (attn.rotate(q, 0).double() - want).abs().max() / want.abs().max()
    assert error < 1e-6, error.item()
    # (angles taken in float32 would be off by up to ~1e-5 rad there: this tolerance tells them apart)
    angles32 = torch.arange(T, dtype=torch.float32)[:, None] * attn.rotary.inv_freq().float()
    cos32, sin32 = angles32.cos().repeat_interleave(2, -1), torch.stack((-angles32.sin(), angles32.sin()), -1).flatten(-2)
    assert (apply_rotary(q, cos32, sin32, "interleaved").double() - want).abs().max() / want.abs().max() > 1e-6

    src, lengths = random_tokens(task, [2000], seed=7)
    batch, batch_lengths = random_tokens(task, [2300, 2000], seed=7)
    batch[1] = torch.cat([torch.full((300,), task.source_dictionary.pad()), src[0]])
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=30)
    with torch.no_grad():
        out = encode(model, src, lengths)
        in_batch = encode(model, batch, batch_lengths)[300:, 1:]
        hyps = generator.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})
        hyps_batch = generator.forward({"net_input": {"src_tokens": batch, "src_lengths": batch_lengths}})
        exact = encode(model.double(), src, lengths)
    torch.testing.assert_close(out.double(), exact, rtol=0, atol=1e-5)
    torch.testing.assert_close(in_batch, out, rtol=1e-5, atol=1e-5)
    assert len(hyps[0]) == 4 and hyps[0][0]["tokens"][-1] == task.target_dictionary.eos()
    assert [h["tokens"].tolist() for h in hyps_batch[1]] == [h["tokens"].tolist() for h in hyps[0]]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_plain_attention_equals_sdpa_path(dict_dir, build, layout):
    """The explicit softmax path (need_weights) and the SDPA path agree, in outputs and gradients,
    with causal and padding masks."""
    model, _ = build(dict_dir, "rope_transformer", "--rope-layout", layout)
    attn = model.decoder.layers[0].self_attn
    T, B = 6, 3
    x = torch.randn(T, B, 32, requires_grad=True)
    left = torch.zeros(B, T, dtype=torch.bool)
    left[1, :2] = True  # a left-padded source
    right = torch.zeros(B, T, dtype=torch.bool)
    right[1, -2:] = right[2, -1] = True  # right-padded targets
    causal = torch.triu(torch.full((T, T), float("-inf")), 1)
    for mask, kpm in [(None, None), (causal, None), (None, left), (causal, right), (causal.isinf(), right)]:
        grads = []
        for need_weights in (False, True):
            x.grad = None
            attn.zero_grad()
            out, weights = attn(x, x, x, key_padding_mask=kpm, attn_mask=mask, need_weights=need_weights)
            assert (weights is not None) == need_weights
            out[:, 0].sum().backward()  # sentence 0 has no padded query rows
            grads.append((out.detach(), x.grad.clone(), attn.q_proj.weight.grad.clone(), attn.v_proj.weight.grad.clone()))
        for fast, plain in zip(*grads):
            torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)


def test_half_precision_model(dict_dir, build):
    """After fairseq's .to(bfloat16) the model runs in bfloat16 within its rounding of float32, its
    caches hold float64 angles rounded once to bfloat16, and incremental decoding equals the full pass."""
    model, task = build(dict_dir, "rope_transformer")
    src, lengths = random_tokens(task, [300, 120], seed=8)
    prev, _ = random_tokens(task, [40, 30], seed=9, left_pad=False)
    with torch.no_grad():
        reference = model(src, lengths, prev)[0]
        model.to(torch.bfloat16)
        out = model(src, lengths, prev)[0]
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev[:, :12],
                                             rtol=0, atol=2 ** -5 * reference.abs().max().item())
    assert out.dtype == torch.bfloat16
    assert (out.float() - reference).abs().max() / reference.abs().max() < 2 ** -6  # measured: 0.0065
    for module in model.modules():
        if isinstance(module, RotaryMultiheadAttention):
            assert module.q_proj.weight.dtype == torch.bfloat16
            cos, sin = module.rotary.cos_table[:, 0::2], module.rotary.sin_table[:, 1::2]
            assert cos.size(0) >= 40
            angles = torch.arange(cos.size(0), dtype=torch.float64)[:, None] * 10000.0 ** (
                -torch.arange(0, 8, 2, dtype=torch.float64) / 8)
            assert torch.equal(cos, angles.cos().to(torch.bfloat16)) and torch.equal(sin, angles.sin().to(torch.bfloat16))
    assert not any("table" in key for key in model.state_dict())


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_baseline_checkpoint_initialises_rope_model(dict_dir, build, positions):
    """sinusoidal/learned -> RoPE fine-tuning: a trained transformer's state dict loads (strict)
    into the rope model; its additive position embeddings are dropped, every other weight kept."""
    flags = ["--encoder-learned-pos", "--decoder-learned-pos"] if positions == "learned" else []
    base, _ = build(dict_dir, "transformer", *flags)
    rope, _ = build(dict_dir, "rope_transformer", seed=1)
    state = {k: v.clone() for k, v in base.state_dict().items()}
    if positions == "sinusoidal":  # what older fairseq versions saved
        state["encoder.embed_positions._float_tensor"] = torch.FloatTensor(1)
    rope.load_state_dict(state, strict=True, model_cfg=rope.cfg)
    rope_state = rope.state_dict()
    kept = {k: v for k, v in base.state_dict().items() if "embed_positions" not in k}
    lengths = {f"{side}.original_max_positions" for side in ("encoder", "decoder")}
    assert set(rope_state) == set(kept) | lengths
    for key, value in kept.items():
        assert torch.equal(rope_state[key], value), key
    assert all(rope_state[key] == 0 for key in lengths)  # a baseline records no training length: unknown
