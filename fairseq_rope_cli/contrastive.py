"""fairseq-rope-contrastive: a contrastive pronoun test (ContraPro's format) scored by a model in context.

    fairseq-rope-contrastive --checkpoint CKPT --data-bin DATA_BIN \
        --json contrapro.json --text contrapro.text --context-text contrapro.context --context-lines 3 \
        [--scores scores.txt] [--out-json result.json]

The files are those of ContraPro (Müller et al., WMT 2018; github.com/ZurichNLP/ContraPro): the
JSON list of entries and, made from it by its conversion_scripts/json2text_and_context.pl with
--context N, TEXT.{src,tgt} (per entry its source with the reference translation, then its source
with each contrastive translation, one per line) and CONTEXT.{src,tgt} (N lines per line of TEXT:
the N sentences before it in its document, oldest first; empty where there is none). The model
scores every line: the log-probability of the target sentence, its end of sentence included, given
the source and the last K of the N context sentences, K the context the model was trained with (DATA_BIN's
record, preprocessing.json, which also says how the text is preprocessed; a sentence-level model, K = 0,
sees none). An entry is right when its reference scores higher than every contrastive variant.

Printed: accuracy overall, by antecedent distance (0 = the same sentence, 1, 2, 3, >3) and by
pronoun (src:ref, e.g. it:sie). --scores writes one score per line of TEXT, as the negative
log-probability (lower is better), the form ContraPro's evaluate.py reads by default;
--out-json writes the counts and accuracies as {"contrastive": {...}}, a field that
fairseq-rope-score --extra-file adds to a result (and fairseq-rope-results shows).
"""

import json
import os
import sys

from fairseq_rope_text.documents import DocumentError, contrastive_accuracy, distance_order, without_padding

from .common import (InputError, add_model_arguments, argument_parser, check_output_file, load_model,
                     model_preprocessing, read_lines, write_json, write_lines)

PROG = "fairseq-rope-contrastive"


def parse_args(argv=None):
    ap = argument_parser(PROG, __doc__)
    add_model_arguments(ap)
    ap.add_argument("--json", required=True, help="the test set's entries (ContraPro's contrapro.json format)")
    ap.add_argument("--text", required=True, help="prefix of the TEXT.{src,tgt} files: one scored pair per line")
    ap.add_argument("--context-text", help="prefix of the CONTEXT.{src,tgt} files (needed for a model trained with context)")
    ap.add_argument("--context-lines", type=int, default=1,
                    help="context sentences per line in the CONTEXT files (json2text_and_context.pl's --context; "
                         "default: %(default)s)")
    ap.add_argument("--source-lang", default="en", help="(default: %(default)s)")
    ap.add_argument("--target-lang", default="de", help="(default: %(default)s)")
    ap.add_argument("--scores", help="write one score per TEXT line (negative log-probability)")
    ap.add_argument("--out-json", help="write the counts and accuracies as JSON")
    return ap.parse_args(argv)


def table(result) -> str:
    """The accuracies as lines of text."""
    def row(name, c):
        return f"  {name:<10} {c['correct']:>6} / {c['total']:<6} {100 * c['accuracy']:6.1f}%"

    lines = [row("all", result["total"]), "by antecedent distance:"]
    order = distance_order(result["by_distance"])
    lines += [row(d, result["by_distance"][d]) for d in order]
    lines.append("by pronoun (source:reference):")
    lines += [row(p, result["by_pronoun"][p]) for p in sorted(result["by_pronoun"])]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isfile(args.json):
        raise InputError(PROG, f"--json file not found: {args.json}")
    for flag, path in (("--scores", args.scores), ("--out-json", args.out_json)):
        check_output_file(PROG, flag, path)
    try:
        with open(args.json, encoding="utf-8") as f:
            entries = json.load(f)
    except json.JSONDecodeError as error:
        raise InputError(PROG, f"{args.json} is not JSON: {error}") from None
    need = ("src pronoun", "ref pronoun", "ante distance", "errors")
    for n, entry in enumerate(entries if isinstance(entries, list) else [None]):
        if not isinstance(entry, dict) or any(key not in entry for key in need):
            raise InputError(PROG, f"{args.json}: entry {n + 1} is not a ContraPro entry (needs the keys "
                                   f"{', '.join(need)})")
    n_lines = sum(1 + len(e["errors"]) for e in entries)
    text = {}
    for lang in (args.source_lang, args.target_lang):
        path = f"{args.text}.{lang}"
        if not os.path.isfile(path):
            raise InputError(PROG, f"--text file not found: {path}")
        text[lang] = read_lines(path, PROG)
        if len(text[lang]) != n_lines:
            raise InputError(PROG, f"{path} has {len(text[lang])} lines; {args.json}'s {len(entries)} entries with "
                                   f"their contrastive variants need {n_lines} (one per scored translation)")
    record = model_preprocessing(args, PROG)  # sets args.context to the record's
    contexts = {lang: [[] for _ in range(n_lines)] for lang in text}
    if args.context > 0:
        if not args.context_text:
            raise InputError(PROG, f"the model takes {args.context} sentences of context ({record.origin}): give "
                                   f"--context-text (the CONTEXT.* files)")
        if args.context_lines < 1:
            raise InputError(PROG, f"--context-lines must be >= 1, got {args.context_lines}")
        for lang in text:
            path = f"{args.context_text}.{lang}"
            if not os.path.isfile(path):
                raise InputError(PROG, f"--context-text file not found: {path}")
            lines = read_lines(path, PROG)
            if len(lines) != n_lines * args.context_lines:
                raise InputError(PROG, f"{path} has {len(lines)} lines; with --context-lines {args.context_lines} "
                                       f"it needs {args.context_lines} per line of {args.text}.{lang} "
                                       f"({n_lines * args.context_lines})")
            n = args.context_lines
            contexts[lang] = [lines[i * n:(i + 1) * n] for i in range(n_lines)]
        if args.context > args.context_lines:
            print(f"[{PROG}] the model takes {args.context} context sentences; the files hold "
                  f"{args.context_lines}: each line is scored with those", file=sys.stderr)
    mt = load_model(args, PROG, record)  # (the record's context: args.context)
    src, tgt = args.source_lang, args.target_lang
    items = [(*without_padding(contexts[src][i], contexts[tgt][i]), text[src][i], text[tgt][i]) for i in range(n_lines)]
    try:
        scores = mt.score_in_context(items, batch_size=args.batch_size)
    except DocumentError as error:
        raise InputError(PROG, str(error)) from None
    result = contrastive_accuracy(entries, scores)
    if args.scores:
        write_lines(args.scores, [f"{-s:.6f}" for s in scores])
    if args.out_json:
        write_json(args.out_json, {"contrastive": dict(result, context=args.context, checkpoint=args.checkpoint,
                                                       test_set=os.path.abspath(args.json))})
    print(f"[{PROG}] {len(entries)} entries, {n_lines} scored translations, context {args.context}: accuracy\n"
          f"{table(result)}", file=sys.stderr)


if __name__ == "__main__":
    main()
