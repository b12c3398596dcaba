"""The WMT14 En-De recipe's shell steps, run for real on tiny data (CPU, a few updates)."""

import gzip
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

import forked
from conftest import model_of, run_tool

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(REPO, "recipes", "wmt14_en_de")
TINY_MODEL = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
              "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
              "--decoder-attention-heads 2")


KNOBS = """RAW_DIR DATA_BIN PREP_DIR TASK CPU_WORKERS MODEL_OVERRIDES RUN_NAME SAVE_DIR CHECKPOINT AVG_CHECKPOINT EVAL_DIR ARCH ARCHS NGPU NNODES
NODE_RANK MASTER_ADDR MASTER_PORT LAUNCHER TOKENIZER PRETOKENIZER BPE_CODES SPM_MODEL SRCDICT TGTDICT JOINED_DICTIONARY BPE_MERGES BPE_VOCAB_THRESHOLD SPM_VOCAB_SIZE SPM_MODEL_TYPE
SPM_INPUT_SENTENCES CLEAN_MIN CLEAN_MAX CLEAN_RATIO MAX_UPDATE LR WARMUP_INIT_LR WARMUP_UPDATES ADAM_BETAS DROPOUT
LABEL_SMOOTHING WEIGHT_DECAY CLIP_NORM SEED SEEDS BASELINE SYSTEM TOKENS_PER_UPDATE MAX_TOKENS_PER_GPU MAX_TOKENS UPDATE_FREQ PRECISION
SAVE_INTERVAL_UPDATES KEEP_INTERVAL_UPDATES LOG_INTERVAL LOG_FORMAT EXTRA_TRAIN_ARGS DRY_RUN AVERAGE_LAST
CHECKPOINT_UPPER_BOUND BEAM LENPEN REFERENCE_NLL BACKEND CT2_QUANTIZATION CT2_DIR CT2_DEVICE CT2_THREADS CT2_BATCH_SIZE GEN_SUBSET GEN_MAX_TOKENS REF TEST_SET PARALLEL_RUNS THREADS_PER_RUN SOURCES
DOWNLOAD_DIR RAW_OUT EXPECT_VALID_LINES EXPECT_TEST_LINES USER_DIR VIRTUAL_ENV VERBOSE PROGRESS_INTERVAL
MODEL_ARGS TUNE_LRS TUNE_WARMUPS TUNE_SEED TUNE_UPDATES LENPENS CONVERGE_START CONVERGE_STEP CONVERGE_MAX FLAT_LAST FLAT_DROP
FIRST_SEED CHOSEN HEADS TEST_PARTS OUT_DIR NAME"""


