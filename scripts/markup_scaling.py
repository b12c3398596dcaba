#!/usr/bin/env python3
"""How long a page's inline markup takes against its nesting depth and its size (developer tool).

Each page goes the way a file goes through fairseq-rope-translate and the server, without a model:
fairseq_rope_text.files.read_document, markup.pieces_of (no nesting limit), each sentence "translated"
into its own words in reverse order, aligned word for word (the projection's real work: every element
moves), markup.join_pieces and the document written. Printed: a row per page, the seconds of reading
(read_document + pieces_of) and of projecting (join_pieces + write), best of --repeat.

  python -m scripts.markup_scaling                     # the table of docs/usage.md
  python -m scripts.markup_scaling --stop-after 30     # a shape's larger pages skipped after a row past 30 s

Pages (sizes in their own unit, --sizes to choose):
  * nested: <p>The small dog <b><b>...sees...</b></b> the red house.</p>, one sentence inside N <b>;
  * siblings: one paragraph of N bold words, sentences of 10 words;
  * sentence: one sentence of N bold words (its "translation" N words long: a model's is at most
    --max-len-b subwords, 200 by default);
  * stray: a page cut short: a paragraph with a bold word, then N "<a" (each a "<" that opens no tag: no ">"
    after it).
"""

import argparse
import time

from fairseq_rope_text.files import read_document
from fairseq_rope_text.markup import Translation, join_pieces, pieces_of

SHAPES = {
    "nested": lambda n: "<p>The small dog " + "<b>" * n + "sees" + "</b>" * n + " the red house.</p>",
    "siblings": lambda n: "<p>" + " ".join(f"<b>{'W' if i % 10 == 0 else 'w'}{i}</b>" + ("." if i % 10 == 9 else "")
                                           for i in range(n)) + "</p>",
    "sentence": lambda n: "<p>" + " ".join(f"<b>w{i}</b>" for i in range(n)) + ".</p>",
    "stray": lambda n: "<p>The <b>dog</b> runs. " + "<a" * n,
}
UNITS = {"nested": "deep", "siblings": "elements", "sentence": "elements", "stray": "stray '<'"}


def words_of(subwords):
    """Every subword a word."""
    return list(subwords), list(range(len(subwords)))


def measure(page: str):
    """(seconds reading, seconds projecting) of ``page``."""
    started = time.perf_counter()
    document = read_document(page.encode(), "html", "page.html")
    items = pieces_of(document.units, document.markup, "en")
    read = time.perf_counter() - started
    translations = []
    for text in items:
        for piece in text:
            for sentence in [] if isinstance(piece, str) else piece.sentences:
                words = sentence.split()
                translations.append(Translation(" ".join(words[::-1]), words, words[::-1],
                                                list(range(len(words)))[::-1]))
    started = time.perf_counter()
    left = iter(translations)
    document.write([join_pieces(text, left, words_of) for text in items])
    return read, time.perf_counter() - started


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="nested,siblings,sentence,stray",
                   help="comma-separated: nested, siblings, sentence, stray (default: all)")
    p.add_argument("--sizes", default="1000,2000,5000,10000,20000", help="N of each page, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="best of (default: 3)")
    p.add_argument("--stop-after", type=float, default=0,
                   help="skip a shape's larger pages after a row that took longer, in seconds (0: never)")
    args = p.parse_args(argv)
    shapes = args.shapes.split(",")
    if any(shape not in SHAPES for shape in shapes):
        p.error(f"--shapes {args.shapes}: expected names among {', '.join(SHAPES)}")
    try:
        sizes = [int(n) for n in args.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes {args.sizes}: expected whole numbers separated by commas, e.g. 1000,2000")
    print("| page | N | bytes | reading (s) | projecting (s) |")
    print("|---|---:|---:|---:|---:|")
    for shape in shapes:
        skipping = False
        for n in sizes:
            page = SHAPES[shape](n)
            if skipping:
                print(f"| {shape} | {n:,} {UNITS[shape]} | {len(page):,} | skipped | skipped |", flush=True)
                continue
            runs = [measure(page) for _ in range(args.repeat)]
            read, project = min(r for r, _ in runs), min(j for _, j in runs)
            print(f"| {shape} | {n:,} {UNITS[shape]} | {len(page):,} | {read:.3f} | {project:.3f} |", flush=True)
            skipping = bool(args.stop_after) and read + project > args.stop_after


if __name__ == "__main__":
    main()
