"""Every fairseq feature a translation user turns on, with every position encoding: it works (shown by the
strongest check it allows) or it is refused when the model is built, naming the flag and the architecture.

The matrix is one table, FEATURES x ENCODINGS; docs/position_encodings.md publishes it as
:func:`matrix_markdown` writes it (``python tests/test_features.py`` prints it). Which encodings refuse a
feature is said by the encoding (``refused_features``), never by a list here or in a model.
"""

import logging
import os
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.distributed import utils as distributed_utils
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq_cli import train as fairseq_train

import forked
from conftest import (TEST_ENCODING_USER_DIR, USER_DIR, encoding_variants, free_port, model_of, random_tokens,
                      reversal_task)
from fairseq_rope_checkpoints import load_checkpoint
from fairseq_rope.encodings import EncodingTransformerModel
from test_model import decode_step_by_step_equals_full_pass

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "position_encodings.md")
BEGIN, END = "<!-- feature matrix: python tests/test_features.py -->", "<!-- end of the feature matrix -->"

# the encodings as a user picks them, from the registry: column name -> (arch, flags); each encoding's
# variants and their small settings are its own (tiny_model_variants)
ENCODINGS = {"transformer": ("transformer", []), **{variant: (name, flags) for variant, name, flags in encoding_variants()}}

MODEL = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
         "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "4",
         "--decoder-attention-heads", "4", "--dropout", "0", "--attention-dropout", "0"]


def refused_features(arch):
    """What the architecture's encoding refuses (fairseq's transformer: nothing)."""
    model = ARCH_MODEL_REGISTRY[arch]
    return model.encoding.refused_features if issubclass(model, EncodingTransformerModel) else {}


# ---- a tiny model, batch and training step ----

def build(dict_dir, encoding, *flags, seed=0):
    arch, own = ENCODINGS[encoding]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [dict_dir, "--arch", arch, "--source-lang", "src", "--target-lang",
                                                "tgt", "--user-dir", USER_DIR, *MODEL, *own, *flags])
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    return task.build_model(args), task


def batch(task, left_pad_source=True, left_pad_target=False, sources=(9, 4, 7), targets=(8, 3, 6), seed=1):
    """Sentences of 9, 4 and 7 tokens and targets of 8, 3 and 6 (or ``sources``, ``targets``):
    (src, lengths, prev_output_tokens, target)."""
    src, lengths = random_tokens(task, list(sources), seed=seed, left_pad=left_pad_source)
    target, _ = random_tokens(task, list(targets), seed=seed + 1, left_pad=left_pad_target)
    d = task.target_dictionary
    prev = target.clone()  # fairseq's prev_output_tokens: EOS first, the target shifted right
    for i, row in enumerate(target):
        real = row.ne(d.pad()).nonzero().flatten()
        prev[i, real] = torch.cat([torch.tensor([d.eos()]), row[real[:-1]]])
    return src, lengths, prev, target


def loss_of(model, task, src, lengths, prev, target):
    lprobs = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
    keep = target.ne(task.target_dictionary.pad())
    return -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)[keep].sum() / keep.sum()


def training_step(model, task, seed=5, **padding):
    """One forward and backward in training mode: (loss, {name: grad})."""
    model.train()
    model.zero_grad()
    torch.manual_seed(seed)
    loss = loss_of(model, task, *batch(task, **padding))
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def draws_in_training(dict_dir, encoding):
    """Whether a training forward of the encoding (without dropout) draws random numbers (RoPE's random
    positions): then processes with different seeds cannot equal one process."""
    model, task = build(dict_dir, encoding)
    model.train()
    before = torch.get_rng_state()
    with torch.no_grad():
        loss_of(model, task, *batch(task))
    return not torch.equal(before, torch.get_rng_state())


def trains_and_decodes(model, task, unused="", **padding):
    """A training step with a finite loss and finite gradients for every parameter (but those named
    ``unused...``), then, in evaluation, decoding step by step equals the full pass."""
    loss, grads = training_step(model, task, **padding)
    assert torch.isfinite(loss)
    missing = {name for name, p in model.named_parameters() if p.requires_grad and not (unused and name.startswith(unused))}
    assert not missing - set(grads), f"no gradient for {sorted(missing - set(grads))}"
    assert all(torch.isfinite(g).all() for g in grads.values())
    model.eval()
    src, lengths, _, _ = batch(task, **padding)
    with torch.no_grad():
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), unpadded_prev(task))