def recipe_env(work, **extra):
    env = dict(os.environ)
    for key in KNOBS.split():  # nothing of the caller's recipe settings leaks in
        env.pop(key, None)
    env.update(WORK_DIR=str(work), PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="", WORKERS="2",
               OMP_NUM_THREADS="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def forked_commands(env):
    """``env`` with fairseq's and the plugin's commands forked from the tests' preloaded server (tests/forked.py:
    each the installed entry point with the step's arguments, environment, working directory and streams,
    without a new interpreter's seconds of imports). For the steps of a test that sends no signal to a process
    group and counts no processes; a user's run as it is (sample.sh, the kills) keeps recipe_env's commands."""
    return dict(env, PATH=os.pathsep.join([forked.on_path(), os.path.dirname(sys.executable), env["PATH"]]))


def step(script, env, ok=True, timeout=600):
    proc = subprocess.run(["bash", os.path.join(RECIPE, script)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    if ok is None:  # either way: the caller checks
        pass
    elif ok:
        assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    else:
        assert proc.returncode != 0, f"{script} should have failed:\n{proc.stderr[-3000:]}"
    return proc


def make_corpus(path, train, valid=12, test=16):
    subprocess.run([sys.executable, os.path.join(RECIPE, "make_sample_corpus.py"), "--out-dir", str(path),
                    "--train", str(train), "--valid", str(valid), "--test", str(test), "--seed", "7"],
                   check=True, capture_output=True)
    return path


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


# --------------------------------------------------------------------------- the whole recipe

@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """sample.sh (-> run.sh -> every step) once for RoPE and the baseline: tiny corpus and model, 4 updates."""
    base = tmp_path_factory.mktemp("recipe")
    raw = make_corpus(base / "raw", train=300)
    env = recipe_env(base / "work", RAW_DIR=raw, MODEL_ARGS=TINY_MODEL, BPE_MERGES=150, MAX_UPDATE=4,
                     SAVE_INTERVAL_UPDATES=2, AVERAGE_LAST=2, WARMUP_UPDATES=2, LR=1e-3, TOKENS_PER_UPDATE=1500,
                     MAX_TOKENS_PER_GPU=1500, LOG_INTERVAL=1, GEN_MAX_TOKENS=2000)
    start = time.time()
    proc = step("sample.sh", env)
    assert f"offline sample: corpus {raw}, work dir {base / 'work'}, archs: rope_transformer transformer" in proc.stderr
    assert "running up to 2 runs at once" in proc.stderr
    env.update(ARCHS="rope_transformer transformer", EXTRA_TRAIN_ARGS=TINY_MODEL)
    # (the tests' own steps below run the commands forked: sample.sh above ran them as a user does)
    return dict(work=base / "work", raw=raw, env=forked_commands(env), proc=proc, seconds=time.time() - start)


def test_recipe_gives_a_result_for_rope_and_baseline(recipe):
    work = recipe["work"]
    for arch in ("rope_transformer", "transformer"):
        result = json.loads((work / "eval" / arch / "result.json").read_text())
        assert result["arch"] == arch
        assert result["n_sentences"] == 16
        assert result["checkpoint"].endswith(f"checkpoints/{arch}/checkpoint_avg_last2.pt")
        assert result["beam"] == 4 and result["lenpen"] == 0.6
        assert result["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        assert result["reference"] == str(recipe["raw"] / "test.de")
        assert len(lines(result["hyps_detok"])) == 16
        ckpts = sorted(os.listdir(work / "checkpoints" / arch))
        assert "checkpoint_1_2.pt" in ckpts and "checkpoint_1_4.pt" in ckpts and "checkpoint_last.pt" in ckpts
        log = (work / "checkpoints" / arch / "train.log").read_text()
        assert re.search(r'\{"epoch": 1, "update": [\d.]+, "loss"', log), "no JSON training log lines"
        assert f"--arch {arch}" in log and "--user-dir" in log
    table = (work / "results.md").read_text()
    assert "| rope_transformer | rope_transformer |" in table and "| transformer | transformer |" in table
    assert table in recipe["proc"].stdout
    # both archs got the same settings
    rope_cmd = re.search(r"# .*fairseq-train (.*)", (work / "checkpoints/rope_transformer/train.log").read_text())[1]
    base_cmd = re.search(r"# .*fairseq-train (.*)", (work / "checkpoints/transformer/train.log").read_text())[1]
    assert rope_cmd.replace("rope_transformer", "transformer") == base_cmd


def test_test_nll_in_every_result_is_fairseq_validates_nll_loss_on_the_test_set(recipe):
    """result.json's test_nll (evaluate.sh: fairseq-generate --score-reference, summed by fairseq-rope-score)
    equals the nll_loss that fairseq-validate, fairseq's criterion, prints for the same checkpoint on the
    binarized test set: within the rounding of validate's three decimals and of the scorer's four."""
    work = recipe["work"]
    for arch in ("rope_transformer", "transformer"):
        result = json.loads((work / "eval" / arch / "result.json").read_text())
        proc = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "fairseq-validate"), str(work / "data-bin"), "--task",
             "translation", "--user-dir", os.path.join(REPO, "fairseq_rope"), "--path", result["checkpoint"],
             "--valid-subset", "test", "--max-tokens", "2000", "--required-batch-size-multiple", "1", "--cpu",
             "--log-format", "json"],
            capture_output=True, text=True, env=recipe["env"], timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        validated = json.loads(re.search(r"\| test \| (\{.*\})", proc.stdout + proc.stderr)[1])
        assert result["test_nll"] == pytest.approx(float(validated["test_nll_loss"]), abs=0.0005 + 0.00005)
        assert result["test_nll_tokens"] == int(validated["test_wpb"])  # one batch: every target token
        assert 1 < result["test_nll"] < 20  # bits per token of an untrained model: ~log2(vocabulary)


def test_terminal_shows_progress_and_every_log_is_complete(recipe):
    """The main job prints a few lines per stage: progress lines of training (update N/M, losses,
    speed) and translation (sentences done/total), the log files named; fairseq's own output
    (configuration dumps, warnings, checkpoint saves) goes, complete, to each run's logs."""
    terminal = (recipe["proc"].stdout + recipe["proc"].stderr).splitlines()
    assert len(terminal) <= 80, "\n".join(terminal)
    assert max(map(len, terminal)) <= 300, max(terminal, key=len)  # no configuration dump, no list of paths
    work = recipe["work"]
    for arch in ("rope_transformer", "transformer"):
        mine = [line for line in terminal if line.startswith(f"{{{arch}}} ")]
        assert any(re.search(r"\[train\] update 4/4 \(100%\), train loss [\d.]+, valid loss [\d.]+, [\d.]+ updates/s, "
                             r"elapsed \d+m\d\ds$", line) for line in mine), mine
        assert any(re.search(r"\[evaluate\] sentences 16/16 \(100%\), [\d.]+ sentences/s", line) for line in mine), mine
        save, eval_dir = work / "checkpoints" / arch, work / "eval" / arch
        assert any(f"log: {save}/train.log" in line for line in mine)
        assert any(f"{eval_dir}/{{generate.out,generate.log}}" in line for line in mine)
        log = (save / "train.log").read_text()
        updates = [int(n) for n in re.findall(r'\| train_inner \| .*"num_updates": "(\d+)"', log)]
        assert updates == [1, 2, 3, 4], updates  # LOG_INTERVAL=1: every update, in order
        assert "done training in" in log and "'_name': 'adam'" in log  # fairseq's end and its configuration
        assert "Saved checkpoint" in log and not any("Saved checkpoint" in line for line in terminal)
        generated = (eval_dir / "generate.out").read_text()
        assert len(re.findall(r"^S-\d+\t", generated, re.M)) == 16 and "Generate test with beam=4" in generated
        assert (eval_dir / "generate.log").exists()


def test_verbose_streams_fairseqs_output_and_a_failure_shows_the_logs_end(recipe, tmp_path):
    env = dict(recipe["env"], ARCH="rope_transformer", RUN_NAME="verbose", MAX_UPDATE="2", VERBOSE="1")
    proc = step("train.sh", env)
    assert "'_name': 'adam'" in proc.stderr and "done training in" in proc.stderr
    log = recipe["work"] / "checkpoints" / "bad" / "train.log"
    proc = step("train.sh", dict(recipe["env"], ARCH="rope_transformer", RUN_NAME="bad", MAX_UPDATE="2",
                                 EXTRA_TRAIN_ARGS=recipe["env"]["EXTRA_TRAIN_ARGS"] + " --rope-dim 3"), ok=False)
    assert "FAILED (exit status 1): fairseq-train; the last" in proc.stderr and f"lines of {log}:" in proc.stderr
    assert "--rope-dim must be an even number >= 2" in proc.stderr  # the end of the log, on the terminal
    assert f"training bad failed: see {log}" in proc.stderr
    assert "--rope-dim must be an even number >= 2" in log.read_text()


def test_named_runs_carry_their_own_flags(recipe):
    """ARCHS="NAME=ARCH ..." with ARGS_<name>: learned absolute positions and Shaw's keys-only as runs
    of their own beside an existing one, in checkpoints/<name> and eval/<name>, their flags recorded
    in their settings and used, every run in the results table."""
    env = dict(recipe["env"], ARCHS="transformer learned=transformer rpe_keys=rpe_transformer",
               ARGS_learned="--encoder-learned-pos --decoder-learned-pos", ARGS_rpe_keys="--rpe-keys-only",
               PARALLEL_RUNS="1")
    proc = step("run.sh", env)
    work = recipe["work"]
    assert "transformer already trained" in proc.stderr  # the existing run is not trained again
    import torch
    for name, arch, flag in [("learned", "transformer", "--encoder-learned-pos --decoder-learned-pos"),
                             ("rpe_keys", "rpe_transformer", "--rpe-keys-only")]:
        settings = (work / "checkpoints" / name / ".settings").read_text()
        assert f"ARCH={arch}\n" in settings and f"EXTRA_TRAIN_ARGS={TINY_MODEL} {flag}" in settings
        state = torch.load(work / "checkpoints" / name / "checkpoint_avg_last2.pt", weights_only=True)
        result = json.loads((work / "eval" / name / "result.json").read_text())
        assert result["run_name"] == name and result["arch"] == arch and result["n_sentences"] == 16
        if name == "learned":
            assert state["cfg"]["model"].encoder_learned_pos and "encoder.embed_positions.weight" in state["model"]
        else:
            assert state["cfg"]["model"].rpe_keys_only and "encoder.layers.0.self_attn.relative_values.weight" not in state["model"]
    table = (work / "results.md").read_text()
    assert all(f"| {name} | {arch} |" in table for name, arch in
               [("transformer", "transformer"), ("learned", "transformer"), ("rpe_keys", "rpe_transformer")])


def test_a_run_whose_training_fails_among_parallel_runs_is_not_averaged_evaluated_or_recorded(recipe, tmp_path):
    """run.sh with PARALLEL_RUNS=2 and RECORDS: a run whose training fails stops there (bash ignores set -e in a
    function called under ||, and such a run went on to average, evaluate and record what its folder held); the
    other run finishes, and the recipe then stops with an error naming the failed run and where its log is."""
    records = tmp_path / "records"
    env = dict(recipe["env"], ARCHS="pgood=transformer pbad=rope_transformer", ARGS_pbad="--rope-dim 3",
               PARALLEL_RUNS="2", RECORDS=str(records))
    proc = step("run.sh", env, ok=False)
    work, runs = recipe["work"], proc.stdout  # (each run's lines, prefixed by its name)
    assert f"{{pbad}} [train] ERROR: training pbad failed: see {work}/checkpoints/pbad/train.log" in runs
    assert (f"[run] ERROR: failed: pbad (see the lines prefixed by their names above, and "
            f"{work}/checkpoints/<run>/train.log)") in proc.stderr
    after = [line for line in runs.splitlines() if line.startswith("{pbad}")]
    assert f"{{pbad}} [fairseq-rope-record] {records}/pbad: no record" in after  # (looked for before training)
    assert not any(step_name in line for line in after for step_name in ("=== train pbad", "[average]", "[evaluate]",
                                                                         ": saved (")), after[-10:]
    assert not (work / "eval" / "pbad").exists() and not (records / "pbad").exists()
    assert (records / "pgood" / "record.json").exists() and "=== results" not in proc.stderr + runs


def test_figures_compare_named_runs_against_the_first(recipe, tmp_path):
    """sample_figures.sh (what sample_comparison.sh runs) with named runs: the comparison table has a
    row per run with its p-value against the first run, and the figures are written under NAME; with
    AGAINST, the same scores tested against another run, and an AGAINST that names no run refused."""
    env = {k: v for k, v in recipe["env"].items() if k != "EXTRA_TRAIN_ARGS"}  # sample.sh adds MODEL_ARGS itself
    env.update(ARCHS="transformer learned=transformer", ARGS_learned="--encoder-learned-pos --decoder-learned-pos",
               PARALLEL_RUNS="1", OUT_DIR=str(tmp_path), NAME="cmp", TITLE="Tiny")
    # a system's own learning rate and warm-up (as a tuning's chosen.env gives them; here the fixture's values,
    # so the runs are the fixture's): both named in the table's note
    env.update(LR_transformer=env["LR"], WARMUP_UPDATES_transformer=env["WARMUP_UPDATES"])
    for against, error in (("nosuch", "AGAINST: 'nosuch' is not one of the runs (ARCHS: transformer learned=transformer)"),
                           ("transformer", "AGAINST: 'transformer' is the first of ARCHS, the runs' baseline already")):
        proc = step("sample_figures.sh", dict(env, AGAINST=against), ok=False)
        assert error in proc.stderr and not list(tmp_path.iterdir()), proc.stderr[-2000:]
    # a part that is not PART=FIRST-LAST: refused before anything is trained or written
    proc = step("sample_figures.sh", dict(env, TEST_PARTS="head=1-5 tail"), ok=False)
    assert "TEST_PARTS: 'tail' must be PART=FIRST-LAST (e.g. prose=1-1200)" in proc.stderr, proc.stderr[-2000:]
    assert "training" not in proc.stderr and not list(tmp_path.iterdir())
    env.update(AGAINST="learned", TEST_PARTS="head=1-5 tail=6-16")  # the tables again, every run tested against learned
    step("sample_figures.sh", env)
    # each part its own tables, scored on its lines alone: the BLEU of sacreBLEU on those lines
    from sacrebleu.metrics import BLEU

    refs = (recipe["raw"] / "test.de").read_text(encoding="utf-8").splitlines()
    for part, first, last in (("head", 1, 5), ("tail", 6, 16)):
        for file, runs in ((f"cmp_{part}_by_length.md", ["transformer", "learned"]),
                           (f"cmp_{part}_against_learned.md", ["learned", "transformer"])):
            text = (tmp_path / file).read_text()
            assert f"Lines {first}-{last} of the test set ({last - first + 1} sentences)" in text, text
            rows = {m[1]: float(m[2]) for m in re.finditer(r"^\| (\w+) \| [\d,]+ \| ([\d.]+) ", text, re.M)}
            assert list(rows) == runs, text
            for run in runs:
                hyps = (recipe["work"] / "eval" / run / "hyps.detok.de").read_text(encoding="utf-8").splitlines()
                bleu = BLEU().corpus_score(hyps[first - 1:last], [refs[first - 1:last]]).score
                assert rows[run] == pytest.approx(bleu, abs=0.005), (file, run)
    table = (tmp_path / "cmp_by_length.md").read_text()
    against = (tmp_path / "cmp_against_learned.md").read_text()
    assert against.startswith("## Tiny: every run against learned") and "every run tested against learned" in against
    # the same scores, the test the other way round: learned first, the transformer's difference to it the opposite
    row = r"^\| (\w+) \| [\d,]+ \| ([\d.]+) \[[\d.]+, [\d.]+\](?: \(([+-][\d.]+) )?"  # run, BLEU, difference
    main, other = ({m[1]: (float(m[2]), m[3]) for m in re.finditer(row, text, re.M)} for text in (table, against))
    assert list(other) == ["learned", "transformer"] and list(main) == ["transformer", "learned"], (table, against)
    assert {k: v[0] for k, v in other.items()} == {k: v[0] for k, v in main.items()}
    assert main["transformer"][1] is None and other["learned"][1] is None
    assert float(other["transformer"][1]) == pytest.approx(-float(main["learned"][1]), abs=0.011)
    assert table.startswith("## Tiny: quality by source length")
    assert (f"each system's learning rate and warm-up its own (LR_*, WARMUP_UPDATES_*: LR_transformer={env['LR']} "
            f"WARMUP_UPDATES_transformer={env['WARMUP_UPDATES']})") in table
    assert re.search(r"^\| transformer \| [\d,]+ \| [\d.]+ \[[\d.]+, [\d.]+\] \|", table, re.M)  # one seed: the 95% CI
    # the difference with the bootstrap's interval and sacreBLEU's p
    assert re.search(r"^\| learned \| [\d,]+ \| [\d.]+ \[[\d.]+, [\d.]+\] \([+-][\d.]+ \[[+-][\d.]+, [+-][\d.]+\], "
                     r"bootstrap p=[\d./]+", table, re.M)
    assert (tmp_path / "cmp_by_length.png").stat().st_size > 0 and (tmp_path / "cmp_curves.png").stat().st_size > 0
    # one seed a run: the valid loss at equal updates without a spread or an interval
    assert re.search(r"^\| 4 \| [\d.]+ \| [\d.]+ \([+-][\d.]+\) \|$", (tmp_path / "cmp_valid_loss.md").read_text(), re.M)


def model_state(path):
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def test_seeds_train_a_run_per_seed_and_the_tables_give_their_mean(recipe, tmp_path):
    """SEEDS="1 2" through sample_figures.sh: a run per seed and system, each trained with its --seed; seed 1
    repeats the recipe's default run (seed 1) bit for bit, seed 2 differs; results.md and the comparison give
    each system's mean and standard deviation over its seeds, every seed's score, and the test."""
    import statistics

    env = {k: v for k, v in recipe["env"].items() if k != "EXTRA_TRAIN_ARGS"}
    env.update(SEEDS="1 2", ARCHS="transformer rope_transformer", OUT_DIR=str(tmp_path), NAME="seeds")
    proc = step("sample_figures.sh", env)
    work = recipe["work"]
    results = {}
    for name in ("transformer", "rope_transformer"):
        for seed in (1, 2):
            run = f"{name}_seed{seed}"
            assert f"--seed {seed} " in (work / "checkpoints" / run / "train.log").read_text()
            results[name, seed] = json.loads((work / "eval" / run / "result.json").read_text())
            assert (results[name, seed]["system"], results[name, seed]["seed"], results[name, seed]["run_name"]) \
                == (name, seed, run)
        default = model_state(work / "checkpoints" / name / "checkpoint_last.pt")
        first = model_state(work / "checkpoints" / f"{name}_seed1" / "checkpoint_last.pt")
        second = model_state(work / "checkpoints" / f"{name}_seed2" / "checkpoint_last.pt")
        assert default.keys() == first.keys()
        assert all(torch_equal(default[k], first[k]) for k in default), "the same seed trained another model"
        assert not all(torch_equal(first[k], second[k]) for k in first), "two seeds trained the same model"
        assert results[name, 1]["hyps_detok"] != results[name, 2]["hyps_detok"]

    table = (work / "results.md").read_text()
    assert table in proc.stdout
    for name in ("transformer", "rope_transformer"):
        chrf = [results[name, seed]["chrf"] for seed in (1, 2)]
        bleu = [results[name, seed]["sacrebleu"] for seed in (1, 2)]
        row = re.search(rf"^\| {name} \| 1, 2 \| ([\d.]+) ± ([\d.]+).*?\| ([\d.]+) ± ([\d.]+)", table, re.M)
        assert row, table
        assert float(row[1]) == pytest.approx(statistics.mean(bleu), abs=0.006)
        # (the result JSONs round to 0.01: a standard deviation of two rounded values is off by up to 0.0071)
        assert float(row[2]) == pytest.approx(statistics.stdev(bleu), abs=0.013)
        assert float(row[3]) == pytest.approx(statistics.mean(chrf), abs=0.006)
        assert float(row[4]) == pytest.approx(statistics.stdev(chrf), abs=0.013)
    assert chrf[0] != chrf[1]  # the seeds' outputs differ where the metric can tell
    # the difference, its 95% interval and Welch's two-sided p over the seeds (no p where neither system's
    # seeds differ in the metric, as BLEU 0 for both tiny models: nothing to test against)
    cells = re.search(r"^\| rope_transformer \| 1, 2 \| ([^|]+) \| ([^|]+) \|", table, re.M)
    assert cells, table
    difference = r"[\d.]+ ± [\d.]+ \([+-][\d.]+ \[[+-][\d.]+, [+-][\d.]+\](, p=[\d.]+)?\)"
    assert all(re.fullmatch(difference, cell.strip()) for cell in cells.groups()), cells.groups()
    assert re.fullmatch(difference, cells[2].strip())[1], "chrF's seeds differ: Welch's p expected"

    cmp = (tmp_path / "seeds_by_length.md").read_text()
    assert "Welch's t-test with the seeds as the samples" in cmp and "p (exact permutation, two-sided; floor)" in cmp
    means = {name: statistics.mean(results[name, s]["chrf"] for s in (1, 2)) for name in ("transformer", "rope_transformer")}
    row = re.search(r"^\| rope_transformer \| 2 \| [\d,]+ \| [\d.]+ ± [\d.]+ \(.*?\) \| ([\d.]+) ± [\d.]+ \(([+-][\d.]+) "
                    r"\[[+-][\d.]+, [+-][\d.]+\], p=", cmp, re.M)
    assert row, cmp
    assert float(row[1]) == pytest.approx(means["rope_transformer"], abs=0.006)
    assert float(row[2]) == pytest.approx(means["rope_transformer"] - means["transformer"], abs=0.011)
    # the test NLL of every seed (fairseq's scorer), its mean and the tests over seeds, as for the scores
    from fairseq_rope_cli.seeds import welch_test

    nll = {name: [results[name, s]["test_nll"] for s in (1, 2)] for name in ("transformer", "rope_transformer")}
    assert nll["transformer"] != nll["rope_transformer"] and nll["transformer"][0] != nll["transformer"][1]
    row = re.search(r"^\| rope_transformer \| 2 \| [\d,]+ \| [^|]+ \| [^|]+ \| ([\d.]+) ± ([\d.]+) \(([+-][\d.]+) "
                    r"\[([+-][\d.]+), ([+-][\d.]+)\], p=([\d.]+)\) \|", cmp, re.M)
    assert row, cmp
    welch = welch_test(nll["rope_transformer"], nll["transformer"])
    assert float(row[1]) == pytest.approx(statistics.mean(nll["rope_transformer"]), abs=0.0005)
    assert float(row[2]) == pytest.approx(statistics.stdev(nll["rope_transformer"]), abs=0.0005)
    assert float(row[3]) == pytest.approx(welch["difference"], abs=0.0005)
    assert [float(row[4]), float(row[5])] == pytest.approx(welch["interval"], abs=0.0005)
    assert float(row[6]) == pytest.approx(welch["p"], abs=0.0005)
    assert re.search(r"^\| rope_transformer \| test NLL \| [+-][\d.]+ \| \[", cmp, re.M), cmp
    # the model's size (fairseq-train's count: every distinct parameter tensor of the checkpoint once, the
    # shared embeddings once) and each seed's length penalty, as a paper's table gives them
    from fairseq import checkpoint_utils

    models, _ = checkpoint_utils.load_model_ensemble([results["rope_transformer", 1]["checkpoint"]])
    count = sum(p.numel() for p in models[0].parameters())
    assert results["rope_transformer", 1]["parameters"] == count
    assert re.search(rf"^\| rope_transformer \| 2 \| {count:,} \| ", cmp, re.M), cmp
    assert re.search(r"^\| rope_transformer \| [\d., ]+ \| [\d., ]+ \| [\d., ]+ \| 0\.6, 0\.6 \|$", cmp, re.M), cmp
    # whether each run had stopped improving at its budget, from its own log: the last validation against the
    # one nearest 80% of the way (fairseq-rope-tune flat's criterion, < 1% lower)
    flat = (tmp_path / "seeds_flatness.md").read_text()
    for name in ("transformer", "rope_transformer"):
        for seed in (1, 2):
            losses = valid_nll(work / "checkpoints" / f"{name}_seed{seed}" / "train.log")
            end = max(losses)
            start = min((u for u in losses if u != end), key=lambda u: (abs(u - 0.8 * end), u))
            drop = (losses[start] - losses[end]) / losses[start]
            row = re.search(rf"^\| {name} \| {name}_seed{seed} \| {start} \| {losses[start]:.4f} \| {end} \| "
                            rf"{losses[end]:.4f} \| ([+-][\d.]+)% \| (flat|still improving) \|$", flat, re.M)
            assert row, flat
            assert float(row[1]) == pytest.approx(100 * drop, abs=0.005) and (row[2] == "flat") == (drop < 0.01)


def torch_equal(a, b):
    import torch

    return torch.equal(a, b)


@pytest.mark.parametrize("extra, message", [
    (dict(SEEDS="1 x"), "SEEDS must be an integer >= 0, got 'x'"),
    (dict(SEEDS="1 2 1"), "SEEDS lists seed 1 twice"),
    (dict(BASELINE="nope"), "BASELINE=nope is not a run of ARCHS"),
    (dict(ARCHS="transformer x=transformer", ARGS_y="--dropout 0"),
     "ARGS_y is set, but no run in ARCHS is named 'y'"),
    (dict(ARCHS="transformer transformer"), "two runs are named 'transformer'"),
    (dict(ARCHS="my-run=transformer"), "run name 'my-run' (in 'my-run=transformer') must be letters, digits and _"),
])
def test_bad_runs_are_named(recipe, extra, message):
    proc = step("run.sh", dict(recipe["env"], **extra), ok=False)
    assert message in proc.stderr


@pytest.fixture(scope="module")
def api(recipe):
    """The recipe's RoPE trained until its translations differ between sentences (150 updates), averaged
    and evaluated: (checkpoint, result)."""
    work = recipe["work"]
    env = dict(recipe["env"], ARCH="rope_transformer", RUN_NAME="api", MAX_UPDATE="150", SAVE_INTERVAL_UPDATES="50",
               AVERAGE_LAST="2", LR="3e-3", WARMUP_UPDATES="20")
    step("train.sh", env)
    step("average.sh", env)
    step("evaluate.sh", env)
    return work / "checkpoints" / "api" / "checkpoint_avg_last2.pt", json.loads((work / "eval" / "api" / "result.json").read_text())


def test_python_api_and_interactive_translate_the_test_set_as_evaluate_does(recipe, api):
    """The API and fairseq-interactive (--bpe recorded, the documented command), given the raw test set,
    return evaluate.sh's translations of the binarized one and the same sacreBLEU, for an averaged
    checkpoint of the recipe trained until its translations differ between sentences."""
    import sacrebleu

    from fairseq_rope.hub import load_translator

    work = recipe["work"]
    checkpoint, result = api
    evaluated = lines(result["hyps_detok"])
    sources, references = lines(recipe["raw"] / "test.en"), lines(recipe["raw"] / "test.de")
    assert len(set(evaluated)) > 8, evaluated  # trained: outputs differ between inputs
    out = run_tool("fairseq-interactive", work / "data-bin", "--user-dir", os.path.join(REPO, "fairseq_rope"), "--cpu",
                   "--path", checkpoint, "--beam", "4", "--lenpen", "0.6", "--bpe", "recorded",
                   "--buffer-size", "16", "--batch-size", "16",  # fairseq's length limits, as the API
                   input="\n".join(sources) + "\n")
    by_id = {int(line.split("\t")[0][2:]): line.split("\t")[2] for line in out.stdout.splitlines() if line.startswith("D-")}
    assert [by_id[i] for i in range(len(sources))] == evaluated
    mt = load_translator(checkpoint.parent, work / "data-bin", checkpoint_file=checkpoint.name)
    api = mt.translate(sources)
    assert api == evaluated
    assert sacrebleu.corpus_bleu(api, [references]).score == pytest.approx(result["sacrebleu"], abs=0.01)


def running_text(raw, words=3000):
    """A text of the corpus' sentences (train, in order) in paragraphs of 5-20 sentences, some indented, one
    with a line break inside, blank lines between (two after every third): (text, its sentences)."""
    sentences, paragraphs, n = [], [], 0
    pool = lines(raw / "train.en")
    while sum(len(s.split()) for s in sentences) < words:
        size = 5 + (7 * len(paragraphs)) % 16
        chunk = pool[n:n + size]
        n += size
        sentences += chunk
        text = " ".join(chunk)
        if len(paragraphs) == 1:
            text = " ".join(chunk[:2]) + "\n" + " ".join(chunk[2:])
        paragraphs.append(("    " if len(paragraphs) % 4 == 3 else "") + text)
    return "".join(p + ("\n\n\n" if i % 3 == 2 else "\n\n") for i, p in enumerate(paragraphs)), sentences


def test_running_text_translates_sentence_by_sentence_with_the_layout_kept(recipe, api, tmp_path):
    """fairseq-rope-translate, stdin to stdout, on 3,000 words in paragraphs (far beyond any training
    length): every paragraph, blank line and indentation in place, each sentence translated as the API
    translates it alone; a sentence without a boundary, longer than the longest training source, is
    translated as it is and named in one line. CRLF line endings are kept; --sentences writes the split."""
    from fairseq_rope.hub import load_translator
    from fairseq_rope_text.running_text import join_text, split_text

    checkpoint, _ = api
    text, sentences = running_text(recipe["raw"])
    long_one = ", and ".join(s.rstrip(".?!") for s in sentences[:12]) + "."
    text = text + long_one + "\n"
    layout, found = split_text(text, "en")
    assert found == sentences + [long_one]  # the corpus' sentences as the segmenter finds them
    out = run_tool("fairseq-rope-translate", "--model-dir", checkpoint.parent, "--checkpoint-file", checkpoint.name,
                   "--data-bin", recipe["work"] / "data-bin", "--device", "cpu", input=text)
    mt = load_translator(checkpoint.parent, recipe["work"] / "data-bin", checkpoint_file=checkpoint.name,
                         backend="fairseq")  # the command's default, CTranslate2, must give fairseq's translations
    alone = mt.translate(found)
    assert out.stdout == join_text(layout, alone)
    # every line on its line (the one inside paragraph 2 follows a sentence end), blank lines and indentation kept
    assert [line.strip() == "" for line in out.stdout.split("\n")] == [line.strip() == "" for line in text.split("\n")]
    assert [len(line) - len(line.lstrip()) for line in out.stdout.split("\n")] == \
        [len(line) - len(line.lstrip()) for line in text.split("\n")]
    longest, length = mt.longest_training_source(), len(mt.encode(long_one))
    assert length > longest
    assert f"sentence {len(found)} has {length} subwords, more than the longest training source ({longest})" \
        in out.stderr
    # each sentence longer than the longest the model trained on (the corpus' own include some that cleaning
    # dropped from training), and only those, named in one line
    named = [int(m) for m in re.findall(r"sentence (\d+) has \d+ subwords, more than the longest", out.stderr)]
    assert named == [n for n, s in enumerate(found, 1) if len(mt.encode(s)) > longest]
    with pytest.warns(UserWarning, match=r"translates the string as one sentence, but it holds several"):
        mt.translate(" ".join(sentences[:3]))
    # CRLF in, CRLF out; --sentences shows the split: each sentence and its translation on a line
    translation_of = dict(zip(found, alone))
    crlf = "\r\n".join(text.split("\n")[:8]) + "\r\n"
    layout, found = split_text(crlf, "en")
    pairs = tmp_path / "pairs.tsv"
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "fairseq-rope-translate"), "--model-dir",
                          str(checkpoint.parent), "--checkpoint-file", checkpoint.name, "--data-bin",
                          str(recipe["work"] / "data-bin"), "--device", "cpu", "--sentences", str(pairs)],
                         input=crlf.encode(), capture_output=True, env=recipe["env"])
    assert out.returncode == 0, out.stderr[-3000:]
    translated = [translation_of[s] for s in found]
    assert out.stdout.decode() == join_text(layout, translated, "\r\n")
    assert out.stdout.count(b"\n") == out.stdout.count(b"\r\n") > 3  # no bare LF
    assert pairs.read_text(encoding="utf-8").split("\n")[:-1] == [f"{s}\t{t}" for s, t in zip(found, translated)]
    units = sum(isinstance(item, tuple) for item in layout)
    assert f"{len(found)} sentences in {units} lines (hard-wrapped ones joined)" in out.stderr.decode()


