#!/usr/bin/env python3
"""One rotary self-attention layer, --rope-attention softmax against linear (eq. 19), by length.

For each sequence length T, one RotaryMultiheadAttention (d = --embed-dim, --heads heads, float32,
batch --batch) as an encoder layer uses it (no mask: non-causal) and as a decoder layer uses it
(fairseq's future mask: causal; softmax then runs SDPA with is_causal=True), measured:
  * forward (no grad) and forward + backward (gradient of a fixed random output gradient), wall
    time, the median over --repeats after --warmup runs; softmax and linear alternate run by run
    (A B, B A, ...) so that both see the same machine load;
  * peak memory of one forward + backward: the process's resident high-water mark (VmHWM, reset
    through /proc/self/clear_refs, after malloc_trim) minus its resident memory just before, i.e.
    activations, gradients and temporaries (scripts/benchmark.py's PeakMemory; on CUDA,
    torch.cuda.max_memory_allocated over memory_allocated).

Softmax is the plugin's default attention (F.scaled_dot_product_attention, whose CPU kernel is a
flash-attention one: no T x T matrix is stored for T x T scores). Linear is
fairseq_rope.linear_attention: phi = elu + 1, sums in float32, causal by chunked prefix sums.

Run from the repository root, as a module (it uses scripts/benchmark.py's PeakMemory):

  python -m scripts.linear_attention_bench --out-json benchmarks/linear_attention_cpu.json \\
      --out-md benchmarks/linear_attention_cpu.md
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time

import torch

import fairseq_rope
from fairseq_rope.attention import RotaryMultiheadAttention
from fairseq_rope.linear_attention import RotaryLinearAttention
from fairseq_rope.options import RopeOptions
from scripts.benchmark import PeakMemory

KINDS = ("softmax", "linear")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", default="128,256,512,1024,2048,4096,8192",
                   help="comma-separated sequence lengths (default: %(default)s)")
    p.add_argument("--embed-dim", type=int, default=512, help="model dimension (default: %(default)s)")
    p.add_argument("--heads", type=int, default=8, help="attention heads (default: %(default)s)")
    p.add_argument("--batch", type=int, default=1, help="sentences per batch (default: %(default)s)")
    p.add_argument("--modes", default="encoder,decoder",
                   help="encoder (non-causal), decoder (causal), or both (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default: %(default)s)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: %(default)s)")
    p.add_argument("--skip-memory", action="store_true", help="do not measure peak memory")
    p.add_argument("--out-json", help="write every number here")
    p.add_argument("--out-md", help="write the markdown table here")
    args = p.parse_args(argv)
    args.lengths = [int(n) for n in args.lengths.split(",")]
    args.modes = args.modes.split(",")
    if not set(args.modes) <= {"encoder", "decoder"}:
        p.error(f"--modes: encoder and/or decoder, got {','.join(args.modes)}")
    return args


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_once(attn, x, mask, grad, backward):
    if not backward:
        with torch.no_grad():
            attn(x, x, x, attn_mask=mask, need_weights=False)
        return
    x = x.detach().requires_grad_()
    out, _ = attn(x, x, x, attn_mask=mask, need_weights=False)
    out.backward(grad)
    attn.zero_grad(set_to_none=True)


def measure(args, T, mode):
    """{kind: {forward_ms, forward_backward_ms, peak_mib}} for one length and mode."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(T, args.batch, args.embed_dim, generator=g).to(args.device)
    grad = torch.randn(T, args.batch, args.embed_dim, generator=g).to(args.device)
    mask = torch.triu(torch.full((T, T), float("-inf")), 1).to(args.device) if mode == "decoder" else None
    modules = {}
    for kind in KINDS:
        torch.manual_seed(0)
        attention = RotaryLinearAttention if kind == "linear" else RotaryMultiheadAttention
        modules[kind] = attention(args.embed_dim, args.heads, RopeOptions(attention=kind),
                                  causal=mode == "decoder").to(args.device)
    result = {kind: {} for kind in KINDS}
    for backward, key in ((False, "forward_ms"), (True, "forward_backward_ms")):
        times = {kind: [] for kind in KINDS}
        for r in range(args.warmup + args.repeats):
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                sync(args.device)
                start = time.perf_counter()
                run_once(modules[kind], x, mask, grad, backward)
                sync(args.device)
                if r >= args.warmup:
                    times[kind].append(time.perf_counter() - start)
        for kind in KINDS:
            result[kind][key] = 1000 * statistics.median(times[kind])
            result[kind][key + "_runs"] = [1000 * t for t in times[kind]]
    if not args.skip_memory:
        for kind in KINDS:
            with PeakMemory(args.device) as memory:
                run_once(modules[kind], x, mask, grad, backward=True)
            result[kind]["peak_mib"] = (memory.peak - memory.resting) / 2**20
    return result


