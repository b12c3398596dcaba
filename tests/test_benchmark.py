"""Smoke tests of scripts/benchmark.py on a tiny model: it runs and writes its reports.
No timed assertions: the numbers of a few steps on a tiny model mean nothing."""

import json
import os
import subprocess
import sys

import torch

import forked

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
SCRIPT = os.path.join(SCRIPTS, "benchmark.py")
TINY = ["--size", "tiny", "--vocab", "100", "--max-tokens", "128", "--mean-length", "8", "--max-length", "16",
        "--train-batches", "2", "--gen-sentences", "4", "--gen-batch-size", "2", "--warmup", "1", "--repeats", "1"]


def run(*flags, timeout=120):
    """scripts/benchmark.py on the tiny model, forked (tests/forked.py): its standard output."""
    done = forked.run(SCRIPT, [*TINY, *flags], timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_cpu_run_writes_json_and_markdown(tmp_path):
    out = run("--skip", "memory", "--out-json", str(tmp_path / "b.json"), "--out-md", str(tmp_path / "b.md"))
    report = json.loads((tmp_path / "b.json").read_text())
    for model in ("baseline", "rope"):
        results = report["results"][model]
        assert results["train_tokens_per_s"] > 0 and results["gen_sentences_per_s"] > 0 and results["train_tflops"] > 0
        assert len(results["train_rounds_s"]) == 1 and "train_mfu" not in results  # no peak FLOP/s on a CPU
    assert set(report["paired_ratios"]) >= {"train_tokens_per_s", "gen_sentences_per_s"}
    assert set(report["targets"]) == {"train_tokens_per_s", "gen_sentences_per_s"}
    for key in ("train_tokens_per_s", "gen_sentences_per_s"):  # the median lies inside its bootstrap interval
        low, high = report["paired_intervals"][key]
        assert low <= report["paired_ratios"][key] <= high and report["targets"][key]["interval"] == [low, high]
    assert report["targets"]["train_tokens_per_s"]["target"] == 0.97
    rotation = report["rotation"]
    assert rotation["rotary_forward_backward_ms"] > 0 and rotation["additive_forward_ms"] > 0
    assert report["config"]["params"]["rope"] == report["config"]["params"]["baseline"]  # --share-all-embeddings
    assert report["machine"]["torch"] == torch.__version__ and report["command"].startswith("python scripts/benchmark.py")
    table = (tmp_path / "b.md").read_text()
    assert "| training target tokens/s |" in table and "Command: `python scripts/benchmark.py" in table
    assert "paired (95% interval)" in table
    ratios = out[out.index("ratios rope/baseline"):]  # printed last
    assert "| training" not in ratios and "train_tokens_per_s" in ratios and "gen_sentences_per_s" in ratios


def test_cuda_request_falls_back_to_cpu_with_its_dtype_and_mfu(tmp_path):
    """Without a GPU, --device cuda runs the same code on the CPU: bf16 autocast in training,
    bf16 weights in generation, MFU from --peak-tflops."""
    run("--device", "cuda", "--dtype", "bf16", "--peak-tflops", "1", "--skip", "memory,rotation",
        "--out-json", str(tmp_path / "b.json"))
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["config"]["requested_device"] == "cuda" and report["config"]["dtype"] == "bf16"
    if not torch.cuda.is_available():
        assert report["config"]["device"] == "cpu"
    assert report["results"]["rope"]["train_mfu"] > 0 and report["results"]["rope"]["gen_sentences_per_s"] > 0


def test_other_encoding_is_measured_against_the_transformer_without_targets(tmp_path):
    """--encoding alibi: alibi_transformer against fairseq's transformer, under its own name, with
    memory probes of its own model (training's: --skip gen, which test_cpu_run_... measures);
    rope's targets and rotation do not apply."""
    out = run("--encoding", "alibi", "--skip", "gen", "--out-json", str(tmp_path / "b.json"),
              "--out-md", str(tmp_path / "b.md"))
    report = json.loads((tmp_path / "b.json").read_text())
    assert set(report["results"]) == {"baseline", "alibi"} and report["targets"] == {}
    assert report["results"]["alibi"]["train_peak_memory"] > 0 and "rotation" not in report
    assert "train_tokens_per_s" in report["paired_ratios"]
    assert report["config"]["params"]["alibi"] == report["config"]["params"]["baseline"]
    assert "| metric | transformer | alibi_transformer | alibi / transformer (medians) |" in (tmp_path / "b.md").read_text()
    assert "ratios alibi/baseline" in out


def test_memory_probe_subprocess():
    """The per-(model, phase) subprocess that measures peak memory (a new interpreter, as the benchmark starts it)."""
    done = subprocess.run([sys.executable, SCRIPT, *TINY, "--probe", "train:rope"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    probe = json.loads(out.split("PROBE ", 1)[1])
    assert probe["peak"] > probe["over_resting"] > 0


def test_peak_memory_sees_torch_allocations():
    """The CPU method (VmHWM after resetting it) sees memory that torch allocates, which tracemalloc does not."""
    code = """
import torch
from benchmark import PeakMemory
with PeakMemory("cpu") as mem:
    x = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    del x
print(mem.peak, mem.resting)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=SCRIPTS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    peak, resting = map(int, done.stdout.split()[-2:])
    assert peak - resting >= 60 * 2**20, (peak, resting)


def test_median_interval_brackets_the_median_and_narrows_with_more_pairs():
    """The bootstrap interval of the paired median: a point where every ratio is the same; around the
    median, inside the range of the ratios, the same on every call (fixed seed), and narrower from
    400 pairs than from 12 of the same distribution."""
    code = """
import json, statistics, numpy as np
from benchmark import median_interval
rng = np.random.default_rng(5)
few, many = rng.normal(1.0, 0.05, 12).tolist(), rng.normal(1.0, 0.05, 400).tolist()
print(json.dumps([median_interval([0.98] * 7), median_interval(few), median_interval(few), statistics.median(few),
                  min(few), max(few), median_interval(many)]))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=SCRIPTS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    point, few, again, median, lowest, highest, many = json.loads(done.stdout.splitlines()[-1])
    assert point == [0.98, 0.98] and few == again
    assert lowest < few[0] < median < few[1] < highest
    assert many[1] - many[0] < (few[1] - few[0]) / 2


def test_projection_cost_measures_the_packed_layer_against_its_stored_weight_and_three_projections():
    """scripts/projection_cost.py: one row per dimension; it stops where the packed projection of training
    (weights stacked per call) does not give exactly the output and input gradient of one stored stacked weight."""
    done = subprocess.run([sys.executable, "-m", "scripts.projection_cost", "--dims", "64,128", "--tokens", "64",
                           "--length", "8", "--pairs", "2"], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(SCRIPTS))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| 64 |", "| 128 |"))]
    assert [row.split("|")[1:4] for row in rows] == [[" 64 ", " 1 ", " 64 "], [" 128 ", " 2 ", " 64 "]]
    for dims, expected in (("96", "multiple of 64"), ("2x6", "whole numbers")):
        bad = subprocess.run([sys.executable, "-m", "scripts.projection_cost", "--dims", dims], capture_output=True,
                             text=True, timeout=60, cwd=os.path.dirname(SCRIPTS))
        assert bad.returncode == 2 and f"--dims {dims}" in bad.stderr and expected in bad.stderr