def test_evaluate_with_ctranslate2_backend(recipe):
    """BACKEND=ctranslate2: the averaged checkpoint exported, the test set translated by CTranslate2 to
    fairseq-generate's translations, scored the same way; the result names the backend; a re-run skips."""
    work = recipe["work"]
    env = dict(recipe["env"], ARCH="rope_transformer", BACKEND="ctranslate2", CT2_THREADS="1")
    proc = step("evaluate.sh", env)
    assert f"exporting {work}/checkpoints/rope_transformer/checkpoint_avg_last2.pt to CTranslate2" in proc.stderr
    result = json.loads((work / "eval" / "rope_transformer-ct2-float32" / "result.json").read_text())
    assert result["backend"] == "ctranslate2" and result["ct2_compute_type"] == "float32"
    assert result["ct2_dir"] == str(work / "ct2" / "rope_transformer-float32") and result["n_sentences"] == 16
    fairseq_result = json.loads((work / "eval" / "rope_transformer" / "result.json").read_text())
    assert fairseq_result["backend"] == "fairseq"
    assert lines(result["hyps_detok"]) == lines(fairseq_result["hyps_detok"])
    # outputs that differ between inputs (11 of 16 here; trained models: tests/test_ct2.py)
    assert len(set(lines(result["hyps_detok"]))) >= 8
    assert result["sacrebleu"] == fairseq_result["sacrebleu"]
    again = step("evaluate.sh", env)
    assert "CTranslate2 model up to date" in again.stderr and "translations up to date" in again.stderr
    bad = step("evaluate.sh", dict(env, BACKEND="onnx"), ok=False)
    assert "BACKEND must be one of: fairseq ctranslate2; got 'onnx'" in bad.stderr
    bad = step("evaluate.sh", dict(env, CT2_QUANTIZATION="int4"), ok=False)  # the list fairseq-rope-ct2 accepts
    assert "CT2_QUANTIZATION must be one of: int8 int8_float32 int8_float16 int8_bfloat16 int16 float16 bfloat16 " \
           "float32; got 'int4'" in bad.stderr


