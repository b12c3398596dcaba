"""fairseq's own command lines with --user-dir fairseq_rope, end to end on a tiny generated corpus."""

import math
import os
import re

import pytest
import torch

from conftest import CLI_TRAIN, REVERSAL_UPDATES, USER_DIR, reversal_subset
from conftest import run_tool as run
from fairseq_rope_checkpoints import UnsafeCheckpointError, load_checkpoint

TRAIN = [*CLI_TRAIN, "--log-interval", "10"]


N_TEST = 25


@pytest.fixture(scope="module")
def data(reversal_models, tmp_path_factory):
    """The toy task of conftest.reversal_models (reverse the word order; BPE'd with subword-nmt) with a test
    set of its first 25 test sentences (conftest.reversal_subset)."""
    return reversal_subset(reversal_models[0], tmp_path_factory.mktemp("cli"), N_TEST)


TRAINED_UPDATES = REVERSAL_UPDATES


@pytest.fixture(scope="module")
def trained(reversal_models):
    """rope_transformer trained 250 updates (conftest.reversal_models' "interleaved": enough to reverse short
    inputs in part, so that outputs differ between inputs), validating once at the end with --eval-bleu
    (numpy in the checkpoint). Read only."""
    return reversal_models[0] / "interleaved"


def interactive(data, checkpoint, lines, *flags):
    """fairseq-interactive on ``lines``: its (H, D) lines' texts, in input order."""
    out = run("fairseq-interactive", data / "bin", "--user-dir", USER_DIR, "--path", checkpoint, "--cpu",
              "--source-lang", "src", "--target-lang", "tgt", *flags, input="\n".join(lines) + "\n")
    return out


def hypotheses(stdout, prefix="H-"):
    """{sentence id: [text of each hypothesis line, best first]} of fairseq-generate/-interactive output."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith(prefix):
            name, _, text = line.split("\t")
            found.setdefault(int(name[len(prefix):]), []).append(text)
    return found


def test_checkpoints_load_weights_only(trained):
    from fairseq_rope_checkpoints import allowed_names
    allowed = allowed_names()
    for checkpoint in ("checkpoint_last.pt", "checkpoint_best.pt"):
        needed = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(trained / checkpoint)))
        assert needed <= allowed, needed - allowed
    state = torch.load(trained / "checkpoint_last.pt", weights_only=True)  # the plugin allowlisted what it needs
    assert state["cfg"]["model"].arch == "rope_transformer"
    assert not any("cached" in key or "embed_positions" in key for key in state["model"])
    assert state["extra_state"]["metrics"]  # --eval-bleu's numpy counts are in there


def test_generate_beam4_nbest_and_interactive_agree(data, trained):
    """fairseq-generate really searches 4 beams (4 distinct n-best hypotheses per sentence, the best
    one as with --nbest 1) and prints, batched by 8, what fairseq-interactive prints one by one."""
    common = ["--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt", "--beam", "4", "--lenpen", "0.6", "--cpu"]
    out = run("fairseq-generate", data / "bin", *common, "--batch-size", "8", "--required-batch-size-multiple", "1",
              "--nbest", "4")
    assert "Translated 25 sentences" in out.stderr
    nbest = hypotheses(out.stdout)
    assert sorted(nbest) == list(range(25)) and all(len(set(h)) == 4 for h in nbest.values())
    best = hypotheses(run("fairseq-generate", data / "bin", *common, "--batch-size", "8",
                          "--required-batch-size-multiple", "1").stdout)
    assert {i: h[0] for i, h in nbest.items()} == {i: h[0] for i, h in best.items()}
    assert len({h[0] for h in best.values()}) > 20  # a trained model: different inputs, different outputs

    sources = (data / "test.src").read_text().splitlines()
    out = interactive(data, trained / "checkpoint_last.pt", sources, "--beam", "4", "--lenpen", "0.6",
                      "--batch-size", "1", "--buffer-size", "1")
    assert hypotheses(out.stdout) == best


def test_validate_reports_the_models_loss(data, trained):
    """fairseq-validate's nll_loss on the test subset equals the teacher-forced NLL (base 2, per target
    token) computed here from the model in evaluation mode (dropout off), over all 25 sentences
    (fairseq's default --required-batch-size-multiple 8 would drop one: bsz 24, nll_loss 0.93)."""
    out = run("fairseq-validate", data / "bin", "--task", "translation", "--user-dir", USER_DIR,
              "--path", trained / "checkpoint_last.pt", "--valid-subset", "test", "--max-tokens", "1000", "--cpu",
              "--required-batch-size-multiple", "1")
    log = out.stdout + out.stderr
    reported = re.search(r"valid on 'test' subset \| loss [0-9.]+ \| nll_loss ([0-9.]+) .*\| bsz 25$", log, re.M)
    assert reported, log[-2000:]

    from fairseq import checkpoint_utils
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(trained / "checkpoint_last.pt")], arg_overrides={"data": str(data / "bin")})
    model = models[0].eval()
    task.load_dataset("test")
    dataset = task.dataset("test")
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    with torch.no_grad():
        lprobs = model.get_normalized_probs(model(**batch["net_input"]), log_probs=True)
    target = batch["target"]
    real = target.ne(task.target_dictionary.pad())
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)[real]
    expected = (nll.sum() / real.sum() / math.log(2)).item()
    assert abs(float(reported.group(1)) - expected) < 6e-4, (reported.group(1), expected)  # printed to 3 decimals


