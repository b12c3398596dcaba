#!/usr/bin/env python3
"""rope_transformer (or another position encoding) vs fairseq's transformer, side by side, in one process,
on the same batches.

--encoding picks the model measured against fairseq's transformer: rope (rope_transformer, the
default), rpe (Shaw's relative positions), t5bias (T5's relative bias) or alibi, each in the same size.
Results are filed under "baseline" and the encoding's name; the targets below are rope's (the
other encodings have none), and the rotation microbenchmark runs for rope only.

Both models are built through fairseq's own parser and translation task (a temporary data
directory holding only dict.src.txt / dict.tgt.txt, one joint vocabulary, shared embeddings)
with the same sizes and flags; they differ only where the models differ: rotary self-attention
and no additive positions, against fairseq's MultiheadAttention and sinusoidal positions.

What is measured:
  * training: target tokens/s of forward + backward + Adam step, with fairseq's
    label_smoothed_cross_entropy criterion on fairseq's own collated sample dicts (left-padded
    sources, right-padded targets, batches filled up to --max-tokens by fairseq's
    batch_by_size) of synthetic sentence pairs with WMT-like lengths. Warm-up excluded, then
    --repeats rounds over the same --train-batches batches; within a round the two models
    alternate batch by batch (A B, B A, A B, ...) so that both see the same machine load.
  * generation: beam search by fairseq's SequenceGenerator (--beam 4, --lenpen 0.6) on the same
    sources, interleaved the same way. The models are untrained, so every batch is forced to
    decode exactly round(1.1 * longest source) + 2 steps (min_len = max_len): both models do
    the same work, which is what makes their sentences/s comparable.
  * speed ratios rope/baseline, two ways: of the medians over rounds, and "paired": the median
    over all (round, batch) pairs of baseline time / rope time, each pair run back to back. The
    paired ratio is the one robust to other jobs on the machine; the targets are judged on it.
    Beside it, a 95% bootstrap interval of that median (the pairs resampled with replacement):
    where a target lies inside it, the run cannot tell whether the target is met.
    Process CPU time is recorded beside wall time and paired the same way.
  * peak memory: a fresh subprocess per (model, phase) builds only that model, runs the
    smallest batch as a warm-up (Adam state, allocator and kernel caches), then the largest.
    On CPU it resets the kernel's high-water mark of resident memory (writes 5 to
    /proc/self/clear_refs) before the largest batch and reads VmHWM from /proc/self/status
    after it: "peak" is the whole process's resident peak (Python, torch, weights, Adam state,
    activations), "over resting" is that peak minus the resident memory just before the batch
    (activations, gradients, temporaries), after malloc_trim has handed freed heap back to the
    OS. tracemalloc does not see torch's allocations; RSS does, for both models alike. On CUDA the same two numbers
    come from torch.cuda.max_memory_allocated and memory_allocated.
  * the rotation alone, as the attention calls it on q, k and v of one projection, against
    additive sinusoidal positions on the same q and k (the largest training source batch),
    forward and forward + backward, and the rotation's estimated share
    of a training step: its forward + backward time x self-attention layers / step time.
  * training FLOP/s and, where the peak is known (CUDA, or --peak-tflops), model FLOP
    utilisation MFU = FLOP/s / peak, with FLOPs per step =
        6 * (N_enc * S + (N_dec + N_out) * T)
      + 12 * d * (L_enc * sum_i s_i^2 + L_dec * sum_i (t_i^2 + t_i * s_i))
    N_enc, N_dec: encoder, decoder parameters without embedding tables; N_out: the output
    projection (vocab x d); S, T: real (non-pad) source, target tokens; s_i, t_i: sentence
    lengths; L: layers; d: model dim. The attention term counts q.k^T and p.v over whole
    (unmasked) matrices, 2 FLOPs per multiply-add, forward x1 + backward x2. Same for both models.

Ratios rope/baseline are printed last; --out-json and --out-md write everything.

  python scripts/benchmark.py --out-json benchmarks/cpu.json --out-md benchmarks/cpu.md
  python scripts/benchmark.py --device cuda --dtype bf16 --max-tokens 16384 --train-batches 10 \\
      --repeats 10 --gen-sentences 512 --gen-batch-size 128 --out-json benchmarks/cuda.json --out-md benchmarks/cuda.md
"""

