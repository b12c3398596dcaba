"""fairseq-rope-results: renders result JSON files of fairseq-rope-score as one markdown table.

    fairseq-rope-results RESULT.json [RESULT.json ...] [--output table.md]

Rows keep the order of the arguments. Columns: run, architecture, tokenized compound-split
BLEU (the paper's convention), sacreBLEU, sentences, checkpoint; the sacreBLEU signatures and
test sets are listed under the table (one line if they are all equal).
"""

import json
import os
import sys

from .common import InputError, argument_parser, atomic_output

PROG = "fairseq-rope-results"


def short_path(path):
    """``path`` relative to the current directory when it lies below it."""
    if path and os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            return rel
    return path


def render(results):
    lines = [
        "| Run | Architecture | BLEU (tokenized, compound-split; fairseq's convention) | sacreBLEU | Sentences | Checkpoint |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(f"| {r.get('run_name') or r.get('arch', '?')} | {r.get('arch', '?')} | {r['tokenized_bleu']:.2f} "
                     f"| {r['sacrebleu']:.2f} | {r['n_sentences']} | {short_path(r.get('checkpoint', ''))} |")
    notes = sorted({(r.get("sacrebleu_signature", ""), r.get("test_set", "")) for r in results})
    lines.append("")
    for signature, test_set in notes:
        lines.append(f"sacreBLEU signature: `{signature}`; test set: {test_set or 'see result JSON'}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("results", nargs="+", metavar="RESULT.json", help="result JSON files of fairseq-rope-score")
    ap.add_argument("--output", help="also write the table to this file")
    args = ap.parse_args(argv)
    results = []
    for path in args.results:
        if not os.path.isfile(path):
            raise InputError(PROG, f"result file not found: {path}")
        try:
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
        except json.JSONDecodeError as error:
            raise InputError(PROG, f"{path} is not valid JSON: {error}")
        for key in ("tokenized_bleu", "sacrebleu", "n_sentences"):
            if key not in result:
                raise InputError(PROG, f"{path} has no '{key}': not a fairseq-rope-score result")
        results.append(result)
    table = render(results)
    sys.stdout.write(table)
    if args.output:
        with atomic_output(args.output) as f:
            f.write(table)


if __name__ == "__main__":
    main()
