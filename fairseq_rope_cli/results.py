"""fairseq-rope-results: renders result JSON files of fairseq-rope-score as one markdown table.

    fairseq-rope-results RESULT.json [RESULT.json ...] [--output table.md]

Rows keep the order of the arguments. Columns: run, architecture, tokenized compound-split
BLEU (fairseq's convention), sacreBLEU, sentences, checkpoint; the sacreBLEU signatures and
test sets are listed under the table (one line if they are all equal). Results of documents
(fairseq-rope-score --docids) add chrF, d-BLEU and seconds per document; results with a
contrastive pronoun test (a "contrastive" field, fairseq-rope-contrastive --out-json) add the
share of pronouns right, overall and by antecedent distance.
"""

import json
import os
import sys

from .common import InputError, argument_parser, atomic_output
from fairseq_rope_text.documents import distance_order

PROG = "fairseq-rope-results"


def short_path(path):
    """``path`` relative to the current directory when it lies below it."""
    if path and os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            return rel
    return path


def pronoun_accuracy(contrastive) -> str:
    """``all (d=0 / 1 / 2 / 3 / >3)`` accuracies in percent, from fairseq-rope-contrastive's counts."""
    by = contrastive["by_distance"]
    order = distance_order(by)
    parts = " / ".join(f"{100 * by[d]['accuracy']:.0f}" for d in order)
    return f"{100 * contrastive['total']['accuracy']:.1f} ({parts})"


def render(results):
    documents = any("document_bleu" in r for r in results)
    pronouns = next((r["contrastive"] for r in results if "contrastive" in r), None)
    head = ["Run", "Architecture", "BLEU (tokenized, compound-split; fairseq's convention)", "sacreBLEU"]
    align = ["---", "---", "---:", "---:"]
    if documents:
        head += ["chrF", "d-BLEU", "s / document"]
        align += ["---:"] * 3
    if pronouns:
        distances = "/".join(distance_order(pronouns["by_distance"]))
        head.append(f"pronouns right, % (distance {distances})")
        align.append("---:")
    head += ["Sentences", "Checkpoint"]
    align += ["---:", "---"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for r in results:
        row = [r.get("run_name") or r.get("arch", "?"), r.get("arch", "?"), f"{r['tokenized_bleu']:.2f}",
               f"{r['sacrebleu']:.2f}"]
        if documents:
            per_doc = r.get("seconds_per_document")
            row += [f"{r['chrf']:.2f}" if "chrf" in r else "", f"{r['document_bleu']:.2f}" if "document_bleu" in r else "",
                    f"{per_doc:.3f}" if per_doc is not None else ""]
        if pronouns:
            row.append(pronoun_accuracy(r["contrastive"]) if "contrastive" in r else "")
        row += [str(r["n_sentences"]), short_path(r.get("checkpoint", ""))]
        lines.append("| " + " | ".join(row) + " |")
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
