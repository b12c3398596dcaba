"""The other position encodings through fairseq's command lines: train, reload weights_only, average,
generate with beam 4 batched and one by one, exactly as rope_transformer."""

import pytest
import torch

from conftest import CLI_TRAIN, USER_DIR, reversal_task
from conftest import run_tool as run
from fairseq_rope_checkpoints import allowed_names
from test_cli import hypotheses, interactive


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("encodings_cli")
    raw = reversal_task(root, {"train": 600, "valid": 20, "test": 25}, max_words=10)
    return root, raw


@pytest.mark.parametrize("arch, flags", [("rpe_transformer", []), ("t5bias_transformer", []),
                                         ("alibi_transformer", ["--add-token-positional-embeddings"])])
def test_train_average_and_generate(data, arch, flags):
    """150 updates (epoch checkpoints every 10 of 30 epochs); every checkpoint loads with
    weights_only; the last 2 averaged translate the test set with beam 4, batched as one by one,
    and a trained model gives different outputs for different inputs."""
    root, raw = data
    save = root / arch
    run("fairseq-train", root / "bin", "--arch", arch, *flags, *CLI_TRAIN, "--max-update", "150",
        "--save-dir", save, "--save-interval", "10", "--log-interval", "50")
    for checkpoint in sorted(save.glob("checkpoint*.pt")):
        assert set(torch.serialization.get_unsafe_globals_in_checkpoint(str(checkpoint))) <= allowed_names()
    state = torch.load(save / "checkpoint_last.pt", weights_only=True)
    assert state["cfg"]["model"].arch == arch
    run("fairseq-rope-average", "--inputs", save, "--num-epoch-checkpoints", "2", "--output", save / "avg.pt")
    averaged = torch.load(save / "avg.pt", weights_only=True)["model"]
    last2 = [torch.load(save / f"checkpoint{epoch}.pt", weights_only=True)["model"] for epoch in (20, 30)]
    for key, value in averaged.items():
        torch.testing.assert_close(value, (last2[0][key] + last2[1][key]) / 2, rtol=1e-6, atol=1e-7)

    out = run("fairseq-generate", root / "bin", "--user-dir", USER_DIR, "--path", save / "avg.pt", "--beam", "4",
              "--lenpen", "0.6", "--cpu", "--batch-size", "8", "--required-batch-size-multiple", "1")
    assert "Translated 25 sentences" in out.stderr
    batched = {i: h[0] for i, h in hypotheses(out.stdout).items()}
    assert len(set(batched.values())) > 15
    bpe_sources = (root / "test.src").read_text().splitlines()
    one_by_one = hypotheses(interactive(root, save / "avg.pt", bpe_sources, "--beam", "4", "--lenpen", "0.6").stdout)
    assert {i: h[0] for i, h in one_by_one.items()} == batched
