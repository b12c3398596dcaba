"""The position encodings other than RoPE (Shaw's RPE, T5's bias, ALiBi, NoPE, and any other the registry
holds, such as the tests' own KERPLE-log): each against its paper's formula written out in float64,
shift invariance, decoding paths, padding, precision, options, sizes. The encodings and their tiny-model
settings come from the registry; RoPE's own tests are tests/test_model.py and tests/test_rotary.py."""

import collections
import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fairseq.models import MODEL_REGISTRY
from fairseq.modules import MultiheadAttention
from fairseq.sequence_generator import SequenceGenerator

import fairseq_rope.self_attention as self_attention
from conftest import encoding_variants, random_tokens
from fairseq_rope.alibi import ALiBi, ALiBiBias, alibi_slopes
from fairseq_rope.encodings import ENCODINGS, StackBias, StackBiasAttention, position_tables
from fairseq_rope.nope import NoPE
from fairseq_rope.rope import RopeOptions
from fairseq_rope.shaw import ShawRPE
from fairseq_rope.t5_bias import T5Bias, relative_position_bucket
from test_model import decode_step_by_step_equals_full_pass, encode

# every registered encoding but RoPE, in each of its tiny-model variants (Shaw's keys-only ablation takes
# the SDPA path): (model, flags); the variants' settings put clipping and log-spaced buckets within a dozen tokens
MODELS = {name: MODEL_REGISTRY[name] for name, encoding in ENCODINGS.items() if encoding is not RopeOptions}
VARIANTS = [(name, flags) for _, name, flags in encoding_variants() if name in MODELS]
VARIANT_IDS = [variant.replace(" ", "-") for variant, name, _ in encoding_variants() if name in MODELS]


# ---- the papers' definitions, written out independently (loops over positions, float64) ----

def shaw_tables(attn, T, S, causal):
    """a^K_ij, a^V_ij (T x S x D): Shaw section 3.2, row of clip(j - i, -k, k); the decoder's table
    stops at 0 (j > i is masked)."""
    k = attn.max_relative_position
    rows = [[k + max(-k, min(0 if causal else k, j - i)) for j in range(S)] for i in range(T)]
    keys = torch.stack([torch.stack([attn.relative_keys.weight[r] for r in row]) for row in rows])
    values = None if attn.relative_values is None else \
        torch.stack([torch.stack([attn.relative_values.weight[r] for r in row]) for row in rows])
    return keys, values


def t5_bucket_definition(relative, bidirectional, num_buckets=32, max_distance=128):
    """T5 (Raffel et al. 2.1): buckets of one distance each for short distances, then ranges growing
    logarithmically up to max_distance, all longer distances in the last; bidirectional: half the
    buckets for keys after the query. The log-spaced bucket m is the largest with
    exact * (max_distance / exact) ** (m / K) <= distance, compared exactly in integers."""
    offset = 0
    if bidirectional:
        num_buckets //= 2
        offset = num_buckets if relative > 0 else 0
        distance = abs(relative)
    else:
        distance = max(-relative, 0)
    exact = num_buckets // 2
    if distance < exact:
        return offset + distance
    K = num_buckets - exact
    return offset + exact + max(m for m in range(K) if max_distance ** m * exact ** K <= distance ** K * exact ** m)


def alibi_penalty(slopes, T, S, causal, past=0):
    """-m_h |i - j| (encoder) or -m_h (i - j) (decoder, j <= i), H x T x S."""
    return torch.tensor([[[-m * (abs(i - j) if not causal else max(i - j, 0)) for j in range(S)]
                          for i in range(past, past + T)] for m in slopes], dtype=torch.float64)