import argparse
import contextlib
import ctypes
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import fairseq_rope  # the installed plugin (pip install -e . / scripts/setup_env.sh); registers rope_transformer
from fairseq import options, tasks
from fairseq.data import LanguagePairDataset
from fairseq.modules import SinusoidalPositionalEmbedding
from fairseq.sequence_generator import SequenceGenerator

USER_DIR = os.path.dirname(fairseq_rope.__file__)

# --encoding: the model <encoding>_<fairseq arch>, for every encoding the plugin registers (rope, rpe, ...)
ENCODINGS = tuple(name[:-len("_transformer")] for name in fairseq_rope.encodings.ENCODINGS)
SIZES = {  # --size: (fairseq arch, flags)
    "tiny": ("transformer",
             ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "64",
              "--decoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--decoder-ffn-embed-dim", "128",
              "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]),
    "base": ("transformer", []),
    "big": ("transformer_wmt_en_de_big", []),
}
TARGETS = {  # ratio rope/baseline: (comparison, CPU target, CUDA target)
    "train_tokens_per_s": (">=", 0.97, 1.0),
    "gen_sentences_per_s": (">=", 0.97, 1.0),
    "train_peak_memory": ("<=", 1.05, 1.05),
    "gen_peak_memory": ("<=", 1.05, 1.05),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=SIZES, default="base", help="model size, fairseq's archs (default: base)")
    p.add_argument("--encoding", choices=ENCODINGS, default="rope",
                   help="the position encoding measured against fairseq's transformer (default: rope)")
    p.add_argument("--layers", type=int, help="encoder and decoder layers")
    p.add_argument("--embed-dim", type=int, help="model dimension")
    p.add_argument("--ffn-dim", type=int, help="feed-forward dimension")
    p.add_argument("--heads", type=int, help="attention heads")
    p.add_argument("--model-args", default="", help="more fairseq flags for both models, one string")
    p.add_argument("--rope-args", default="", help="more flags for the --encoding model only, e.g. '--rope-layout half'")
    p.add_argument("--vocab", type=int, default=32000, help="joint vocabulary size, specials included (default: 32000)")
    p.add_argument("--device", default="cpu", help="cpu or cuda; cuda without a GPU falls back to the CPU")
    p.add_argument("--dtype", choices=DTYPES, help="autocast dtype (default: fp32 on CPU, bf16 on CUDA); "
                                                   "generation casts the weights to it, as fairseq-generate --bf16")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    p.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per training batch (default: 4096)")
    p.add_argument("--train-batches", type=int, default=3, help="training batches per round (default: 3)")
    p.add_argument("--gen-sentences", type=int, default=24, help="sentences translated per round (default: 24)")
    p.add_argument("--gen-batch-size", type=int, default=8, help="sentences per generation batch (default: 8)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
    p.add_argument("--warmup", type=int, default=1, help="untimed batches per model before timing (default: 1)")
    p.add_argument("--repeats", type=int, default=4, help="interleaved timed rounds (default: 4)")
    p.add_argument("--mean-length", type=float, default=27.0, help="mean source length in tokens (default: 27)")
    p.add_argument("--max-length", type=int, default=128, help="longest sentence in tokens (default: 128)")
    p.add_argument("--peak-tflops", type=float, help="the device's peak TFLOP/s, for MFU "
                                                     "(default on CUDA: 989, H100 SXM dense bf16/fp16)")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: train,gen,memory,rotation")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out-json", help="write everything here")
    p.add_argument("--out-md", help="write the markdown tables here")
    p.add_argument("--probe", help=argparse.SUPPRESS)  # internal: "<phase>:<model>", a memory subprocess
    args = p.parse_args(argv)
    args.requested_device = args.device
    args.dtype = args.dtype or ("bf16" if args.device.startswith("cuda") else "fp32")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"{args.device} is not available: running on the CPU ({args.dtype})", file=sys.stderr)
        args.device = "cpu"
    if args.peak_tflops is None and args.device.startswith("cuda"):
        args.peak_tflops = 989.0
    args.skip = set(filter(None, args.skip.split(",")))
    return args


