#!/usr/bin/env python3
"""The GPU A/B of how self-attention runs: every variant paired against fairseq's transformer in one
process, on the same batches, in one short run (about 6 minutes on one H100/H200).

Variants (a rope variant: --rope-rotation and the projection; the other encodings: the projection):
  * "3 GEMMs": q, k and v by three projections, as fairseq's attention (each SelfAttention's
    ``packed`` turned off after the build); "packed": one GEMM on the stacked weights (the default);
  * eager: eq. 34 in element-wise operations; triton: the fused kernel (fused_rotary.py; the default
    on a GPU); compile: eq. 34 compiled by torch.compile.
For each (size, dtype) of the plan, all models are built with the same seed, trained on the same
batches (scripts/benchmark.py's Bench, batches and interleaving: the models in turn, batch by
batch, the order reversed every other batch), then cast for beam-4 generation of the same
sentences. Each variant's ratio to the transformer is paired: the median over (round, batch) of
transformer time / variant time, with a 95% bootstrap interval. Then torch.profiler over one training
step and one beam-search batch of the default rope model and of the transformer: kernel launches,
CPU and GPU time, the top operations by GPU time. The JSON is written after every step (a cut run
keeps what it measured); --budget-s skips what would start after that many seconds.

  python scripts/gpu_ab.py --out-json benchmarks/gpu_ab.json              # on a GPU
  python scripts/gpu_ab.py --smoke --out-json /tmp/gpu_ab.json            # rehearsal on a CPU: tiny, fp32
"""

import argparse
import copy
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

from fairseq_rope.self_attention import SelfAttention
from scripts.benchmark import Bench, make_batches, median_interval, parse_args as benchmark_args, timed, write_dicts

ROPE = {  # name: (encoding, its flags, packed projection)
    "rope eager, 3 GEMMs": ("rope", "--rope-rotation eager", False),
    "rope eager, packed": ("rope", "--rope-rotation eager", True),
    "rope triton, 3 GEMMs": ("rope", "--rope-rotation triton", False),
    "rope triton, packed": ("rope", "--rope-rotation triton", True),  # the default on a GPU
    "rope compile, packed": ("rope", "--rope-rotation compile", True),
}
OTHERS = {f"{encoding} {projection}": (encoding, "", projection == "packed")
          for encoding in ("rpe", "t5bias", "alibi", "nope") for projection in ("3 GEMMs", "packed")}
DEFAULT = "rope triton, packed"
# (size, dtype, variants): everything at base bf16, the rotation's variants at big, the defaults in fp16
PLAN = [("base", "bf16", {**ROPE, **OTHERS}),
        ("big", "bf16", {k: v for k, v in ROPE.items() if "compile" not in k}),
        ("base", "fp16", {k: v for k, v in {**ROPE, **OTHERS}.items() if "packed" in k and "compile" not in k}),
        ("big", "fp16", {k: ROPE[k] for k in ("rope eager, 3 GEMMs", DEFAULT)})]


def log(message):
    print(f"[gpu-ab] {message}", file=sys.stderr, flush=True)


def build(name, variant, bench_args, data_dir):
    encoding, flags, packed = variant
    args = copy.copy(bench_args)
    args.encoding, args.rope_args = encoding, flags
    bench = Bench(encoding, args, data_dir)
    for module in bench.model.modules():
        if isinstance(module, SelfAttention):
            module.packed = packed
    return bench


def paired(times, baseline, name):
    ratios = [b / v for b, v in zip(times[baseline], times[name])]
    return {"paired": statistics.median(ratios), "interval": median_interval(ratios)}


def run_models(benches, step, batches, rounds, device):
    """One warm-up pass per model, then ``rounds`` passes, the models in turn batch by batch (reversed
    every other batch); wall seconds per (round, batch) per model."""
    for bench in benches.values():
        for sample in batches[:1]:
            step(bench, sample)
    times = {name: [] for name in benches}
    order = list(benches)
    for r in range(rounds):
        for i, sample in enumerate(batches):
            for name in order if (r * len(batches) + i) % 2 == 0 else order[::-1]:
                times[name].append(timed(device, lambda: step(benches[name], sample))[0])
    return times


def measure(size, dtype, variants, args, data_dir):
    argv = ["--device", args.device, "--size", size, "--dtype", dtype, "--max-tokens", str(args.max_tokens),
            "--train-batches", str(args.train_batches), "--gen-sentences", str(args.gen_sentences),
            "--gen-batch-size", str(args.gen_batch_size), "--vocab", str(args.vocab)]
    bench_args = benchmark_args(argv)
    benches = {"transformer": Bench("baseline", bench_args, data_dir)}
    for name, variant in variants.items():
        benches[name] = build(name, variant, bench_args, data_dir)
    train, gen = make_batches(bench_args, benches["transformer"].task)
    result = {"train": {}, "gen": {}}
    tokens = sum(int(s["ntokens"]) for s in train)
    times = run_models(benches, lambda b, s: b.train_step(s), train, args.rounds, args.device)
    for name in benches:
        result["train"][name] = {"tokens_per_s": tokens * args.rounds / sum(times[name]),
                                 **({} if name == "transformer" else paired(times, "transformer", name))}
    for bench in benches.values():
        bench.for_generation()
    sentences = sum(s["nsentences"] for s in gen)
    times = run_models(benches, lambda b, s: b.generate(s), gen, args.rounds, args.device)
    for name in benches:
        result["gen"][name] = {"sentences_per_s": sentences * args.rounds / sum(times[name]),
                               **({} if name == "transformer" else paired(times, "transformer", name))}
    del benches
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return result