def test_train_dry_run_computes_tokens_per_update(recipe):
    # the paper's defaults: nothing but the data and the GPU count is set; a node that shows 8 GPUs
    env = recipe_env(recipe["work"], DRY_RUN=1, CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7")
    # (settings, batch, flags, GPUs in all): NGPU below the visible GPUs uses that many, not all
    cases = [(dict(NGPU="8"), "--max-tokens 3125 --update-freq 1", ("--fp16", "--distributed-world-size 8"), 8),
             (dict(NGPU="1"), "--max-tokens 3572 --update-freq 7", ("--fp16", "--distributed-world-size 1"), 1),
             (dict(NGPU="4"), "--max-tokens 3125 --update-freq 2", ("--distributed-world-size 4",), 4),
             (dict(CUDA_VISIBLE_DEVICES="0,1,2,3"), "--max-tokens 3125 --update-freq 2", ("--distributed-world-size 4",), 4),
             (dict(NGPU="8", PRECISION="amp"), "--max-tokens 3125 --update-freq 1", ("--amp",), 8),
             (dict(NGPU="4", NNODES="2", MASTER_ADDR="node0", PRECISION="fp16"),
              "--max-tokens 3125 --update-freq 1", ("--distributed-world-size 8",), 8)]
    for extra, tokens, flags, gpus in cases:
        proc = step("train.sh", dict(env, **extra))
        assert tokens in proc.stderr and f"on {gpus} GPU(s)" in proc.stderr, proc.stderr
        assert all(flag in proc.stderr for flag in flags), proc.stderr
        assert "--max-update 100000" in proc.stderr and "--lr 5e-4" in proc.stderr
    assert "torchrun --nnodes 2 --node_rank 0 --nproc_per_node 4 --master_addr node0" in proc.stderr
    assert not (recipe["work"] / "checkpoints" / "rope_transformer_wmt_en_de").exists()
    # the printed command pastes: a shell reads it back as the words the script would run
    proc = step("train.sh", dict(env, NGPU="1", EXTRA_TRAIN_ARGS="--rope-theta 500"))
    printed = proc.stderr.split("DRY_RUN=1: would run: ", 1)[1].splitlines()[0]
    words = shlex.split(printed)
    assert words[0] == "fairseq-train" and words[words.index("--adam-betas") + 1] == "(0.9, 0.98)"
    assert words[words.index("--rope-theta") + 1] == "500" and "--adam-betas '(0.9, 0.98)'" in printed
    proc = step("train.sh", dict(env, NGPU="4", CUDA_VISIBLE_DEVICES="0,1"), ok=False)
    assert "NGPU=4, but this node shows 2 GPU(s) (CUDA_VISIBLE_DEVICES='0,1')" in proc.stderr
    proc = step("train.sh", dict(env, NGPU="0", PRECISION="fp16"), ok=False)
    assert "PRECISION=fp16 needs a GPU" in proc.stderr
    proc = step("train.sh", dict(env, NGPU="8", PRECISION="bf16"), ok=False)
    assert "PRECISION=bf16 is not supported" in proc.stderr and "use PRECISION=fp16 or PRECISION=amp" in proc.stderr


def test_train_dry_run_on_a_fresh_checkout_prints_the_command(tmp_path):
    """DRY_RUN=1 before prepare.sh has made any data: the plan and the whole command, nothing created."""
    proc = step("train.sh", recipe_env(tmp_path / "work", DRY_RUN=1, CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"))
    assert "holds no binarized data yet (prepare.sh makes it)" in proc.stderr
    printed = shlex.split(proc.stderr.split("DRY_RUN=1: would run: ", 1)[1].splitlines()[0])
    assert printed[:2] == ["fairseq-train", str(tmp_path / "work" / "data-bin")]
    assert printed[printed.index("--distributed-world-size") + 1] == "8"
    assert not (tmp_path / "work").exists()


def test_rerun_skips_and_training_resumes(recipe):
    env = dict(recipe["env"], ARCH="transformer", RUN_NAME="transformer")
    proc = step("prepare.sh", env)
    assert "already prepared" in proc.stderr
    proc = step("train.sh", env)
    assert "already trained" in proc.stderr
    # a longer schedule, once allowed, continues from checkpoint_last.pt instead of starting again
    assert "MAX_UPDATE: 4 -> 6" in step("train.sh", dict(env, MAX_UPDATE="6"), ok=False).stderr
    proc = step("train.sh", dict(env, MAX_UPDATE="6", ALLOW_CHANGED_SETTINGS="1"))
    assert "resuming from" in proc.stderr
    log = (recipe["work"] / "checkpoints/transformer/train.log").read_text()  # fairseq's output goes there
    assert "Loaded checkpoint" in log and "(epoch 1 @ 4 updates)" in log
    assert os.path.exists(recipe["work"] / "checkpoints/transformer/checkpoint_1_6.pt")
    proc = step("average.sh", dict(env, AVERAGE_LAST="2"))
    assert "checkpoint_1_6.pt" in proc.stderr


def test_a_run_asked_for_fewer_updates_than_it_holds_is_refused_and_keeps_its_done_and_settings(recipe, tmp_path):
    env = dict(recipe["env"], WORK_DIR=str(tmp_path / "work"), DATA_BIN=str(recipe["work"] / "data-bin"),
               ARCH="transformer", RUN_NAME="run", MAX_UPDATE="2", SAVE_INTERVAL_UPDATES="2")
    step("train.sh", env)
    run = tmp_path / "work" / "checkpoints" / "run"
    done, settings = (run / ".done").read_text(), (run / ".settings").read_text()
    proc = step("train.sh", dict(env, MAX_UPDATE="1", ALLOW_CHANGED_SETTINGS="1"), ok=False)
    assert f"{run}/checkpoint_last.pt holds 2 updates, more than MAX_UPDATE=1: raise MAX_UPDATE" in proc.stderr
    assert (run / ".done").read_text() == done and (run / ".settings").read_text() == settings
    assert "already trained" in step("train.sh", env).stderr


def updates_per_epoch(data_bin, max_tokens):
    """fairseq's own count of the batches in one epoch of the training set."""
    from fairseq import options, tasks
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data_bin), "--task", "translation", "--arch", "transformer", "--max-tokens", str(max_tokens)])
    task = tasks.setup_task(args)
    task.load_dataset("train")
    return len(task.get_batch_iterator(task.dataset("train"), max_tokens=max_tokens, max_positions=(1024, 1024),
                                       required_batch_size_multiple=8).next_epoch_itr(shuffle=False))


def test_last_update_ending_an_epoch_is_saved_for_averaging(recipe):
    # fairseq saves an update that ends an epoch only as checkpoint_last.pt; train.sh names a copy
    n = updates_per_epoch(recipe["work"] / "data-bin", 1500)
    env = dict(recipe["env"], ARCH="transformer", RUN_NAME="epoch_end", MAX_UPDATE=str(n),
               SAVE_INTERVAL_UPDATES=str(n), AVERAGE_LAST="1")
    proc = step("train.sh", env)
    assert f"update {n} ended an epoch" in proc.stderr, proc.stderr[-2000:]
    save = recipe["work"] / "checkpoints" / "epoch_end"
    assert (save / f"checkpoint_1_{n}.pt").exists()
    proc = step("average.sh", env)
    assert f"checkpoint_1_{n}.pt" in proc.stderr


def test_finetune_a_model_trained_elsewhere_through_the_recipe(recipe, tmp_path):
    """A transformer trained elsewhere (here: the recipe's own, in another work dir), with its BPE codes and
    dictionary: prepare.sh applies them (BPE_CODES, SRCDICT) instead of learning new ones, and train.sh
    fine-tunes it into RoPE (--finetune-from-model): every weight they share starts from the transformer's."""
    elsewhere = recipe["work"]
    codes, dictionary = elsewhere / "prep" / "bpe" / "codes", elsewhere / "data-bin" / "dict.en.txt"
    baseline = elsewhere / "checkpoints" / "transformer" / "checkpoint_last.pt"
    env = dict(recipe["env"], WORK_DIR=str(tmp_path / "work"), BPE_CODES=str(codes), SRCDICT=str(dictionary),
               BPE_MERGES="7")  # (not used: no codes are learned)
    proc = step("prepare.sh", env)
    assert f"BPE_CODES: applying {codes}" in proc.stderr
    data = tmp_path / "work" / "data-bin"
    assert (data / "dict.en.txt").read_text() == (data / "dict.de.txt").read_text() == dictionary.read_text()
    assert (tmp_path / "work" / "prep" / "bpe" / "codes").read_text() == codes.read_text()
    extra = f"{TINY_MODEL} --finetune-from-model {baseline}"
    step("train.sh", dict(env, ARCH="rope_transformer", RUN_NAME="finetuned", MAX_UPDATE="2",
                          SAVE_INTERVAL_UPDATES="1", EXTRA_TRAIN_ARGS=extra))
    log = (tmp_path / "work" / "checkpoints" / "finetuned" / "train.log").read_text()
    assert f"loading pretrained model from {baseline}" in log
    start, tuned = model_of(baseline), model_of(tmp_path / "work" / "checkpoints" / "finetuned" / "checkpoint_1_1.pt")
    shared = [k for k in tuned if k in start and tuned[k].is_floating_point()]
    assert len(shared) > 20 and max((tuned[k] - start[k]).abs().max().item() for k in shared) < 5e-3  # one update away


def test_prepare_text_as_it_is_with_a_dictionary_per_language(recipe, tmp_path):
    """PRETOKENIZER=none uses the text as it is; JOINED_DICTIONARY=0 makes a dictionary per language, and
    train.sh then shares only the decoder's input and output embeddings; evaluate.sh scores without Moses."""
    env = dict(recipe["env"], WORK_DIR=str(tmp_path / "work"), PRETOKENIZER="none", JOINED_DICTIONARY="0")
    step("prepare.sh", env)
    work = tmp_path / "work"
    assert (work / "prep" / "tok" / "valid.de").read_text() == (recipe["raw"] / "valid.de").read_text()
    assert (work / "data-bin" / "dict.en.txt").read_text() != (work / "data-bin" / "dict.de.txt").read_text()
    assert "PRETOKENIZER=none" in (work / "data-bin" / "recipe.env").read_text()
    proc = step("train.sh", dict(env, DRY_RUN="1"))
    command = shlex.split(proc.stderr.split("DRY_RUN=1: would run: ", 1)[1].splitlines()[0])
    assert "--share-decoder-input-output-embed" in command and "--share-all-embeddings" not in command
    bad = step("prepare.sh", dict(env, WORK_DIR=str(tmp_path / "other"), JOINED_DICTIONARY="1",
                                  SRCDICT=str(work / "data-bin" / "dict.en.txt"),
                                  TGTDICT=str(work / "data-bin" / "dict.de.txt")), ok=False)
    assert "differ: a joined dictionary needs one file; set JOINED_DICTIONARY=0" in bad.stderr
    bad = step("prepare.sh", dict(env, WORK_DIR=str(tmp_path / "other"), BPE_CODES=str(tmp_path / "missing")), ok=False)
    assert f"BPE_CODES not found: {tmp_path / 'missing'}" in bad.stderr


def test_prepare_with_sentencepiece(tmp_path):
    """TOKENIZER=spm: a joint model, pieces that fairseq's --remove-bpe sentencepiece turns back into the text."""
    from fairseq.data.data_utils import post_process

    raw = make_corpus(tmp_path / "raw", train=400)
    env = forked_commands(recipe_env(tmp_path / "work", RAW_DIR=raw, TOKENIZER="spm", SPM_VOCAB_SIZE=300))
    proc = step("prepare.sh", env)
    assert "training a joint sentencepiece unigram model, vocabulary 300" in proc.stderr
    prep, data_bin = tmp_path / "work" / "prep", tmp_path / "work" / "data-bin"
    assert "TOKENIZER=spm" in (data_bin / "recipe.env").read_text()
    assert (data_bin / "spm.model").exists() and (data_bin / "test.en-de.de.bin").exists()
    assert 250 < len(lines(data_bin / "dict.en.txt")) <= 300
    for split in ("valid", "test"):
        for lang in ("en", "de"):
            pieces = lines(prep / "spm" / f"{split}.{lang}")
            assert "\u2581" in pieces[0]
            assert [post_process(p, "sentencepiece") for p in pieces] == lines(prep / "tok" / f"{split}.{lang}")


# --------------------------------------------------------------------------- bad input

def write_corpus(path, counts):
    path.mkdir()
    for name, n in counts.items():
        (path / name).write_text("".join(f"line {i}\n" for i in range(n)))
    return path


def test_unequal_line_counts_are_named(tmp_path):
    raw = write_corpus(tmp_path / "raw", {"train.en": 3, "train.de": 2, "valid.en": 2, "valid.de": 2,
                                          "test.en": 2, "test.de": 2})
    proc = step("prepare.sh", recipe_env(tmp_path / "work", RAW_DIR=raw), ok=False)
    assert f"{raw}/train.en has 3 lines, {raw}/train.de has 2 lines" in proc.stderr