def reference_attention(attn, coder, x, causal, padding):
    """softmax(q k^T / sqrt(d) + position term) (v + a^V) through out_proj, from the layer's weights."""
    T, B, C = x.shape
    H = attn.num_heads
    D = C // H
    q, k, v = (p(x).view(T, B, H, D) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    e = torch.einsum("ibhd,jbhd->bhij", q, k) / math.sqrt(D)
    a_v = None
    encoding = coder.encoding
    if isinstance(encoding, ShawRPE):
        a_k, a_v = shaw_tables(attn, T, T, causal)
        e = e + torch.einsum("ibhd,ijd->bhij", q, a_k) / math.sqrt(D)
    elif isinstance(encoding, T5Bias):
        table = coder.position_bias.relative_attention_bias.weight  # buckets x H
        buckets = torch.tensor([[t5_bucket_definition(j - i, not causal, coder.position_bias.options.num_buckets,
                                                      coder.position_bias.options.max_distance)
                                 for j in range(T)] for i in range(T)])
        e = e + table[buckets].permute(2, 0, 1)
    elif isinstance(encoding, ALiBi):
        e = e + alibi_penalty([2.0 ** (-8 * h / H) for h in range(1, H + 1)], T, T, causal)  # H = 4
    elif not isinstance(encoding, NoPE):  # another encoding: its own written-out definition
        definition = getattr(encoding, "reference_position_logits", None)
        assert definition is not None, f"{type(encoding).__name__}: no formula to test it against (give it a " \
                                       "reference_position_logits(coder, T, causal) or add it here)"
        e = e + definition(coder, T, causal)
    # (NoPE: no position term)
    if causal:
        e = e.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    if padding is not None:
        e = e.masked_fill(padding[:, None, None, :], float("-inf"))
    alpha = e.softmax(-1)
    z = torch.einsum("bhij,jbhd->ibhd", alpha, v)
    if a_v is not None:
        z = z + torch.einsum("bhij,ijd->ibhd", alpha, a_v)
    return attn.out_proj(z.reshape(T, B, C))


@pytest.mark.parametrize("arch, flags", VARIANTS, ids=VARIANT_IDS)
def test_attention_equals_its_papers_formula_in_float64(dict_dir, build, arch, flags):
    """Encoder (left padding) and decoder (future mask, right padding) self-attention, by SDPA and by
    the written-out softmax, equal the formula to float64 rounding."""
    model, _ = build(dict_dir, arch, *flags)
    model.double()
    T, B = 11, 3
    x = torch.randn(T, B, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    left = torch.zeros(B, T, dtype=torch.bool)
    left[1, :4] = True
    right = torch.zeros(B, T, dtype=torch.bool)
    right[2, -3:] = True
    future = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for coder, causal, padding, mask in [(model.encoder, False, left, None), (model.decoder, True, right, future)]:
        attn = coder.layers[1].self_attn
        want = reference_attention(attn, coder, x, causal, padding)
        for need_weights in (False, True):
            with torch.no_grad():
                got, _ = attn(x, x, x, key_padding_mask=padding, attn_mask=mask, need_weights=need_weights)
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=lambda m: f"causal={causal} weights={need_weights}: {m}")


def test_shaw_tables_clip_at_k_and_the_decoders_look_back(dict_dir, build):
    model, _ = build(dict_dir, "rpe_transformer", "--rpe-max-relative-position", "3")
    enc, dec = model.encoder.layers[0].self_attn, model.decoder.layers[0].self_attn
    assert enc.relative_keys.weight.shape == (7, 8) and enc.relative_values.weight.shape == (7, 8)
    assert dec.relative_keys.weight.shape == (4, 8)  # distances -3 .. 0
    assert torch.equal(enc.distance_rows(0, 3, 9, "cpu"), torch.tensor(
        [[3, 4, 5, 6, 6, 6, 6, 6, 6], [2, 3, 4, 5, 6, 6, 6, 6, 6], [1, 2, 3, 4, 5, 6, 6, 6, 6]]))
    assert torch.equal(dec.distance_rows(7, 1, 8, "cpu"), torch.tensor([[0, 0, 0, 0, 0, 1, 2, 3]]))
    # each layer its own tables, shared by the heads (one d-vector per distance)
    assert not torch.equal(model.encoder.layers[0].self_attn.relative_keys.weight,
                           model.encoder.layers[1].self_attn.relative_keys.weight)


def test_t5_buckets_follow_the_definition():
    relative = torch.arange(-400, 401)
    for bidirectional in (True, False):
        for num_buckets, max_distance in [(32, 128), (16, 40), (8, 300)]:
            got = relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
            want = [t5_bucket_definition(r, bidirectional, num_buckets, max_distance) for r in relative.tolist()]
            assert got.tolist() == want, (bidirectional, num_buckets, max_distance)
    encoder = relative_position_bucket(relative, True, 32, 128).tolist()
    decoder = relative_position_bucket(relative, False, 32, 128).tolist()
    at = {r: i for i, r in enumerate(relative.tolist())}
    # encoder: exact 0..7 looking back, 16..23 looking ahead; decoder: all 32 for the past, the future 0
    assert [encoder[at[r]] for r in (0, -1, -7, 1, 7)] == [0, 1, 7, 17, 23]
    assert [decoder[at[r]] for r in (0, -1, -15, 1, 5)] == [0, 1, 15, 0, 0]
    # (as in T5, bucket 16, "distance 0 looking ahead", is never used)
    assert set(encoder) == set(range(32)) - {16} and set(decoder) == set(range(32))
    assert encoder[at[-128]] == encoder[at[-400]] == 15 and encoder[at[400]] == 31 and decoder[at[-400]] == 31


def ctranslate2_bucket(relative, bidirectional, num_buckets, max_distance):
    """CTranslate2 4.x's get_relative_position_bucket (src/layers/attention.cc), transcribed: the
    log-spaced bucket int32(float(exact) + log(float(d) / float(exact)) / log(float(max_distance) /
    float(exact)) * float(num_buckets - exact)) in float32 (numpy float32 scalars; logf correctly rounded)."""
    f = np.float32
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket = num_buckets if relative > 0 else 0
        relative = abs(relative)
    else:
        relative = -min(relative, 0)
    exact = num_buckets // 2
    if relative < exact:
        return bucket + relative
    value = f(exact) + f(math.log(f(relative) / f(exact))) / f(math.log(f(max_distance) / f(exact))) \
        * f(num_buckets - exact)
    return bucket + min(int(value), num_buckets - 1)


def test_t5_buckets_are_ctranslate2s_float32_buckets():
    """For every even bucket count 4..64 and maximum distances up to 1000, each distance -1000..1000 falls
    in the bucket CTranslate2 gives it, so that an exported model attends as the trained one. Distance
    8 of 18 buckets up to 128 is a case float64 puts one bucket lower."""
    relative = torch.arange(-1000, 1001)
    for num_buckets in range(4, 66, 2):
        for max_distance in sorted({num_buckets // 2 + 1, 12, 100, 128, 257, 1000} - set(range(num_buckets // 2 + 1))):
            for bidirectional in (True, False):
                got = relative_position_bucket(relative, bidirectional, num_buckets, max_distance).tolist()
                want = [ctranslate2_bucket(r, bidirectional, num_buckets, max_distance) for r in relative.tolist()]
                assert got == want, (num_buckets, max_distance, bidirectional)
    assert relative_position_bucket(torch.tensor([-8, 8]), True, 18, 128).tolist() == [5, 14]


def test_alibi_slopes_are_press_et_al():
    assert alibi_slopes(8) == [2.0 ** -e for e in range(1, 9)]
    assert alibi_slopes(4) == [2.0 ** -e for e in (2, 4, 6, 8)]
    assert alibi_slopes(16) == pytest.approx([2.0 ** (-e / 2) for e in range(1, 17)], rel=1e-15)
    # not a power of two: the 4 of 4 heads, then every other of the 8-head sequence
    assert alibi_slopes(6) == [2.0 ** -e for e in (2, 4, 6, 8, 1, 3)]


@pytest.mark.parametrize("arch, flags", VARIANTS, ids=VARIANT_IDS)
def test_scores_depend_on_relative_positions_only(dict_dir, build, arch, flags):
    """The scores among the tokens of x are the same whether x stands alone or after 5 other tokens
    (encoder: in one sequence; decoder: after 5 cached ones), to float64 rounding."""
    model, _ = build(dict_dir, arch, *flags)
    model.double()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(7, 2, 32, dtype=torch.float64, generator=g), torch.randn(5, 2, 32, dtype=torch.float64, generator=g)
    xy = torch.cat([y, x])
    with torch.no_grad():
        attn = model.encoder.layers[0].self_attn
        alone, _ = attn(x, x, x, before_softmax=True)
        after, _ = attn(xy, xy, xy, before_softmax=True)
        torch.testing.assert_close(after[:, 5:, 5:], alone, rtol=1e-12, atol=1e-12)
        attn, state = model.decoder.layers[0].self_attn, {}
        attn(y, y, y, incremental_state=state)
        after, _ = attn(x, x, x, incremental_state=state, before_softmax=True)
        future = torch.triu(torch.full((7, 7), float("-inf"), dtype=torch.float64), 1)
        alone, _ = attn(x, x, x, attn_mask=future, before_softmax=True)
    lower = torch.ones(7, 7, dtype=torch.bool).tril()
    torch.testing.assert_close(after[:, :, 5:][:, lower], alone[:, lower], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch, flags", VARIANTS, ids=VARIANT_IDS)
def test_incremental_decoding_equals_full_pass(dict_dir, build, arch, flags):
    """Step by step with fairseq's cache equals teacher forcing at every step, with beam reorders that
    drop and duplicate hypotheses, and for right-padded decoder input reordered."""
    model, task = build(dict_dir, arch, *flags)
    src, lengths = random_tokens(task, [9, 5, 7], seed=6)
    prev, _ = random_tokens(task, [12, 12, 12], seed=5, left_pad=False)
    padded, _ = random_tokens(task, [10, 4, 7], seed=7, left_pad=False)
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        decode_step_by_step_equals_full_pass(model, enc, prev)
        decode_step_by_step_equals_full_pass(model, enc, padded)
        # the 3 beams of one sentence, reordered as beam search does
        beams = model.encoder(src[:1].repeat(3, 1), src_lengths=lengths[:1].repeat(3))
        reorders = [(4, torch.tensor([2, 0, 0])), (7, torch.tensor([1, 2, 0]))]
        decode_step_by_step_equals_full_pass(model, beams, prev, reorders=reorders)
        decode_step_by_step_equals_full_pass(model, beams, padded, reorders=reorders)


@pytest.mark.parametrize("arch, flags", VARIANTS, ids=VARIANT_IDS)
def test_sentence_alone_equals_inside_left_padded_batch(dict_dir, build, arch, flags):
    model, task = build(dict_dir, arch, *flags)
    batch, lengths = random_tokens(task, [15, 6, 11], seed=6)  # sentence 1 gets 9 pads on the left
    alone = batch[1:2, -6:]
    with torch.no_grad():
        torch.testing.assert_close(encode(model, batch, lengths)[-6:, 1], encode(model, alone, lengths[1:2])[:, 0],
                                   rtol=1e-5, atol=1e-5)
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, len_penalty=0.6, max_len_b=20)
    with torch.no_grad():
        hyp_batch = generator.forward({"net_input": {"src_tokens": batch, "src_lengths": lengths}})[1]
        hyp_alone = generator.forward({"net_input": {"src_tokens": alone, "src_lengths": lengths[1:2]}})[0]
    assert [h["tokens"].tolist() for h in hyp_batch] == [h["tokens"].tolist() for h in hyp_alone]
    for got, want in zip(hyp_batch, hyp_alone):
        torch.testing.assert_close(got["score"], want["score"], rtol=1e-5, atol=1e-5)


def test_alibi_encoder_is_symmetric_and_positions_tell_direction(dict_dir, build):
    """The symmetric encoder penalty sees distance, not direction: a reversed source gives the reversed
    encoding. fairseq's positions added with --add-token-positional-embeddings break that symmetry."""
    model, task = build(dict_dir, "alibi_transformer")
    tokens, lengths = random_tokens(task, [10], seed=3)
    reverse = torch.arange(9, -1, -1)
    with torch.no_grad():
        out, out_reversed = encode(model, tokens, lengths), encode(model, tokens[:, reverse], lengths)
        torch.testing.assert_close(out_reversed, out[reverse], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(out[1:], out[:-1], atol=1e-2)  # but it does see positions
        model, _ = build(dict_dir, "alibi_transformer", "--add-token-positional-embeddings")
        out, out_reversed = encode(model, tokens, lengths), encode(model, tokens[:, reverse], lengths)
    assert not torch.allclose(out_reversed, out[reverse], atol=1e-2)


@pytest.mark.parametrize("arch, flags", VARIANTS, ids=VARIANT_IDS)
def test_half_precision_runs_in_its_dtype(dict_dir, build, arch, flags, monkeypatch):
    """After .to(bfloat16) every position term and everything handed to SDPA is bfloat16 (no float32
    detour), the output is bfloat16 within its rounding of float32, and decoding step by step
    equals the full pass."""
    model, task = build(dict_dir, arch, *flags)
    src, lengths = random_tokens(task, [40, 25], seed=8)
    prev, _ = random_tokens(task, [12, 9], seed=9, left_pad=False)
    dtypes = set()
    sdpa = F.scaled_dot_product_attention

    def spy_sdpa(q, k, v, attn_mask=None, **kwargs):
        dtypes.update(t.dtype for t in (q, k, v, attn_mask) if t is not None and t.dtype != torch.bool)
        return sdpa(q, k, v, attn_mask=attn_mask, **kwargs)

    logits = self_attention.SelfAttention.explicit_attention

    def spy_explicit(self, q, k, v, padding, attn_mask, position_logits, *args):
        dtypes.update(t.dtype for t in (q, k, v, position_logits) if t is not None)
        return logits(self, q, k, v, padding, attn_mask, position_logits, *args)

    monkeypatch.setattr(self_attention.F, "scaled_dot_product_attention", spy_sdpa)
    monkeypatch.setattr(self_attention.SelfAttention, "explicit_attention", spy_explicit)
    with torch.no_grad():
        reference = model(src, lengths, prev)[0]
        dtypes.clear()
        model.to(torch.bfloat16)
        out = model(src, lengths, prev)[0]
        assert dtypes == {torch.bfloat16}
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev,
                                             rtol=0, atol=2 ** -5 * reference.abs().max().item())
    assert out.dtype == torch.bfloat16
    assert (out.float() - reference).abs().max() / reference.abs().max() < 2 ** -6


@pytest.mark.parametrize("arch", MODELS)
def test_architectures_match_fairseq_sizes(dict_dir, build, arch):
    """Each size is fairseq's (every argument but the encoding's own and the positions), with fairseq's
    parameters less the additive positions, plus the encoding's; cross-attention stays fairseq's."""
    for suffix in ("", "_wmt_en_de", "_wmt_en_de_big", "_iwslt_de_en"):
        with torch.device("meta"):  # shapes only: no memory, no initialization (seconds per model on a CPU)
            ours, _ = build(dict_dir, arch + suffix, tiny=False)
            base, _ = build(dict_dir, "transformer" + suffix, tiny=False)
        assert type(ours) is MODELS[arch]
        own = {"arch", "no_token_positional_embeddings", "add_token_positional_embeddings"}
        prefix = arch.split("_")[0] + "_"
        differing = {key for key in {*vars(ours.args), *vars(base.args)} - own if not key.startswith(prefix)
                     and getattr(ours.args, key, "absent") != getattr(base.args, key, "absent")}
        assert not differing, (arch + suffix, differing)
        layers, heads, dim = base.args.encoder_layers, base.args.encoder_attention_heads, base.args.encoder_embed_dim
        extra = {}
        if arch == "rpe_transformer":
            for side, rows in (("encoder", 33), ("decoder", 17)):
                for i in range(layers):
                    for table in ("keys", "values"):
                        extra[f"{side}.layers.{i}.self_attn.relative_{table}.weight"] = (rows, dim // heads)
        elif arch == "t5bias_transformer":
            extra = {f"{side}.position_bias.relative_attention_bias.weight": (32, heads) for side in ("encoder", "decoder")}
        elif arch not in ("alibi_transformer", "nope_transformer"):  # another encoding: its own tables
            extra = {key: tuple(tensor.shape) for key, tensor in position_tables(ours).items()}
        want = {k: tuple(v.shape) for k, v in base.state_dict().items() if "embed_positions" not in k}
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {**want, **extra}
        assert ours.encoder.embed_positions is None and ours.decoder.embed_positions is None
        for layer in ours.decoder.layers:
            assert type(layer.encoder_attn) is MultiheadAttention
        del ours, base


@pytest.mark.parametrize(
    "arch, flags, message",
    [
        ("rpe_transformer", ["--rpe-max-relative-position", "0"],
         "--rpe-max-relative-position must be >= 1 (the clipping distance k); got 0"),
        ("t5bias_transformer", ["--t5bias-num-buckets", "31"],
         "--t5bias-num-buckets must be an even number >= 4 (half of them per direction in the encoder); got 31"),
        ("t5bias_transformer", ["--t5bias-max-distance", "16"], "--t5bias-max-distance must exceed half of "
         "--t5bias-num-buckets (16): the distances below that have buckets of their own; got 16"),
        ("rpe_transformer", ["--cross-self-attention"], ": error: --cross-self-attention is not supported by "
         "rpe_transformer: its decoder self-attention would also attend to the encoder's states"),
        ("t5bias_transformer", ["--add-token-positional-embeddings", "--no-token-positional-embeddings"],
         "--add-token-positional-embeddings contradicts --no-token-positional-embeddings"),
    ],
)
def test_bad_options_fail_at_build_naming_the_flag(dict_dir, build, arch, flags, message):
    with pytest.raises(ValueError) as error:
        build(dict_dir, arch, *flags)
    assert message in str(error.value)


def test_options_reach_every_layer(dict_dir, build):
    model, _ = build(dict_dir, "rpe_transformer", "--rpe-max-relative-position", "5", "--rpe-keys-only")
    layers = [layer.self_attn for layer in (*model.encoder.layers, *model.decoder.layers)]
    assert [(a.max_relative_position, a.relative_values, a.needs_weights, a.causal) for a in layers] == \
        [(5, None, False, False)] * 2 + [(5, None, False, True)] * 2
    model, _ = build(dict_dir, "t5bias_transformer", "--t5bias-num-buckets", "16", "--t5bias-max-distance", "64")
    assert [(c.position_bias.relative_attention_bias.num_embeddings, c.position_bias.options.max_distance,
             c.position_bias.bidirectional) for c in (model.encoder, model.decoder)] == [(16, 64, True), (16, 64, False)]
    assert model.args.t5bias_num_buckets == 16 and model.args.t5bias_max_distance == 64


@pytest.mark.parametrize("arch", MODELS)
def test_additive_positions_load_strictly_or_are_dropped(dict_dir, build, arch):
    """With --add-token-positional-embeddings and learned positions, a state dict loads strictly into a
    fresh model with every weight, position tables included; without, a baseline's positions are
    dropped and every other weight of fairseq's transformer is kept."""
    flags = ["--add-token-positional-embeddings", "--encoder-learned-pos", "--decoder-learned-pos"]
    trained, _ = build(dict_dir, arch, *flags)
    fresh, _ = build(dict_dir, arch, *flags, seed=1)
    state = {k: v + 0.5 for k, v in trained.state_dict().items()}  # unlike any initialisation
    fresh.load_state_dict(state, strict=True, model_cfg=fresh.cfg)
    loaded = fresh.state_dict()
    assert set(loaded) == set(state) and {"encoder.embed_positions.weight", "decoder.embed_positions.weight"} <= set(state)
    assert all(torch.equal(loaded[key], value) for key, value in state.items())
    base, _ = build(dict_dir, "transformer", "--encoder-learned-pos", "--decoder-learned-pos")
    ours, _ = build(dict_dir, arch, seed=1)
    own = {k: v for k, v in ours.state_dict().items() if k not in base.state_dict()}  # e.g. Shaw's tables
    ours.load_state_dict({**{k: v.clone() for k, v in base.state_dict().items()}, **own}, strict=True,
                         model_cfg=ours.cfg)
    kept = {k: v for k, v in base.state_dict().items() if "embed_positions" not in k}
    assert all(torch.equal(ours.state_dict()[key], value) for key, value in kept.items())


def test_nope_is_fairseqs_attention_without_positions(dict_dir, build):
    """nope_transformer, an encoding with none of the hooks on the shared scaffold, equals fairseq's
    transformer without positions, weight for weight, in a full pass and decoding step by step; its
    encoder cannot tell the order of its tokens (a permuted source gives the permuted encoding)."""
    base, task = build(dict_dir, "transformer", "--no-token-positional-embeddings")
    model, _ = build(dict_dir, "nope_transformer")
    model.load_state_dict(base.state_dict(), strict=True)
    assert all(type(layer.self_attn) is self_attention.SelfAttention for layer in model.encoder.layers)
    src, lengths = random_tokens(task, [9, 5, 7], seed=6)
    prev, _ = random_tokens(task, [6, 6, 6], seed=5, left_pad=False)
    permutation = torch.tensor([3, 0, 7, 1, 5, 2, 6, 4, 8])
    with torch.no_grad():
        torch.testing.assert_close(model(src, lengths, prev)[0], base(src, lengths, prev)[0], rtol=1e-6, atol=1e-6)
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev)
        out, permuted = encode(model, src[:1], lengths[:1]), encode(model, src[:1, permutation], lengths[:1])
    torch.testing.assert_close(permuted, out[permutation], rtol=1e-5, atol=1e-5)


def test_every_encoding_is_in_the_registry_the_tools_read():
    """The benchmark, the sample comparison, the length study and the CTranslate2 export list the
    encodings from one registry: every registered model, in fairseq's sizes."""
    packaged = {name for name, encoding in ENCODINGS.items() if encoding.__module__.startswith("fairseq_rope.")}
    assert packaged >= {"rope_transformer", "rpe_transformer", "t5bias_transformer", "alibi_transformer",
                        "nope_transformer"}
    assert set(ENCODINGS) - packaged == {"kerple_transformer"}  # the tests' own
    from fairseq.models import ARCH_MODEL_REGISTRY
    for name in ENCODINGS:
        assert {f"{name}{suffix}" for suffix in ("", "_wmt_en_de", "_wmt_en_de_big", "_iwslt_de_en")} <= \
            {arch for arch, model in ARCH_MODEL_REGISTRY.items() if getattr(model, "encoding", None) is ENCODINGS[name]}


def test_alibi_penalty_in_bfloat16_is_the_float32_product_rounded_once():
    """In bfloat16 a distance of 257 is not representable (it rounds to 256): the penalty is m_h * 257
    formed in float32, then rounded once; for 16 heads (slopes 2^(-h/2)) that is another value."""
    bias = ALiBiBias(16, causal=False).to(torch.bfloat16)
    got = bias(0, 1, 300)[0, :, 0, :]  # H x 300, distances 0 .. 299
    slopes = bias.slopes.float()[:, None]
    want = -(slopes * torch.arange(300, dtype=torch.float32)).to(torch.bfloat16)
    assert torch.equal(got, want)
    rounded_distance = -(bias.slopes[:, None] * torch.tensor([257.0]).to(torch.bfloat16))
    assert not torch.equal(got[:, 257:258], rounded_distance)


def test_position_tables_are_the_encodings_own_and_nothing_else(dict_dir, build):
    """What fine-tuning from a transformer fills in: exactly the tables a transformer lacks (Shaw's a^K and
    a^V of every layer, T5's table of each stack; nothing for ALiBi, RoPE or the transformer), so that a
    checkpoint missing any other weight still fails fairseq's strict load."""
    want = {
        "transformer": set(),
        "rope_transformer": set(),
        "alibi_transformer": set(),
        "nope_transformer": set(),
        "rpe_transformer": {f"{side}.layers.{i}.self_attn.relative_{t}.weight" for side in ("encoder", "decoder")
                            for i in (0, 1) for t in ("keys", "values")},
        "t5bias_transformer": {f"{side}.position_bias.relative_attention_bias.weight" for side in ("encoder", "decoder")},
    }
    base, _ = build(dict_dir, "transformer")
    for arch, keys in want.items():
        model, _ = build(dict_dir, arch)
        assert set(position_tables(model)) == keys, arch
        recorded = {"encoder.original_max_positions", "decoder.original_max_positions"}  # RoPE's, upgraded on their own
        assert keys == set(model.state_dict()) - set(base.state_dict()) - recorded
        state = {k: v for k, v in base.state_dict().items() if k != "encoder.layers.0.self_attn.q_proj.weight"}
        with pytest.raises(RuntimeError, match="Missing key.*encoder.layers.0.self_attn.q_proj.weight"):
            model.load_state_dict(state, strict=True, model_cfg=model.cfg)


@pytest.mark.parametrize("arch, flags", [("rope_transformer", []), *VARIANTS], ids=["rope", *VARIANT_IDS])
def test_several_new_tokens_after_a_cache_attend_as_in_one_pass(dict_dir, build, arch, flags):
    """Decoder self-attention fed 3 tokens, then 4 more at once with their rows of the future mask (a
    chunk after a cache, as a prefix is forced), equals one pass over the 7, by SDPA and written out."""
    model, _ = build(dict_dir, arch, *flags)
    model.double()
    attn = model.decoder.layers[0].self_attn
    x = torch.randn(7, 2, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    future = torch.triu(torch.full((7, 7), float("-inf"), dtype=torch.float64), 1)
    with torch.no_grad():
        full, _ = attn(x, x, x, attn_mask=future, need_weights=False)
        for need_weights in (False, True):
            state, first, rest = {}, x[:3], x[3:]
            attn(first, first, first, attn_mask=future[:3, :3], incremental_state=state, need_weights=need_weights)
            chunk, _ = attn(rest, rest, rest, attn_mask=future[3:, :], incremental_state=state,
                            need_weights=need_weights)
            torch.testing.assert_close(chunk, full[3:], rtol=1e-12, atol=1e-12)


def home_of(cls) -> str:
    """The module, or for an encoding of several modules the package, directly under fairseq_rope that
    defines ``cls`` (RoPE's: fairseq_rope.rope); the tests' own encoding is a package of its own (kerple)."""
    parts = cls.__module__.split(".")
    return ".".join(parts[:2]) if parts[0] == "fairseq_rope" else parts[0]


def test_encodings_import_from_the_scaffold_only():
    """Each encoding (all six: RoPE, Shaw's RPE, T5's bias, ALiBi, NoPE and the tests' KERPLE) is one
    module or one package, which stands above the scaffold (encodings.py, self_attention.py) and imports
    from it and from its own modules only; the scaffold imports no encoding. Its options class, model,
    self-attention and position inputs all live in its home."""
    import kerple
    from test_layering import imports_of, project_modules

    modules = project_modules()
    modules["kerple"] = kerple.__file__
    scaffold = {"fairseq_rope.encodings", "fairseq_rope.self_attention"}
    homes = collections.Counter(home_of(encoding) for encoding in ENCODINGS.values())
    assert sorted(homes) == ["fairseq_rope.alibi", "fairseq_rope.nope", "fairseq_rope.rope", "fairseq_rope.shaw",
                             "fairseq_rope.t5_bias", "kerple"]
    assert list(homes.values()) == [1] * 6

    def plugin_imports(module):
        return {name for name in imports_of(module, modules[module], modules) if name.split(".")[0] == "fairseq_rope"}

    for module in scaffold:
        assert plugin_imports(module) <= scaffold, module
    for home in homes:
        family = {name for name in modules if name == home or name.startswith(home + ".")}
        for module in family:
            assert plugin_imports(module) <= scaffold | family, (module, plugin_imports(module) - scaffold - family)


EVERY_VARIANT = [(name, flags) for _, name, flags in encoding_variants()] + \
    [("rope_transformer", ["--rope-scaling", "auto", "--rope-original-max-positions", "4"])]
EVERY_VARIANT_ID = [variant.replace(" ", "-") for variant, _, _ in encoding_variants()] + ["rope-auto"]


def forwards(model, task):
    """A training forward, a forward in evaluation and two steps of incremental decoding (sources
    longer than 4 tokens: --rope-scaling auto with L = 4 scales them)."""
    src, lengths = random_tokens(task, [9, 5], seed=6)
    prev, _ = random_tokens(task, [7, 7], seed=5, left_pad=False)
    model.train()
    model(src, lengths, prev)
    model.eval()
    with torch.no_grad():
        model(src, lengths, prev)
        enc, state = model.encoder(src, src_lengths=lengths), {}
        for t in (1, 2):
            model.decoder(prev[:, :t], encoder_out=enc, incremental_state=state)


@pytest.mark.parametrize("arch, flags", EVERY_VARIANT, ids=EVERY_VARIANT_ID)
def test_an_encodings_model_is_made_in_its_home(dict_dir, build, arch, flags, monkeypatch):
    """Everything of a model that is neither fairseq's nor the scaffold's (its model class, self-attentions,
    rotations and biases, and the type of its forward inputs) is defined in its encoding's home."""
    model, task = build(dict_dir, arch, *flags)
    encoding = type(model.encoder.encoding)
    made = {type(model), *(type(module) for module in model.modules())}
    inputs = []
    forward_inputs = encoding.forward_inputs
    monkeypatch.setattr(encoding, "forward_inputs", lambda *args: inputs.append(forward_inputs(*args)) or inputs[-1])
    forwards(model, task)
    made |= {type(made_inputs) for made_inputs in inputs}
    ours = {cls for cls in made if cls.__module__.split(".")[0] in ("fairseq_rope", "kerple")
            and cls.__module__ not in ("fairseq_rope.encodings", "fairseq_rope.self_attention")}
    assert ours and {home_of(cls) for cls in ours} == {home_of(encoding)}, sorted(cls.__module__ for cls in ours)


@pytest.mark.parametrize("arch, flags", EVERY_VARIANT, ids=EVERY_VARIANT_ID)
def test_position_inputs_are_one_frozen_type_from_the_encoding_to_the_attention(dict_dir, build, arch, flags,
                                                                                 monkeypatch):
    """What a forward hands its self-attentions is a frozen dataclass, not a dict of string keys: the
    encoding's forward_inputs makes one, of the type each self-attention declares (``no_inputs``), and
    that type is what reaches every self-attention, in training, in evaluation and at each decoding
    step; a misspelt field is an error (reading, making, or naming it to pass on to the decoder),
    never a None."""
    model, task = build(dict_dir, arch, *flags)
    encoding = type(model.encoder.encoding)
    made, seen = [], []
    forward_inputs = encoding.forward_inputs
    monkeypatch.setattr(encoding, "forward_inputs", lambda *args: made.append(forward_inputs(*args)) or made[-1])
    attentions = [module for module in model.modules() if isinstance(module, self_attention.SelfAttention)]
    for module in attentions:
        def spy(*args, check=module.check_self_attention, module=module):
            seen.append((module, args[-1]))  # (..., inputs): what its hooks receive
            return check(*args)

        module.check_self_attention = spy
    forwards(model, task)
    assert made and {module for module, _ in seen} == set(attentions)
    declared = {type(module.no_inputs) for module in attentions}
    assert len(declared) == 1 and {type(inputs) for inputs in made} == declared
    assert all(type(inputs) is type(module.no_inputs) for module, inputs in seen)
    kind = declared.pop()
    assert dataclasses.is_dataclass(kind) and issubclass(kind, self_attention.PositionInputs)
    for inputs in made:
        with pytest.raises(dataclasses.FrozenInstanceError):
            inputs.stack_bias = {}
        with pytest.raises(AttributeError):
            inputs.stack_bais
    with pytest.raises(TypeError):
        kind(stack_bais={})
    fields = {field.name for field in dataclasses.fields(kind)}
    assert set(encoding.encoder_output_fields) <= fields
    with pytest.raises(KeyError, match="misspelt"):
        model.encoder.encoding.encoder_output({}, "misspelt")


STACK_BIASES = [(arch, flags) for arch, flags in VARIANTS if issubclass(ENCODINGS[arch], StackBias)]


@pytest.mark.parametrize("arch, flags", STACK_BIASES, ids=[a for a, _ in STACK_BIASES])
def test_stack_bias_is_evaluated_once_per_forward_and_anew_at_each(dict_dir, build, arch, flags):
    """Without gradients a stack evaluates its bias once per forward for all its layers (not once per
    layer), and again at the next forward: after the bias's parameters change, the next output is a fresh
    model's with the new weights (nothing kept from the last forward)."""
    model, task = build(dict_dir, arch, *flags)
    src, lengths = random_tokens(task, [9, 5], seed=6)
    prev, _ = random_tokens(task, [7, 7], seed=5, left_pad=False)
    calls = collections.Counter()
    for side in ("encoder", "decoder"):
        bias = getattr(model, side).position_bias
        original = bias.forward

        def counted(*key, side=side, original=original):
            calls[side] += 1
            return original(*key)

        bias.forward = counted
        for module in getattr(model, side).modules():
            if isinstance(module, StackBiasAttention):
                module.use_stack_bias(bias)
    with torch.no_grad():
        model(src, lengths, prev)
        assert calls == {"encoder": 1, "decoder": 1}
        for parameter in model.encoder.position_bias.parameters():
            parameter.add_(0.5)
        for parameter in model.decoder.position_bias.parameters():
            parameter.mul_(-1.0)
        changed = model(src, lengths, prev)[0]
        assert calls == {"encoder": 2, "decoder": 2}
        fresh, _ = build(dict_dir, arch, *flags)
        fresh.load_state_dict(model.state_dict())
        torch.testing.assert_close(changed, fresh(src, lengths, prev)[0], rtol=0, atol=0)


@pytest.mark.parametrize("arch, flags", [("rope_transformer", ["--rope-random-positions", "64"]), *STACK_BIASES],
                         ids=["rope-random", *(a for a, _ in STACK_BIASES)])
def test_no_position_inputs_are_left_on_modules_after_a_forward(dict_dir, build, arch, flags):
    """Each forward's inputs live for that forward's call only: after a training forward, and after one
    that fails, no stack and no self-attention holds them (a self-attention called alone afterwards has none)."""
    model, task = build(dict_dir, arch, *flags)
    model.train()
    src, lengths = random_tokens(task, [9, 5], seed=6)
    prev, _ = random_tokens(task, [7, 7], seed=5, left_pad=False)

    def nothing_left():
        return all(getattr(m, "position_inputs", None) is None for m in model.modules())

    model(src, lengths, prev)[0].sum().backward()
    assert nothing_left()
    with pytest.raises(IndexError):
        model(src, lengths, torch.full_like(prev, 10_000))  # a token id beyond the embeddings
    assert nothing_left()
