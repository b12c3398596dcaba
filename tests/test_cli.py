"""fairseq's own command lines with --user-dir fairseq_rope, end to end on a tiny generated corpus."""

import os
import random
import subprocess
import sys

import pytest
import torch

from subword_nmt.apply_bpe import BPE
from subword_nmt.learn_bpe import learn_bpe

from conftest import USER_DIR
from fairseq_rope.checkpoints import UnsafeCheckpointError, load_checkpoint

BIN = os.path.dirname(sys.executable)
TINY = ("--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 64 --decoder-embed-dim 64 "
        "--encoder-ffn-embed-dim 128 --decoder-ffn-embed-dim 128 --encoder-attention-heads 4 "
        "--decoder-attention-heads 4 --share-all-embeddings").split()
TRAIN = [*TINY, "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "5e-3", "--lr-scheduler", "inverse_sqrt",
         "--warmup-updates", "10", "--warmup-init-lr", "1e-7", "--criterion", "label_smoothed_cross_entropy",
         "--label-smoothing", "0.1", "--max-tokens", "2000", "--cpu", "--seed", "1", "--no-progress-bar",
         "--log-interval", "10", "--user-dir", USER_DIR, "--num-workers", "0"]


def run(tool, *args, check=True, **kwargs):
    result = subprocess.run([os.path.join(BIN, tool), *map(str, args)], capture_output=True, text=True, **kwargs)
    if check and result.returncode:
        raise AssertionError(f"{tool} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A toy translation task (reverse the word order), BPE'd with subword-nmt, fairseq-preprocess'd."""
    root = tmp_path_factory.mktemp("cli")
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    raw = {}
    for split, n in [("train", 600), ("valid", 20), ("test", 25)]:
        sentences = [rng.choices(words, k=rng.randint(2, 10)) for _ in range(n)]
        raw[split, "src"] = [" ".join(s) for s in sentences]
        raw[split, "tgt"] = [" ".join(reversed(s)) for s in sentences]
    with open(root / "codes", "w") as codes:
        learn_bpe(raw["train", "src"] + raw["train", "tgt"], codes, num_symbols=15)
    with open(root / "codes") as codes:
        bpe = BPE(codes)
    for (split, lang), lines in raw.items():
        (root / f"{split}.{lang}").write_text("".join(bpe.process_line(line) + "\n" for line in lines))
    run("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
        "--trainpref", root / "train", "--validpref", root / "valid", "--testpref", root / "test",
        "--destdir", root / "bin", "--workers", "1")
    return root


@pytest.fixture(scope="module")
def trained(data):
    """rope_transformer trained 40 updates, validating with --eval-bleu (numpy in the checkpoint)."""
    save = data / "rope"
    run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "40",
        "--save-dir", save, "--eval-bleu", "--eval-bleu-args", '{"beam": 2}', "--best-checkpoint-metric", "bleu",
        "--maximize-best-checkpoint-metric")
    return save


def test_checkpoints_load_weights_only(trained):
    from fairseq_rope.checkpoints import allowed_names
    allowed = allowed_names()
    for checkpoint in ("checkpoint_last.pt", "checkpoint_best.pt", "checkpoint1.pt"):
        needed = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(trained / checkpoint)))
        assert needed <= allowed, needed - allowed
    state = torch.load(trained / "checkpoint_last.pt", weights_only=True)  # the plugin allowlisted what it needs
    assert state["cfg"]["model"].arch == "rope_transformer"
    assert not any("cached" in key or "embed_positions" in key for key in state["model"])
    assert state["extra_state"]["metrics"]  # --eval-bleu's numpy counts are in there


def test_generate_beam4_and_interactive(data, trained):
    out = run("fairseq-generate", data / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
              "--beam", "4", "--lenpen", "0.6", "--batch-size", "8", "--required-batch-size-multiple", "1", "--cpu",
              "--remove-bpe")
    hyps = [line for line in out.stdout.splitlines() if line.startswith("H-")]
    assert len(hyps) == 25, out.stderr[-2000:]
    assert "Translated 25 sentences" in out.stderr

    assert all("@@" not in line for line in hyps)