def test_missing_file_tool_and_bad_knob_are_named(tmp_path):
    raw = write_corpus(tmp_path / "raw", {"train.en": 2, "train.de": 2, "valid.en": 2, "valid.de": 2,
                                          "test.en": 2})
    proc = step("prepare.sh", recipe_env(tmp_path / "work", RAW_DIR=raw), ok=False)
    assert f"parallel file not found: {raw}/test.de" in proc.stderr
    proc = step("prepare.sh", recipe_env(tmp_path / "work", RAW_DIR=raw, BPE_MERGES="40k"), ok=False)
    assert "BPE_MERGES must be an integer >= 1, got '40k'" in proc.stderr
    proc = step("prepare.sh", recipe_env(tmp_path / "work", RAW_DIR=raw, TOKENIZER="wordpiece"), ok=False)
    assert "TOKENIZER must be one of: bpe spm; got 'wordpiece'" in proc.stderr
    # an interpreter whose directory has no fairseq-preprocess, and a PATH without one
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python")
    env = recipe_env(tmp_path / "work", RAW_DIR=raw, PYTHON=bindir / "python", PATH="/usr/bin:/bin")
    proc = step("prepare.sh", env, ok=False)
    assert "required program 'fairseq-preprocess' not found" in proc.stderr
    proc = step("evaluate.sh", recipe_env(tmp_path / "work"), ok=False)
    assert f"not found: {tmp_path}/work/data-bin/recipe.env" in proc.stderr
    proc = step("evaluate.sh", recipe_env(tmp_path / "work", PRECISION="bf16"), ok=False)
    assert "PRECISION=bf16 is not supported: fairseq-generate 0.12 ignores --bf16" in proc.stderr


def test_interrupted_prepare_leaves_no_partial_output_and_rerun_finishes(tmp_path):
    sizes = {"train": 6000, "valid": 10, "test": 10}
    raw = make_corpus(tmp_path / "raw", **sizes)
    env = recipe_env(tmp_path / "work", RAW_DIR=raw, BPE_MERGES=100, WORKERS=1)
    tok = tmp_path / "work" / "prep" / "tok"
    proc = subprocess.Popen(["bash", os.path.join(RECIPE, "prepare.sh")], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    # kill while a training file is being tokenized: six files of 6,000 lines, each seconds long
    while not (tok.is_dir() and any(p.name.startswith("train.") for p in tok.glob("*.tmp"))):
        assert proc.poll() is None, "prepare.sh ended before it could be interrupted"
        assert time.time() < deadline, "prepare.sh never started tokenizing"
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # as hard as a power cut
    proc.wait()
    partial = [p for p in tok.glob("*.tmp")]
    assert partial, "killed between files: nothing was interrupted"
    for p in partial:
        assert not (tok / p.stem).exists(), f"{p} was being written, yet {p.stem} carries the final name"
    for p in tok.iterdir():  # whatever carries a final name is complete
        if p.suffix != ".tmp":
            assert len(lines(p)) == sizes[p.name.split(".")[0]], p
    assert not (tmp_path / "work" / "data-bin").exists()
    proc = step("prepare.sh", env)
    assert "tokenizing" in proc.stderr
    for split, n in sizes.items():
        for lang in ("en", "de"):
            assert len(lines(tok / f"{split}.{lang}")) == n
    assert (tmp_path / "work" / "prep" / ".done").exists()
    assert (tmp_path / "work" / "data-bin" / "train.en-de.en.bin").exists()
    # a re-run with other settings refuses to mix them into the same directory
    proc = step("prepare.sh", dict(env, BPE_MERGES="99"), ok=False)
    assert "made with other settings" in proc.stderr and "merges=99" in proc.stderr


# --------------------------------------------------------------------------- download

SGM = '<srcset setid="x" srclang="any">\n<doc docid="1">\n{}</doc>\n</srcset>\n'


def fake_downloads(src):
    """Tiny tarballs laid out like the statmt.org ones, and a SOURCES file with file:// URLs."""
    src.mkdir()
    members = {
        "training-parallel-europarl-v7.tgz": {"training/europarl-v7.de-en.en": "e1\ne2\n",
                                              "training/europarl-v7.de-en.de": "E1\nE2\n"},
        "training-parallel-commoncrawl.tgz": {"commoncrawl.de-en.en": "c1\n", "commoncrawl.de-en.de": "C1\n",
                                              "commoncrawl.fr-en.en": "ignored\n"},
        "training-parallel-nc-v9.tgz": {"training/news-commentary-v9.de-en.en": "n1\n",
                                        "training/news-commentary-v9.de-en.de": "N1\n"},
        "wmt13-test.tgz": {f"test/newstest2013-src.{lang}.sgm": SGM.format(
            f'<seg id="1">{lang} v1</seg>\n<seg id="2"> {lang}  v2 </seg>\n') for lang in ("en", "de")},
        "wmt14-test-full.tgz": {"test-full/newstest2014-deen-src.en.sgm": SGM.format('<seg id="1">t1 &amp; x</seg>\n'),
                                "test-full/newstest2014-deen-ref.de.sgm": SGM.format('<seg id="1">T1</seg>\n')},
    }
    rows = []
    for name, files in members.items():
        stage = src / (name + ".d")
        for member, text in files.items():
            (stage / member).parent.mkdir(parents=True, exist_ok=True)
            (stage / member).write_text(text)
        with tarfile.open(src / name, "w:gz") as tar:
            for member in files:
                tar.add(stage / member, arcname=member)
        data = (src / name).read_bytes()
        checksum = {"training-parallel-commoncrawl.tgz": "sha256:" + hashlib.sha256(data).hexdigest(),
                    "training-parallel-nc-v9.tgz": "md5:" + hashlib.md5(data).hexdigest()}.get(name, "unknown")
        rows.append(f"{name}\t{checksum}\tfile://{src / name}")
    (src / "sources.tsv").write_text("# test sources\n" + "\n".join(rows) + "\n")
    return src / "sources.tsv"


def test_download_verifies_and_records_checksums(tmp_path):
    sources = fake_downloads(tmp_path / "server")
    env = recipe_env(tmp_path / "work", SOURCES=sources, EXPECT_VALID_LINES=2, EXPECT_TEST_LINES=1)
    proc = step("download.sh", env)
    raw = tmp_path / "work" / "raw"
    assert lines(raw / "train.en") == ["e1", "e2", "c1", "n1"] and lines(raw / "train.de") == ["E1", "E2", "C1", "N1"]
    assert lines(raw / "valid.de") == ["de v1", "de v2"] and lines(raw / "test.en") == ["t1 &amp; x"]
    assert "UNVERIFIED: no checksum for training-parallel-europarl-v7.tgz" in proc.stderr
    assert "checksum ok: training-parallel-commoncrawl.tgz (sha256)" in proc.stderr
    assert "checksum ok: training-parallel-nc-v9.tgz (md5)" in proc.stderr
    recorded = (tmp_path / "work" / "download" / "checksums.recorded").read_text()
    assert re.search(r"^wmt13-test.tgz sha256:[0-9a-f]{64}$", recorded, re.M)
    assert "commoncrawl" not in recorded  # known checksums are not recorded
    assert not list((tmp_path / "work" / "download").glob("*.part"))
    # once complete, nothing is downloaded again
    assert "already complete" in step("download.sh", env).stderr
    # later runs verify "unknown" files against what was recorded; a changed file is refused
    (raw / ".done").unlink()
    proc = step("download.sh", env)
    assert "verifying wmt13-test.tgz against the checksum recorded" in proc.stderr
    (raw / ".done").unlink()
    with open(tmp_path / "work" / "download" / "wmt13-test.tgz", "ab") as f:
        f.write(b"tampered")
    proc = step("download.sh", env, ok=False)
    assert f"checksum mismatch for {tmp_path}/work/download/wmt13-test.tgz" in proc.stderr
    # a partial download is resumed, and a wrong known checksum is an error
    shutil.rmtree(tmp_path / "work")
    (tmp_path / "work" / "download").mkdir(parents=True)
    whole = (tmp_path / "server" / "training-parallel-nc-v9.tgz").read_bytes()
    (tmp_path / "work" / "download" / "training-parallel-nc-v9.tgz.part").write_bytes(whole[:50])
    # the server's first 50 bytes are now wrong: only a download that resumes after the .part gets it right
    (tmp_path / "server" / "training-parallel-nc-v9.tgz").write_bytes(b"x" * 50 + whole[50:])
    bad = tmp_path / "bad.tsv"
    bad.write_text(sources.read_text().replace("\tunknown\tfile://" + str(tmp_path / "server/wmt14"),
                                               "\tsha256:" + "0" * 64 + "\tfile://" + str(tmp_path / "server/wmt14")))
    proc = step("download.sh", dict(env, SOURCES=bad), ok=False)
    assert (tmp_path / "work/download/training-parallel-nc-v9.tgz").read_bytes() == whole
    assert "checksum mismatch for" in proc.stderr and "wmt14-test-full.tgz" in proc.stderr


def test_evaluate_with_model_overrides_retranslates_and_records_them(recipe):
    """MODEL_OVERRIDES reaches fairseq-generate (--model-overrides), is recorded in result.json, and
    translations made without it are not reused for it (nor the other way round)."""
    env = dict(recipe["env"], ARCH="rope_transformer", RUN_NAME="rope_transformer", AVERAGE_LAST="2")
    overrides = "{'rope_scaling': 'linear', 'rope_scaling_factor': 2.0}"
    proc = step("evaluate.sh", dict(env, MODEL_OVERRIDES=overrides))
    assert "translating test" in proc.stderr and "up to date" not in proc.stderr
    result = json.loads((recipe["work"] / "eval" / "rope_transformer" / "result.json").read_text())
    assert result["model_overrides"] == overrides
    proc = step("evaluate.sh", dict(env, MODEL_OVERRIDES=overrides))
    assert "translations up to date" in proc.stderr
    proc = step("evaluate.sh", env)
    assert "translating test" in proc.stderr
    assert "model_overrides" not in json.loads((recipe["work"] / "eval" / "rope_transformer" / "result.json").read_text())
    proc = step("evaluate.sh", dict(env, MODEL_OVERRIDES="rope_scaling=linear"), ok=False)
    assert "MODEL_OVERRIDES must be a Python dict" in proc.stderr


# --------------------------------------------------------------------------- tuning, convergence, per-system settings

def valid_nll(log_path):
    """{update: valid nll_loss} read straight from fairseq's json log lines (the ground truth for the tune command)."""
    losses = {}
    for line in open(log_path, encoding="utf-8"):
        m = re.search(r"\| valid \| (\{.*\})\s*$", line)
        if m:
            stats = json.loads(m[1])
            losses[int(stats["valid_num_updates"])] = float(stats["valid_nll_loss"])
    return losses


def test_tune_chooses_each_systems_lowest_valid_loss_from_its_own_grid(recipe, tmp_path):
    """tune.sh over lr x warm-up for two systems: every point trained to the budget with its own settings, and
    each system's chosen point is the one of lowest valid nll_loss at the budget in its own fairseq log; the
    table lists every point; a re-run trains nothing again."""
    env = {k: v for k, v in recipe["env"].items() if k != "EXTRA_TRAIN_ARGS"}
    env.update(ARCHS="transformer rope_transformer", TUNE_LRS="5e-4 3e-3", TUNE_WARMUPS="1 4", TUNE_UPDATES="4",
               MODEL_ARGS=TINY_MODEL, SAVE_INTERVAL_UPDATES="2", OUT_DIR=str(tmp_path), NAME="tiny")
    step("tune.sh", env)
    work = recipe["work"]
    table = (tmp_path / "tiny_tuning.md").read_text()
    chosen = dict(re.findall(r"^(\w+)=(\S+)", (work / "tune" / "chosen.env").read_text(), re.M))
    # the settings published beside the table (what CHOSEN= takes on another machine) are the ones chosen
    assert (tmp_path / "tiny_tuning.env").read_text() == (work / "tune" / "chosen.env").read_text()
    for system in ("transformer", "rope_transformer"):
        losses = {}
        for lr in ("5e-4", "3e-3"):
            for wu in ("1", "4"):
                folder = work / "tune" / "checkpoints" / f"{system}_lr{lr}_wu{wu}"
                settings = (folder / ".settings").read_text()
                assert f"LR={lr}\n" in settings and f"WARMUP_UPDATES={wu}\n" in settings and "MAX_UPDATE=4\n" in settings
                assert f"--arch {system} " in (folder / "train.log").read_text()
                losses[lr, wu] = valid_nll(folder / "train.log")[4]
                assert f"{losses[lr, wu]:.3f}" in table
        best = min(losses, key=losses.get)
        assert (chosen[f"LR_{system}"], chosen[f"WARMUP_UPDATES_{system}"]) == best, (losses, chosen)
        assert f"- {system}: lr {best[0]}, warm-up {best[1]} " in table
    assert len(set(losses.values())) > 1, "the grid's points trained alike: the test cannot tell a choice"
    assert step("tune.sh", env).stdout.count("already trained") == 8


def test_tune_with_heads_trains_the_comparisons_model_with_that_many_heads_and_refuses_a_head_count_not_dividing_128(
        recipe, tmp_path):
    """HEADS=4 without MODEL_ARGS: the point trains the real-text study's model (2+2 layers, dimension 128, FFN 512)
    with 4 heads a layer, as the checkpoint fairseq saved says; a HEADS that does not divide 128, or is no number,
    stops before training with an error naming HEADS and the value."""
    env = {k: v for k, v in recipe["env"].items() if k not in ("EXTRA_TRAIN_ARGS", "MODEL_ARGS")}
    env.update(WORK_DIR=str(tmp_path / "work"), DATA_BIN=str(recipe["work"] / "data-bin"), ARCHS="rope_transformer",
               TUNE_LRS="1e-3", TUNE_WARMUPS="1", TUNE_UPDATES="1", SAVE_INTERVAL_UPDATES="1", OUT_DIR=str(tmp_path),
               NAME="heads", HEADS="4")
    step("tune.sh", env)
    from fairseq_rope_checkpoints import load_checkpoint

    point = tmp_path / "work" / "tune" / "checkpoints" / "rope_transformer_lr1e-3_wu1"
    model = load_checkpoint(str(point / "checkpoint_last.pt"))["cfg"]["model"]
    assert (model.encoder_attention_heads, model.decoder_attention_heads) == (4, 4)
    assert (model.encoder_layers, model.decoder_layers, model.encoder_embed_dim, model.decoder_ffn_embed_dim) == (2, 2, 128, 512)
    for bad in ("3", "0", "four", "256"):
        proc = step("tune.sh", dict(env, HEADS=bad, WORK_DIR=str(tmp_path / f"bad{bad}")), ok=False)
        assert f"HEADS must be a whole number that divides the model dimension 128 (1, 2, 4, ..., 128), got '{bad}'" in proc.stderr
        assert not (tmp_path / f"bad{bad}" / "tune").exists()


@pytest.mark.parametrize("heads", ["3", "0", "four", "256"])
def test_debian_comparison_refuses_a_head_count_not_dividing_128_before_building_anything(tmp_path, heads):
    env = recipe_env(tmp_path / "work", HEADS=heads, CORPUS_WORK_DIR=tmp_path / "corpus", RAW_OUT=tmp_path / "corpus" / "raw")
    proc = step("debian_comparison.sh", env, ok=False, timeout=120)
    assert (f"[debian_comparison] ERROR: HEADS must be a whole number that divides the model dimension 128 "
            f"(1, 2, 4, ..., 128), got '{heads}'") in proc.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "corpus").exists()


