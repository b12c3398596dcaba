"""Checkpoints with numpy arrays (fairseq's --eval-bleu counts) load weights-only across numpy 1.26 and 2."""

import argparse
import json
import os
import subprocess
import sys
import zipfile

import numpy
import pytest
import torch

from fairseq_rope_checkpoints import load_checkpoint

NUMPY_1 = "numpy==1.26.4"
# fairseq imports scikit-learn, which imports scipy: the newest scipy (1.18) needs numpy 2, so the numpy 1
# environment gets the last scipy that runs on numpy 1.26 beside it, as a user's numpy-1 environment has
SCIPY_FOR_NUMPY_1 = "scipy==1.17.1"


@pytest.fixture(scope="module")
def numpy_1(tmp_path_factory):
    """A directory that puts numpy 1.26 (and a scipy for it) first on PYTHONPATH (pip from the package index)."""
    target = tmp_path_factory.mktemp("numpy1")
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                             "--only-binary=:all:", "--target", str(target), NUMPY_1, SCIPY_FOR_NUMPY_1],
                            capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"could not install {NUMPY_1} from the package index: {result.stderr.strip()[-300:]}")
    return target


def fairseq_like_checkpoint():
    return {"model": {"w": torch.ones(2)}, "args": argparse.Namespace(arch="rope_transformer"),
            "extra_state": {"metrics": {"_bleu_counts_0": numpy.array([3, 2, 1], dtype=numpy.int64)}}}


def test_numpy_arrays_load_weights_only_across_numpy_1_and_2(numpy_1, tmp_path):
    """numpy 2 pickles arrays through numpy._core.multiarray._reconstruct, numpy 1.x through
    numpy.core.multiarray._reconstruct: a checkpoint written under either loads under the other."""
    assert numpy.__version__.startswith("2.")
    written_by_2, written_by_1 = tmp_path / "numpy2.pt", tmp_path / "numpy1.pt"
    torch.save(fairseq_like_checkpoint(), written_by_2)
    script = f"""
import numpy, torch
assert numpy.__version__ == "{NUMPY_1.split('==')[1]}", numpy.__version__
import fairseq_rope
from fairseq_rope_checkpoints import load_checkpoint
state = load_checkpoint({str(written_by_2)!r})
assert state["extra_state"]["metrics"]["_bleu_counts_0"].tolist() == [3, 2, 1]
assert state["args"].arch == "rope_transformer"
state["extra_state"]["metrics"]["_bleu_counts_0"] = numpy.array([4, 5], dtype=numpy.int64)
torch.save(state, {str(written_by_1)!r})
torch.load({str(written_by_1)!r}, weights_only=True)  # fairseq's own load after importing the plugin
print("ok")
"""
    env = dict(os.environ, PYTHONPATH=str(numpy_1))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
    state = load_checkpoint(written_by_1)
    assert state["extra_state"]["metrics"]["_bleu_counts_0"].tolist() == [4, 5]
    for path, name in ((written_by_1, b"numpy.core.multiarray"), (written_by_2, b"numpy._core.multiarray")):
        with zipfile.ZipFile(path) as archive:
            pickle = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
        assert name in pickle, path  # each file names _reconstruct the way its numpy does


@pytest.mark.parametrize("iterations_in_epoch, name", [(0, "checkpoint_1_16.pt"), (3, "checkpoint_2_16.pt")])
def test_final_name_is_the_epoch_the_last_update_belongs_to(tmp_path, iterations_in_epoch, name):
    """fairseq saves the state after an epoch's last update with the next epoch and 0 iterations in
    it: that update belongs to the epoch before; mid-epoch, to the epoch it names."""
    from conftest import run_main
    from fairseq_rope_cli import checkpoint

    state = {"model": {}, "optimizer_history": [{"num_updates": 16}],
             "extra_state": {"train_iterator": {"epoch": 2, "iterations_in_epoch": iterations_in_epoch}}}
    torch.save(state, tmp_path / "checkpoint_last.pt")
    proc = run_main(checkpoint.main, "final-name", tmp_path / "checkpoint_last.pt", "--max-update", 16)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"name": name}, proc
    proc = run_main(checkpoint.main, "final-name", tmp_path / "checkpoint_last.pt", "--max-update", 20)
    assert json.loads(proc.stdout) == {"name": None}  # the run did not reach --max-update
