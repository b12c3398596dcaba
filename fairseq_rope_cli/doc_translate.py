"""fairseq-rope-doc-translate: translates documents in order, each sentence with its context.

    fairseq-rope-doc-translate --checkpoint CKPT --data-bin DATA_BIN \
        --input test.en --docids test.docids --output hyps.de [--generate-output gen.out]

The text is preprocessed as DATA_BIN's record says (preprocessing.json, written by prepare.sh:
pretokenizer, subwords, and K, the sentences of context the model was trained with). Each sentence of
a document is translated with up to K previous source sentences of its document and the model's own translations of them as the target context, forced as a prefix of
the target (as a model trained by prepare.sh with CONTEXT=K saw them); what the model writes after
the last separator is the sentence's translation. The i-th sentences of all documents are
translated together, --batch-size at a time, so a test set takes as many rounds as its longest
document has sentences. A sentence-level model (K = 0) translates sentence by sentence through the same code.

--output: one detokenized translation per input line, aligned with --input. --generate-output:
the same as fairseq-generate prints it (H-<id> <tab> score <tab> text, subwords joined, not
detokenized), which fairseq-rope-score reads. --info-json: sentences, documents, seconds and
seconds per document.

A document is the run of consecutive lines with the same id in --docids (one id per line of
--input, as `sacrebleu -t wmt14 -l en-de --echo docid` prints them); an id that reappears after
another document is an error. A model with a table of positions (fairseq's transformer:
sinusoidal or learned, 1024 by default) refuses a source whose context makes it longer, naming
the sentence and the length; RoPE, Shaw's RPE, T5's bias, ALiBi and NoPE have no table and
translate any length (how well beyond the lengths seen in training is what the length studies of
docs/length_generalisation.md measure).
"""

import os
import sys
import time

from fairseq_rope_text.documents import DocumentError

from .common import (InputError, add_model_arguments, argument_parser, check_output_file, documents_argument,
                     load_model, model_preprocessing, read_lines, write_json, write_lines)

PROG = "fairseq-rope-doc-translate"


def parse_args(argv=None):
    ap = argument_parser(PROG, __doc__)
    add_model_arguments(ap)
    ap.add_argument("--input", required=True, help="raw source text, one sentence per line")
    ap.add_argument("--docids", help="document id of each line of --input (required for a model trained with context)")
    ap.add_argument("--output", help="translations, one per line of --input (default: stdout)")
    ap.add_argument("--generate-output", help="also write them as fairseq-generate prints them")
    ap.add_argument("--info-json", help="also write timing and counts as JSON")
    ap.add_argument("--beam", type=int, default=4, help="(default: %(default)s)")
    ap.add_argument("--lenpen", type=float, default=0.6, help="(default: %(default)s)")
    ap.add_argument("--max-len-b", type=int, default=200,
                    help="longest translation of one sentence, in subwords, beyond its forced context "
                         "(default: %(default)s, fairseq-generate's)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isfile(args.input):
        raise InputError(PROG, f"--input file not found: {args.input}")
    for flag, path in (("--output", args.output), ("--generate-output", args.generate_output),
                       ("--info-json", args.info_json)):
        check_output_file(PROG, flag, path)
    lines = read_lines(args.input, PROG)
    spans = documents_argument(PROG, "--docids", args.docids, len(lines), args.input)[1] if args.docids else None
    record = model_preprocessing(args, PROG)  # sets args.context to the record's
    if spans is None:
        if args.context > 0:
            raise InputError(PROG, f"the model takes {args.context} sentences of context ({record.origin}): "
                                   f"give --docids (which lines form a document)")
        spans = [(i, i + 1) for i in range(len(lines))]
    mt = load_model(args, PROG, record)  # (the record's context: args.context)
    try:
        start = time.perf_counter()
        documents = mt.translate_documents_ids([lines[a:b] for a, b in spans], args.beam, args.lenpen,
                                                       args.max_len_b, args.batch_size)
    except DocumentError as error:
        raise InputError(PROG, str(error)) from None
    seconds = time.perf_counter() - start
    flat = [out for doc in documents for out in doc]
    texts = [mt.detokenized(ids) for ids, _ in flat]
    if args.output:
        write_lines(args.output, texts)
    else:
        sys.stdout.writelines(t + "\n" for t in texts)
    if args.generate_output:
        write_lines(args.generate_output, [f"H-{i}\t{score:.6f}\t{mt.tokenized(ids)}"
                                           for i, (ids, score) in enumerate(flat)])
    info = {"sentences": len(lines), "documents": len(spans), "context": args.context, "beam": args.beam,
            "lenpen": args.lenpen, "seconds": round(seconds, 3),
            "seconds_per_document": round(seconds / max(len(spans), 1), 4)}
    if args.info_json:
        write_json(args.info_json, info)
    print(f"[{PROG}] {len(lines)} sentences in {len(spans)} documents, context {args.context}: "
          f"{seconds:.1f} s ({1000 * seconds / max(len(spans), 1):.0f} ms per document)"
          f" -> {args.output or 'stdout'}", file=sys.stderr)


if __name__ == "__main__":
    main()