def test_debian_comparison_trains_the_systems_of_archs_with_their_own_lines_of_a_chosen_file_of_more_systems(tmp_path):
    """CHOSEN tuned for three systems, ARCHS naming two (one as NAME=ARCH): the study runs on a corpus given as
    RAW_DIR (no Debian corpus built), each run trained with its own learning rate, warm-up and ARGS_ from
    CHOSEN, as the fairseq-train command in its log says, and nothing of the third (run.sh would refuse its
    lines); a system of ARCHS without its lines in CHOSEN, or a run name that is no variable name, stops the
    study before the data is prepared, with an error naming the file, the setting and the system."""
    raw = make_corpus(tmp_path / "raw", train=300)
    (raw / "report.json").write_text(json.dumps({"test_lines": {"test_prose": 0, "test_help": 10}}))
    chosen = tmp_path / "chosen.env"  # (as tune.sh writes it, for three systems, and a system's own flags)
    chosen.write_text("LR_transformer=1e-3\nWARMUP_UPDATES_transformer=3  # valid loss 8.0 at 4\n"
                      'ARGS_transformer="--attention-dropout 0.05"\n'
                      "LR_rpe_transformer=7e-3\nWARMUP_UPDATES_rpe_transformer=1  # valid loss 7.8 at 4\n"
                      'ARGS_rpe_transformer="--rpe-keys-only"\n'
                      "LR_rope=2e-3\nWARMUP_UPDATES_rope=2  # valid loss 7.9 at 4\n")
    env = forked_commands(recipe_env(
        tmp_path / "work", RAW_DIR=raw, CHOSEN=chosen, ARCHS="transformer rope=rope_transformer", SEEDS="1",
        MAX_UPDATE=4, MODEL_ARGS=TINY_MODEL, BPE_MERGES=150, SAVE_INTERVAL_UPDATES=2, AVERAGE_LAST=2,
        TOKENS_PER_UPDATE=1500, MAX_TOKENS_PER_GPU=1500, LENPENS="0.6 1.4", GEN_MAX_TOKENS=2000,
        OUT_DIR=tmp_path / "out", NAME="tiny", CORPUS_WORK_DIR=tmp_path / "corpus"))
    proc = step("debian_comparison.sh", env)
    assert not (tmp_path / "corpus").exists()  # RAW_DIR given: no corpus built
    assert "test parts: prose=1-10 help=11-16" in proc.stderr
    for table in ("tiny_valid_loss.md", "tiny_by_length.md", "tiny_prose_by_length.md", "tiny_help_by_length.md"):
        assert "| rope |" in (tmp_path / "out" / table).read_text(), table
    checkpoints = tmp_path / "work" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.is_dir()) == ["rope_seed1", "transformer_seed1"]
    for run, arch, lr, warmup, own in (("transformer", "transformer", "1e-3", "3", "--attention-dropout 0.05"),
                                       ("rope", "rope_transformer", "2e-3", "2", None)):
        command = re.search(r"^# .*fairseq-train (.*)$", (checkpoints / f"{run}_seed1" / "train.log").read_text(), re.M)[1]
        assert f" --arch {arch} " in command
        assert float(re.search(r" --lr (\S+)", command)[1]) == float(lr), command
        assert re.search(r" --warmup-updates (\S+)", command)[1] == warmup, command
        assert (own is None or f" {own}" in command) and "--rpe-keys-only" not in command, command
    # a system of ARCHS that CHOSEN has no lines for; a run name bash cannot name a variable after
    chosen.write_text("".join(l for l in chosen.read_text().splitlines(True) if "_rope=" not in l))
    for archs, error in (("transformer rope=rope_transformer",
                          f'{chosen} has no LR_rope for the system rope of ARCHS="transformer rope=rope_transformer"'),
                         ("transformer rope-x=rope_transformer",
                          "ARCHS: run name 'rope-x' (in 'rope-x=rope_transformer') must be letters, digits and _")):
        work = tmp_path / "work2"
        proc = step("debian_comparison.sh", dict(env, WORK_DIR=str(work), ARCHS=archs), ok=False)
        assert f"[debian_comparison] ERROR: {error}" in proc.stderr
        assert not (work / "data-bin").exists()


def test_debian_comparison_takes_the_test_parts_from_report_json_or_test_parts_and_names_a_report_without_them(tmp_path):
    raw = make_corpus(tmp_path / "raw", train=20)
    chosen = tmp_path / "chosen.env"
    chosen.write_text("LR_transformer=1e-3\nWARMUP_UPDATES_transformer=3\n")  # (no rope_transformer: stops there)
    env = recipe_env(tmp_path / "work", RAW_DIR=raw, CHOSEN=chosen, ARCHS="transformer rope_transformer", MAX_UPDATE=4)
    proc = step("debian_comparison.sh", env, ok=False, timeout=120)
    assert f"the corpus report (debian_corpus.sh writes it; or give TEST_PARTS) not found: {raw}/report.json" in proc.stderr
    (raw / "report.json").write_text(json.dumps({"sources": {}}))
    proc = step("debian_comparison.sh", env, ok=False, timeout=120)
    assert f"[debian_comparison] ERROR: {raw}/report.json: no test_lines, where each part of the test set starts" in proc.stderr
    assert "Traceback" not in proc.stderr
    (raw / "report.json").unlink()
    proc = step("debian_comparison.sh", dict(env, TEST_PARTS="prose=1-10 help=11-16"), ok=False, timeout=120)
    assert "test parts: prose=1-10 help=11-16" in proc.stderr and f"{chosen} has no LR_rope_transformer" in proc.stderr
    assert not (tmp_path / "work").exists()


def test_tune_refuses_a_point_not_trained_to_the_budget(recipe):
    work = recipe["work"]
    point = next((work / "tune" / "checkpoints").glob("transformer_lr*"))
    proc = run_tool("fairseq-rope-tune", "grid", f"transformer={point}", "--updates", "6", check=False)
    assert proc.returncode == 1 and f"{point}: no validation at update 6 in its train.log (last: 4)" in proc.stderr


def test_converge_extends_the_runs_until_every_valid_loss_is_flat(recipe, tmp_path):
    """converge.sh from the tuned settings: each system CONVERGE_STEP more updates at a time until its own
    verdict, the criterion computed here from fairseq's log (relative drop of valid nll_loss from the
    validation nearest (1 - FLAT_LAST) of the way to the last, under FLAT_DROP), is flat; then every system
    at the largest such budget, until one budget is flat for all: budget.env is the first budget of the grid
    at which every run is flat, each check is in the report, and past CONVERGE_MAX an error names it."""
    chosen = tmp_path / "chosen.env"  # (as tune.sh writes it)
    chosen.write_text("LR_transformer=1e-3\nWARMUP_UPDATES_transformer=2  # valid loss 8.0 at 4\n"
                      "LR_rope_transformer=2e-3\nWARMUP_UPDATES_rope_transformer=1  # valid loss 7.9 at 4\n")
    env = {k: v for k, v in recipe["env"].items() if k != "EXTRA_TRAIN_ARGS"}
    env.update(ARCHS="transformer rope_transformer", MODEL_ARGS=TINY_MODEL, SAVE_INTERVAL_UPDATES="2", CHOSEN=str(chosen),
               FIRST_SEED="7", CONVERGE_START="8", CONVERGE_STEP="2", CONVERGE_MAX="20", FLAT_LAST="0.25",
               FLAT_DROP="0.016", OUT_DIR=str(tmp_path), NAME="tiny")
    proc = step("converge.sh", env, ok=None)
    work = recipe["work"]
    logs = {s: valid_nll(work / "checkpoints" / f"{s}_seed7" / "train.log") for s in ("transformer", "rope_transformer")}

    def flat(losses, budget):
        points = sorted(u for u in losses if u <= budget)
        start = min(points[:-1], key=lambda u: (abs(u - budget * 0.75), u))
        return (losses[start] - losses[budget]) / losses[start] < 0.016

    # the search, replayed on the logs: the checks each system makes, and where it ends (None: past 20)
    floor, reached, checks, budget = 8, {s: 0 for s in logs}, [], None
    while True:
        found = {}
        for system, losses in logs.items():
            b = max(floor, reached[system])
            while b <= 20 and not flat(losses, b):
                checks.append((system, b, False))
                b += 2
            if b <= 20:
                if (system, b, True) not in checks:  # (already flat there in the last round: one line)
                    checks.append((system, b, True))
                reached[system] = b
            found[system] = b
        if max(found.values()) > 20:
            break
        if len(set(found.values())) == 1:
            budget = max(found.values())
            break
        floor = max(found.values())
    for system, lr, warmup in (("transformer", "1e-3", "2"), ("rope_transformer", "2e-3", "1")):
        settings = (work / "checkpoints" / f"{system}_seed7" / ".settings").read_text()
        assert f"LR={lr}\n" in settings and f"WARMUP_UPDATES={warmup}\n" in settings and "SEED=7\n" in settings
    if budget is not None:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (work / "tune" / "budget.env").read_text() == f"MAX_UPDATE={budget}\n"
        assert (tmp_path / "tiny_budget.env").read_text() == f"MAX_UPDATE={budget}\n"  # published beside the report
        report = (tmp_path / "tiny_convergence.md").read_text()
        made = sorted((s, int(u), verdict == "flat") for u, s, verdict in
                      re.findall(r"^- at (\d+) updates: (\w+): .*, (flat|still improving) ", report, re.M))
        assert made == sorted(checks), report
        assert max(max(l) for l in logs.values()) == budget
        assert all(flat(l, budget) for l in logs.values())
    else:
        assert proc.returncode != 0 and "not flat by CONVERGE_MAX=20 updates" in proc.stderr
        assert not (work / "tune" / "budget.env").exists() and not (tmp_path / "tiny_budget.env").exists()
        assert max(max(l) for l in logs.values()) == 20
    assert {s for s, _, _ in checks} == set(logs)
    firsts = {s: min(b for t, b, verdict in checks if t == s and verdict) for s in logs if any(t == s and v for t, _, v in checks)}
    assert len(set(firsts.values())) > 1, f"the systems were flat at the same budget ({checks}): nothing to tell"
    # the flatness table of the runs as they ended (sample_figures.sh's ${NAME}_flatness.md), checked on their logs
    table = tmp_path / "flat.md"
    run_tool("fairseq-rope-tune", "flat", *(f"{s}={work / 'checkpoints' / f'{s}_seed7'}" for s in logs), "--last", "0.25",
             "--drop", "0.016", "--out-md", str(table), check=False)
    for system, losses in logs.items():
        end = max(losses)
        start = min((u for u in losses if u != end), key=lambda u: (abs(u - 0.75 * end), u))
        drop = (losses[start] - losses[end]) / losses[start]
        row = re.search(rf"^\| {system} \| {system}_seed7 \| {start} \| {losses[start]:.4f} \| {end} \| "
                        rf"{losses[end]:.4f} \| ([+-][\d.]+)% \| (flat|still improving) \|$", table.read_text(), re.M)
        assert row and float(row[1]) == pytest.approx(100 * drop, abs=0.005), table.read_text()
        assert (row[2] == "flat") == flat(losses, end)


