"""The other position encodings through fairseq's command lines: train, reload weights_only, average,
generate with beam 4 batched and one by one, exactly as rope_transformer."""

import pytest
import torch

from conftest import CLI_TRAIN, USER_DIR, reversal_subset
from conftest import run_tool as run
from fairseq_rope_checkpoints import allowed_names
from test_cli import hypotheses, interactive

N_TEST = 25


@pytest.fixture(scope="module")
def data(reversal_models, tmp_path_factory):
    """The reversal task of conftest.reversal_models with a test set of its first 25 test sentences
    (conftest.reversal_subset): (this data's root, the reversal models' root)."""
    root, _ = reversal_models
    return reversal_subset(root, tmp_path_factory.mktemp("encodings_cli"), N_TEST), root


def epoch_checkpoints(save):
    """{epoch: path} of fairseq's checkpoint<epoch>.pt files in ``save``."""
    return {int(path.stem[len("checkpoint"):]): path for path in save.glob("checkpoint[0-9]*.pt")}


@pytest.mark.parametrize("arch, trained", [("rpe_transformer", "rpe"), ("t5bias_transformer", "t5bias"),
                                           ("alibi_transformer", None)])
def test_train_average_and_generate(data, tmp_path, arch, trained):
    """Trained with fairseq-train: Shaw's RPE and T5's bias are conftest.reversal_models' (250 updates,
    an epoch checkpoint every 5 epochs, the last two kept), ALiBi (with token positions) trained here (150
    updates, an epoch checkpoint every 10). Every checkpoint loads with weights_only; the last 2 epoch
    checkpoints averaged translate 25 test sentences with beam 4, batched as one by one, and a trained
    model gives different outputs for different inputs."""
    own, root = data
    if trained:
        save = root / trained
    else:
        save = tmp_path / arch
        run("fairseq-train", own / "bin", "--arch", arch, "--add-token-positional-embeddings", *CLI_TRAIN,
            "--max-update", "150", "--save-interval", "10", "--save-dir", save, "--log-interval", "50")
    for checkpoint in sorted(save.glob("checkpoint*.pt")):
        assert set(torch.serialization.get_unsafe_globals_in_checkpoint(str(checkpoint))) <= allowed_names()
    state = torch.load(save / "checkpoint_last.pt", weights_only=True)
    assert state["cfg"]["model"].arch == arch
    epochs = epoch_checkpoints(save)
    assert len(epochs) >= 2, sorted(epochs)
    average = tmp_path / "avg.pt"
    run("fairseq-rope-average", "--inputs", save, "--num-epoch-checkpoints", "2", "--output", average)
    averaged = torch.load(average, weights_only=True)["model"]
    last2 = [torch.load(epochs[epoch], weights_only=True)["model"] for epoch in sorted(epochs)[-2:]]
    for key, value in averaged.items():
        torch.testing.assert_close(value, (last2[0][key] + last2[1][key]) / 2, rtol=1e-6, atol=1e-7)

    out = run("fairseq-generate", own / "bin", "--user-dir", USER_DIR, "--path", average, "--beam", "4",
              "--lenpen", "0.6", "--cpu", "--batch-size", "8", "--required-batch-size-multiple", "1")
    assert f"Translated {N_TEST} sentences" in out.stderr
    batched = {i: h[0] for i, h in hypotheses(out.stdout).items()}
    assert len(set(batched.values())) > 15
    bpe_sources = (own / "test.src").read_text().splitlines()
    one_by_one = hypotheses(interactive(own, average, bpe_sources, "--beam", "4", "--lenpen", "0.6").stdout)
    assert {i: h[0] for i, h in one_by_one.items()} == batched
