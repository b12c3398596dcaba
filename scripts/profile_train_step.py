#!/usr/bin/env python3
"""Where a rope training step spends its time that fairseq's transformer does not: torch.profiler
over the same training batches for both models (built as scripts/benchmark.py builds them), self
CPU time per ATen operation, printed as the operations with the largest difference rope - transformer.

Identical operations (the matrix products) differ between the two models by the machine's noise;
the operations only rope runs (eq. 34's flip, mul, addcmul and their backward) are its own cost.

Run from the repository root, as a module (it uses scripts/benchmark.py's model building):

  python -m scripts.profile_train_step --max-tokens 2048 --train-batches 2 --repeats 2
  python -m scripts.profile_train_step --encoding rpe ...   (another encoding against the transformer)
"""

import argparse
import sys
import tempfile

from torch.profiler import ProfilerActivity, profile

from scripts.benchmark import Bench, make_batches, models, parse_args, write_dicts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=2, help="profiled passes over the batches (default: 2)")
    p.add_argument("--top", type=int, default=15, help="operations printed (default: 15)")
    args, bench_argv = p.parse_known_args(argv)
    bench = parse_args(bench_argv)  # scripts/benchmark.py's model and batch options (--size, --max-tokens, ...)
    with tempfile.TemporaryDirectory() as data_dir:
        write_dicts(data_dir, bench.vocab)
        name = bench.encoding
        benches = {which: Bench(which, bench, data_dir) for which in models(bench)}
        batches, _ = make_batches(bench, benches[name].task)
        for model in benches.values():  # warm-up: Adam state, allocator
            for sample in batches:
                model.train_step(sample)
        self_ms = {}
        for which, model in benches.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(args.repeats):
                    for sample in batches:
                        model.train_step(sample)
            self_ms[which] = {e.key: e.self_cpu_time_total / 1e3 / args.repeats for e in prof.key_averages()}
    rope, base = self_ms[name], self_ms["baseline"]
    print(f"self CPU time per pass over {len(batches)} batches: {name} {sum(rope.values()):,.0f} ms, "
          f"transformer {sum(base.values()):,.0f} ms")
    print(f"| operation | {name} (ms) | transformer (ms) | difference (ms) |")
    print("|---|---:|---:|---:|")
    ops = sorted(set(rope) | set(base), key=lambda op: base.get(op, 0) - rope.get(op, 0))
    for op in ops[:args.top] + ops[-5:]:
        print(f"| {op} | {rope.get(op, 0):.1f} | {base.get(op, 0):.1f} | {rope.get(op, 0) - base.get(op, 0):+.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