def unpadded_prev(task):
    """Decoder input of 3 x 7 tokens (no padding: fairseq's additive positions differ at pads when incremental)."""
    return random_tokens(task, [7, 7, 7], seed=3, left_pad=False)[0]


# ---- the checks, one per feature ----

def check_plain(dict_dir, encoding, flags, unused="", **_):
    model, task = build(dict_dir, encoding, *flags)
    trains_and_decodes(model, task, unused=unused)
    return model


def check_share_all(dict_dir, encoding, flags, **_):
    model = check_plain(dict_dir, encoding, flags)
    assert model.encoder.embed_tokens.weight is model.decoder.embed_tokens.weight \
        is model.decoder.output_projection.weight


def check_share_decoder(dict_dir, encoding, flags, **_):
    model = check_plain(dict_dir, encoding, flags)
    assert model.decoder.embed_tokens.weight is model.decoder.output_projection.weight
    assert model.encoder.embed_tokens.weight is not model.decoder.embed_tokens.weight


def check_no_cross_attention(dict_dir, encoding, flags, **_):
    model = check_plain(dict_dir, encoding, flags, unused="encoder.")  # the decoder reads no encoder
    assert all(layer.encoder_attn is None for layer in model.decoder.layers)


def check_layernorm_embedding(dict_dir, encoding, flags, **_):
    model = check_plain(dict_dir, encoding, flags)
    assert model.encoder.layernorm_embedding is not None and model.decoder.layernorm_embedding is not None


def check_normalize_before(dict_dir, encoding, flags, **_):
    model = check_plain(dict_dir, encoding, flags)
    assert all(layer.normalize_before for layer in (*model.encoder.layers, *model.decoder.layers))


def check_layerdrop(dict_dir, encoding, flags, **_):
    """20 training steps with half the layers dropped at random (some steps run fewer layers), then in
    evaluation every layer runs: outputs equal the same weights without LayerDrop."""
    model, task = build(dict_dir, encoding, *flags)
    plain, _ = build(dict_dir, encoding)
    plain.load_state_dict(model.state_dict())
    runs = []
    for layer in (*model.encoder.layers, *model.decoder.layers):
        layer.register_forward_hook(lambda *_: runs.append(1))
    counts = []
    for step in range(20):
        runs.clear()
        loss, _ = training_step(model, task, seed=step)
        assert torch.isfinite(loss)
        counts.append(len(runs))
    assert min(counts) < 4, "LayerDrop dropped no layer in 20 steps"
    model.eval(), plain.eval()
    src, lengths, prev, _ = batch(task)
    with torch.no_grad():
        torch.testing.assert_close(model(src, lengths, prev)[0], plain(src, lengths, prev)[0], rtol=0, atol=0)


def check_checkpointing(dict_dir, encoding, flags, **_):
    """With dropout, the gradients of a step whose layers are recomputed in the backward equal those of the
    same step without activation checkpointing (same seed: same dropout masks and random positions)."""
    dropout = ["--dropout", "0.1", "--attention-dropout", "0.1"]
    model, task = build(dict_dir, encoding, *flags, *dropout)
    plain, _ = build(dict_dir, encoding, *dropout)
    plain.load_state_dict(model.state_dict())
    assert all(hasattr(layer, "precheckpoint_forward") for layer in (*model.encoder.layers, *model.decoder.layers))
    loss, grads = training_step(model, task)
    plain_loss, plain_grads = training_step(plain, task)
    # float32 rounding only: matmul may lay out its strided q/k views otherwise with gradients than without
    torch.testing.assert_close(loss, plain_loss, rtol=1e-6, atol=0)
    assert grads.keys() == plain_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, plain_grads[name], rtol=1e-5, atol=1e-7, msg=lambda m: f"{name}: {m}")