def profile_steps(args, data_dir, top=15):
    """torch.profiler over one training step and one beam-search batch of the default rope and of the
    transformer (base, bf16 on a GPU): kernel launches, CPU and device time, top operations."""
    dtype = "bf16" if args.device == "cuda" else "fp32"
    bench_args = benchmark_args(["--device", args.device, "--size", args.sizes[0], "--dtype", dtype,
                                 "--max-tokens", str(args.max_tokens), "--train-batches", "2",
                                 "--gen-sentences", str(args.gen_batch_size), "--gen-batch-size",
                                 str(args.gen_batch_size), "--vocab", str(args.vocab)])
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    out = {}
    for name, bench in (("transformer", Bench("baseline", bench_args, data_dir)),
                        (DEFAULT, build(DEFAULT, ROPE[DEFAULT], bench_args, data_dir))):
        train, gen = make_batches(bench_args, bench.task)
        for phase, step, sample in (("train", bench.train_step, train[0]), ("gen", None, gen[0])):
            if phase == "gen":
                bench.for_generation()
                step = bench.generate
            step(sample)  # warm-up
            with profile(activities=activities) as prof:
                timed(args.device, lambda: step(sample))
            events = prof.key_averages()
            device_time = "self_device_time_total" if args.device == "cuda" else "self_cpu_time_total"
            kernels = [e for e in prof.events() if e.device_type.name == "CUDA"] if args.device == "cuda" else []
            out[f"{name} {phase}"] = {
                "kernels": len(kernels), "cpu_ms": sum(e.self_cpu_time_total for e in events) / 1e3,
                "device_ms": sum(getattr(e, device_time) for e in events) / 1e3,
                "top": [{"op": e.key, "calls": e.count, "device_ms": getattr(e, device_time) / 1e3,
                         "cpu_ms": e.self_cpu_time_total / 1e3}
                        for e in sorted(events, key=lambda e: -getattr(e, device_time))[:top]]}
        del bench
    return out


def write(report, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-json", required=True)
    p.add_argument("--budget-s", type=float, default=330, help="start no (size, dtype) after this (default: 330)")
    p.add_argument("--rounds", type=int, default=3, help="timed passes over the batches (default: 3)")
    p.add_argument("--smoke", action="store_true", help="a rehearsal on the CPU: tiny models, fp32, one round")
    args = p.parse_args(argv)
    args.device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    if args.device == "cpu" and not args.smoke:
        p.error("no CUDA GPU: run it on a GPU, or rehearse with --smoke")
    plan = [("tiny", "fp32", variants) for _, _, variants in PLAN[:1]] if args.smoke else PLAN
    args.sizes = [plan[0][0]]
    args.max_tokens, args.train_batches, args.vocab = (512, 2, 1000) if args.smoke else (16384, 6, 32000)
    args.gen_sentences, args.gen_batch_size = (8, 8) if args.smoke else (128, 64)
    if args.smoke:
        args.rounds = 1
    start = time.time()
    report = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu (smoke)",
              "date": datetime.date.today().isoformat(), "torch": torch.__version__,
              "command": " ".join(["python scripts/gpu_ab.py", *(argv if argv is not None else sys.argv[1:])]),
              "rounds": args.rounds, "train_batches": args.train_batches, "max_tokens": args.max_tokens,
              "gen_sentences": args.gen_sentences, "configs": {}, "skipped": []}
    with tempfile.TemporaryDirectory() as data_dir:
        write_dicts(data_dir, args.vocab)
        for size, dtype, variants in plan:
            key = f"{size} {dtype}"
            if time.time() - start > args.budget_s:
                report["skipped"].append(key)
                log(f"{key}: skipped (past --budget-s {args.budget_s:g})")
                continue
            log(f"{key}: transformer and {len(variants)} variants")
            t0 = time.time()
            report["configs"][key] = measure(size, dtype, variants, args, data_dir)
            report["configs"][key]["seconds"] = round(time.time() - t0)
            write(report, args.out_json)
            for phase, rows in report["configs"][key].items():
                if phase != "seconds":
                    log(f"{key} {phase}: " + ", ".join(f"{n} {r['paired']:.3f}" for n, r in rows.items() if "paired" in r))
        log("profile")
        report["profile"] = profile_steps(args, data_dir)
        write(report, args.out_json)
    log(f"done in {time.time() - start:.0f} s: {args.out_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
