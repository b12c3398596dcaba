"""fairseq-rope-ct2-generate: beam search with CTranslate2, printed as fairseq-generate prints it.

    fairseq-rope-ct2-generate CT2_DIR --data-bin DATA_BIN [--gen-subset test] --remove-bpe "@@ " > gen.out
    fairseq-rope-ct2-generate CT2_DIR --input raw.en > gen.out

CT2_DIR is a model written by fairseq-rope-ct2. The input is either the binarized subset of a
fairseq-preprocess directory (the very subwords fairseq-generate translates) or a raw text file
(preprocessed by the record the export carries: the data's, so the subwords are those of training).
Output per sentence, in input order: S-<id> (source subwords), H-<id> <tab> score <tab> hypothesis
(subwords; --remove-bpe as fairseq's) and D-<id> <tab> score <tab> detokenized text; so
fairseq-rope-score reads it like a fairseq-generate log. The score is fairseq-generate's: the sum of
the log-probabilities (EOS included) divided by (length + 1) ** lenpen, in base 2 as it prints it.

Decoding means what fairseq-generate's options mean (beam, lenpen, max length a * S + b with S the
source length with its EOS, at least one token); see fairseq_rope/ct2.py for how it is matched.
"""

import math
import os
import sys
import time

from .common import InputError, argument_parser, read_lines, write_json

PROG = "fairseq-rope-ct2-generate"


def parse_args(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("model_dir", metavar="CT2_DIR", help="a model directory written by fairseq-rope-ct2")
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--data-bin", help="fairseq-preprocess directory: translate its --gen-subset")
    source.add_argument("--input", help="raw text file, one sentence per line")
    ap.add_argument("--gen-subset", default="test", help="subset of --data-bin (default: test)")
    ap.add_argument("--beam", type=int, default=4, help="beam size (default: 4)")
    ap.add_argument("--lenpen", type=float, default=0.6, help="length penalty, fairseq's (default: 0.6)")
    ap.add_argument("--max-len-a", type=float, default=0, help="max length a * S + b, as fairseq's (default: 0)")
    ap.add_argument("--max-len-b", type=int, default=200, help="as fairseq's (default: 200)")
    ap.add_argument("--nbest", type=int, default=1, help="hypotheses printed per sentence (default: 1)")
    ap.add_argument("--remove-bpe", nargs="?", const="@@ ", default=None,
                    help="post-process H lines as fairseq's --remove-bpe ('@@ ' or 'sentencepiece')")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    ap.add_argument("--compute-type", default="default",
                    help="CTranslate2 compute type: default (the saved weights'), float32, int8, float16, ...")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: 0, CTranslate2's choice)")
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    ap.add_argument("--info-json", metavar="FILE",
                    help="also write what translated, as JSON: ctranslate2_version, ct2_compute_type, ct2_device, "
                         "beam, lenpen, sentences, seconds")
    return ap.parse_args(argv)


def binarized_subset(data_bin, subset, src, tgt, dictionary):
    """The source subwords of DATA_BIN/<subset>.<src>-<tgt>.<src>, without the EOS fairseq appends."""
    from fairseq.data import data_utils

    for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
        prefix = os.path.join(data_bin, f"{subset}.{pair}.{src}")
        dataset = data_utils.load_indexed_dataset(prefix, dictionary)
        if dataset is not None:
            return [[dictionary[i] for i in dataset[k].tolist() if i != dictionary.eos()] for k in range(len(dataset))]
    raise InputError(PROG, f"no binarized '{subset}' source ({subset}.{src}-{tgt}.{src}.bin/.idx) in --data-bin {data_bin}")


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.model_dir):
        raise InputError(PROG, f"CT2_DIR not found: {args.model_dir}")
    for flag, value, low in (("--beam", args.beam, 1), ("--nbest", args.nbest, 1), ("--batch-size", args.batch_size, 1)):
        if value < low:
            raise InputError(PROG, f"{flag} must be >= {low}, got {value}")
    if args.nbest > args.beam:
        raise InputError(PROG, f"--nbest {args.nbest} is more than --beam {args.beam}")
    if args.input and not os.path.isfile(args.input):
        raise InputError(PROG, f"--input not found: {args.input}")
    if args.data_bin and not os.path.isdir(args.data_bin):
        raise InputError(PROG, f"--data-bin not found: {args.data_bin}")
    from fairseq.data import Dictionary
    from fairseq.data.data_utils import post_process

    from fairseq_rope_translation.ct2_engine import CTranslate2Translator, subword_text

    try:
        mt = CTranslate2Translator(args.model_dir, device=args.device, compute_type=args.compute_type,
                                   threads=args.threads, beam=args.beam, lenpen=args.lenpen,
                                   max_len_a=args.max_len_a, max_len_b=args.max_len_b, max_batch_size=args.batch_size)
    except (FileNotFoundError, ValueError, RuntimeError) as error:
        raise InputError(PROG, str(error)) from None
    meta = mt.metadata
    if args.data_bin:
        dictionary = Dictionary.load(os.path.join(args.model_dir, f"dict.{meta['source_lang']}.txt"))
        sources = binarized_subset(args.data_bin, args.gen_subset, meta["source_lang"], meta["target_lang"], dictionary)
    else:
        sources = [mt.subwords(line) for line in read_lines(args.input)]
    start = time.perf_counter()
    try:
        results = mt.translate_tokens(sources, nbest=args.nbest)
    except ValueError as error:
        raise InputError(PROG, str(error)) from None
    seconds = time.perf_counter() - start
    out = sys.stdout
    for i, (source, nbest) in enumerate(zip(sources, results)):
        out.write(f"S-{i}\t{' '.join(source)}\n")
        for tokens, score, _ in nbest:
            score = score / math.log(2)  # as fairseq-generate prints it
            text = subword_text(tokens)  # (as fairseq-generate's H lines: without <s>)
            out.write(f"H-{i}\t{score}\t{post_process(text, args.remove_bpe) if args.remove_bpe else text}\n")
            out.write(f"D-{i}\t{score}\t{mt.detokenize(tokens)}\n")
    n_tokens = sum(len(nbest[0][0]) + 1 for nbest in results)
    if args.info_json:
        info = {"ctranslate2_version": meta["ctranslate2_version"], "ct2_compute_type": mt.compute_type,
                "ct2_device": args.device, "beam": args.beam, "lenpen": args.lenpen, "sentences": len(sources),
                "seconds": round(seconds, 3)}
        write_json(args.info_json, info)
    out.write(f"Translated {len(sources)} sentences ({n_tokens} tokens) in {seconds:.1f}s "
              f"({len(sources) / max(seconds, 1e-9):.2f} sentences/s, {n_tokens / max(seconds, 1e-9):.2f} tokens/s) "
              f"with CTranslate2 {meta['ctranslate2_version']}, compute type {mt.compute_type}, device {args.device}, "
              f"beam {args.beam}, lenpen {args.lenpen}\n")


if __name__ == "__main__":
    main()
