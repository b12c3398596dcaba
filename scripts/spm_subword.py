#!/usr/bin/env python3
"""Joint sentencepiece model for the TOKENIZER=spm variant of the WMT14 recipe.

    spm_subword.py train  --inputs A.en A.de --model-prefix PREFIX [--vocab-size 37000]
                          [--model-type unigram|bpe] [--input-sentence-size 10000000]
    spm_subword.py encode --model PREFIX.model -i IN -o OUT

Uses the sentencepiece Python API (the PyPI package has no spm_* commands). The model is
trained on the Moses-tokenized text of both languages together; "encode" writes
space-separated pieces, which fairseq turns back into the tokenized text with
``--remove-bpe sentencepiece``. Outputs are written atomically (tmp + rename).
"""

import argparse
import os
import sys


def train(args):
    import sentencepiece as spm

    for path in args.inputs:
        if not os.path.isfile(path):
            sys.exit(f"spm_subword.py: --inputs file not found: {path}")
    if args.vocab_size < 8:
        sys.exit(f"spm_subword.py: --vocab-size must be >= 8, got {args.vocab_size}")
    tmp_prefix = args.model_prefix + ".tmp"
    spm.SentencePieceTrainer.train(
        input=",".join(args.inputs),
        model_prefix=tmp_prefix,
        vocab_size=args.vocab_size,
        model_type=args.model_type,
        character_coverage=1.0,
        input_sentence_size=args.input_sentence_size,
        shuffle_input_sentence=True,
        # fairseq adds its own <s>, </s>, <pad>; keep only <unk> in the sentencepiece vocabulary
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        num_threads=args.threads,
        seed_sentencepiece_size=1000000,
        hard_vocab_limit=not args.soft_vocab_limit,
        minloglevel=1,
    )
    for ext in ("model", "vocab"):
        os.replace(f"{tmp_prefix}.{ext}", f"{args.model_prefix}.{ext}")
    print(f"[spm_subword] trained {args.model_type} model, vocab {args.vocab_size}: {args.model_prefix}.model",
          file=sys.stderr)


def encode(args):
    import sentencepiece as spm

    for flag, path in (("--model", args.model), ("-i", args.input)):
        if not os.path.isfile(path):
            sys.exit(f"spm_subword.py: {flag} file not found: {path}")
    sp = spm.SentencePieceProcessor(model_file=args.model)
    tmp = args.output + ".tmp"
    n = 0
    with open(args.input, encoding="utf-8", newline="\n") as fin, open(tmp, "w", encoding="utf-8", newline="\n") as fout:
        for line in fin:
            fout.write(" ".join(sp.encode(line.rstrip("\n"), out_type=str)) + "\n")
            n += 1
    os.replace(tmp, args.output)
    print(f"[spm_subword] encoded {args.input} -> {args.output}: {n} lines", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--inputs", nargs="+", required=True)
    t.add_argument("--model-prefix", required=True)
    t.add_argument("--vocab-size", type=int, default=37000)
    t.add_argument("--model-type", choices=["unigram", "bpe"], default="unigram")
    t.add_argument("--input-sentence-size", type=int, default=10000000,
                   help="sentences sampled for training (0 = all)")
    t.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    t.add_argument("--soft-vocab-limit", action="store_true",
                   help="allow a smaller vocabulary when the corpus is too small for --vocab-size")
    e = sub.add_parser("encode")
    e.add_argument("--model", required=True)
    e.add_argument("-i", "--input", required=True)
    e.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    train(args) if args.cmd == "train" else encode(args)


if __name__ == "__main__":
    main()
