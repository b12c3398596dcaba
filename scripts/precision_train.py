#!/usr/bin/env python3
"""Mixed-precision training check on a GPU: recipes/wmt14_en_de/train.sh with PRECISION=fp16
and amp, for rope_transformer and fairseq's transformer at base size, on the same data.
(fairseq 0.12's --bf16 also switches on its TPU code path and crashes on GPUs for every model,
so train.sh refuses PRECISION=bf16; see the recipe's README.)

Each run trains --max-update updates from scratch (same seed, same batches) and its JSON log
(train.log) is read back: the training loss at the first and the last logged interval, the
validation loss, fairseq's fp16 loss scale, and fairseq's words/s (wps, median over the logged
intervals after the first). A run passes when every logged loss is finite and the last training
loss is below the first; the script exits 1 if any run fails. Ratios rope/baseline of wps are
printed per precision (fairseq-train's own throughput, not the paired benchmark of benchmark.py).

  python scripts/precision_train.py --data-bin work/sample/data-bin --work-dir /tmp/precision \\
      --out-json benchmarks/cuda_precision.json --out-md benchmarks/cuda_precision.md
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_SH = os.path.join(REPO, "recipes", "wmt14_en_de", "train.sh")
LOG_LINE = re.compile(r"\| (train_inner|valid|train) \| (\{.*\})\s*$")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-bin", required=True, help="binarized data with a joint dictionary (e.g. the sample's)")
    p.add_argument("--work-dir", required=True, help="where the runs' checkpoints and logs go")
    p.add_argument("--precisions", default="fp16,amp", help="PRECISION values of train.sh (default: fp16,amp)")
    p.add_argument("--archs", default="rope_transformer,transformer", help="architectures (default: both base archs)")
    p.add_argument("--max-update", type=int, default=300)
    p.add_argument("--warmup-updates", type=int, default=100)
    p.add_argument("--lr", default="5e-4")
    p.add_argument("--tokens-per-update", type=int, default=4096)
    p.add_argument("--log-interval", type=int, default=25)
    p.add_argument("--out-json")
    p.add_argument("--out-md")
    return p.parse_args(argv)


def read_log(path):
    """The JSON records of a fairseq train.log: {'train_inner': [...], 'valid': [...], 'train': [...]}."""
    records = {"train_inner": [], "valid": [], "train": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LOG_LINE.search(line)
            if m:
                records[m.group(1)].append({k: float(v) for k, v in json.loads(m.group(2)).items()
                                            if re.fullmatch(r"-?[0-9.eE+-]+|nan|inf|-inf", str(v))})
    return records


def run(args, arch, precision):
    name = f"{arch}_{precision}"
    env = dict(os.environ, ARCH=arch, RUN_NAME=name, WORK_DIR=args.work_dir, DATA_BIN=os.path.abspath(args.data_bin),
               PRECISION=precision, MAX_UPDATE=str(args.max_update), WARMUP_UPDATES=str(args.warmup_updates),
               LR=args.lr, TOKENS_PER_UPDATE=str(args.tokens_per_update),
               MAX_TOKENS_PER_GPU=str(args.tokens_per_update), SAVE_INTERVAL_UPDATES=str(args.max_update),
               KEEP_INTERVAL_UPDATES="1", LOG_INTERVAL=str(args.log_interval), LOG_FORMAT="json")
    print(f"[precision] {name}: {args.max_update} updates", flush=True)
    subprocess.run(["bash", TRAIN_SH], env=env, check=True)
    log = read_log(os.path.join(args.work_dir, "checkpoints", name, "train.log"))
    inner = log["train_inner"]
    if not inner:
        raise SystemExit(f"no train_inner records in {name}'s train.log")
    losses = [r["loss"] for r in inner] + [r["valid_loss"] for r in log["valid"]]
    wps = [r["wps"] for r in inner[1:]] or [inner[0]["wps"]]
    result = {"arch": arch, "precision": precision, "updates": int(inner[-1]["num_updates"]),
              "first_train_loss": inner[0]["loss"], "last_train_loss": inner[-1]["loss"],
              "valid_loss": log["valid"][-1]["valid_loss"] if log["valid"] else None,
              "loss_scale": inner[-1].get("loss_scale"), "wps_median": statistics.median(wps),
              "all_finite": all(map(lambda x: x == x and abs(x) != float("inf"), losses))}
    result["ok"] = result["all_finite"] and result["last_train_loss"] < result["first_train_loss"]
    return result


def main(argv=None):
    args = parse_args(argv)
    results = [run(args, arch, precision) for precision in args.precisions.split(",")
               for arch in args.archs.split(",")]
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    rows = ["| arch | precision | updates | train loss first -> last | valid loss | fp16 loss scale | wps (median) | ok |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        rows.append(f"| {r['arch']} | {r['precision']} | {r['updates']} | {r['first_train_loss']:.3f} -> "
                    f"{r['last_train_loss']:.3f} | {r['valid_loss'] if r['valid_loss'] is None else round(r['valid_loss'], 3)} | "
                    f"{r['loss_scale'] if r['loss_scale'] is not None else '-'} | {r['wps_median']:.0f} | {r['ok']} |")
    archs = args.archs.split(",")
    ratios = {}
    if len(archs) == 2:
        for precision in args.precisions.split(","):
            a, b = (next(r for r in results if r["arch"] == x and r["precision"] == precision) for x in archs)
            ratios[precision] = a["wps_median"] / b["wps_median"]
        rows.append("")
        rows.append(f"wps ratio {archs[0]} / {archs[1]}: " + ", ".join(f"{p} {v:.3f}" for p, v in ratios.items()))
    table = "\n".join(rows)
    print(f"[precision] device: {device}\n{table}")
    report = {"device": device, "torch": torch.__version__, "config": vars(args), "results": results,
              "wps_ratio": ratios, "command": " ".join([os.path.basename(sys.argv[0]), *(argv or sys.argv[1:])])}
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump(report, f, indent=2)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(f"# Mixed-precision training on {device}\n\n`python scripts/{report['command']}` "
                    f"(torch {torch.__version__})\n\n{table}\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
