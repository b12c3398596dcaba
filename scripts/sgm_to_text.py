#!/usr/bin/env python3
"""Extracts the segments of a WMT "SGML" test file (newstest*.sgm) as plain text, one per line.

    sgm_to_text.py IN.sgm OUT.txt

Takes each line that starts with "<seg ", replaces the <seg ...>text</seg> element by its
text, strips the line and collapses runs of whitespace: the same rule sacrebleu applies to the
same files, so the references equal ``sacrebleu -t wmt14/full -l en-de --echo ref``.
Entities are left as they are (as sacrebleu does). Writes OUT atomically.
"""

import os
import re
import sys

SEG = re.compile(r"<seg[^>]*>(.*)</seg>")


def segments(lines):
    for line in lines:
        if line.startswith("<seg "):
            yield re.sub(r"\s+", " ", SEG.sub(r"\1", line).strip())


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.exit("usage: sgm_to_text.py IN.sgm OUT.txt")
    src, dst = argv
    if not os.path.isfile(src):
        sys.exit(f"sgm_to_text.py: file not found: {src}")
    tmp = dst + ".tmp"
    with open(src, encoding="utf-8") as fin, open(tmp, "w", encoding="utf-8", newline="\n") as fout:
        n = 0
        for text in segments(fin):
            fout.write(text + "\n")
            n += 1
    if n == 0:
        os.remove(tmp)
        sys.exit(f"sgm_to_text.py: no <seg> lines in {src}: is it a WMT .sgm file?")
    os.replace(tmp, dst)
    print(f"[sgm_to_text] {src} -> {dst}: {n} segments", file=sys.stderr)


if __name__ == "__main__":
    main()
