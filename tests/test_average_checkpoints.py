"""fairseq-rope-average through its command line (its main(argv), in this process), on small
fairseq-shaped checkpoints."""

import argparse
import collections
import os

import pytest
import torch

from conftest import run_main
from fairseq_rope_checkpoints import load_checkpoint
from fairseq_rope_cli import average


def make_state(value=0.0, arch="transformer", names=("encoder.w", "decoder.w"), shape=(3, 4), seed=None):
    """A checkpoint laid out like fairseq's: model / cfg (legacy Namespace) / extra_state / optimizer_history."""
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    model = collections.OrderedDict()
    for name in names:
        model[name] = (torch.randn(*shape, generator=gen) if gen is not None else torch.full(shape, float(value)))
    model["decoder.half"] = (torch.randn(5, generator=gen) if gen is not None else torch.full((5,), float(value))).half()
    model["decoder.version"] = torch.tensor([int(value) if gen is None else int(seed) * 7 + 1])
    return {
        "model": model,
        "cfg": {"model": argparse.Namespace(arch=arch, _name=arch), "common": {"seed": 1}},
        "extra_state": {"train_iterator": {"epoch": 1}, "marker": f"value={value} seed={seed}"},
        "optimizer_history": [{"num_updates": int(value)}],
        "last_optimizer_state": None,
    }


def save(path, state):
    torch.save(state, path)
    return str(path)


def run(*args, ok=True):
    proc = run_main(average.main, *args)
    if ok:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0, f"expected a failure, got success:\n{proc.stderr}"
    return proc


def load(path):
    return load_checkpoint(str(path))


