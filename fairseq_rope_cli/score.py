"""fairseq-rope-score: scores fairseq-generate output against the raw reference file; writes hypotheses and a JSON result.

    fairseq-rope-score --generate-output gen.out --ref raw/test.de --lang de --out-dir DIR \
        [--arch NAME] [--checkpoint PATH] [--test-set "newstest2014 (wmt14/full, en-de)"] [--json DIR/result.json]

Steps:
  1. collect the "H-<id>\\t<score>\\t<text>" lines (BPE already removed by --remove-bpe) and
     fail if their number differs from the number of reference lines, or if the ids are not
     exactly 0..N-1 (both counts are named: fairseq silently drops sentences, e.g. with the
     default --required-batch-size-multiple 8);
  2. sort by id, write DIR/hyps.tok.<lang> (tokenized) and DIR/hyps.detok.<lang>
     (detokenized with sacremoses, the inverse of the recipe's tokenizer);
  3. sacreBLEU (default 13a tokenization, mixed case) of the detokenized hypotheses against
     the RAW reference file, with its signature; sacrebleu 2.x signatures no longer name the
     test set, so the test set is printed and stored next to it;
  4. tokenized, compound-split BLEU (fairseq's convention, as its compound_split_bleu.sh):
     hypotheses and the reference tokenized by the recipe's Moses tokenizer, then
     s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g on both, BLEU on whitespace tokens. It is not comparable
     across tokenizations; sacreBLEU is.
  5. with --reference-scores (the stdout of fairseq-generate --score-reference on the same test set:
     fairseq's own scorer, teacher-forced on the reference): the test NLL, minus the log2 probability of
     every reference token (end of sentence included) summed over the test set and divided by the
     number of tokens: fairseq's nll_loss (bits per target subword), as fairseq-validate prints it;
  6. the JSON result (arch, checkpoint, both BLEUs, signature, #sentences, file paths),
     written atomically.
"""

import json
import os
import re
import sys
import time
import zlib

from fairseq_rope_text.preprocessing import moses_detokenize, moses_tokenize

from .common import InputError, argument_parser, documents_argument, open_text, read_lines, write_json, write_lines

PROG = "fairseq-rope-score"

COMPOUND = re.compile(r"(\S)-(\S)")


def compound_split(line):
    """Applies s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g (perl's /g: matches do not overlap)."""
    return COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def read_hypotheses(generate_output, n_ref, ref_path):
    """Hypotheses of a fairseq-generate log, sorted by id; checks the count and the ids."""
    hyps = {}
    with open(generate_output, encoding="utf-8") as f:
        for line in f:
            if line.startswith("H-"):
                head, _score, *text = line.rstrip("\n").split("\t")
                idx = int(head[2:])
                if idx in hyps:
                    raise InputError(PROG, f"sentence id {idx} appears twice in {generate_output}")
                hyps[idx] = text[0] if text else ""
    if len(hyps) != n_ref:
        raise InputError(
            PROG, f"{len(hyps)} hypotheses in {generate_output} but {n_ref} reference lines in "
            f"{ref_path}: fairseq-generate skipped or duplicated sentences (use --required-batch-size-multiple 1, "
            f"check --max-len/--skip-invalid-size-inputs-valid-test), or the reference is not this test set")
    if sorted(hyps) != list(range(n_ref)):
        bad = sorted(set(hyps) - set(range(n_ref)))[:5]
        raise InputError(PROG, f"hypothesis ids in {generate_output} are not 0..{n_ref - 1} "
                         f"(e.g. {bad})")
    return [hyps[i] for i in range(n_ref)]


