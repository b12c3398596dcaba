#!/usr/bin/env python3
"""Builds the corpus of the length-extrapolation study (recipes/wmt14_en_de/length_study.sh).

    python recipes/wmt14_en_de/length_study_data.py --sample-dir recipes/wmt14_en_de/sample --out-dir work/length_study/raw \
        --max-train-words 15 --buckets 10,15,20,25,30,40 --per-bucket 100 [--test-seed 2] [--pool 20000]

  train, valid  the bundled sample's pairs whose English side has at most --max-train-words
                whitespace-separated words (the same length measure as fairseq-rope-compare's buckets);
  test          a length-stratified test set from make_sample_corpus.py's grammar with
                another seed (--test-seed): its first --pool generated pairs, in order, minus any
                whose English sentence occurs anywhere in the bundled sample, keeping the first
                --per-bucket pairs of every source-length bucket (1-10, 11-15, ..., 41+ for the
                default edges), in generation order. So most test sentences are longer than any
                training sentence, and every bucket has about the same number of sentences.
Deterministic: the same arguments give byte-identical files. Writes OUT_DIR/{train,valid,test}.{en,de}
and OUT_DIR/README (what was kept, per bucket).
"""

import argparse
import os
import sys

import make_sample_corpus  # beside this script (the recipe's folder is on sys.path when it runs)
from fairseq_rope_cli.common import write_lines
from fairseq_rope_cli.compare import bucket_bounds, parse_buckets

PROG = "length_study_data.py"


def read_pairs(prefix, src="en", tgt="de"):
    with open(f"{prefix}.{src}", encoding="utf-8", newline="\n") as f:
        en = [line.rstrip("\n") for line in f]
    with open(f"{prefix}.{tgt}", encoding="utf-8", newline="\n") as f:
        de = [line.rstrip("\n") for line in f]
    if len(en) != len(de):
        sys.exit(f"{PROG}: {prefix}.{src} has {len(en)} lines but {prefix}.{tgt} has {len(de)}")
    return list(zip(en, de))


def words(sentence):
    return len(sentence.split())


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample-dir", required=True, help="the bundled sample corpus ({train,valid,test}.{en,de})")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--max-train-words", type=int, default=15)
    ap.add_argument("--buckets", default="10,15,20,25,30,40")
    ap.add_argument("--per-bucket", type=int, default=100)
    ap.add_argument("--test-seed", type=int, default=2)
    ap.add_argument("--pool", type=int, default=20000, help="test candidates generated (default %(default)s)")
    args = ap.parse_args(argv)
    if args.max_train_words < 1 or args.per_bucket < 1 or args.pool < 1:
        ap.error("--max-train-words, --per-bucket and --pool must be >= 1")
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            path = os.path.join(args.sample_dir, f"{split}.{lang}")
            if not os.path.isfile(path):
                sys.exit(f"{PROG}: sample corpus file not found: {path}")
    bounds = bucket_bounds(parse_buckets(args.buckets))

    sample = {split: read_pairs(os.path.join(args.sample_dir, split)) for split in ("train", "valid", "test")}
    out = {split: [p for p in sample[split] if words(p[0]) <= args.max_train_words] for split in ("train", "valid")}
    if not out["train"] or not out["valid"]:
        sys.exit(f"{PROG}: no training or validation pair has at most {args.max_train_words} words")
    seen = {en for pairs in sample.values() for en, _ in pairs}
    pool = make_sample_corpus.generate(args.test_seed, 1, 1, args.pool)["test"]
    chosen = {label: [] for _, _, label in bounds}
    skipped = 0
    for en, de in pool:
        if en in seen:
            skipped += 1
            continue
        n = words(en)
        for lo, hi, label in bounds:
            if n >= lo and (hi is None or n <= hi):
                if len(chosen[label]) < args.per_bucket:
                    chosen[label].append((en, de))
                break
    out["test"] = [p for _, _, label in bounds for p in chosen[label]]

    os.makedirs(args.out_dir, exist_ok=True)
    for split, pairs in out.items():
        for i, lang in enumerate(("en", "de")):
            write_lines(os.path.join(args.out_dir, f"{split}.{lang}"), [p[i] for p in pairs])
    longest = max(words(en) for en, _ in out["train"])
    report = [
        f"Length study corpus ({PROG} {' '.join(argv if argv is not None else sys.argv[1:])})",
        f"train: {len(out['train'])} of {len(sample['train'])} sample pairs with <= {args.max_train_words} English "
        f"words (longest kept: {longest}); valid: {len(out['valid'])} of {len(sample['valid'])}",
        f"test: {len(out['test'])} pairs from make_sample_corpus seed {args.test_seed} (first {args.pool} generated, "
        f"{skipped} dropped as they occur in the sample), by source words: "
        + ", ".join(f"{label}: {len(chosen[label])}" for _, _, label in bounds),
    ]
    short = [label for _, _, label in bounds if len(chosen[label]) < args.per_bucket]
    if short:
        report.append(f"WARNING: fewer than {args.per_bucket} test pairs in bucket(s) {', '.join(short)}: "
                      f"raise --pool for more")
    write_lines(os.path.join(args.out_dir, "README"), report)
    for line in report:
        print(f"[{PROG}] {line}", file=sys.stderr)


if __name__ == "__main__":
    main()