def test_mean_of_explicit_files_and_other_keys_from_first(tmp_path):
    states = [make_state(seed=s) for s in (1, 2, 3)]
    paths = [save(tmp_path / f"c{i}.pt", st) for i, st in enumerate(states)]
    out = tmp_path / "avg.pt"
    run("--inputs", *paths, "--output", out)
    avg = load(out)
    for name in ("encoder.w", "decoder.w"):
        expected = sum(st["model"][name] for st in states) / 3
        torch.testing.assert_close(avg["model"][name], expected, rtol=0, atol=1e-6)
    # float16 is accumulated (and saved) in float32
    assert avg["model"]["decoder.half"].dtype == torch.float32
    expected_half = sum(st["model"]["decoder.half"].float() for st in states) / 3
    torch.testing.assert_close(avg["model"]["decoder.half"], expected_half, rtol=0, atol=1e-6)
    # integers are floor-divided
    ints = [st["model"]["decoder.version"] for st in states]
    assert avg["model"]["decoder.version"].dtype == torch.int64
    assert torch.equal(avg["model"]["decoder.version"], sum(ints) // 3)
    # everything but the model comes from the first input
    assert avg["extra_state"] == states[0]["extra_state"]
    assert avg["optimizer_history"] == states[0]["optimizer_history"]
    assert avg["cfg"]["model"].arch == "transformer"
    assert list(avg["model"].keys()) == list(states[0]["model"].keys())


def test_integer_floor_division(tmp_path):
    a, b = make_state(1.0), make_state(2.0)
    a["model"]["decoder.version"] = torch.tensor([1, 2, 3, -1])
    b["model"]["decoder.version"] = torch.tensor([2, 2, 4, 0])
    out = tmp_path / "avg.pt"
    run("--inputs", save(tmp_path / "a.pt", a), save(tmp_path / "b.pt", b), "--output", out)
    assert load(out)["model"]["decoder.version"].tolist() == [1, 2, 3, -1]  # [3,4,7,-1] // 2


def test_selection_by_update_and_upper_bound(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for epoch, update in [(1, 10), (1, 20), (2, 30), (2, 40), (3, 50)]:
        save(ckpt / f"checkpoint_{epoch}_{update}.pt", make_state(update))
    save(ckpt / "checkpoint_last.pt", make_state(999))
    save(ckpt / "checkpoint3.pt", make_state(777))
    out = tmp_path / "avg.pt"
    run("--inputs", ckpt, "--num-update-checkpoints", 2, "--output", out)
    avg = load(out)
    assert torch.all(avg["model"]["encoder.w"] == 45.0)  # mean of 50 and 40
    assert avg["extra_state"]["marker"] == "value=50 seed=None"  # the newest selected comes first
    run("--inputs", ckpt, "--num-update-checkpoints", 3, "--checkpoint-upper-bound", 35, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 20.0)  # mean of 30, 20, 10
    proc = run("--inputs", ckpt, "--num-update-checkpoints", 6, "--output", out, ok=False)
    assert "found 5" in proc.stderr and "need 6" in proc.stderr


def test_selection_by_epoch(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for epoch in range(1, 6):
        save(ckpt / f"checkpoint{epoch}.pt", make_state(epoch))
    save(ckpt / "checkpoint_5_100.pt", make_state(100))
    out = tmp_path / "avg.pt"
    run("--inputs", ckpt, "--num-epoch-checkpoints", 3, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 4.0)  # 5, 4, 3
    run("--inputs", ckpt, "--num-epoch-checkpoints", 3, "--checkpoint-upper-bound", 3, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 2.0)  # 3, 2, 1
    proc = run("--inputs", ckpt, "--num-epoch-checkpoints", 2, "--num-update-checkpoints", 2, "--output", out, ok=False)
    assert "not allowed with" in proc.stderr


def test_last_checkpoints_are_chosen_by_number_across_digit_boundaries(tmp_path):
    """Update 1000 comes after 950 and epoch 10 after 9, although their names sort before them."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for update in (900, 950, 1000, 1050):
        save(ckpt / f"checkpoint_7_{update}.pt", make_state(update))
    for epoch in (8, 9, 10, 11):
        save(ckpt / f"checkpoint{epoch}.pt", make_state(epoch))
    out = tmp_path / "avg.pt"
    run("--inputs", ckpt, "--num-update-checkpoints", 2, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 1025.0)  # mean of 1050 and 1000
    run("--inputs", ckpt, "--num-update-checkpoints", 3, "--checkpoint-upper-bound", 1000, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 950.0)  # 1000, 950, 900
    run("--inputs", ckpt, "--num-epoch-checkpoints", 2, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 10.5)  # 11 and 10
    run("--inputs", ckpt, "--num-epoch-checkpoints", 2, "--checkpoint-upper-bound", 10, "--output", out)
    assert torch.all(load(out)["model"]["encoder.w"] == 9.5)  # 10 and 9


@pytest.mark.parametrize(
    "other, message",
    [
        (dict(names=("encoder.w", "decoder.other")), "parameter names differ"),
        (dict(shape=(3, 5)), "has shape (3, 4)"),
        (dict(arch="rope_transformer"), "architectures differ"),
    ],
)
def test_mismatched_inputs_are_refused(tmp_path, other, message):
    a = save(tmp_path / "a.pt", make_state(1.0))
    b = save(tmp_path / "b.pt", make_state(2.0, **other))
    out = tmp_path / "avg.pt"
    proc = run("--inputs", a, b, "--output", out, ok=False)
    assert message in proc.stderr
    assert a in proc.stderr and b in proc.stderr
    assert not out.exists()


def test_output_never_replaces_an_input(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    a = save(ckpt / "checkpoint_1_10.pt", make_state(10))
    b = save(ckpt / "checkpoint_1_20.pt", make_state(20))
    before = open(a, "rb").read()
    proc = run("--inputs", a, b, "--output", a, ok=False)
    assert "refusing to overwrite an input" in proc.stderr
    link = tmp_path / "link.pt"
    os.symlink(a, link)  # the same file under another name
    proc = run("--inputs", a, b, "--output", link, ok=False)
    assert "refusing to overwrite an input" in proc.stderr
    proc = run("--inputs", ckpt, "--num-update-checkpoints", 2, "--output", b, ok=False)
    assert "refusing to overwrite an input" in proc.stderr
    assert open(a, "rb").read() == before
    assert sorted(os.listdir(ckpt)) == ["checkpoint_1_10.pt", "checkpoint_1_20.pt"]  # no temporary left


def test_missing_input_is_named(tmp_path):
    a = save(tmp_path / "a.pt", make_state(1.0))
    proc = run("--inputs", a, tmp_path / "nope.pt", "--output", tmp_path / "avg.pt", ok=False)
    assert "nope.pt" in proc.stderr
