"""Where fairseq's beam search spends its time on the CPU: matrix products against everything else.

    python -m scripts.generate_profile --checkpoint work/ct2bench/rope_base/checkpoint_last.pt \
        --data-bin work/sample/data-bin --threads 2 --sentences 128 --forced-length 22

Translates the first --sentences sentences of the binarized test set with fairseq's SequenceGenerator
(beam 4, batches of --batch-size, every hypothesis exactly --forced-length subwords: EOS forbidden
before and forced after, as scripts/ct2_benchmark.py's fairseq-generate runs), once untimed, then
under torch.profiler, and prints the wall time, the self CPU time of the matrix products (mm, addmm,
bmm, baddbmm, linear's and attention's), of the other torch operators, and the rest (Python: the
search's bookkeeping, fairseq's incremental state). The bound it prints is what an engine that ran
the same matrix products at the same speed and everything else for free would gain: wall / products.
CTranslate2 float32 uses the same kind of kernels (MKL's sgemm on Intel), so its speed-up over
fairseq-generate in float32 is bounded by about this figure; int8 is not (its products are cheaper).
"""

import argparse
import time

MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                   "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data-bin", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--forced-length", type=int, default=22)
    args = ap.parse_args(argv)

    import os

    import torch
    from torch.profiler import ProfilerActivity, profile

    from fairseq_rope.hub import load_translator

    torch.set_num_threads(args.threads)
    mt = load_translator(os.path.dirname(args.checkpoint), args.data_bin,
                         checkpoint_file=os.path.basename(args.checkpoint), backend="fairseq", device="cpu",
                         max_len_a=0, max_len_b=args.forced_length)
    from fairseq.data import data_utils

    src, tgt = mt.source_lang, mt.target_lang
    dataset = data_utils.load_indexed_dataset(os.path.join(args.data_bin, f"test.{src}-{tgt}.{src}"), mt.src_dict)
    sentences = [dataset[i] for i in range(min(args.sentences, len(dataset)))]
    generator = mt.task.build_generator(mt.models, argparse.Namespace(beam=4, lenpen=0.6, min_len=args.forced_length,
                                                                      max_len_a=0, max_len_b=args.forced_length))

    def translate():
        for start in range(0, len(sentences), args.batch_size):
            batch = sentences[start:start + args.batch_size]
            tokens = data_utils.collate_tokens(batch, mt.src_dict.pad(), mt.src_dict.eos(), left_pad=True)
            lengths = torch.tensor([s.numel() for s in batch])
            sample = {"net_input": {"src_tokens": tokens, "src_lengths": lengths}}
            with torch.inference_mode():
                hypos = generator.generate(mt.models, sample)
            assert all(len(h[0]["tokens"]) == args.forced_length + 1 for h in hypos)

    translate()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        translate()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    products = sum(e.self_cpu_time_total for e in events if e.key in MATRIX_PRODUCTS) / 1e6
    operators = sum(e.self_cpu_time_total for e in events if e.key.startswith("aten::")) / 1e6
    print(f"{len(sentences)} sentences, {args.forced_length} subwords each, beam 4, batches of {args.batch_size}, "
          f"{args.threads} threads: {wall:.2f} s ({len(sentences) / wall:.2f} sentences/s under the profiler)")
    print(f"  matrix products: {products:.2f} s ({100 * products / wall:.0f}%)")
    print(f"  other torch operators: {operators - products:.2f} s ({100 * (operators - products) / wall:.0f}%)")
    print(f"  the rest (Python, fairseq's search and state): {wall - operators:.2f} s "
          f"({100 * (wall - operators) / wall:.0f}%)")
    print(f"  bound for an engine with the same matrix products and nothing else: {wall / products:.2f}x")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]:
        print(f"    {e.key:50s} {e.self_cpu_time_total / 1e6:7.2f} s  {e.count:7d} calls")


if __name__ == "__main__":
    main()
