#!/usr/bin/env python3
"""A/B of versions of fairseq-rope with scripts/benchmark.py: is a change worth its code?

Each ref (two or more commits, branches or tags of this repository) is checked out into a temporary git
worktree; scripts/benchmark.py of that worktree runs with that worktree's fairseq_rope
(PYTHONPATH, from a neutral directory), so that each version is measured as it was, paired
against fairseq's transformer in the same run. Runs cycle through the refs in a rotating order
(A B C, B C A, ...) so that all see the same drift of the machine. The paired ratios rope/transformer of every run
are printed and written as JSON, with each ref's median and range over its runs: a change
earns its place where the ranges of the two refs do not overlap.

  python scripts/ab_benchmark.py --refs f0659fb HEAD --runs 3 --out-json benchmarks/ab_core_small.json \\
      -- --layers 3 --embed-dim 256 --ffn-dim 1024 --heads 4 --vocab 8000 --repeats 8 --skip memory,rotation
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ("train_tokens_per_s", "gen_sentences_per_s")


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], check=True, capture_output=True, text=True).stdout.strip()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refs", nargs="+", required=True, metavar="REF", help="two or more git refs of this repository")
    p.add_argument("--runs", type=int, default=3, help="benchmark runs per ref (default: 3)")
    p.add_argument("--out-json", help="write every run's ratios and the summary here")
    p.add_argument("benchmark_args", nargs=argparse.REMAINDER, help="after --: arguments of scripts/benchmark.py")
    args = p.parse_args(argv)
    if len(args.refs) < 2:
        p.error("--refs needs two or more refs to compare")
    bench_args = [a for a in args.benchmark_args if a != "--"]
    commits = {ref: git("rev-parse", "--short", ref) for ref in args.refs}
    runs = {ref: [] for ref in args.refs}
    with tempfile.TemporaryDirectory(prefix="ab_") as tmp:
        trees = {}
        for ref in args.refs:
            trees[ref] = os.path.join(tmp, commits[ref])
            if not os.path.isdir(trees[ref]):
                git("worktree", "add", "--detach", trees[ref], commits[ref])
        try:
            for run in range(args.runs):
                shift = run % len(args.refs)
                for ref in args.refs[shift:] + args.refs[:shift]:
                    out = os.path.join(tmp, f"{commits[ref]}_{run}.json")
                    command = [sys.executable, os.path.join(trees[ref], "scripts", "benchmark.py"), *bench_args,
                               "--out-json", out]
                    print(f"[ab] run {run + 1}/{args.runs}, {ref} ({commits[ref]})", file=sys.stderr, flush=True)
                    subprocess.run(command, check=True, cwd=tmp, stdout=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONPATH": trees[ref]})
                    with open(out) as f:
                        report = json.load(f)
                    runs[ref].append({key: {"paired": report["paired_ratios"][key],
                                            "interval": report["paired_intervals"][key]}
                                      for key in KEYS if key in report["paired_ratios"]})  # (--skip train or gen)
                    print("[ab]   " + ", ".join(f"{key} {value['paired']:.3f}" for key, value in runs[ref][-1].items()),
                          file=sys.stderr, flush=True)
        finally:
            for ref in args.refs:
                subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", trees[ref]], capture_output=True)
    keys = [key for key in KEYS if all(key in r for ref in args.refs for r in runs[ref])]
    summary = {ref: {key: {"median": statistics.median(r[key]["paired"] for r in runs[ref]),
                           "min": min(r[key]["paired"] for r in runs[ref]),
                           "max": max(r[key]["paired"] for r in runs[ref])} for key in keys} for ref in args.refs}
    print(f"| ref | commit | {' | '.join(f'{k} paired, per run' for k in keys)} | "
          f"{' | '.join(f'{k} median (range)' for k in keys)} |")
    print("|---|---|" + "---|" * (2 * len(keys)))
    for ref in args.refs:
        per_run = [", ".join(f"{r[key]['paired']:.3f}" for r in runs[ref]) for key in keys]
        medians = [f"{summary[ref][k]['median']:.3f} ({summary[ref][k]['min']:.3f}-{summary[ref][k]['max']:.3f})" for k in keys]
        print(f"| {ref} | {commits[ref]} | {' | '.join(per_run)} | {' | '.join(medians)} |")
    if args.out_json:
        with open(args.out_json + ".tmp", "w") as f:
            json.dump({"command": " ".join(["python", "scripts/ab_benchmark.py", *(argv or sys.argv[1:])]),
                       "commits": commits, "runs": runs, "summary": summary}, f, indent=1)
        os.replace(args.out_json + ".tmp", args.out_json)


if __name__ == "__main__":
    main()
