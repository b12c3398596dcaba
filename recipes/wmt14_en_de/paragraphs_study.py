#!/usr/bin/env python3
"""Running text against one sentence per line: the test set joined into paragraphs, translated three ways.

    python recipes/wmt14_en_de/paragraphs_study.py --work-dir work/sample --runs rope_transformer transformer \
        --output docs/sample_paragraphs   # writes .md and (with matplotlib) .png

For each run (WORK_DIR/checkpoints/RUN/checkpoint_avg_last5.pt with WORK_DIR/data-bin, as sample.sh
leaves them), the raw test set (the RAW_DIR of the data-bin's recipe.env) is joined, in order, into
paragraphs of 5 to 20 sentences (sizes drawn with --seed), and translated
  * sentence per line: evaluate.sh's translations (WORK_DIR/eval/RUN/hyps.detok.<tgt>), joined per paragraph;
  * running text: ``translate_text`` on the paragraphs (split into sentences, each translated as the
    model was trained, put back in place);
  * paragraph as one sentence: ``translate`` given each paragraph whole.
sacreBLEU of each against the references joined per paragraph, overall and by paragraph length
(5-9, 10-14, 15-20 sentences).
"""

import argparse
import json
import os
import random
import sys

BUCKETS = ((5, 9), (10, 14), (15, 20))
WAYS = ("sentence per line", "running text", "paragraph as one sentence")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def paragraph_spans(n, seed):
    """[start, end) spans of 5-20 consecutive lines covering 0..n (the last one what is left, >= 1)."""
    rng, spans, start = random.Random(seed), [], 0
    while start < n:
        size = rng.randint(5, 20)
        spans.append((start, min(n, start + size)))
        start += size
    return spans


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--runs", nargs="+", required=True)
    ap.add_argument("--checkpoint-file", default="checkpoint_avg_last5.pt")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--output", required=True, help="prefix of the .md table and .png figure")
    args = ap.parse_args(argv)

    import sacrebleu

    from fairseq_rope.hub import load_translator
    from fairseq_rope_text.preprocessing import recipe_env

    data_bin = os.path.join(args.work_dir, "data-bin")
    env = recipe_env(data_bin)
    src, tgt = env.get("SRC", "en"), env.get("TGT", "de")
    sources = read_lines(os.path.join(env["RAW_DIR"], f"test.{src}"))
    references = read_lines(os.path.join(env["RAW_DIR"], f"test.{tgt}"))
    spans = paragraph_spans(len(sources), args.seed)
    paragraphs = [" ".join(sources[a:b]) for a, b in spans]
    joined_refs = [" ".join(references[a:b]) for a, b in spans]
    results = {}
    for run in args.runs:
        model_dir = os.path.join(args.work_dir, "checkpoints", run)
        mt = load_translator(model_dir, data_bin, checkpoint_file=args.checkpoint_file)
        per_line = read_lines(os.path.join(args.work_dir, "eval", run, f"hyps.detok.{tgt}"))
        outputs = {
            WAYS[0]: [" ".join(per_line[a:b]) for a, b in spans],
            WAYS[1]: mt.translate_text("\n\n".join(paragraphs) + "\n").split("\n\n"),
            WAYS[2]: mt.translate(paragraphs),
        }
        outputs[WAYS[1]][-1] = outputs[WAYS[1]][-1].rstrip("\n")
        results[run] = {}
        for way, hyps in outputs.items():
            assert len(hyps) == len(spans), (run, way, len(hyps))
            row = {"all": sacrebleu.corpus_bleu(hyps, [joined_refs]).score}
            for low, high in BUCKETS:
                keep = [i for i, (a, b) in enumerate(spans) if low <= b - a <= high]
                row[f"{low}-{high}"] = sacrebleu.corpus_bleu([hyps[i] for i in keep],
                                                             [[joined_refs[i] for i in keep]]).score
            results[run][way] = row
        print(f"[paragraphs_study] {run}: " + "; ".join(f"{w} {r['all']:.2f}" for w, r in results[run].items()),
              file=sys.stderr)
    counts = {f"{low}-{high}": sum(low <= b - a <= high for a, b in spans) for low, high in BUCKETS}
    header = ["run", "translated as", "sacreBLEU, all paragraphs"] + [f"{k} sentences ({n})" for k, n in counts.items()]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * (len(header) - 2)]
    for run, rows in results.items():
        for way, row in rows.items():
            table.append(f"| {run} | {way} | " + " | ".join(f"{v:.2f}" for v in row.values()) + " |")
    text = "\n".join(table) + (f"\n\n{len(spans)} paragraphs of the {len(sources)} test sentences (sizes 5-20, "
                               f"seed {args.seed}); sacreBLEU {sacrebleu.__version__} of paragraphs against the "
                               f"references joined likewise.\n")
    with open(args.output + ".md", "w", encoding="utf-8") as f:
        f.write(text)
    with open(args.output + ".json", "w", encoding="utf-8") as f:
        json.dump({"paragraphs": len(spans), "counts": counts, "results": results}, f, indent=1)
        f.write("\n")
    print(text)
    try:
        import logging

        logging.getLogger("matplotlib").setLevel(logging.WARNING)  # (fairseq's logging would print its font search)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[paragraphs_study] no figure: matplotlib is not installed", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), sharey=True, squeeze=False)
    for ax, (run, rows) in zip(axes[0], results.items()):
        for (way, row), (style, marker) in zip(rows.items(), (("-", "o"), ("--", "x"), (":", "s"))):
            ax.plot(list(counts), [row[k] for k in counts], linestyle=style, marker=marker, markersize=8, label=way)
        ax.set_title(run, fontsize=10)
        ax.set_xlabel("sentences per paragraph")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("sacreBLEU (paragraphs)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output + ".png", dpi=120)


if __name__ == "__main__":
    main()