# -- models and data ------------------------------------------------------------------

def models(args):
    """The two models of a run: fairseq's transformer and the --encoding's."""
    return ("baseline", args.encoding)


def write_dicts(path, vocab):
    """dict.src.txt = dict.tgt.txt: `vocab` entries once fairseq adds its 4 specials."""
    for lang in ("src", "tgt"):
        with open(os.path.join(path, f"dict.{lang}.txt"), "w") as f:
            f.writelines(f"w{i} {vocab - i}\n" for i in range(vocab - 4))


def fairseq_flags(args, which):
    baseline_arch, size_flags = SIZES[args.size]
    flags = ["--arch", baseline_arch if which == "baseline" else f"{which}_{baseline_arch}", *size_flags]
    for option, value in (("layers", args.layers), ("embed-dim", args.embed_dim),
                          ("ffn-embed-dim", args.ffn_dim), ("attention-heads", args.heads)):
        if value is not None:
            flags += [f"--encoder-{option}", str(value), f"--decoder-{option}", str(value)]
    flags += ["--share-all-embeddings", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
    return flags + shlex.split(args.model_args) + (shlex.split(args.rope_args) if which != "baseline" else [])


class Bench:
    """One model with its task, criterion and optimizer, built as fairseq-train builds them."""

    def __init__(self, which, args, data_dir):
        self.args = args
        fs_args = options.parse_args_and_arch(
            options.get_training_parser(),
            [data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--user-dir", USER_DIR,
             "--seed", str(args.seed), *fairseq_flags(args, which)])
        self.task = tasks.setup_task(fs_args)
        torch.manual_seed(args.seed)
        self.model = self.task.build_model(fs_args).to(args.device)
        self.criterion = self.task.build_criterion(fs_args).to(args.device)
        fused = {"fused": True} if args.device.startswith("cuda") else {}
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=5e-4, betas=(0.9, 0.98), **fused)
        self.scaler = torch.amp.GradScaler(args.device.split(":")[0], enabled=args.dtype == "fp16")

    def train_step(self, sample):
        self.model.train()
        with contextlib.nullcontext() if self.args.dtype == "fp32" else \
                torch.autocast(self.args.device.split(":")[0], dtype=DTYPES[self.args.dtype]):
            loss, sample_size, _ = self.criterion(self.model, sample)
        self.scaler.scale(loss / sample_size).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def for_generation(self):
        """After training: drop the optimizer, cast the weights as fairseq-generate --fp16/--bf16."""
        self.optimizer = self.scaler = None
        self.model.eval().to(DTYPES[self.args.dtype])

    def generate(self, sample):
        """Beam search forced to exactly forced_length(sample) steps; the best hypotheses' tokens."""
        steps = forced_length(sample)
        generator = SequenceGenerator([self.model], self.task.target_dictionary, beam_size=self.args.beam,
                                      len_penalty=self.args.lenpen, max_len_a=0, max_len_b=steps, min_len=steps)
        with torch.no_grad():
            hypos = generator.forward(sample)
        return sum(len(h[0]["tokens"]) for h in hypos)


def forced_length(sample):
    return round(1.1 * int(sample["net_input"]["src_lengths"].max())) + 2


def synthetic_pairs(args, vocab, n):
    """n pairs: log-normal source lengths (mean --mean-length), targets ~1.1x, random words."""
    rng = np.random.default_rng(args.seed)
    src_len = np.clip(rng.lognormal(np.log(args.mean_length) - 0.18, 0.6, n), 3, args.max_length).astype(int)
    tgt_len = np.clip(src_len * rng.normal(1.1, 0.15, n), 3, args.max_length).astype(int)
    g = torch.Generator().manual_seed(args.seed)

    def sentence(length):  # binarized sentences end in EOS (2); words start at 4
        return torch.cat([torch.randint(4, vocab, (length - 1,), generator=g), torch.tensor([2])])

    return [sentence(s) for s in src_len], [sentence(t) for t in tgt_len]