def read_reference_scores(path, n_ref, ref_path, prog=PROG):
    """The per-sentence scores of fairseq-generate --score-reference (its "P-<id>" lines: the log2
    probability of each target token), sorted by id: [(sum of log2 probabilities, tokens)]; a path ending
    in .gz is read gzipped (as fairseq-rope-record keeps them). Checks the count and the ids as
    read_hypotheses does."""
    try:
        with open_text(path) as f:
            lines = list(f)
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as error:
        raise InputError(prog, f"{path}: cannot read it ({error}); expected fairseq-generate --score-reference's "
                               "output, as text or gzipped (.gz)") from None
    scores = {}
    for number, line in enumerate(lines, 1):
        if not line.startswith("P-"):
            continue
        head, _, values = line.rstrip("\n").partition("\t")
        try:
            idx, log_probs = int(head[2:]), [float(v) for v in values.split()]
        except ValueError:
            raise InputError(prog, f"{path}, line {number}: expected 'P-<id><TAB><log2 probabilities>', "
                             f"got {line[:80]!r}")
        if idx in scores:
            raise InputError(prog, f"sentence id {idx} appears twice in {path}")
        scores[idx] = (sum(log_probs), len(log_probs))
    if sorted(scores) != list(range(n_ref)):
        raise InputError(prog, f"{path} scores {len(scores)} sentences (ids {min(scores, default='-')}.."
                         f"{max(scores, default='-')}) but {ref_path} has {n_ref} lines: expected the stdout of "
                         f"fairseq-generate --score-reference on this test set, with --required-batch-size-multiple 1")
    return [scores[i] for i in range(n_ref)]


def corpus_nll(scores):
    """fairseq's nll_loss of these sentences: -(sum of log2 probabilities) / tokens, in bits per token."""
    tokens = sum(n for _, n in scores)
    return -sum(s for s, _ in scores) / tokens if tokens else None


def json_object(text, what):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(PROG, f"{what} is not valid JSON ({error.msg} at character {error.pos}): {text[:200]}")
    if not isinstance(value, dict):
        raise InputError(PROG, f"{what} must be a JSON object ({{...}}), got {type(value).__name__}: {text[:200]}")
    return value


