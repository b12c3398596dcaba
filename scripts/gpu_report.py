#!/usr/bin/env python3
"""The GPU report in one command: everything that needs a CUDA GPU, in about 20 minutes on one.

  1. tests/test_cuda.py (half-precision decoding = full pass, the Flash kernel without padding);
  2. scripts/benchmark.py at base and big size in bf16 and fp16, paired against fairseq's
     transformer (training tokens/s, beam-4 generation, peak memory, the rotation's share of a
     training step, MFU against the GPU's peak);
  3. fairseq-train --fp16 and --amp on the bundled sample (prepared by the recipe's prepare.sh
     first when --data-bin is missing) for --train-updates updates, rope_transformer and
     transformer (scripts/precision_train.py: no NaN, the loss falls);
then writes <out-dir>/cuda.json and cuda.md: the device, the commands, every figure and the
targets (paired against fairseq's transformer: training >= 1.00, beam-4 generation >= 1.00,
rotation <= 1% of a training step). Exits 1 when a step fails or a target is missed.

Without a CUDA GPU it stops at once with an error saying so.

  python scripts/gpu_report.py                    # writes benchmarks/cuda.{json,md}
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "gpu_report.py"
SIZES = {"base": [], "big": ["--size", "big"]}
DTYPES = ("bf16", "fp16")
TARGETS = {"train_tokens_per_s": (">=", 1.00), "gen_sentences_per_s": (">=", 1.00),
           "rotation_share_of_train_step": ("<=", 0.01)}
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense bf16/fp16 tensor-core peaks


def fail(message):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(1)


def log(message):
    print(f"[gpu-report] {message}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default=os.path.join(REPO, "benchmarks"), help="where cuda.json/cuda.md go")
    p.add_argument("--work-dir", default=os.path.join(REPO, "work", "gpu_report"), help="logs and runs")
    p.add_argument("--data-bin", default=os.path.join(REPO, "work", "sample", "data-bin"),
                   help="binarized sample data for the training check (prepared when missing)")
    p.add_argument("--train-updates", type=int, default=300, help="updates of each fp16/amp run (default: 300)")
    p.add_argument("--repeats", type=int, default=6, help="benchmark rounds at base size (big: half; default: 6)")
    p.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated benchmark sizes (default: {','.join(SIZES)})")
    p.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated benchmark dtypes (default: {','.join(DTYPES)})")
    args = p.parse_args(argv)
    for flag, value, allowed in (("--sizes", args.sizes, SIZES), ("--dtypes", args.dtypes, DTYPES)):
        chosen = [v for v in value.split(",") if v]
        unknown = [v for v in chosen if v not in allowed]
        if not chosen or unknown:
            p.error(f"{flag} {value!r}: expected a comma-separated subset of {', '.join(allowed)}")
        setattr(args, flag[2:], chosen)
    return args


def run(name, command, work_dir, env=None):
    """Runs a step, its output to <work_dir>/<name>.log; returns (ok, seconds)."""
    path = os.path.join(work_dir, f"{name}.log")
    log(f"{name}: {' '.join(command)} (log: {path})")
    start = time.time()
    with open(path, "w") as out:
        done = subprocess.run(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    seconds = time.time() - start
    log(f"{name}: {'ok' if done.returncode == 0 else f'FAILED (status {done.returncode})'} in {seconds:.0f} s")
    return done.returncode == 0, seconds


def main(argv=None):
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        fail(f"no CUDA GPU: torch {torch.__version__} sees none (torch.cuda.is_available() is False; "
             f"a CPU build of torch sees none either). Run this on a machine with an NVIDIA GPU and a CUDA build of torch.")
    device = torch.cuda.get_device_name()
    peak = next((tflops for name, tflops in PEAK_TFLOPS.items() if name in device), None)
    os.makedirs(args.work_dir, exist_ok=True)
    py = sys.executable
    report = {"device": device, "date": datetime.date.today().isoformat(), "torch": torch.__version__,
              "python": sys.version.split()[0], "commands": {}, "steps": {}, "benchmarks": {}, "targets": {}}

    ok, seconds = run("test_cuda", [py, "-m", "pytest", "-q", "tests/test_cuda.py"], args.work_dir)
    report["steps"]["test_cuda"] = {"ok": ok, "seconds": round(seconds)}

    write(report, args.out_dir)  # each step's result is on disk as soon as it is known
    for size in args.sizes:
        size_args = SIZES[size]
        for dtype in args.dtypes:
            name = f"benchmark_{size}_{dtype}"
            out = os.path.join(args.work_dir, f"{name}.json")
            repeats = args.repeats if size == "base" else max(2, args.repeats // 2)
            command = [py, "scripts/benchmark.py", "--device", "cuda", *size_args, "--dtype", dtype,
                       "--max-tokens", "16384", "--train-batches", "10", "--repeats", str(repeats),
                       "--gen-sentences", "512", "--gen-batch-size", "128", "--out-json", out,
                       *(["--peak-tflops", str(peak)] if peak else [])]
            ok, seconds = run(name, command, args.work_dir)
            report["commands"][name] = " ".join(command[1:]).replace(args.work_dir, "WORK")
            report["steps"][name] = {"ok": ok, "seconds": round(seconds)}
            if ok:
                with open(out) as f:
                    bench = json.load(f)
                rope = bench["results"]["rope"]
                report["benchmarks"][f"{size}_{dtype}"] = {
                    "paired": bench["paired_ratios"], "intervals": bench["paired_intervals"], "ratios": bench["ratios"],
                    "rotation_share_of_train_step": bench.get("rotation", {}).get("share_of_train_step"),
                    "train_mfu": {m: bench["results"][m].get("train_mfu") for m in ("baseline", "rope")},
                    "train_tflops": {m: bench["results"][m].get("train_tflops") for m in ("baseline", "rope")},
                    "rope_train_tokens_per_s": rope["train_tokens_per_s"],
                    "rope_gen_sentences_per_s": rope["gen_sentences_per_s"]}
            write(report, args.out_dir)

    if not os.path.exists(os.path.join(args.data_bin, "dict.en.txt")):
        env = {"WORK_DIR": os.path.dirname(args.data_bin), "RAW_DIR": os.path.join(REPO, "recipes", "wmt14_en_de", "sample"),
               "BPE_MERGES": "1000"}
        ok, seconds = run("prepare_sample", ["bash", "recipes/wmt14_en_de/prepare.sh"], args.work_dir, env)
        report["steps"]["prepare_sample"] = {"ok": ok, "seconds": round(seconds)}
    out = os.path.join(args.work_dir, "precision.json")
    command = [py, "scripts/precision_train.py", "--data-bin", args.data_bin, "--work-dir",
               os.path.join(args.work_dir, "precision"), "--max-update", str(args.train_updates), "--out-json", out]
    ok, seconds = run("precision_train", command, args.work_dir)
    report["commands"]["precision_train"] = " ".join(command[1:]).replace(args.work_dir, "WORK")
    report["steps"]["precision_train"] = {"ok": ok, "seconds": round(seconds)}
    if ok:
        with open(out) as f:
            report["precision_train"] = json.load(f)

    for key, (op, target) in TARGETS.items():
        for config, bench in report["benchmarks"].items():
            value = bench.get(key) if key.startswith("rotation") else bench["paired"].get(key)
            if value is not None:
                met = value >= target if op == ">=" else value <= target
                report["targets"][f"{config} {key}"] = {"op": op, "target": target, "value": value, "met": met}
    write(report, args.out_dir)
    failed = [name for name, step in report["steps"].items() if not step["ok"]]
    missed = [name for name, t in report["targets"].items() if not t["met"]]
    if failed or missed:
        fail(f"failed steps: {', '.join(failed) or 'none'}; missed targets: {', '.join(missed) or 'none'} "
             f"(see {os.path.join(args.out_dir, 'cuda.md')} and the logs in {args.work_dir})")
    log(f"all steps passed and all targets met; wrote {os.path.join(args.out_dir, 'cuda.md')}")
    return 0


def write(report, out_dir):
    """cuda.json (everything) and cuda.md (the tables), each written to a temporary file and renamed."""
    lines = [f"# rope_transformer vs transformer on {report['device']}", "",
             f"Measured on {report['date']} with `python scripts/gpu_report.py` (torch {report['torch']}, "
             f"Python {report['python']}). Ratios are rope_transformer / transformer, paired (median over "
             "batches run back to back, 95% bootstrap interval).", "",
             "| size, dtype | training tokens/s | beam-4 generation sentences/s | training peak memory | "
             "generation peak memory | rotation share of a training step | MFU transformer / rope |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for config, b in report["benchmarks"].items():
        p, i, r = b["paired"], b["intervals"], b["ratios"]
        share = b["rotation_share_of_train_step"]
        mfu = b["train_mfu"]
        lines.append(
            f"| {config.replace('_', ', ')} | {p['train_tokens_per_s']:.3f} ({i['train_tokens_per_s'][0]:.3f}-"
            f"{i['train_tokens_per_s'][1]:.3f}) | {p['gen_sentences_per_s']:.3f} ({i['gen_sentences_per_s'][0]:.3f}-"
            f"{i['gen_sentences_per_s'][1]:.3f}) | {r.get('train_peak_memory', float('nan')):.3f} | "
            f"{r.get('gen_peak_memory', float('nan')):.3f} | {'' if share is None else f'{share:.2%}'} | "
            + (" / ".join("" if mfu[m] is None else f"{mfu[m]:.1%}" for m in ("baseline", "rope"))) + " |")
    lines += ["", "| step | result | seconds |", "|---|---|---:|"]
    lines += [f"| {name} | {'ok' if s['ok'] else 'FAILED'} | {s['seconds']} |" for name, s in report["steps"].items()]
    lines += ["", "| target | value | met |", "|---|---:|---|"]
    lines += [f"| {name} {t['op']} {t['target']:g} | {t['value']:.4g} | {'yes' if t['met'] else 'NO'} |"
              for name, t in report["targets"].items()]
    lines += ["", "Commands (WORK: the report's work directory):", ""]
    lines += [f"    {name}: {command}" for name, command in report["commands"].items()]
    os.makedirs(out_dir, exist_ok=True)
    for name, text in (("cuda.json", json.dumps(report, indent=1)), ("cuda.md", "\n".join(lines) + "\n")):
        path = os.path.join(out_dir, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