def check_quant_noise(dict_dir, encoding, flags, **_):
    """In training the noise changes the output from one draw to the next (no dropout here); in
    evaluation there is none."""
    model, task = build(dict_dir, encoding, *flags)
    first, _ = training_step(model, task, seed=1)
    second, _ = training_step(model, task, seed=2)
    assert first.item() != second.item()
    trains_and_decodes(model, task)
    src, lengths, prev, _ = batch(task)
    with torch.no_grad():
        outputs = []
        for seed in (1, 2):
            torch.manual_seed(seed)
            outputs.append(model(src, lengths, prev)[0])
    torch.testing.assert_close(*outputs, rtol=0, atol=0)


def check_padding_side(dict_dir, encoding, flags, **_):
    """A sentence padded on the other side attends as it would alone: the output of its real tokens in
    the padded batch equals its output alone (no NaN from rows of padding), and the model trains."""
    model, task = build(dict_dir, encoding, *flags)
    padding = dict(left_pad_source=task.cfg.left_pad_source, left_pad_target=task.cfg.left_pad_target)
    assert padding != dict(left_pad_source=True, left_pad_target=False)  # the flag changed fairseq's default
    trains_and_decodes(model, task, **padding)
    model.eval()
    src, lengths, prev, _ = batch(task, **padding)
    d = task.source_dictionary
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
        assert torch.isfinite(out).all()
        for i in range(src.size(0)):
            s, p = src[i][src[i].ne(d.pad())][None], prev[i][prev[i].ne(d.pad())][None]
            alone = model(s, lengths[i:i + 1], p)[0][0]
            real = prev[i].ne(d.pad())
            torch.testing.assert_close(out[i][real], alone, rtol=1e-5, atol=1e-5)


def check_bf16(dict_dir, encoding, flags, **_):
    """The model in bfloat16 trains (loss within bfloat16's rounding of float32's) and decodes
    incrementally as in one pass. (fairseq-train's --bf16 is broken in fairseq 0.12 for every model.)"""
    model, task = build(dict_dir, encoding)
    reference, _ = training_step(model, task)
    model.to(torch.bfloat16)
    loss, grads = training_step(model, task)
    assert all(g.dtype == torch.bfloat16 and torch.isfinite(g).all() for g in grads.values())
    assert abs(loss.float() - reference) < 2 ** -5 * reference
    model.eval()
    src, lengths, _, _ = batch(task)
    prev = unpadded_prev(task)
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev,
                                             rtol=0, atol=2 ** -5 * out.abs().max().item())


def check_amp(dict_dir, encoding, flags, data, tmp_path, **_):
    """fairseq-train --amp trains 3 updates (on a CPU fairseq's autocast is CUDA's: float32), and the model
    under the CPU's autocast (bfloat16) trains with a loss within its rounding of float32's."""
    train(data, tmp_path, encoding, *flags)
    model, task = build(dict_dir, encoding)
    reference, _ = training_step(model, task)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, grads = training_step(model, task)
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert abs(loss.float() - reference) < 2 ** -5 * reference


def check_fp16(dict_dir, encoding, flags, **_):
    """On a GPU, the model in float16 trains and decodes incrementally as in one pass."""
    model, task = build(dict_dir, encoding)
    model.cuda().half()
    src, lengths, prev, target = (t.cuda() for t in batch(task))
    model.train()
    loss = loss_of(model, task, src, lengths, prev, target)
    loss.backward()
    assert torch.isfinite(loss)
    model.eval()
    prev = unpadded_prev(task).cuda()
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
        decode_step_by_step_equals_full_pass(model, model.encoder(src, src_lengths=lengths), prev,
                                             rtol=0, atol=2 ** -8 * out.abs().max().item())


UPDATE_FREQ_2 = ("--update-freq", "2")


def check_update_freq(dict_dir, encoding, flags, update_freq_2, **_):
    """fairseq-train --update-freq 2 trains 3 updates and changes every weight it trains."""
    assert tuple(flags) == UPDATE_FREQ_2
    save = update_freq_2(encoding)
    first, last = model_of(save / "checkpoint_1_1.pt"), model_of(save / "checkpoint_last.pt")
    unchanged = [key for key in first if first[key].is_floating_point() and not key.endswith(".version")
                 and torch.equal(first[key], last[key])]
    assert not unchanged


