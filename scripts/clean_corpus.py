#!/usr/bin/env python3
"""Drops sentence pairs by length and length ratio, like Moses' clean-corpus-n.perl.

    clean_corpus.py --src train.tok.en --tgt train.tok.de --out-src OUT.en --out-tgt OUT.de \
        [--min 1] [--max 250] [--ratio 1.5] [--max-word-length 1000]

Why our own: sacremoses has no clean-corpus-n, Moses itself is a Perl toolkit we do not
want as a dependency, and the rules are a few lines. They, per line pair (tokens = words
split on whitespace):
  * leading/trailing whitespace is stripped and inner runs of whitespace become one space;
  * the pair is dropped when either side has fewer than --min or more than --max tokens,
    when len(longer)/len(shorter) > --ratio, or when a token is longer than
    --max-word-length characters.
Differences from the Perl script: no factored-corpus handling (it deletes "|" in plain
corpora; we keep it) and no lowercasing option. Both inputs must have the same number of
lines (an error names both files and counts). Outputs are written atomically, in input order.
"""

import argparse
import os
import sys


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def keep_pair(src_tokens, tgt_tokens, min_len=1, max_len=250, ratio=1.5, max_word_length=1000):
    """The clean-corpus-n rules on two token lists; True if the pair stays."""
    ns, nt = len(src_tokens), len(tgt_tokens)
    if ns < min_len or nt < min_len or ns > max_len or nt > max_len:
        return False
    if ns == 0 or nt == 0:  # --min 0 still cannot keep an empty side
        return False
    if ns / nt > ratio or nt / ns > ratio:
        return False
    return all(len(tok) <= max_word_length for tok in src_tokens + tgt_tokens)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--tgt", required=True)
    ap.add_argument("--out-src", required=True)
    ap.add_argument("--out-tgt", required=True)
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("--max", type=int, default=250)
    ap.add_argument("--ratio", type=float, default=1.5)
    ap.add_argument("--max-word-length", type=int, default=1000)
    args = ap.parse_args(argv)
    for flag in ("src", "tgt"):
        if not os.path.isfile(getattr(args, flag)):
            sys.exit(f"clean_corpus.py: --{flag} file not found: {getattr(args, flag)}")
    if args.min < 0 or args.max < max(args.min, 1):
        sys.exit(f"clean_corpus.py: need 0 <= --min <= --max and --max >= 1, got --min {args.min} --max {args.max}")
    if not args.ratio >= 1:
        sys.exit(f"clean_corpus.py: --ratio must be >= 1, got {args.ratio}")
    n_src, n_tgt = count_lines(args.src), count_lines(args.tgt)
    if n_src != n_tgt:
        sys.exit(f"clean_corpus.py: parallel files differ in length: {args.src} has {n_src} lines, "
                 f"{args.tgt} has {n_tgt} lines")
    tmp_src, tmp_tgt = args.out_src + ".tmp", args.out_tgt + ".tmp"
    kept = 0
    with open(args.src, encoding="utf-8", newline="\n") as fs, open(args.tgt, encoding="utf-8", newline="\n") as ft, \
            open(tmp_src, "w", encoding="utf-8", newline="\n") as os_, \
            open(tmp_tgt, "w", encoding="utf-8", newline="\n") as ot:
        for s, t in zip(fs, ft):
            s_tok, t_tok = s.split(), t.split()
            if keep_pair(s_tok, t_tok, args.min, args.max, args.ratio, args.max_word_length):
                os_.write(" ".join(s_tok) + "\n")
                ot.write(" ".join(t_tok) + "\n")
                kept += 1
    os.replace(tmp_src, args.out_src)
    os.replace(tmp_tgt, args.out_tgt)
    print(f"[clean_corpus] {args.src} / {args.tgt}: kept {kept} of {n_src} pairs "
          f"(tokens {args.min}-{args.max}, ratio <= {args.ratio:g}) -> {args.out_src}, {args.out_tgt}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
