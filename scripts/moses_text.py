#!/usr/bin/env python3
"""Moses-style text processing with sacremoses' Python API, in parallel.

    moses_text.py tokenize   --lang en -i IN -o OUT [--workers N]
    moses_text.py detokenize --lang de -i IN -o OUT

tokenize = the three Moses steps of fairseq's WMT14 recipe on every line:
  normalize-punctuation.perl, remove-non-printing-char.perl, tokenizer.perl -a
i.e. sacremoses MosesPunctNormalizer (with its unicode-punctuation pre-replacement and
control-character removal) and MosesTokenizer(aggressive_dash_splits=True, escape=False).
escape=False keeps "&" and "<" as they are (the Moses CLI would write &amp; and &lt;, which
then end up in BPE codes and hypotheses). Lines are processed in order-preserving chunks by
a multiprocessing pool; the output is written to OUT.tmp and renamed when complete, so an
interrupted run never leaves a partial OUT.
"""

import argparse
import multiprocessing
import os
import sys
from functools import lru_cache

CHUNK = 2000


@lru_cache(maxsize=None)
def _tools(lang):
    from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

    normalizer = MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=True, post_remove_control_chars=True)
    return normalizer, MosesTokenizer(lang=lang), MosesDetokenizer(lang=lang)


def tokenize_line(line, lang):
    """Normalizes punctuation, removes control characters and tokenizes one line (no newline)."""
    normalizer, tokenizer, _ = _tools(lang)
    text = normalizer.normalize(line.strip())
    return tokenizer.tokenize(text, aggressive_dash_splits=True, escape=False, return_str=True).strip()


def detokenize_line(line, lang):
    """Inverse of the tokenizer: joins "@-@" splits and attaches punctuation (no unescaping)."""
    _, _, detokenizer = _tools(lang)
    return detokenizer.detokenize(line.split(), unescape=False).strip()


def _work(job):
    mode, lang, lines = job
    fn = tokenize_line if mode == "tokenize" else detokenize_line
    return [fn(line, lang) for line in lines]


def _chunks(path, mode, lang):
    with open(path, encoding="utf-8", newline="\n") as f:
        buf = []
        for line in f:
            buf.append(line.rstrip("\n"))
            if len(buf) == CHUNK:
                yield mode, lang, buf
                buf = []
        if buf:
            yield mode, lang, buf


def process_file(mode, lang, src, dst, workers=1):
    """Applies tokenize/detokenize to every line of ``src``; writes ``dst`` atomically; returns #lines."""
    tmp = dst + ".tmp"
    n = 0
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        if workers <= 1:
            results = map(_work, _chunks(src, mode, lang))
            pool = None
        else:
            pool = multiprocessing.Pool(workers)
            results = pool.imap(_work, _chunks(src, mode, lang))
        try:
            for lines in results:
                for line in lines:
                    out.write(line + "\n")
                n += len(lines)
                if n % (CHUNK * 100) == 0:
                    print(f"[moses_text] {mode} {src}: {n} lines", file=sys.stderr, flush=True)
        finally:
            if pool is not None:
                pool.close()
                pool.join()
    os.replace(tmp, dst)
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["tokenize", "detokenize"])
    ap.add_argument("--lang", required=True, help="ISO code: en, de, ...")
    ap.add_argument("-i", "--input", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    if not os.path.isfile(args.input):
        sys.exit(f"moses_text.py: input file not found: {args.input}")
    if os.path.abspath(args.input) == os.path.abspath(args.output):
        sys.exit(f"moses_text.py: --output must differ from --input ({args.input})")
    if args.workers < 1:
        sys.exit(f"moses_text.py: --workers must be >= 1, got {args.workers}")
    n = process_file(args.mode, args.lang, args.input, args.output, args.workers)
    print(f"[moses_text] {args.mode} ({args.lang}) {args.input} -> {args.output}: {n} lines", file=sys.stderr)


if __name__ == "__main__":
    main()