def test_validate(data, trained):
    out = run("fairseq-validate", data / "bin", "--task", "translation", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
              "--valid-subset", "test", "--max-tokens", "1000", "--cpu")
    assert "valid on 'test' subset" in out.stdout + out.stderr


def test_python_api_translates_like_fairseq_interactive(data, trained):
    """load_translator: raw text -> Moses -> BPE -> beam 4 (lenpen 0.6) -> de-BPE -> detokenized,
    the same strings fairseq-interactive prints with the same settings."""
    from fairseq_rope.hub import load_translator

    sentences = ["w1 w2 w3", "w7 w17 w8 w9 w10 w21"]
    out = run("fairseq-interactive", data / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
              "--beam", "4", "--lenpen", "0.6", "--source-lang", "src", "--target-lang", "tgt", "--cpu",
              "--bpe", "subword_nmt", "--bpe-codes", data / "codes", "--tokenizer", "moses",
              "--max-len-a", "1.2", "--max-len-b", "10", input="\n".join(sentences) + "\n")
    expected = [line.split("\t")[2] for line in out.stdout.splitlines() if line.startswith("D-")]
    assert len(expected) == 2

    mt = load_translator(trained, data / "bin", checkpoint_file="checkpoint_last.pt", bpe_codes=data / "codes",
                         source_lang="src", target_lang="tgt")
    assert mt.translate(sentences) == expected
    assert mt.translate(sentences[0]) == expected[0]
    with pytest.raises(FileNotFoundError, match="checkpoint not found: .*missing.pt"):
        load_translator(trained, data / "bin", checkpoint_file="missing.pt", source_lang="src", target_lang="tgt")
    with pytest.raises(FileNotFoundError, match="dictionary for 'en'"):
        load_translator(trained, data / "bin", checkpoint_file="checkpoint_last.pt")


def test_resume_training_from_checkpoint_last(data, trained, tmp_path):
    save = tmp_path / "resume"
    save.mkdir()
    (save / "checkpoint_last.pt").write_bytes((trained / "checkpoint_last.pt").read_bytes())
    out = run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "50",
              "--save-dir", save)
    log = out.stdout + out.stderr
    assert "Loaded checkpoint" in log and "@ 40 updates" in log, log[-3000:]
    assert load_checkpoint(save / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == 50


def test_finetune_rope_from_baseline_transformer(data, tmp_path):
    """sinusoidal -> RoPE: fairseq-train --finetune-from-model with a trained `transformer` checkpoint."""
    run("fairseq-train", data / "bin", "--arch", "transformer", *TRAIN, "--max-update", "5",
        "--save-dir", tmp_path / "base", "--no-epoch-checkpoints")
    out = run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "5",
              "--save-dir", tmp_path / "ft", "--no-epoch-checkpoints",
              "--finetune-from-model", tmp_path / "base" / "checkpoint_last.pt")
    assert "Loaded checkpoint" in out.stdout + out.stderr
    base = load_checkpoint(tmp_path / "base" / "checkpoint_last.pt")["model"]
    ft = load_checkpoint(tmp_path / "ft" / "checkpoint_last.pt")["model"]
    assert set(ft) == {key for key in base if "embed_positions" not in key}


class RunsCode:
    """A pickle that would run a shell command when loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_that_would_run_code_is_refused(data, tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    with open(evil, "wb") as f:
        torch.save({"model": {}, "args": RunsCode(marker)}, f)
    with pytest.raises(UnsafeCheckpointError, match=r"evil\.pt: refusing to load this checkpoint: its pickle needs posix\.system"):
        load_checkpoint(evil)
    out = run("fairseq-generate", data / "bin", "--user-dir", USER_DIR, "--path", evil, "--cpu", check=False)
    assert out.returncode != 0
    assert "Weights only load failed" in out.stderr and "system" in out.stderr
    assert not marker.exists()
