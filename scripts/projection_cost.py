#!/usr/bin/env python3
"""What q, k and v cost in training, three ways, one self-attention layer at a time (developer tool).

The same layer (fairseq_rope.self_attention.SelfAttention, the same weights and input) in forward +
backward on a training batch, three arms interleaved in a rotating order, each pair back to back:
  * "packed": fairseq_rope as it is: one GEMM on the three weights stacked by torch.cat in every call;
  * "stored": the same GEMM on a stacked weight kept as one parameter (no per-call concatenation;
    a layer that fairseq_rope does not ship: its parameters would not be fairseq's three);
  * "three": three projections, as fairseq's attention (``packed`` turned off).
"packed" and "stored" are checked to give identical outputs and input gradients. Printed per model
dimension: each arm's median time, and the paired medians packed / stored and three / stored (over the
pairs), with the cost of the torch.cat alone.

  python -m scripts.projection_cost --dims 256,512,1024 --pairs 60
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from fairseq_rope.self_attention import SelfAttention


class StoredPacked(SelfAttention):
    """The arm "stored": q, k and v from one stored C -> 3C projection (weights copied from a layer)."""

    def __init__(self, layer: SelfAttention):
        super().__init__(layer.embed_dim, layer.num_heads)
        self.load_state_dict(layer.state_dict())
        projections = (self.q_proj, self.k_proj, self.v_proj)
        self.qkv_weight = torch.nn.Parameter(torch.cat([p.weight.detach() for p in projections]))
        self.qkv_bias = torch.nn.Parameter(torch.cat([p.bias.detach() for p in projections]))

    def split_heads(self, x):
        T, B, _ = x.shape
        qkv = F.linear(x, self.qkv_weight, self.qkv_bias)
        qkv = qkv.view(T, B, 3 * self.num_heads, self.head_dim).permute(1, 2, 0, 3)  # B x 3H x T x D
        return qkv.split([2 * self.num_heads, self.num_heads], dim=1)


def forward_backward(layer, x):
    """Seconds of one forward + backward of ``layer`` on x; (output, input gradient)."""
    x = x.detach().requires_grad_()
    start = time.perf_counter()
    out, _ = layer(x, x, x, need_weights=False)
    out.sum().backward()
    return time.perf_counter() - start, (out.detach(), x.grad)


def measure(dim: int, heads: int, tokens: int, length: int, pairs: int) -> dict:
    torch.manual_seed(0)
    packed = SelfAttention(dim, heads)
    three = SelfAttention(dim, heads)
    three.load_state_dict(packed.state_dict())
    three.packed = False
    arms = [("packed", packed), ("stored", StoredPacked(packed)), ("three", three)]
    x = torch.randn(length, tokens // length, dim)
    results = {name: forward_backward(layer, x)[1] for name, layer in arms}  # also the warm-up
    for name, layer in arms:
        forward_backward(layer, x)
    same = all(torch.equal(a, b) for a, b in zip(results["packed"], results["stored"]))
    if not same:
        raise SystemExit(f"d {dim}: the stored packed weight does not give the packed layer's output and gradient")
    times = {name: [] for name, _ in arms}
    for i in range(pairs):
        for name, layer in arms[i % 3:] + arms[:i % 3]:
            times[name].append(forward_backward(layer, x)[0])
    weights = [p.weight for p in (packed.q_proj, packed.k_proj, packed.v_proj)]
    start = time.perf_counter()
    for _ in range(100):
        torch.cat(weights)
    cat_s = (time.perf_counter() - start) / 100
    return {
        "dim": dim, "heads": heads, "tokens": x.size(0) * x.size(1), "pairs": pairs,
        "median_ms": {name: 1e3 * statistics.median(t) for name, t in times.items()},
        "paired_packed_over_stored": statistics.median(p / s for p, s in zip(times["packed"], times["stored"])),
        "paired_three_over_stored": statistics.median(t / s for t, s in zip(times["three"], times["stored"])),
        "cat_alone_ms": 1e3 * cat_s,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dims", default="256,512,1024", help="model dimensions, comma-separated (heads: dim / 64)")
    p.add_argument("--tokens", type=int, default=4096, help="tokens per batch (default: 4096)")
    p.add_argument("--length", type=int, default=32, help="sentence length; batch = tokens / length (default: 32)")
    p.add_argument("--pairs", type=int, default=60, help="timed rounds of the three arms (default: 60)")
    args = p.parse_args(argv)
    try:
        dims = [int(d) for d in args.dims.split(",")]
    except ValueError:
        p.error(f"--dims {args.dims}: expected whole numbers separated by commas, e.g. 256,512")
    if any(d < 64 or d % 64 for d in dims):
        p.error(f"--dims {args.dims}: each dimension must be a multiple of 64 (heads of 64)")
    if args.tokens < args.length:
        p.error(f"--tokens {args.tokens} must be at least --length {args.length}")
    print("| d | heads | tokens | packed (ms) | stored (ms) | three (ms) | packed / stored, paired | "
          "three / stored, paired | torch.cat alone (ms) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for dim in dims:
        r = measure(dim, dim // 64, args.tokens, args.length, args.pairs)
        m = r["median_ms"]
        print(f"| {dim} | {r['heads']} | {r['tokens']} | {m['packed']:.2f} | {m['stored']:.2f} | {m['three']:.2f} | "
              f"{r['paired_packed_over_stored']:.4f} | {r['paired_three_over_stored']:.4f} | {r['cat_alone_ms']:.3f} |",
              flush=True)
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads; forward + backward of one layer, "
          f"medians over {args.pairs} rounds")


if __name__ == "__main__":
    main()