def test_python_api_translates_like_fairseq_interactive(data, trained):
    """load_translator: raw text -> Moses -> BPE -> beam 4 (lenpen 0.6) -> de-BPE -> detokenized,
    the same strings fairseq-interactive prints with the same settings."""
    from fairseq_rope.hub import load_translator

    sentences = ["w1 w2 w3", "w7 w17 w8 w9 w10 w21", "w3 w4 w5 w6", "w11 w12"]
    out = interactive(data, trained / "checkpoint_last.pt", sentences, "--beam", "4", "--lenpen", "0.6",
                      "--bpe", "subword_nmt", "--bpe-codes", data / "codes", "--tokenizer", "moses",
                      "--buffer-size", "4", "--batch-size", "4")
    expected = [h[0] for _, h in sorted(hypotheses(out.stdout, "D-").items())]
    assert len(expected) == 4 and len(set(expected)) == 4  # trained: outputs differ between inputs

    # languages from the checkpoint's task (src-tgt here), fairseq's length limits (0 x source + 200),
    # the device torch has (a CPU here)
    mt = load_translator(trained, data / "bin", checkpoint_file="checkpoint_last.pt", bpe_codes=data / "codes",
                         backend="fairseq")
    assert (mt.task.source_dictionary, mt.task.cfg.source_lang, mt.task.cfg.target_lang)[1:] == ("src", "tgt")
    assert (mt.cfg.generation.max_len_a, mt.cfg.generation.max_len_b) == (0, 200)
    assert mt.device == torch.device("cpu")
    assert mt.translate(sentences) == expected
    assert mt.translate(sentences[0]) == expected[0]
    with pytest.raises(FileNotFoundError, match="checkpoint not found: .*missing.pt"):
        load_translator(trained, data / "bin", checkpoint_file="missing.pt", source_lang="src", target_lang="tgt")
    with pytest.raises(FileNotFoundError, match="dictionary for 'en'"):
        load_translator(trained, data / "bin", checkpoint_file="checkpoint_last.pt", source_lang="en",
                        target_lang="de")


def test_python_api_device_follows_torch(data, trained, monkeypatch):
    """Without device=, the model goes to "cuda" when torch sees a GPU; device= chooses."""
    from fairseq_rope import hub

    moved = []
    monkeypatch.setattr(hub.Translator, "to", lambda self, device: moved.append(device) or self)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    load = dict(checkpoint_file="checkpoint_last.pt", tokenizer=None, backend="fairseq")
    hub.load_translator(trained, data / "bin", **load)
    hub.load_translator(trained, data / "bin", **load, device="cpu")
    assert moved == ["cuda", "cpu"]


def test_python_api_with_sentencepiece_translates_like_fairseq_interactive(data, tmp_path):
    """load_translator(sentencepiece_model=...): a model trained on sentencepiece pieces translates raw
    text as fairseq-interactive --bpe sentencepiece does."""
    import sentencepiece as spm
    from fairseq_rope.hub import load_translator

    raw = {(split, lang): [line.replace("@@ ", "") for line in (data / f"{split}.{lang}").read_text().splitlines()]
           for split in ("train", "valid", "test") for lang in ("src", "tgt")}
    spm.SentencePieceTrainer.train(sentence_iterator=iter(raw["train", "src"] + raw["train", "tgt"]),
                                   model_prefix=str(tmp_path / "spm"), vocab_size=34, model_type="bpe",
                                   character_coverage=1.0)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    for (split, lang), lines in raw.items():
        (tmp_path / f"{split}.{lang}").write_text("".join(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines))
    run("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
        "--trainpref", tmp_path / "train", "--validpref", tmp_path / "valid", "--destdir", tmp_path / "bin",
        "--workers", "1")
    run("fairseq-train", tmp_path / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "200",
        "--save-dir", tmp_path / "model", "--no-epoch-checkpoints", "--disable-validation")
    sentences = ["w1 w2 w3", "w7 w17 w8 w9 w10 w21", "w3 w4 w5 w6", "w11 w12"]
    out = run("fairseq-interactive", tmp_path / "bin", "--user-dir", USER_DIR, "--path",
              tmp_path / "model" / "checkpoint_last.pt", "--beam", "4", "--lenpen", "0.6", "--source-lang", "src",
              "--target-lang", "tgt", "--cpu", "--bpe", "sentencepiece", "--sentencepiece-model", tmp_path / "spm.model",
              "--buffer-size", "4", "--batch-size", "4", input="\n".join(sentences) + "\n")
    expected = [h[0] for _, h in sorted(hypotheses(out.stdout, "D-").items())]
    assert len(expected) == 4 and len(set(expected)) == 4
    mt = load_translator(tmp_path / "model", tmp_path / "bin", checkpoint_file="checkpoint_last.pt",
                         sentencepiece_model=tmp_path / "spm.model", source_lang="src", target_lang="tgt")
    assert mt.translate(sentences) == expected