def converge_env(recipe, tmp_path, chosen, **knobs):
    """converge.sh's environment for a search in a work folder of its own (tmp_path/work) on the recipe's
    binarized data: the tiny model, `chosen` as the tuned settings (CHOSEN), the report as tiny_*.md."""
    (tmp_path / "chosen.env").write_text(chosen)
    env = {k: v for k, v in recipe["env"].items() if k != "EXTRA_TRAIN_ARGS"}
    env.update(WORK_DIR=str(tmp_path / "work"), DATA_BIN=str(recipe["work"] / "data-bin"), MODEL_ARGS=TINY_MODEL,
               CHOSEN=str(tmp_path / "chosen.env"), OUT_DIR=str(tmp_path), NAME="tiny", **knobs)
    return env


def test_converge_stopped_between_two_budgets_goes_on_to_the_next_budget_from_the_last_checkpoint(recipe, tmp_path):
    """converge.sh stopped while a run was on its way from one budget of the grid to the next (checkpoint_last.pt
    past the last budget, no .done, as a kill leaves it) goes on from that checkpoint to the next budget of the
    grid and checks there, instead of asking train.sh for the budget below what the run holds."""
    env = converge_env(recipe, tmp_path, "LR_transformer=1e-3\nWARMUP_UPDATES_transformer=2\n", ARCHS="transformer",
                       SAVE_INTERVAL_UPDATES="2", CONVERGE_START="4", CONVERGE_STEP="4", CONVERGE_MAX="8",
                       FLAT_LAST="0.5", FLAT_DROP="0.99")
    run = tmp_path / "work" / "checkpoints" / "transformer_seed1"
    # the run as converge.sh's step from 4 to 8 updates leaves it when stopped at 6
    step("train.sh", dict(env, ARCH="transformer", RUN_NAME="transformer_seed1", SEED="1", MAX_UPDATE="6", LR="1e-3",
                          WARMUP_UPDATES="2", EXTRA_TRAIN_ARGS=TINY_MODEL))
    (run / ".done").unlink()
    proc = step("converge.sh", env)
    assert f"resuming from {run}/checkpoint_last.pt (6 updates)" in proc.stdout + proc.stderr
    assert max(valid_nll(run / "train.log")) == 8
    assert (tmp_path / "work" / "tune" / "budget.env").read_text() == "MAX_UPDATE=8\n"
    checks = re.findall(r"^- at (\d+) updates: (\w+): .*, (flat|still improving) ", (tmp_path / "tiny_convergence.md").read_text(), re.M)
    assert checks == [("8", "transformer", "flat")]
    # searched again with a CONVERGE_MAX below what the run holds: an error naming both, nothing trained
    (tmp_path / "work" / "tune" / "budget.env").unlink()
    proc = step("converge.sh", dict(env, CONVERGE_MAX="6"), ok=False)
    assert f"{run} holds 8 updates: the grid's next budget, 8, is past CONVERGE_MAX=6" in proc.stdout
    assert max(valid_nll(run / "train.log")) == 8


def test_converge_refuses_to_resume_a_report_begun_with_another_criterion(recipe, tmp_path):
    """A search stopped with the single-validation check (FLAT_MEAN_OF=1) and run again with FLAT_MEAN_OF=3
    would write checks of two criteria into one report: refused before anything is trained, naming the
    report, its criterion and the knobs; the same criterion again is taken up."""
    env = converge_env(recipe, tmp_path, "LR_transformer=1e-3\nWARMUP_UPDATES_transformer=2\n", ARCHS="transformer",
                       SAVE_INTERVAL_UPDATES="1", CONVERGE_START="4", CONVERGE_STEP="2", CONVERGE_MAX="4",
                       FLAT_LAST="0.5", FLAT_DROP="0.99", FLAT_MEAN_OF="3")
    report = tmp_path / "work" / "tune" / "convergence.md.tmp"
    report.parent.mkdir(parents=True)
    begun = ("Flat: valid nll_loss less than 0.99 lower (relative) over the last 0.5 of the updates (fairseq-rope-tune "
             "flat). Each system is checked on its own, from the budget it has reached, CONVERGE_STEP more at a time.")
    report.write_text(begun + "\n")
    proc = step("converge.sh", env, ok=False)
    assert (f"{report} was begun with another criterion ({begun}): run with that search's FLAT_LAST, FLAT_DROP and "
            "FLAT_MEAN_OF, or move the report away to search with FLAT_LAST=0.5 FLAT_DROP=0.99 FLAT_MEAN_OF=3") in proc.stderr
    assert not (tmp_path / "work" / "checkpoints").exists()
    step("converge.sh", dict(env, FLAT_MEAN_OF="1"))  # (its own criterion: the search goes on, and ends flat at 4)
    assert (tmp_path / "work" / "tune" / "budget.env").read_text() == "MAX_UPDATE=4\n"


def test_converge_not_flat_by_converge_max_reports_where_each_run_is_heading_before_its_error(recipe, tmp_path):
    """converge.sh whose runs are not flat by CONVERGE_MAX (a criterion no falling loss meets) writes, before
    its error, each run's projection (fairseq-rope-tune extrapolate on the run, with FLAT_LAST and FLAT_DROP:
    a fit, or why there is none) into the report, once however often it stops there. Its checks with
    FLAT_MEAN_OF=2 are fairseq-rope-tune flat --mean-of 2 on each run as it stood at each budget."""
    env = converge_env(recipe, tmp_path, "LR_transformer=1e-3\nWARMUP_UPDATES_transformer=2\nLR_rope=2e-3\n"
                       "WARMUP_UPDATES_rope=2\n", ARCHS="transformer rope=rope_transformer", SAVE_INTERVAL_UPDATES="1",
                       CONVERGE_START="8", CONVERGE_STEP="4", CONVERGE_MAX="12", FLAT_LAST="0.5", FLAT_DROP="0.000001",
                       FLAT_MEAN_OF="2")
    proc = step("converge.sh", env, ok=False)
    assert "not flat by CONVERGE_MAX=12 updates: transformer rope reached none none" in proc.stdout + proc.stderr
    report = (tmp_path / "work" / "tune" / "convergence.md.tmp").read_text()
    assert report.startswith("Flat: valid nll_loss less than 0.000001 lower (relative) over the last 0.5 of the updates, "
                             "each end of the window the mean of the 2 validations up to it "), report
    checks = []
    for budget in (8, 12):
        for name in ("transformer", "rope"):
            run = tmp_path / "work" / "checkpoints" / f"{name}_seed1"
            direct = run_tool("fairseq-rope-tune", "flat", f"{name}={run}", "--last", "0.5", "--drop", "0.000001",
                              "--mean-of", "2", "--until", str(budget), check=False)
            assert direct.returncode == 3 and "(each end of the window the mean of the 2 validations up to it)" in direct.stdout
            checks.append(f"- at {budget} updates: {direct.stdout.strip()}")
    assert sorted(line for line in report.splitlines() if line.startswith("- at ")) == sorted(checks), report
    projected = [line for line in report.splitlines() if line.startswith("- projected: ")]
    expected = []
    for name in ("transformer", "rope"):
        run = tmp_path / "work" / "checkpoints" / f"{name}_seed1"
        assert max(valid_nll(run / "train.log")) == 12
        direct = run_tool("fairseq-rope-tune", "extrapolate", f"{name}={run}", "--last", "0.5", "--drop", "0.000001", check=False)
        expected += [f"- projected: {line}" for line in (direct.stdout + direct.stderr).splitlines()]
    # (a fit from a quarter and one from half of each run's updates, each projected or saying why not)
    assert projected == expected and len(expected) == 4, report
    assert all(re.match(r"- projected: (transformer|rope): valid nll_loss from update \d+ on \(\d+ validations, last 12\): ",
                        line) for line in projected), report
    step("converge.sh", env, ok=False)  # stopped there again: the same lines, not twice
    again = (tmp_path / "work" / "tune" / "convergence.md.tmp").read_text()
    assert [line for line in again.splitlines() if line.startswith("- projected: ")] == expected


def test_head_size_tables_the_interaction_of_ropes_lead_and_the_head_size_from_the_two_studies_records(tmp_path):
    """debian_head_size.sh on the records of two studies (HEADS=2 and HEADS=4, two or three seeds each): every
    seed's hypotheses scored by sacreBLEU, the interaction (RoPE 4 heads - transformer 4 heads) - (RoPE 2 heads -
    transformer 2 heads) of the mean BLEU over seeds with Welch's interval on the contrast, for the whole test
    set and for each part of the corpus report's test_lines; a system with one seed at a size is refused."""
    from sacrebleu.metrics import BLEU
    from scipy import stats

    raw = tmp_path / "raw"
    raw.mkdir()
    src = ["the dog runs .", "a cat reads a long book !", "42 red houses ?", "where is the key ?",
           "the server starts .", "run apt-get update first"]
    ref = ["Der Hund läuft .", "Eine Katze liest ein langes Buch !", "42 rote Häuser ?", "Wo ist der Schlüssel ?",
           "Der Server startet .", "Zuerst apt-get update ausführen"]
    (raw / "test.en").write_text("".join(f"{line}\n" for line in src), encoding="utf-8")
    (raw / "test.de").write_text("".join(f"{line}\n" for line in ref), encoding="utf-8")
    (raw / "report.json").write_text(json.dumps({"test_lines": {"test_prose": 0, "test_help": 4}}))
    rng = random.Random(3)
    drop = {("transformer", 2): 0.5, ("rope_transformer", 2): 0.3, ("transformer", 4): 0.45, ("rope_transformer", 4): 0.1}
    hyps = {}
    for (system, heads), rate in drop.items():
        for seed in (1, 2, 3)[:2 if heads == 4 else 3]:
            out = [" ".join(w for w in line.split() if rng.random() > rate) for line in ref]
            folder = tmp_path / f"records{heads}" / f"{system}_seed{seed}"
            folder.mkdir(parents=True)
            (folder / "hyps.detok.de").write_text("".join(f"{line}\n" for line in out), encoding="utf-8")
            (folder / "result.json").write_text(json.dumps({"system": system, "hyps_detok": "hyps.detok.de",
                                                            "reference": "test.de"}))
            hyps.setdefault((system, heads), []).append(out)
    env = recipe_env(tmp_path / "work", RAW_DIR=raw, RECORDS_2=tmp_path / "records2", RECORDS_4=tmp_path / "records4",
                     OUT_DIR=tmp_path / "out", BOOTSTRAP_SAMPLES="20")
    step("debian_head_size.sh", env)
    page = (tmp_path / "out" / "debian_head_size.md").read_text()
    sections = page.split("\n## ")
    assert len(sections) == 4, page  # both sets, prose, help, RoPE's own head-size effect
    for section, (first, last) in zip(sections[:3], ((1, 6), (1, 4), (5, 6))):
        bleu = {key: [BLEU().corpus_score(h[first - 1:last], [ref[first - 1:last]]).score for h in seeds]
                for key, seeds in hyps.items()}
        means = {key: float(np.mean(v)) for key, v in bleu.items()}
        contrast = (means["rope_transformer", 4] - means["transformer", 4]) - (means["rope_transformer", 2] - means["transformer", 2])
        parts = {key: np.var(v, ddof=1) / len(v) for key, v in bleu.items()}
        df = sum(parts.values()) ** 2 / sum(parts[k] ** 2 / (len(bleu[k]) - 1) for k in bleu)
        half = stats.t.ppf(0.975, df) * sum(parts.values()) ** 0.5
        row = re.search(r"^\| \(rope_transformer_4heads - transformer_4heads\) - \(rope_transformer_2heads - "
                        r"transformer_2heads\) \| ([^|]+) \|", section, re.M)
        assert row and row[1].startswith(f"{contrast:+.2f} [{contrast - half:+.2f}, {contrast + half:+.2f}]"), section
    assert "the prose test set (lines 1-4)" in sections[1] and "the help test set (lines 5-6)" in sections[2]
    own = re.search(r"^\| rope_transformer_4heads \| 2 \| [\d.]+ ± [\d.]+ \(([+-][\d.]+) ", sections[3], re.M)
    rope = {h: float(np.mean([BLEU().corpus_score(x, [ref]).score for x in hyps["rope_transformer", h]])) for h in (2, 4)}
    assert own and float(own[1]) == pytest.approx(rope[4] - rope[2], abs=0.005), sections[3]
    assert not re.search(r"^\| transformer_[24]heads \|", sections[3], re.M)
    shutil.rmtree(tmp_path / "records4" / "transformer_seed2")
    proc = step("debian_head_size.sh", env, ok=False)
    assert "transformer at 4 heads has one seed in" in proc.stderr