def extra_fields(args):
    """The fields --extra, --extra-file and --set add to the result, in that order."""
    extra = json_object(args.extra, "--extra")
    for path in args.extra_file:
        if not os.path.isfile(path):
            raise InputError(PROG, f"--extra-file file not found: {path}")
        with open(path, encoding="utf-8") as f:
            extra.update(json_object(f.read(), f"--extra-file {path}"))
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(PROG, f"--set expects KEY=VALUE, got '{item}'")
        try:
            parsed = json.loads(value)
            extra[key] = parsed if isinstance(parsed, (int, float, bool)) or parsed is None else value
        except json.JSONDecodeError:
            extra[key] = value
    return extra


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("--generate-output", required=True, help="stdout of fairseq-generate")
    ap.add_argument("--ref", required=True, help="raw (untokenized) reference file, one sentence per line")
    ap.add_argument("--lang", required=True, help="target language (for the Moses tokenizer/detokenizer)")
    ap.add_argument("--tokenization", choices=("moses", "none"), default="moses",
                    help="how the training text was tokenized before subwords (prepare.sh's PRETOKENIZER): "
                         "moses (default): the hypotheses are Moses-detokenized for sacreBLEU and the references "
                         "Moses-tokenized for the tokenized BLEU; none: both are scored as they are")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--json", help="result file (default OUT_DIR/result.json)")
    ap.add_argument("--arch", default="")
    ap.add_argument("--run-name", default="", help="the run's name in fairseq-rope-results' table "
                                                   "(default: --arch, else --out-dir's last component)")
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--test-set", default="", help="name of the test set, stored with the signature "
                                                   "(default: --ref's file name)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a field added to the result, repeatable (e.g. beam=4): VALUE as JSON when it is a "
                         "number, true/false or null, otherwise as a string")
    ap.add_argument("--extra", default="{}", help="a JSON object merged into the result")
    ap.add_argument("--extra-file", action="append", default=[], metavar="FILE",
                    help="a JSON object file merged into the result (e.g. fairseq-rope-ct2-generate --info-json)")
    ap.add_argument("--docids", metavar="FILE",
                    help="document id of each reference line: also document-level BLEU (d-BLEU: sacreBLEU over "
                         "each document's hypotheses and references joined by spaces)")
    ap.add_argument("--reference-scores", metavar="FILE",
                    help="stdout of fairseq-generate --score-reference on the same test set (or it gzipped, "
                         "FILE.gz): the result gets test_nll (fairseq's nll_loss on the test set, bits per target token)")
    args = ap.parse_args(argv)
    extra = extra_fields(args)
    for flag, path in (("--generate-output", args.generate_output), ("--ref", args.ref),
                       ("--reference-scores", args.reference_scores)):
        if path is None:
            continue
        if not os.path.isfile(path):
            raise InputError(PROG, f"{flag} file not found: {path}")
    import sacrebleu

    refs = read_lines(args.ref, PROG)
    hyps_tok = read_hypotheses(args.generate_output, len(refs), args.ref)
    moses = args.tokenization == "moses"
    hyps_detok = [moses_detokenize(h, args.lang) for h in hyps_tok] if moses else hyps_tok
    os.makedirs(args.out_dir, exist_ok=True)
    tok_path = os.path.join(args.out_dir, f"hyps.tok.{args.lang}")
    detok_path = os.path.join(args.out_dir, f"hyps.detok.{args.lang}")
    write_lines(tok_path, hyps_tok)
    write_lines(detok_path, hyps_detok)

    bleu = sacrebleu.metrics.BLEU()
    sacre = bleu.corpus_score(hyps_detok, [refs])
    signature = str(bleu.get_signature())

    chrf = sacrebleu.metrics.CHRF().corpus_score(hyps_detok, [refs])
    documents = {}
    if args.docids:
        _, spans = documents_argument(PROG, "--docids", args.docids, len(refs), args.ref)
        doc_bleu = sacrebleu.metrics.BLEU().corpus_score([" ".join(hyps_detok[a:b]) for a, b in spans],
                                                         [[" ".join(refs[a:b]) for a, b in spans]])
        documents = {"document_bleu": round(doc_bleu.score, 2), "n_documents": len(spans),
                     "document_bleu_detail": str(doc_bleu)}

    nll = {}
    if args.reference_scores:
        scores = read_reference_scores(args.reference_scores, len(refs), args.ref)
        nll = {"test_nll": corpus_nll(scores), "test_nll_tokens": sum(n for _, n in scores),
               "test_nll_note": "fairseq-generate --score-reference: -sum of log2 p(reference token) / tokens "
                                "(end of sentence included), fairseq's nll_loss",
               "reference_scores": os.path.abspath(args.reference_scores)}

    refs_tok = [compound_split(moses_tokenize(r, args.lang) if moses else r) for r in refs]
    hyps_split = [compound_split(h) for h in hyps_tok]
    tok_bleu = sacrebleu.metrics.BLEU(tokenize="none", force=True).corpus_score(hyps_split, [refs_tok])

    # a row of fairseq-rope-results is named: the run's name, else its architecture, else its --out-dir's name
    name = args.run_name or args.arch or os.path.basename(os.path.normpath(args.out_dir))
    result = {
        "run_name": name,
        "arch": args.arch,
        "checkpoint": args.checkpoint,
        "test_set": args.test_set or os.path.basename(args.ref),
        "reference": os.path.abspath(args.ref),
        "n_sentences": len(refs),
        "sacrebleu": round(sacre.score, 2),
        "sacrebleu_signature": signature,
        "sacrebleu_detail": str(sacre),
        "chrf": round(chrf.score, 2),
        **documents,
        **nll,
        "tokenized_bleu": round(tok_bleu.score, 2),
        "tokenized_bleu_detail": str(tok_bleu),
        "tokenization": args.tokenization,
        "tokenized_bleu_note": ("tokenized, compound-split (fairseq's convention): Moses tokenizer -a, "
                                if moses else "tokenized, compound-split (fairseq's convention): the text as given, ")
                               + "##AT## compound splitting, BLEU on whitespace tokens; not comparable to sacreBLEU",
        "hyps_detok": os.path.abspath(detok_path),
        "hyps_tok": os.path.abspath(tok_path),
        "generate_output": os.path.abspath(args.generate_output),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    result.update(extra)
    json_path = args.json or os.path.join(args.out_dir, "result.json")
    write_json(json_path, result)

    print(f"[{PROG}] {name}: sacreBLEU {sacre.score:.2f}, tokenized, compound-split BLEU (fairseq's convention) "
          f"{tok_bleu.score:.2f}; {len(refs)} sentences, hyp/ref length {sacre.sys_len / max(sacre.ref_len, 1):.3f}"
          + (f"; d-BLEU {documents['document_bleu']:.2f} over {documents['n_documents']} documents" if documents else "")
          + (f"; test NLL {nll['test_nll']:.4f} bits/token" if nll else ""),
          file=sys.stderr)
    print(f"[{PROG}] {name}: sacreBLEU signature: {signature} | test set: {args.test_set or args.ref}",
          file=sys.stderr)
    print(f"[{PROG}] {name}: hypotheses {detok_path}; result {json_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
