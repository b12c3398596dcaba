"""Checkpoints saved by fairseq-rope 0.4.0 (tests/fixtures/v0.4.0, made by its make.py with that release) load
with weights_only into the current code and translate as they did: the same beam-4 hypotheses, the same scores."""

import json
import pathlib

import pytest
import torch

from conftest import USER_DIR
from conftest import run_tool as run
from fairseq_rope_checkpoints import allowed_names

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "v0.4.0"
MODELS = ["rope", "rope_linear", "rpe", "t5bias", "alibi"]


def hypotheses(stdout):
    hyps = {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            key, score, tokens = line.split("\t")
            hyps.setdefault(key[2:], []).append({"score": float(score), "tokens": tokens})
    return hyps


@pytest.mark.parametrize("model", MODELS)
def test_a_040_checkpoint_translates_as_it_did(model):
    checkpoint = FIXTURES / f"{model}.pt"
    assert set(torch.serialization.get_unsafe_globals_in_checkpoint(str(checkpoint))) <= allowed_names()
    out = run("fairseq-generate", FIXTURES, "--user-dir", USER_DIR, "--path", checkpoint, "--beam", "4",
              "--nbest", "4", "--lenpen", "0.6", "--batch-size", "12", "--required-batch-size-multiple", "1",
              "--gen-subset", "test", "--cpu").stdout
    got, want = hypotheses(out), json.loads((FIXTURES / f"{model}.expected.json").read_text())
    assert got.keys() == want.keys()
    for key in want:
        assert [h["tokens"] for h in got[key]] == [h["tokens"] for h in want[key]], key
        assert [h["score"] for h in got[key]] == pytest.approx([h["score"] for h in want[key]], abs=1e-4), key