def test_task_refuses_sources_over_max_source_positions_unless_raised(data, trained):
    """RoPE sets no length limit, the translation task's --max-source-positions (1024) still does:
    a 1100-word source is refused with fairseq's message, and translated once the limit is raised."""
    long_source = [" ".join(f"w{i % 30}" for i in range(1100))]
    flags = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "5"]
    with pytest.raises(AssertionError, match=r"max_positions=\(1024, 1024\)"):
        interactive(data, trained / "checkpoint_last.pt", long_source, *flags)
    out = interactive(data, trained / "checkpoint_last.pt", long_source, *flags,
                      "--max-source-positions", "2048", "--max-target-positions", "2048")
    assert len(hypotheses(out.stdout)[0]) == 1


def test_resume_training_from_checkpoint_last(data, trained, tmp_path):
    save = tmp_path / "resume"
    save.mkdir()
    (save / "checkpoint_last.pt").write_bytes((trained / "checkpoint_last.pt").read_bytes())
    out = run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", TRAINED_UPDATES + 10,
              "--save-dir", save)
    log = out.stdout + out.stderr
    assert "Loaded checkpoint" in log and f"@ {TRAINED_UPDATES} updates" in log, log[-3000:]
    assert load_checkpoint(save / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == TRAINED_UPDATES + 10


def test_finetune_rope_from_baseline_transformer(data, tmp_path):
    """sinusoidal -> RoPE: fairseq-train --finetune-from-model with a trained `transformer` checkpoint."""
    run("fairseq-train", data / "bin", "--arch", "transformer", *TRAIN, "--max-update", "5",
        "--save-dir", tmp_path / "base", "--no-epoch-checkpoints")
    # one update with a learning rate of 1e-9: Adam moves each weight by about 1e-9, so the fine-tuned
    # weights are the baseline's within 1e-7; 5 updates of training moved them by ~1e-2 from any init
    out = run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "1",
              "--lr", "1e-9", "--warmup-init-lr", "1e-9", "--save-dir", tmp_path / "ft", "--no-epoch-checkpoints",
              "--finetune-from-model", tmp_path / "base" / "checkpoint_last.pt")
    assert "Loaded checkpoint" in out.stdout + out.stderr
    base = load_checkpoint(tmp_path / "base" / "checkpoint_last.pt")["model"]
    ft = load_checkpoint(tmp_path / "ft" / "checkpoint_last.pt")["model"]
    lengths = {"encoder.original_max_positions", "decoder.original_max_positions"}  # recorded by the update
    assert set(ft) == {key for key in base if "embed_positions" not in key} | lengths
    for key, value in ft.items():
        if key in lengths:  # the longest sentence of that one batch: at most the data's longest + EOS
            side = "src" if key.startswith("encoder") else "tgt"
            longest = max(len(line.split()) for line in (data / f"train.{side}").read_text().splitlines()) + 1
            assert 2 <= int(value) <= longest, key
        else:
            torch.testing.assert_close(value, base[key], rtol=0, atol=1e-7, msg=key)


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


def test_length_options_are_recorded_and_overridable_at_generation(data, trained, tmp_path):
    """--rope-random-positions / --rope-scaling given to fairseq-train are in the checkpoint;
    fairseq-generate --model-overrides sets a scaling on a model trained without one, and it
    changes the translations of inputs longer than the training ones (a scaled rotation)."""
    run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "3",
        "--save-dir", tmp_path, "--no-epoch-checkpoints", "--rope-random-positions", "256",
        "--rope-scaling", "linear", "--rope-scaling-factor", "2")
    model_cfg = load_checkpoint(tmp_path / "checkpoint_last.pt")["cfg"]["model"]
    assert (model_cfg.rope_random_positions, model_cfg.rope_scaling, model_cfg.rope_scaling_factor) == (256, "linear", 2.0)

    def generate(*flags):
        out = run("fairseq-generate", data / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
                  "--cpu", "--beam", "4", "--gen-subset", "test", *flags)
        return sorted(line for line in out.stdout.splitlines() if line.startswith("H-"))

    plain = generate()
    yarn = generate("--model-overrides", "{'rope_scaling': 'yarn', 'rope_scaling_factor': 2.0, "
                                         "'rope_original_max_positions': 12}")
    assert len(plain) == len(yarn) >= 20 and plain != yarn