def make_batches(args, task):
    """Training batches (fairseq's batch_by_size up to --max-tokens, a random pick of them) and
    generation batches (random sentences sorted by length, as fairseq-generate), on the device."""
    d = task.source_dictionary
    src, tgt = synthetic_pairs(args, len(d), 4000)
    dataset = LanguagePairDataset(src, np.array([len(s) for s in src]), d, tgt, np.array([len(t) for t in tgt]),
                                  task.target_dictionary, left_pad_source=True, left_pad_target=False, shuffle=False)
    batches = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=args.max_tokens)
    rng = np.random.default_rng(args.seed)
    picked = rng.choice(len(batches), size=min(args.train_batches, len(batches)), replace=False)
    train = [dataset.collater([dataset[int(i)] for i in batches[j]]) for j in picked]
    chosen = sorted(rng.choice(len(src), size=args.gen_sentences, replace=False), key=lambda i: len(src[i]))
    gen = [dataset.collater([dataset[int(i)] for i in chosen[k:k + args.gen_batch_size]])
           for k in range(0, len(chosen), args.gen_batch_size)]

    def move(sample):
        return {k: move(v) if isinstance(v, dict) else v.to(args.device) if torch.is_tensor(v) else v
                for k, v in sample.items()}

    return [move(s) for s in train], [move(s) for s in gen]


def padded_size(sample):
    return sample["net_input"]["src_tokens"].numel() + sample["net_input"]["prev_output_tokens"].numel()


# -- timing ---------------------------------------------------------------------------

def timed(device, fn):
    """(wall seconds, process CPU seconds) of fn()."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(benches, step, batches, args):
    """--warmup batches per model, then --repeats rounds over all batches, the models alternating
    batch by batch. Returns {model: {"wall": [...], "cpu": [...]}}, one entry per (round, batch)."""
    for bench in benches.values():
        for sample in batches[: args.warmup]:
            step(bench, sample)
    times = {name: {"wall": [], "cpu": []} for name in benches}
    order = list(benches)
    for r in range(args.repeats):
        for i, sample in enumerate(batches):
            for name in order if (r * len(batches) + i) % 2 == 0 else order[::-1]:
                wall, cpu = timed(args.device, lambda: step(benches[name], sample))
                times[name]["wall"].append(wall)
                times[name]["cpu"].append(cpu)
        print(f"  round {r + 1}/{args.repeats}: " + ", ".join(
            f"{name} {sum(times[name]['wall'][-len(batches):]):.2f} s" for name in order), file=sys.stderr, flush=True)
    return times


def median_interval(ratios, level=0.95, resamples=2000, seed=0):
    """A bootstrap interval of the median of ``ratios``: the (1 - level)/2 and (1 + level)/2
    quantiles of the medians of ``resamples`` samples of as many ratios, drawn with replacement."""
    x = np.asarray(ratios, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(x), (resamples, len(x)))
    low, high = np.quantile(np.median(x[draws], axis=1), [(1 - level) / 2, (1 + level) / 2])
    return [float(low), float(high)]


def summarise(times, n_batches, amount):
    """amount per second of the median round, per model; the paired speed ratios rope/baseline,
    and their 95% intervals (:func:`median_interval`)."""
    out = {}
    for name, t in times.items():
        rounds = [sum(t["wall"][k:k + n_batches]) for k in range(0, len(t["wall"]), n_batches)]
        out[name] = {"per_s": amount / statistics.median(rounds), "rounds_s": rounds,
                     "cpu_per_s": amount / statistics.median(
                         sum(t["cpu"][k:k + n_batches]) for k in range(0, len(t["cpu"]), n_batches))}
    baseline, candidate = times
    ratios = {clock: [b / r for b, r in zip(times[baseline][clock], times[candidate][clock])] for clock in ("wall", "cpu")}
    paired = {clock: statistics.median(r) for clock, r in ratios.items()}
    return out, paired, {clock: median_interval(r) for clock, r in ratios.items()}


def record_paired(report, wall_key, cpu_key, paired, intervals):
    """Files summarise's paired ratios and intervals of wall and CPU time under the report's keys."""
    for clock, key in (("wall", wall_key), ("cpu", cpu_key)):
        report["paired_ratios"][key], report["paired_intervals"][key] = paired[clock], intervals[clock]


def train_flops(bench, batches):
    """The module docstring's formula, summed over the batches."""
    model, cfg = bench.model, bench.model.cfg
    tables = {id(p) for m in (model.encoder.embed_tokens, model.decoder.embed_tokens, model.decoder.output_projection)
              for p in m.parameters()}
    count = lambda module: sum(p.numel() for p in module.parameters() if id(p) not in tables)
    n_enc, n_dec = count(model.encoder), count(model.decoder)
    n_out = model.decoder.output_projection.weight.numel()
    d, l_enc, l_dec = cfg.encoder.embed_dim, cfg.encoder.layers, cfg.decoder.layers
    pad = bench.task.target_dictionary.pad()
    total = 0.0
    for sample in batches:
        s = sample["net_input"]["src_lengths"].double()
        t = sample["target"].ne(pad).sum(1).double()
        total += 6 * (n_enc * s.sum() + (n_dec + n_out) * t.sum())
        total += 12 * d * (l_enc * (s * s).sum() + l_dec * (t * t + t * s).sum())
    return float(total)


