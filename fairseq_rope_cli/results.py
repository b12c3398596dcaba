"""fairseq-rope-results: renders result JSON files of fairseq-rope-score as one markdown table.

    fairseq-rope-results RESULT.json [RESULT.json ...] [--baseline NAME] [--output table.md]

Rows keep the order of the arguments. Columns: run, architecture, tokenized compound-split
BLEU (fairseq's convention), sacreBLEU, sentences, checkpoint; the sacreBLEU signatures and
test sets are listed under the table (one line if they are all equal). Results of documents
(fairseq-rope-score --docids) add chrF, d-BLEU and seconds per document; results with a
contrastive pronoun test (a "contrastive" field, fairseq-rope-contrastive --out-json) add the
share of pronouns right, overall and by antecedent distance.

Seeds: results that name the same "system" (the recipe's runs with SEEDS: run NAME_seedS of system
NAME) are one system trained with several seeds. When a system has more than one, a second table gives
each system's mean ± sample standard deviation over its seeds of sacreBLEU, chrF and the tokenized BLEU,
every seed's sacreBLEU, and against the baseline (--baseline, default the first system) the difference
of the means and the p-value of the paired bootstrap over seeds and test sentences
(fairseq_rope_cli/seeds.py, 1000 resamples, seed SACREBLEU_SEED or 12345).
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


def system_of(result) -> str:
    return result.get("system") or result.get("run_name") or result.get("arch", "?")


def render_seeds(results, baseline=None, n_samples=1000):
    """The table across seeds (see the module's docstring), or "" when every system has one result."""
    systems = {}
    for r in results:
        systems.setdefault(system_of(r), []).append(r)
    if all(len(runs) == 1 for runs in systems.values()):
        return ""
    from sacrebleu.metrics import BLEU, CHRF

    from .common import read_lines
    from .compare import score_cell
    from .seeds import bootstrap_seed, compare_seeds, mean_sd

    baseline = baseline or next(iter(systems))
    references = {r["reference"] for r in results}
    if len(references) > 1:
        raise InputError(PROG, f"the results score different references ({', '.join(sorted(references))}): "
                               "seeds are compared on one test set")
    refs = read_lines(references.pop(), PROG)
    order = [baseline] + [name for name in systems if name != baseline]
    hyps = [(name, [read_lines(r["hyps_detok"], PROG) for r in systems[name]]) for name in order]
    scores = compare_seeds(hyps, refs, {"bleu": BLEU(), "chrf": CHRF()}, n_samples, bootstrap_seed())

    def cell(name, metric):
        return score_cell(scores, name, metric, baseline, n_samples)

    lines = ["", f"Across training seeds: mean ± sample standard deviation; in parentheses the difference to "
                 f"**{baseline}**, its 95% confidence interval and the two-sided p of Welch's t-test with the "
                 f"seeds as the samples (docs/evaluation.md, across training seeds; with one seed on a side: the "
                 f"interval of the paired bootstrap over seeds and test sentences, {n_samples} resamples, seed "
                 f"{os.environ.get('SACREBLEU_SEED', '12345')}, and no p).",
             "", "| System | Seeds | sacreBLEU | chrF | BLEU (tokenized) | sacreBLEU by seed |",
             "|---|---|---:|---:|---:|---|"]
    for name in order:
        runs = systems[name]
        seeds = ", ".join(str(r.get("seed", "?")) for r in runs)
        tokenized = mean_sd([r["tokenized_bleu"] for r in runs])
        lines.append(f"| {name} | {seeds} | {cell(name, 'bleu')} | {cell(name, 'chrf')} | {tokenized['mean']:.2f}"
                     + (f" ± {tokenized['sd']:.2f}" if tokenized["sd"] is not None else "") + " | "
                     + ", ".join(f"{v:.2f}" for v in scores[name]["bleu_seeds"]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("results", nargs="+", metavar="RESULT.json", help="result JSON files of fairseq-rope-score")
    ap.add_argument("--baseline", metavar="NAME",
                    help="with several seeds: the system the others are tested against (default: the first)")
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
    names = [system_of(r) for r in results]
    if args.baseline is not None and args.baseline not in names:
        raise InputError(PROG, f"--baseline {args.baseline}: no result names this system (systems: "
                               f"{', '.join(dict.fromkeys(names))})")
    table = render(results) + render_seeds(results, args.baseline)
    sys.stdout.write(table)
    if args.output:
        with atomic_output(args.output) as f:
            f.write(table)


if __name__ == "__main__":
    main()