def test_each_system_gets_its_own_seeds_rate_and_the_length_penalty_of_its_best_valid_bleu(recipe):
    """run.sh with SEEDS_<name>, LR_<name> and LENPENS: the system's own seeds and learning rate are the ones
    trained (recorded in the run's settings), every penalty translates valid, and the test set is translated
    with the one of highest valid BLEU (ties: the nearest to 0.6), recorded in result.json."""
    env = dict(recipe["env"], ARCHS="transformer rope_transformer", SEEDS="1", SEEDS_rope_transformer="4",
               LR_rope_transformer="2e-3", LENPENS="0.6 2.0", PARALLEL_RUNS="1")
    step("run.sh", env)
    work = recipe["work"]
    assert not (work / "checkpoints" / "rope_transformer_seed1").exists() or \
        "LR=2e-3" not in (work / "checkpoints" / "rope_transformer_seed1" / ".settings").read_text()
    assert "LR=2e-3\n" in (work / "checkpoints" / "rope_transformer_seed4" / ".settings").read_text()
    assert "SEED=4\n" in (work / "checkpoints" / "rope_transformer_seed4" / ".settings").read_text()
    for run in ("transformer_seed1", "rope_transformer_seed4"):
        valid = {}
        for penalty in ("0.6", "2.0"):
            result = json.loads((work / "eval" / run / f"valid_lenpen{penalty}" / "result.json").read_text())
            assert result["subset"] == "valid" and float(result["lenpen"]) == float(penalty)
            assert result["n_sentences"] == len(lines(recipe["raw"] / "valid.de"))
            valid[float(penalty)] = result["sacrebleu"]
        best = max(valid, key=lambda p: (valid[p], -abs(p - 0.6)))
        test = json.loads((work / "eval" / run / "result.json").read_text())
        assert test["subset"] == "test" and float(test["lenpen"]) == best
    bad = step("run.sh", dict(env, SEEDS_rope="1"), ok=False)
    assert "SEEDS_rope is set, but no run in ARCHS is named 'rope'" in bad.stderr


def test_rope_auto_translates_every_rope_run_again_with_its_training_length_as_a_system_of_its_own(recipe, tmp_path):
    """sample_figures.sh with ROPE_AUTO=1: each RoPE run's averaged checkpoint translated again with
    --rope-scaling auto (recorded in its result.json), as the system rope_transformer_auto beside the others in
    the comparison; a transformer gets no such run."""
    env = {k: v for k, v in recipe["env"].items() if k != "EXTRA_TRAIN_ARGS"}
    env.update(ARCHS="plain=transformer rope_transformer", ROPE_AUTO="1", OUT_DIR=str(tmp_path), NAME="auto",
               TRAIN_MAX_WORDS="8", PARALLEL_RUNS="1")  # (plain: a run of its own, as earlier tests changed transformer's)
    step("sample_figures.sh", env)
    work = recipe["work"]
    result = json.loads((work / "eval" / "rope_transformer_auto" / "result.json").read_text())
    assert result["system"] == "rope_transformer_auto" and result["model_overrides"] == "{'rope_scaling': 'auto'}"
    assert result["checkpoint"].endswith("checkpoints/rope_transformer/checkpoint_avg_last2.pt")
    assert not (work / "eval" / "plain_auto").exists()
    table = (tmp_path / "auto_by_length.md").read_text()
    assert re.search(r"^\| rope_transformer_auto \|", table, re.M) and "Longest training source: 8 words" in table


def test_a_finished_run_is_kept_as_a_record_and_restored_elsewhere_without_training(recipe, tmp_path):
    """run.sh with RECORDS: every finished run is saved as a record (no checkpoints; the result's paths
    relative to it; the reference scores' P- lines and the train.log gzipped); a fresh work folder (another
    machine: its own prepare.sh) restores each run from its record instead of training it, and gives the same
    train.log, table and test NLL (with ROPE_AUTO, the RoPE run's second translation too); a record saved
    before the gzipped files (train.log, score_reference.out as text) is restored the same; a changed setting
    trains the run again; a record whose files changed is refused, naming the file."""
    records = tmp_path / "records"
    env = dict(recipe["env"], ARCHS="rec=transformer rrope=rope_transformer", SEEDS="1 2", SEEDS_rrope="1",
               LENPENS="0.6 1.0", PARALLEL_RUNS="1", ROPE_AUTO="1", RECORDS=str(records))
    step("run.sh", env)
    work = recipe["work"]
    auto = json.loads((records / "rrope_seed1" / "also" / "rrope_auto_seed1" / "result.json").read_text())
    assert auto["model_overrides"] == "{'rope_scaling': 'auto'}" and auto["system"] == "rrope_auto"
    assert "ROPE_AUTO=1" in json.loads((records / "rrope_seed1" / "record.json").read_text())["settings"]
    for run in ("rec_seed1", "rec_seed2", "rrope_seed1"):
        record = json.loads((records / run / "record.json").read_text())
        assert "DATA_BIN=" not in "\n".join(record["settings"]) and "MAX_UPDATE=4" in record["settings"]
        assert f"SEED={run[-1]}" in record["settings"] and "LENPENS=0.6 1.0" in record["settings"]
        assert record["machine"]["cpu"] and record["machine"]["torch"] == __import__("torch").__version__
        assert not list((records / run).glob("*.pt"))
        result = json.loads((records / run / "result.json").read_text())
        assert (result["hyps_detok"], result["reference_scores"]) == ("hyps.detok.de", "score_reference.out.gz")
        assert lines(records / run / "hyps.detok.de") == lines(work / "eval" / run / "hyps.detok.de")
        scores = gzip.decompress((records / run / "score_reference.out.gz").read_bytes()).decode().splitlines()
        assert len(scores) == len(lines(recipe["raw"] / "test.de")) and all(s.startswith("P-") for s in scores)
        assert scores == [s for s in lines(work / "eval" / run / "score_reference.out") if s.startswith("P-")]
        assert gzip.decompress((records / run / "train.log.gz").read_bytes()) \
            == (work / "checkpoints" / run / "train.log").read_bytes()
        assert not (records / run / "train.log").exists() and not (records / run / "score_reference.out").exists()
    first = (work / "results.md").read_text()

    elsewhere = tmp_path / "elsewhere"
    proc = step("run.sh", dict(env, WORK_DIR=str(elsewhere)))
    assert proc.stderr.count("restored from its record") == 3, proc.stderr[-3000:]
    assert not list((elsewhere / "checkpoints").rglob("*.pt")) and "fairseq-train" not in proc.stderr
    assert (elsewhere / "results.md").read_text() == first and "rrope_auto" in first
    for run in ("rec_seed1", "rec_seed2", "rrope_seed1"):
        assert (elsewhere / "checkpoints" / run / "train.log").read_bytes() \
            == (work / "checkpoints" / run / "train.log").read_bytes()
    for run in ("rec_seed1", "rec_seed2", "rrope_seed1", "rrope_auto_seed1"):
        restored = json.loads((elsewhere / "eval" / run / "result.json").read_text())
        original = json.loads((work / "eval" / run / "result.json").read_text())
        assert restored["reference"] == original["reference"]
        assert {k: v for k, v in restored.items() if k not in ("hyps_detok", "reference_scores", "record",
                                                               "hyps_tok", "generate_output")} \
            == {k: v for k, v in original.items() if k not in ("hyps_detok", "reference_scores", "hyps_tok",
                                                              "generate_output")}
    compared = []
    for folder in (work, elsewhere):
        out = tmp_path / f"{folder.name}.json"
        run_tool("fairseq-rope-compare", "--src", str(recipe["raw"] / "test.en"),
                 *(a for s in (1, 2) for a in ("--result", f"rec={folder}/eval/rec_seed{s}/result.json")),
                 "--out-json", str(out))
        compared.append(json.loads(out.read_text()))
    # the records themselves, compared where they lie: their result.json names its files by their names in the record
    out = tmp_path / "records.json"
    run_tool("fairseq-rope-compare", "--src", str(recipe["raw"] / "test.en"), "--ref", str(recipe["raw"] / "test.de"),
             *(a for s in (1, 2) for a in ("--result", f"rec={records}/rec_seed{s}/result.json")), "--out-json", str(out))
    compared.append(json.loads(out.read_text()))
    assert "nll_seeds" in json.dumps(compared[0])  # (the test NLL of each seed, from the reference scores)
    for other in compared[1:]:
        assert {k: v for k, v in compared[0].items() if k != "files"} == {k: v for k, v in other.items() if k != "files"}

    one = {k: v for k, v in env.items() if k != "SEEDS_rrope"}
    # a record as fairseq-rope-record saved it before gzipping: train.log and score_reference.out as text
    before = tmp_path / "records_before" / "rec_seed1"
    shutil.copytree(records / "rec_seed1", before)
    record = json.loads((before / "record.json").read_text())
    for name in ("train.log", "score_reference.out"):
        packed = before / f"{name}.gz"
        (before / name).write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
        del record["files"][f"{name}.gz"]
        record["files"][name] = hashlib.sha256((before / name).read_bytes()).hexdigest()
    result = json.loads((before / "result.json").read_text())
    (before / "result.json").write_text(json.dumps(dict(result, reference_scores="score_reference.out")))
    record["files"]["result.json"] = hashlib.sha256((before / "result.json").read_bytes()).hexdigest()
    (before / "record.json").write_text(json.dumps(record))
    # a file the record does not list is not what restore reads (here: a train.log.gz beside the listed train.log)
    (before / "train.log.gz").write_bytes(gzip.compress(b"not the run's log\n"))
    old = step("run.sh", dict(one, WORK_DIR=str(tmp_path / "old"), RECORDS=str(before.parent), ARCHS="rec=transformer",
                              SEEDS="1"))
    assert old.stderr.count("restored from its record") == 1 and "fairseq-train" not in old.stderr
    assert (tmp_path / "old" / "checkpoints" / "rec_seed1" / "train.log").read_bytes() \
        == (work / "checkpoints" / "rec_seed1" / "train.log").read_bytes()
    both = []  # the test NLL read from either record where it lies: the text and the gzipped reference scores
    for folder in (before, records / "rec_seed1"):
        out = tmp_path / f"{folder.parent.name}.json"
        run_tool("fairseq-rope-compare", "--src", str(recipe["raw"] / "test.en"), "--ref", str(recipe["raw"] / "test.de"),
                 "--result", f"rec={folder}/result.json", "--out-json", str(out))
        both.append({k: v for k, v in json.loads(out.read_text()).items() if k != "files"})
    assert both[0] == both[1] and both[0]["nll"] and isinstance(both[0]["overall"]["rec"]["nll"], float)
    # a restored run saved again (e.g. into another study's records): the same log and reference scores
    again = tmp_path / "again"
    run_tool("fairseq-rope-record", "save", str(again), "--checkpoints", str(elsewhere / "checkpoints" / "rec_seed1"),
             "--eval", str(elsewhere / "eval" / "rec_seed1"), "--settings",
             str(elsewhere / "checkpoints" / "rec_seed1" / ".done"), "--data-bin", str(elsewhere / "data-bin"),
             "--reference", str(recipe["raw"] / "test.de"))
    for name in ("train.log.gz", "score_reference.out.gz", "hyps.detok.de"):
        assert (again / name).read_bytes() == (records / "rec_seed1" / name).read_bytes(), name
    changed = step("run.sh", dict(one, WORK_DIR=str(elsewhere), ARCHS="rec=transformer", SEEDS="1", MAX_UPDATE="5"))
    assert "recorded with other settings (record MAX_UPDATE=4; now MAX_UPDATE=5)" in changed.stderr
    assert (elsewhere / "checkpoints" / "rec_seed1" / "checkpoint_last.pt").exists()
    assert "MAX_UPDATE=5" in json.loads((records / "rec_seed1" / "record.json").read_text())["settings"]

    hyps = records / "rrope_seed1" / "also" / "rrope_auto_seed1" / "hyps.detok.de"
    hyps.write_text(hyps.read_text().replace("\n", " x\n", 1))
    bad = step("run.sh", dict(one, WORK_DIR=str(tmp_path / "third"), ARCHS="rrope=rope_transformer", SEEDS="1"),
               ok=False)
    assert f"{hyps}: missing or changed since the record was saved" in bad.stderr