# -- memory ---------------------------------------------------------------------------

class PeakMemory:
    """Peak memory of this process over a block, and its resting level before the block."""

    def __init__(self, device):
        self.cuda = device.startswith("cuda")

    @staticmethod
    def _status(field):
        with open("/proc/self/status") as f:
            return int(re.search(rf"{field}:\s+(\d+) kB", f.read()).group(1)) * 1024

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.resting = torch.cuda.memory_allocated()
        else:
            with contextlib.suppress(OSError, AttributeError):  # freed heap back to the OS, so that
                ctypes.CDLL("libc.so.6").malloc_trim(0)  # "resting" counts live memory only
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            self.resting = self._status("VmRSS")
        return self

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        else:
            self.peak = self._status("VmHWM")


def probe(args, data_dir):
    """The subprocess: one model, one phase, smallest batch then largest; prints its peak memory."""
    phase, which = args.probe.split(":")
    bench = Bench(which, args, data_dir)
    train, gen = make_batches(args, bench.task)
    if phase == "gen":
        bench.for_generation()
    step, batches = (bench.train_step, train) if phase == "train" else (bench.generate, gen)
    step(min(batches, key=padded_size))
    with PeakMemory(args.device) as mem:
        step(max(batches, key=padded_size))
    print("PROBE " + json.dumps({"peak": mem.peak, "over_resting": mem.peak - mem.resting}))