def markdown(report):
    lines = []
    memory = "peak_mib" in next(iter(report["results"].values()))["softmax"]
    for mode in report["config"]["modes"]:
        title = "encoder self-attention (non-causal)" if mode == "encoder" else "decoder self-attention (causal)"
        lines += [f"**{title}**", "",
                  "| T | softmax fwd (ms) | linear fwd (ms) | softmax/linear | softmax fwd+bwd (ms) | linear fwd+bwd (ms) "
                  "| softmax/linear |" + (" softmax peak (MiB) | linear peak (MiB) |" if memory else ""),
                  "|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if memory else "")]
        for T in report["config"]["lengths"]:
            s, l = report["results"][f"{mode}_{T}"]["softmax"], report["results"][f"{mode}_{T}"]["linear"]
            row = (f"| {T} | {s['forward_ms']:.2f} | {l['forward_ms']:.2f} | {s['forward_ms'] / l['forward_ms']:.2f} "
                   f"| {s['forward_backward_ms']:.2f} | {l['forward_backward_ms']:.2f} "
                   f"| {s['forward_backward_ms'] / l['forward_backward_ms']:.2f} |")
            if memory:
                row += f" {s['peak_mib']:.1f} | {l['peak_mib']:.1f} |"
            lines.append(row)
        lines.append("")
    c, m = report["config"], report["machine"]
    lines.append(f"d = {c['embed_dim']}, {c['heads']} heads, batch {c['batch']}, float32, {c['device']}; "
                 f"median of {c['repeats']} runs after {c['warmup']} warm-up; softmax/linear > 1: linear faster. "
                 f"Peak: resident memory over resting during one forward + backward. "
                 f"{m['cpu']}, {m['torch_threads']} torch threads, torch {m['torch']}; load average "
                 f"{m['load_average_before'][0]:.1f} before, {m['load_average_after'][0]:.1f} after.")
    lines += ["", f"Command: `{report['command']}`", ""]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("linear_attention_bench.py: error: --device cuda, but no CUDA device is available")
    cpu = "unknown"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    report = {
        "command": "python -m scripts.linear_attention_bench " + shlex.join(sys.argv[1:] if argv is None else argv),
        "config": {k: v for k, v in vars(args).items() if k not in ("out_json", "out_md")},
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "torch": torch.__version__, "python": platform.python_version(),
                    "fairseq_rope": os.path.dirname(fairseq_rope.__file__), "load_average_before": os.getloadavg()},
        "results": {},
    }
    for mode in args.modes:
        for T in args.lengths:
            report["results"][f"{mode}_{T}"] = measure(args, T, mode)
            s, l = report["results"][f"{mode}_{T}"]["softmax"], report["results"][f"{mode}_{T}"]["linear"]
            print(f"{mode} T={T}: forward {s['forward_ms']:.2f} / {l['forward_ms']:.2f} ms, forward+backward "
                  f"{s['forward_backward_ms']:.2f} / {l['forward_backward_ms']:.2f} ms (softmax / linear)",
                  file=sys.stderr, flush=True)
    report["machine"]["load_average_after"] = os.getloadavg()
    table = markdown(report)
    print(table)
    for path, text in ((args.out_json, json.dumps(report, indent=2) + "\n"), (args.out_md, table)):
        if path:
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.replace(path + ".tmp", path)
    return report


if __name__ == "__main__":
    main()