def check_two_processes(dict_dir, encoding, flags, data, tmp_path, update_freq_2, **_):
    """Two fairseq-train processes (gloo) train as one process with --update-freq 2, bit for bit; with
    random positions (drawn per process, so no bitwise equality) they train."""
    port = free_port()
    distributed = ["--distributed-world-size", "2", "--distributed-init-method", f"tcp://127.0.0.1:{port}",
                   "--distributed-no-spawn", "--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp"]
    two = tmp_path / "two"
    ranks = [forked.Command("fairseq-train", train_args(data, two, encoding, *distributed, "--distributed-rank",
                                                        str(rank))) for rank in (0, 1)]
    for rank in ranks:
        done = rank.wait(300)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    one = update_freq_2(encoding)
    two_model, one_model = model_of(two / "checkpoint_last.pt"), model_of(one / "checkpoint_last.pt")
    assert load_checkpoint(str(two / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 3
    if draws_in_training(dict_dir, encoding):
        first = model_of(two / "checkpoint_1_1.pt")
        assert any(not torch.equal(first[k], two_model[k]) for k in first)
    else:
        assert all(torch.equal(two_model[key], one_model[key]) for key in one_model)


def check_finetune(dict_dir, encoding, flags, data, tmp_path, baseline, caplog, **_):
    """From a trained transformer: every weight they share is the transformer's, the encoding's own tables
    are as a fresh model initialises them (one log line says so), and fairseq-train runs 3 updates."""
    model, task = build(str(data), encoding, seed=1)
    fresh, _ = build(str(data), encoding, seed=1)
    state = model_of(baseline)
    with caplog.at_level(logging.INFO):
        model.load_state_dict(dict(state), strict=True, model_cfg=model.cfg)
    loaded = model.state_dict()
    shared = {k for k in loaded if k in state}
    own = set(loaded) - shared - {"encoder.original_max_positions", "decoder.original_max_positions"}
    assert all(torch.equal(loaded[k], state[k]) for k in shared)
    assert all(torch.equal(loaded[k], fresh.state_dict()[k]) for k in own)
    said = [r.message for r in caplog.records if "start as this model initialised them" in r.message]
    assert len(said) == (1 if own else 0), said
    train(data, tmp_path, encoding, *flags)


@dataclass
class Feature:
    name: str  # as the table shows it
    flags: Tuple[str, ...]
    check: Callable
    how: str  # what the check shows, for the table
    gpu: bool = False  # needs CUDA
    start_from: Optional[str] = None  # the flag that starts the run from the transformer's checkpoint


FEATURES = [
    Feature("`--encoder-layerdrop 0.5 --decoder-layerdrop 0.5`",
            ("--encoder-layerdrop", "0.5", "--decoder-layerdrop", "0.5"), check_layerdrop,
            "20 training steps with layers dropped; in evaluation every layer runs (= without LayerDrop)"),
    Feature("`--checkpoint-activations`", ("--checkpoint-activations",), check_checkpointing,
            "gradients = without checkpointing (same dropout, same random positions)"),
    Feature("`--offload-activations`", ("--offload-activations",), check_checkpointing,
            "gradients = without checkpointing"),
    Feature("bfloat16 (`model.bfloat16()`)", (), check_bf16,
            "a training step within bfloat16 rounding; incremental = full pass"),
    Feature("`--amp`", ("--amp",), check_amp,
            "fairseq-train 3 updates; under CPU autocast (bfloat16) a step within its rounding"),
    Feature("`--fp16`", ("--fp16",), check_fp16, "a training step and incremental = full pass on a GPU", gpu=True),
    Feature("`--update-freq 2`", UPDATE_FREQ_2, check_update_freq, "fairseq-train 3 updates"),
    Feature("2 processes (gloo)", (), check_two_processes, "= 1 process with `--update-freq 2`, bit for bit "
            "(random positions, drawn per process: trains)"),
    Feature("`--share-all-embeddings`", ("--share-all-embeddings",), check_share_all,
            "one embedding matrix; trains; incremental = full pass"),
    Feature("`--share-decoder-input-output-embed`", ("--share-decoder-input-output-embed",), check_share_decoder,
            "tied decoder matrix; trains; incremental = full pass"),
    Feature("`--quant-noise-pq 0.2`", ("--quant-noise-pq", "0.2", "--quant-noise-pq-block-size", "8"),
            check_quant_noise, "noise in training only; trains; incremental = full pass"),
    Feature("`--finetune-from-model` a transformer's", (), check_finetune,
            "strict load, new tables as initialised (one log line); fairseq-train 3 updates",
            start_from="--finetune-from-model"),
    Feature("`--restore-file` a transformer's, with the resets",
            ("--reset-optimizer", "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler"), check_finetune,
            "as `--finetune-from-model`", start_from="--restore-file"),
    Feature("`--left-pad-source` (fairseq: sets it False)", ("--left-pad-source",), check_padding_side,
            "a sentence in a right-padded batch = alone; trains"),
    Feature("`--left-pad-target` (fairseq: sets it True)", ("--left-pad-target",), check_padding_side,
            "a target in a left-padded batch = alone, no NaN; trains"),
    Feature("`--cross-self-attention`", ("--cross-self-attention",), check_plain, "trains; incremental = full pass"),
    Feature("`--no-cross-attention`", ("--no-cross-attention",), check_no_cross_attention,
            "trains; incremental = full pass"),
    Feature("`--layernorm-embedding`", ("--layernorm-embedding",), check_layernorm_embedding,
            "trains; incremental = full pass"),
    Feature("`--encoder-normalize-before --decoder-normalize-before`",
            ("--encoder-normalize-before", "--decoder-normalize-before"), check_normalize_before,
            "trains; incremental = full pass"),
]
TRAINED = {check_amp, check_update_freq, check_two_processes, check_finetune}  # run fairseq-train


def refusal(feature, encoding):
    """(flag, why) where the encoding refuses the feature, else None."""
    arch = ENCODINGS[encoding][0]
    for name, why in refused_features(arch).items():
        if f"--{name.replace('_', '-')}" in feature.flags:
            return f"--{name.replace('_', '-')}", why
    return None


# ---- fairseq-train in this process (3 updates of the tiny model) ----

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    reversal_task(root, {"train": 48, "valid": 8}, max_words=10)
    return root / "bin"


@pytest.fixture(scope="module")
def baseline(data, tmp_path_factory):
    """A transformer's checkpoint after 3 updates, to fine-tune from."""
    save = train(data, tmp_path_factory.mktemp("baseline"), "transformer")
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def update_freq_2(data, tmp_path_factory):
    """update_freq_2(encoding) -> the save dir of fairseq-train --update-freq 2 (3 updates) on ``data``, trained
    once per encoding: the run check_update_freq checks and check_two_processes compares two processes with."""
    runs = {}

    def run(encoding):
        if encoding not in runs:
            runs[encoding] = train(data, tmp_path_factory.mktemp("update_freq_2"), encoding, *UPDATE_FREQ_2)
        return runs[encoding]

    return run


def train_args(data, save, encoding, *flags):
    arch, own = ENCODINGS[encoding]
    return [str(data), "--arch", arch, *MODEL, *own, *map(str, flags), "--user-dir", TEST_ENCODING_USER_DIR, "--cpu",
            "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "200", "--max-update", "3", "--seed", "1",
            "--save-dir", str(save), "--save-interval-updates", "1", "--no-epoch-checkpoints",
            "--num-workers", "0", "--no-progress-bar", "--disable-validation"]


def train(data, save, encoding, *flags):
    """fairseq-train, in this process: its command line, parsed and run as fairseq's main does."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, train_args(data, save, encoding, *flags))
    distributed_utils.call_main(convert_namespace_to_omegaconf(args), fairseq_train.main)
    return save


# ---- the matrix ----

CELLS = [(feature, encoding) for feature in FEATURES for encoding in ENCODINGS]


@pytest.mark.parametrize("feature, encoding", CELLS, ids=[f"{f.name.strip('`').split()[0]}-{e}" for f, e in CELLS])
def test_feature_works_or_is_refused_by_name(dict_dir, feature, encoding, request, tmp_path):
    if feature.gpu and not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    arch, _ = ENCODINGS[encoding]
    flags = list(feature.flags)
    if feature.start_from:
        flags = [feature.start_from, str(request.getfixturevalue("baseline")), *flags]
    refused = refusal(feature, encoding)
    if refused:
        flag, why = refused
        with pytest.raises(ValueError) as error:
            build(dict_dir, encoding, *flags)
        assert str(error.value).endswith(f": error: {flag} is not supported by {arch}: {why}")
        return
    context = dict(tmp_path=tmp_path)
    if feature.check in TRAINED:
        context["data"] = request.getfixturevalue("data")
    if feature.check in (check_update_freq, check_two_processes):
        context["update_freq_2"] = request.getfixturevalue("update_freq_2")
    if feature.check is check_finetune:
        context.update(baseline=request.getfixturevalue("baseline"), caplog=request.getfixturevalue("caplog"))
    feature.check(dict_dir, encoding, flags, **context)


def test_refusals_are_the_ones_documented():
    """What is refused today, so that a change to an encoding's refusals is a visible change here."""
    refused = {(feature.name, encoding) for feature, encoding in CELLS if refusal(feature, encoding)}
    assert refused == {("`--cross-self-attention`", encoding) for encoding in ENCODINGS if encoding != "transformer"}


TWO_FORWARDS = [(encoding, flags, training) for encoding in ENCODINGS
                for flags in (("--checkpoint-activations",), ("--checkpoint-activations", "--offload-activations"))
                for training in (True, False)]


@pytest.mark.parametrize("encoding, flags, training", TWO_FORWARDS,
                         ids=[f"{e}-{flags[-1].strip('-')}-{'train' if t else 'eval'}" for e, flags, t in TWO_FORWARDS])
def test_two_forwards_then_one_backward_recompute_each_forward_with_its_own_inputs(dict_dir, encoding, flags,
                                                                                      training):
    """Two forwards of different batches before one backward (R-Drop, consistency losses): the layers
    that activation checkpointing recomputes in the backward see each forward's own position inputs
    (random positions drawn in training; in evaluation with gradients, RoPE's per-sentence factors of
    --rope-scaling auto, sources longer than the training length 5), so every gradient equals the same
    steps without checkpointing, dropout included."""
    own = ["--dropout", "0.1", "--attention-dropout", "0.1"]
    if ENCODINGS[encoding][0] == "rope_transformer" and not training and "--rope-attention" not in ENCODINGS[encoding][1]:
        own += ["--rope-scaling", "auto", "--rope-original-max-positions", "5"]
    model, task = build(dict_dir, encoding, *own, *flags)
    plain, _ = build(dict_dir, encoding, *own)
    plain.load_state_dict(model.state_dict())
    assert all(hasattr(layer, "precheckpoint_forward") for layer in (*model.encoder.layers, *model.decoder.layers))
    grads = []
    for m in (model, plain):
        m.train(training)
        m.zero_grad()
        torch.manual_seed(7)
        first = loss_of(m, task, *batch(task))
        second = loss_of(m, task, *batch(task, sources=(12, 6), targets=(5, 11), seed=4))
        (first + second).backward()
        grads.append({name: p.grad for name, p in m.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], rtol=1e-5, atol=1e-7, msg=lambda m: f"{name}: {m}")


def packaged(encoding):
    """Whether a column's encoding is fairseq's or the plugin's (not one the tests register)."""
    model = ARCH_MODEL_REGISTRY[ENCODINGS[encoding][0]]
    return model.__module__.split(".")[0] in ("fairseq", "fairseq_rope")


def matrix_markdown(columns=None):
    """The table of docs/position_encodings.md: a row per feature, a column per encoding (``columns``;
    default: every packaged one)."""
    columns = [e for e in ENCODINGS if packaged(e)] if columns is None else columns
    head = ["fairseq feature", *columns, "checked by"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for feature in FEATURES:
        cells = [("GPU only" if feature.gpu else "works") if not refusal(feature, e) else "**refused**"
                 for e in columns]
        rows.append("| " + " | ".join([feature.name, *cells, feature.how]) + " |")
    reasons = sorted({refusal(f, e) for f in FEATURES for e in columns if refusal(f, e)})
    notes = [f"Refused: `{flag}`: {why}." for flag, why in reasons]
    return "\n".join([BEGIN, *rows, "", *notes, END])


def test_docs_publish_the_matrix():
    with open(DOC) as f:
        text = f.read()
    assert matrix_markdown() in text, f"docs/position_encodings.md: paste the output of python {__file__}"


if __name__ == "__main__":  # python tests/test_features.py: the table for docs/position_encodings.md
    print(matrix_markdown())