def measure_memory(argv, args):
    """Runs the probes: on CPU all at once (each process has its own peak), on CUDA one by one."""
    for flag in ("--out-json", "--out-md"):
        if flag in argv:
            i = argv.index(flag)
            argv = argv[:i] + argv[i + 2:]
    probes = [(phase, which) for phase in ("train", "gen") if phase not in args.skip for which in models(args)]
    command = lambda phase, which: [sys.executable, os.path.abspath(__file__), *argv, "--probe", f"{phase}:{which}"]
    results = {}
    batches = [probes] if not args.device.startswith("cuda") else [[p] for p in probes]
    for batch in batches:
        running = {p: subprocess.Popen(command(*p), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for p in batch}
        for p, process in running.items():
            out, err = process.communicate()
            if process.returncode:
                raise RuntimeError(f"memory probe {p} failed:\n{err[-3000:]}")
            results[p] = json.loads(out.split("PROBE ", 1)[1])
    return results


# -- the rotation alone ---------------------------------------------------------------

def rotation_microbench(rope, batches, args, repeats=20):
    """q and k of the largest training source batch (B x H x T x D each), rotated as the encoder's
    first attention does (eq. 34, x * cos + swap(x) * sin), against adding fairseq's sinusoidal
    positions to the same q and k. Rotations and sinusoids are looked up inside the timing."""
    attn = rope.model.encoder.layers[0].self_attn
    tokens = max(batches, key=lambda s: s["net_input"]["src_tokens"].numel())["net_input"]["src_tokens"]
    B, T = tokens.shape
    H, D = attn.num_heads, attn.head_dim
    dtype = DTYPES[args.dtype]
    pad = rope.task.source_dictionary.pad()
    sinusoidal = SinusoidalPositionalEmbedding(H * D, pad, init_size=T + pad + 1).to(args.device)
    g = torch.Generator(device=args.device).manual_seed(0)
    q, k = (torch.randn(B, H, T, D, generator=g, device=args.device, dtype=dtype, requires_grad=True) for _ in "qk")
    grads = [torch.randn(B, H, T, D, generator=g, device=args.device, dtype=dtype) for _ in "qk"]

    def rotary():
        return attn.rotate(q, 0), attn.rotate(k, 0)

    def additive():
        positions = sinusoidal(tokens).to(dtype).view(B, T, H, D).transpose(1, 2)
        return q + positions, k + positions

    results = {"shape_BHTD": [B, H, T, D]}
    for name, fn in (("rotary", rotary), ("additive", additive)):
        for mode in ("forward", "forward_backward"):
            def run():
                if mode == "forward":
                    with torch.no_grad():
                        fn()
                else:
                    torch.autograd.backward(fn(), grads)
            for _ in range(3):
                run()
            results[f"{name}_{mode}_ms"] = 1e3 * statistics.median(timed(args.device, run)[0] for _ in range(repeats))
    return results


# -- report ---------------------------------------------------------------------------

def machine(args):
    import fairseq
    cpu = "unknown"
    with contextlib.suppress(OSError, AttributeError):
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1).strip()
    info = {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "fairseq": fairseq.__version__, "python": platform.python_version(), "platform": platform.platform()}
    if args.device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    return info


ROWS = [  # label, key, format, scale
    ("training target tokens/s", "train_tokens_per_s", "{:,.0f}", 1),
    ("training target tokens per CPU-second", "train_tokens_per_cpu_s", "{:,.0f}", 1),
    ("training TFLOP/s", "train_tflops", "{:.3f}", 1),
    ("training MFU", "train_mfu", "{:.1%}", 1),
    ("training peak memory (MiB)", "train_peak_memory", "{:,.0f}", 2**-20),
    ("training memory over resting (MiB)", "train_memory_over_resting", "{:,.0f}", 2**-20),
    ("generation sentences/s", "gen_sentences_per_s", "{:.2f}", 1),
    ("generation tokens/s", "gen_tokens_per_s", "{:.1f}", 1),
    ("generation sentences per CPU-second", "gen_sentences_per_cpu_s", "{:.2f}", 1),
    ("generation peak memory (MiB)", "gen_peak_memory", "{:,.0f}", 2**-20),
    ("generation memory over resting (MiB)", "gen_memory_over_resting", "{:,.0f}", 2**-20),
]


def verdict(report, key):
    target = report["targets"].get(key)
    if not target:
        return ""
    low, high = target.get("interval", (None, None))
    unsure = ", inside the 95% interval" if low is not None and low <= target["target"] <= high else ""
    return f"{target['op']} {target['target']:.2f}: {'met' if target['met'] else 'NOT met'}{unsure}"