def test_training_records_its_longest_sentences_and_auto_uses_them(data, trained):
    """fairseq-train records the longest source and target it saw (tokens + EOS) in the checkpoint;
    fairseq-generate with --model-overrides "{'rope_scaling': 'auto'}" needs no number, translates
    the test set (no longer than training) exactly as without it, and changes inputs that are
    longer (fairseq-interactive on 3x longer sentences)."""
    model = load_checkpoint(trained / "checkpoint_last.pt")["model"]
    longest = {side: max(len(line.split()) for line in (data / f"train.{side}").read_text().splitlines()) + 1
               for side in ("src", "tgt")}
    assert int(model["encoder.original_max_positions"]) == longest["src"]
    assert int(model["decoder.original_max_positions"]) == longest["tgt"]

    def generate(*flags):
        out = run("fairseq-generate", data / "bin", "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt",
                  "--cpu", "--beam", "4", "--gen-subset", "test", *flags)
        return sorted(line for line in out.stdout.splitlines() if line.startswith(("H-", "P-")))

    auto = ("--model-overrides", "{'rope_scaling': 'auto'}")
    plain = generate()
    assert len(plain) >= 40 and generate(*auto) == plain
    words = [f"w{i}" for i in range(30)]
    long_lines = [" ".join(words[(i * 7 + j) % 30] for j in range(30)) for i in range(4)]
    flags = ("--beam", "4", "--lenpen", "0.6", "--bpe", "subword_nmt", "--bpe-codes", data / "codes",
             "--tokenizer", "moses", "--max-len-a", "1.2", "--max-len-b", "10")
    plain_long = hypotheses(interactive(data, trained / "checkpoint_last.pt", long_lines, *flags).stdout, "D-")
    auto_long = hypotheses(interactive(data, trained / "checkpoint_last.pt", long_lines, *flags, *auto).stdout, "D-")
    assert len(plain_long) == len(auto_long) == 4 and plain_long != auto_long
    from fairseq_rope.hub import load_translator  # the Python API with the same override

    mt = load_translator(trained, data / "bin", checkpoint_file="checkpoint_last.pt", bpe_codes=data / "codes",
                         source_lang="src", target_lang="tgt", model_overrides={"rope_scaling": "auto"})
    assert mt.translate(long_lines) == [h[0] for _, h in sorted(auto_long.items())]


def test_training_length_is_the_longest_sentence_not_the_padded_batch(data, tmp_path):
    """--required-seq-len-multiple 8 pads every batch to a multiple of 8 tokens; the training length
    recorded for --rope-scaling auto is still the longest real sentence + EOS on each side."""
    longest = {side: max(len(line.split()) for line in (data / f"train.{side}").read_text().splitlines()) + 1
               for side in ("src", "tgt")}
    assert longest["src"] % 8 and longest["tgt"] % 8  # so that a padded width would differ
    save = tmp_path / "padded"
    run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "12", "--save-dir", save,
        "--required-seq-len-multiple", "8", "--no-epoch-checkpoints", "--disable-validation")
    model = load_checkpoint(save / "checkpoint_last.pt")["model"]
    assert int(model["encoder.original_max_positions"]) == longest["src"]
    assert int(model["decoder.original_max_positions"]) == longest["tgt"]


def test_learned_positions_survive_a_checkpoint_round_trip(data, tmp_path):
    """rope_transformer with --add-token-positional-embeddings and learned positions, trained and saved
    by fairseq-train, loads through fairseq's own loader (strict) with every weight as saved, the
    learned position tables included."""
    from fairseq import checkpoint_utils

    save = tmp_path / "learned"
    run("fairseq-train", data / "bin", "--arch", "rope_transformer", *TRAIN, "--max-update", "3", "--save-dir", save,
        "--add-token-positional-embeddings", "--encoder-learned-pos", "--decoder-learned-pos",
        "--no-epoch-checkpoints", "--disable-validation")
    saved = load_checkpoint(save / "checkpoint_last.pt")["model"]
    assert {"encoder.embed_positions.weight", "decoder.embed_positions.weight"} <= set(saved)
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(save / "checkpoint_last.pt")],
                                                                arg_overrides={"data": str(data / "bin")})
    loaded = models[0].state_dict()
    assert set(loaded) == set(saved)
    for key, value in saved.items():
        assert torch.equal(loaded[key], value), key
