#!/usr/bin/env python3
"""Plots the pronoun test of sample_documents.sh: the share of pronouns right by antecedent distance.

One panel per context size, one line per architecture, from the result.json files that
evaluate.sh wrote (fairseq-rope-score with a "contrastive" field, from fairseq-rope-contrastive).

Usage: python recipes/wmt14_en_de/plot_documents.py RESULT.json [RESULT.json ...] --output PNG [--title T]
"""

import argparse
import json
import os
import sys

from fairseq_rope_cli.common import save_figure
from fairseq_rope_text.documents import distance_order


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", metavar="RESULT.json")
    ap.add_argument("--output", required=True, help="PNG file (written atomically)")
    ap.add_argument("--title", default="Pronouns right by antecedent distance")
    args = ap.parse_args(argv)
    runs = []
    for path in args.results:
        if not os.path.isfile(path):
            ap.error(f"result file not found: {path}")
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        if "contrastive" not in result:
            ap.error(f"{path} has no pronoun test (no 'contrastive' field): run evaluate.sh with CONTRASTIVE_JSON")
        runs.append(result)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contexts = sorted({r["contrastive"]["context"] for r in runs})
    fig, axes = plt.subplots(1, len(contexts), figsize=(3.6 * len(contexts), 3.6), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, k in zip(axes, contexts):
        for r in runs:
            c = r["contrastive"]
            if c["context"] != k:
                continue
            distances = distance_order(c["by_distance"])
            ax.plot(distances, [100 * c["by_distance"][d]["accuracy"] for d in distances], marker="o",
                    label=r["arch"])
        ax.axhline(100 / 3, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(0, 102)
        ax.set_xlabel("antecedent distance (sentences)")
        ax.set_title("sentence-level" if k == 0 else f"context {k}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("pronouns right (%)")
    save_figure(fig, axes[0], args.title, min(len({r["arch"] for r in runs}), 5), args.output)
    print(f"[plot_documents] {len(runs)} runs -> {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