def markdown(report):
    res, ratios, paired, intervals = report["results"], report["ratios"], report["paired_ratios"], report["paired_intervals"]
    name = report["config"]["encoding"]
    out = [f"| metric | transformer | {name}_transformer | {name} / transformer (medians) | paired (95% interval) "
           "| target (on paired for speed) |",
           "|---|---:|---:|---:|---:|---|"]
    for label, key, fmt, scale in ROWS:
        if key in res["baseline"]:
            cells = [fmt.format(res[m][key] * scale) for m in ("baseline", name)]
            pair = f"{paired[key]:.3f} ({intervals[key][0]:.3f}-{intervals[key][1]:.3f})" if key in paired else ""
            out.append(f"| {label} | {cells[0]} | {cells[1]} | {ratios[key]:.3f} | {pair} | {verdict(report, key)} |")
    rot = report.get("rotation")
    if rot:
        B, H, T, D = rot["shape_BHTD"]
        out += ["", f"The rotation alone (eq. 34 on q and k, B x H x T x D = {B} x {H} x {T} x {D} each) against "
                    "additive sinusoidal positions added to the same q and k:", "",
                "| | additive (ms) | rotary (ms) | rotary / additive |", "|---|---:|---:|---:|"]
        for mode in ("forward", "forward_backward"):
            a, r = (rot[f"{name}_{mode}_ms"] for name in ("additive", "rotary"))
            out.append(f"| {mode.replace('_', ' + ')} | {a:.3f} | {r:.3f} | {r / a:.2f} |")
        if "share_of_train_step" in rot:
            out += ["", f"Rotation (forward + backward, {rot['self_attention_layers']} self-attention layers at "
                        f"that shape) = {rot['share_of_train_step']:.2%} of a rope training step (an upper estimate)."]
    m, c = report["machine"], report["config"]
    device = c["device"] + (f" (asked for {c['requested_device']})" if c["requested_device"] != c["device"] else "")
    out += ["", f"Machine: {m['cpu']}, {m['cores']} cores, {m['torch_threads']} torch threads"
                + (f", {m['gpu']}" if "gpu" in m else "") + f"; torch {m['torch']}, fairseq {m['fairseq']}, "
                f"Python {m['python']}.",
            f"Models: {c['size']}, {c['params']['baseline']:,} / {c['params'][name]:,} parameters, joint vocabulary "
            f"{c['vocab']}, {device}, {c['dtype']}. Training: {len(c['train_batch_shapes'])} batches of <= "
            f"{c['max_tokens']} tokens ({c['train_target_tokens']:,} target tokens) per round; generation: "
            f"{c['gen_sentences']} sentences in batches of {c['gen_batch_size']}, beam {c['beam']}, lenpen {c['lenpen']}; "
            f"{c['repeats']} interleaved rounds after {c['warmup']} warm-up batch(es). Total time {report['total_s']:.0f} s.",
            "", f"Command: `{report['command']}`", ""]
    return "\n".join(out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as data_dir:
        write_dicts(data_dir, args.vocab)
        if args.probe:
            return probe(args, data_dir)
        name = args.encoding
        benches = {which: Bench(which, args, data_dir) for which in models(args)}
        train, gen = make_batches(args, benches[name].task)
        pad = benches[name].task.target_dictionary.pad()
        n_target = sum(int(s["target"].ne(pad).sum()) for s in train)
        res = {which: {} for which in models(args)}
        config = {k: sorted(v) if isinstance(v, set) else v for k, v in vars(args).items() if k != "probe"}
        config.update(params={w: sum(p.numel() for p in b.model.parameters()) for w, b in benches.items()},
                      train_target_tokens=n_target,
                      train_batch_shapes=[[*s["net_input"]["src_tokens"].shape, s["target"].size(1)] for s in train],
                      gen_batch_shapes=[[*s["net_input"]["src_tokens"].shape, forced_length(s)] for s in gen])
        report = {"command": "python scripts/benchmark.py " + shlex.join(argv), "machine": machine(args),
                  "config": config, "results": res, "paired_ratios": {}, "paired_intervals": {}}

        if "train" not in args.skip:
            print(f"training: {len(train)} batches, {n_target} target tokens per round", file=sys.stderr)
            speed, *pairs = summarise(interleaved(benches, Bench.train_step, train, args), len(train), n_target)
            record_paired(report, "train_tokens_per_s", "train_tokens_per_cpu_s", *pairs)
            for which, bench in benches.items():
                seconds = n_target / speed[which]["per_s"]
                res[which].update(train_tokens_per_s=speed[which]["per_s"], train_tokens_per_cpu_s=speed[which]["cpu_per_s"],
                                  train_rounds_s=speed[which]["rounds_s"], train_step_s=seconds / len(train),
                                  train_tflops=train_flops(bench, train) / seconds / 1e12)
                if args.peak_tflops:
                    res[which]["train_mfu"] = res[which]["train_tflops"] / args.peak_tflops
        if "rotation" not in args.skip and name == "rope":
            rot = report["rotation"] = rotation_microbench(benches["rope"], train, args)
            if "train_step_s" in res["rope"]:  # the largest source batch: an upper estimate
                cfg = benches["rope"].model.cfg
                rot["self_attention_layers"] = layers = cfg.encoder.layers + cfg.decoder.layers
                rot["share_of_train_step"] = rot["rotary_forward_backward_ms"] * 1e-3 * layers / res["rope"]["train_step_s"]
        if "gen" not in args.skip:
            for bench in benches.values():
                bench.for_generation()
            n_sent = sum(s["nsentences"] for s in gen)
            tokens = {w: sum(b.generate(s) for s in gen) for w, b in benches.items()}  # a first warm-up, too
            print(f"generation: {n_sent} sentences", file=sys.stderr)
            speed, *pairs = summarise(interleaved(benches, Bench.generate, gen, args), len(gen), n_sent)
            record_paired(report, "gen_sentences_per_s", "gen_sentences_per_cpu_s", *pairs)
            for which in models(args):
                res[which].update(gen_sentences_per_s=speed[which]["per_s"], gen_sentences_per_cpu_s=speed[which]["cpu_per_s"],
                                  gen_rounds_s=speed[which]["rounds_s"],
                                  gen_tokens_per_s=tokens[which] * speed[which]["per_s"] / n_sent)
        del benches
        if "memory" not in args.skip:
            print("memory: one subprocess per model and phase", file=sys.stderr, flush=True)
            for (phase, which), mem in measure_memory(argv, args).items():
                res[which].update({f"{phase}_peak_memory": mem["peak"], f"{phase}_memory_over_resting": mem["over_resting"]})
    report["total_s"] = time.perf_counter() - start

    report["ratios"] = {key: res[name][key] / res["baseline"][key] for _, key, _, _ in ROWS
                        if key in res[name] and res["baseline"][key]}
    cuda = args.device.startswith("cuda")
    report["targets"] = {}
    for key, (op, cpu_target, cuda_target) in (TARGETS.items() if name == "rope" else ()):
        value = report["paired_ratios"].get(key, report["ratios"].get(key))
        if value is not None:
            target = cuda_target if cuda else cpu_target
            report["targets"][key] = {"op": op, "target": target, "value": value,
                                      "met": value >= target if op == ">=" else value <= target}
            if key in report["paired_intervals"]:
                report["targets"][key]["interval"] = report["paired_intervals"][key]
    table = markdown(report)
    for path, text in ((args.out_json, json.dumps(report, indent=1)),
                       (args.out_md, f"# {name}_transformer vs transformer, {args.device}\n\n{table}")):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as f:
                f.write(text + "\n")
    print(table)
    print(f"ratios {name}/baseline (medians; paired, its 95% interval; target):")
    for key, value in report["ratios"].items():
        pair = (f"  paired {report['paired_ratios'][key]:.3f} ({report['paired_intervals'][key][0]:.3f}-"
                f"{report['paired_intervals'][key][1]:.3f})" if key in report["paired_ratios"] else "")
        print(f"  {key:26s} {value:.3f}{pair}  {verdict(report, key)}")
    return report


if __name__ == "__main__":
    main()
