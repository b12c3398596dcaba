"""fairseq-rope-ct2: exports a rope_transformer, transformer, rpe_transformer or t5bias_transformer checkpoint to CTranslate2.

    fairseq-rope-ct2 --checkpoint CKPT --data-bin DIR --output-dir OUT \
        [--quantization int8|int8_float32|int8_float16|int8_bfloat16|int16|float16|bfloat16|float32] \
        [--force]

Every rope_transformer architecture converts (interleaved and half layouts, --rope-dim, any
--rope-theta, averaged checkpoints), and fairseq's transformer too, so that both can be compared on
one engine; Shaw's relative positions (rpe_transformer, keys-only included) and T5's bias
(t5bias_transformer) go to CTranslate2's relative attention, and alibi_transformer is refused
(CTranslate2 4.x has no ALiBi in encoders). The checkpoint is loaded with torch.load(weights_only=True) through fairseq-rope's
allowlist. ctranslate2's own fairseq helpers fill the layers; only the input layers differ (RoPE has
no position table: CTranslate2 rotates queries and keys itself, same layout, dims and theta).

What the engine cannot represent is refused with the option named (e.g.
--add-token-positional-embeddings, --adaptive-softmax-cutoff, an unsupported --activation-fn).

OUT receives model.bin, config.json and shared_vocabulary.json (fairseq's dictionaries, <pad> as
<blank>), the fairseq dictionaries, fairseq_rope_ct2.json (languages, arch, limits), and the data's
preprocessing record (preprocessing.json, which prepare.sh writes into DIR) with its files: the
translator applies it, so that the model reads what it read in training. For a data-bin made before
records, --bpe-codes/--sentencepiece-model and --tokenizer say how its text was made.
It is assembled under a temporary name and renamed when complete: an interrupted export leaves
nothing under OUT, and an existing OUT is replaced only with --force, once the new one is complete.

Translate with fairseq-rope-ct2-generate, or from Python:
    from fairseq_rope.hub import load_translator
    mt = load_translator(OUT, backend="ctranslate2")   # beam 4, length penalty 0.6
    mt.translate(["The small dog sees the red house."])
"""

import argparse
import os
import sys

from .common import InputError, argument_parser

PROG = "fairseq-rope-ct2"
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")


class ListQuantizations(argparse.Action):
    """--list-quantizations: the accepted --quantization values, one per line, then exit (as --version)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print("\n".join(QUANTIZATIONS))
        parser.exit()


def parse_args(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("--list-quantizations", action=ListQuantizations,
                    help="print the accepted --quantization values, one per line, and exit")
    ap.add_argument("--checkpoint", required=True, help="fairseq checkpoint (.pt), e.g. checkpoint_avg_last5.pt")
    ap.add_argument("--data-bin", required=True, help="the fairseq-preprocess directory it was trained on (dictionaries "
                                                      "and preprocessing.json, both copied into the export)")
    ap.add_argument("--output-dir", required=True, help="the CTranslate2 model directory to write")
    ap.add_argument("--quantization", choices=QUANTIZATIONS, help="weight type saved (default: float32)")
    subwords = ap.add_mutually_exclusive_group()
    subwords.add_argument("--bpe-codes", help="subword-nmt codes (only for a --data-bin without a record; else they "
                                              "must be the record's)")
    subwords.add_argument("--sentencepiece-model", help="sentencepiece model (as --bpe-codes)")
    ap.add_argument("--tokenizer", choices=("moses", "none"),
                    help="prepare.sh's PRETOKENIZER (default: the record's; as --bpe-codes)")
    ap.add_argument("--source-lang", help="default: the checkpoint's, else inferred from --data-bin")
    ap.add_argument("--target-lang", help="default: the checkpoint's, else inferred from --data-bin")
    ap.add_argument("--force", action="store_true", help="replace OUT if it exists")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    for flag, path, test in (("--checkpoint", args.checkpoint, os.path.isfile), ("--data-bin", args.data_bin, os.path.isdir),
                             ("--bpe-codes", args.bpe_codes, os.path.isfile),
                             ("--sentencepiece-model", args.sentencepiece_model, os.path.isfile)):
        if path and not test(path):
            raise InputError(PROG, f"{flag} not found: {path}")
    if os.path.exists(args.output_dir) and not args.force:
        raise InputError(PROG, f"--output-dir exists: {args.output_dir} (give --force to replace it)")
    from fairseq_rope_checkpoints import CheckpointError
    from fairseq_rope_translation.ct2_export import export
    from fairseq_rope_translation.ct2_spec import ExportError

    try:
        out = export(args.checkpoint, args.data_bin, args.output_dir, quantization=args.quantization,
                     force=args.force, bpe_codes=args.bpe_codes, sentencepiece_model=args.sentencepiece_model,
                     tokenizer=args.tokenizer,
                     source_lang=args.source_lang, target_lang=args.target_lang)
    except (ExportError, CheckpointError, FileNotFoundError, ValueError) as error:
        raise InputError(PROG, str(error)) from None
    print(f"[{PROG}] {args.checkpoint} -> {out} (CTranslate2, weights {args.quantization or 'float32'})", file=sys.stderr)


if __name__ == "__main__":
    main()
