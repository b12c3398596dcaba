"""fairseq-rope-translate: plain text of any length in, its translation out, the layout kept.

    fairseq-rope-translate --model-dir work/sample/checkpoints/rope_transformer --data-bin work/sample/data-bin \
        < README.txt > README.de.txt
    fairseq-rope-translate --model-dir work/sample/ct2/rope --backend ctranslate2 --input mail.txt --output mail.de.txt

The layout is kept: a list item (its marker and indentation kept), a heading, a label or another
short line, and a line that ends a sentence are each translated alone and come back on their line;
only hard-wrapped prose (a long line that does not end a sentence, followed by more text) is joined,
and comes back on one line (--keep-line-breaks: every line translated alone). Each unit is split into sentences by
Moses' rules (sentence-splitter, 24 European languages; sentencex's rules for every other language:
docs/serving.md), each sentence is turned into model input by the data-bin's recorded preprocessing
(preprocessing.json), and the sentences of the input are one document: a model trained with context
(prepare.sh's CONTEXT=K) translates each with its K previous sentences and its own translations of
them, a sentence-level model one by one, batched. Blank lines, and lines or sentences without
letters (numbers, punctuation, emoji, a lone URL), are kept as they are, not translated. A sentence
longer than the longest training source (no boundary to split it at) is translated as it is and
named in one line on stderr. On a terminal, a progress line with the time left; at the end, the
number of sentences translated, of lines and of parts kept as they are, on stderr. --sentences FILE
also writes each sentence and its translation, tab-separated, one pair a line, to see how the text
was split. Line endings (LF or CRLF) are kept.

--model-dir holds the checkpoint (--checkpoint-file; default: checkpoint_avg_last5.pt, the recipe's
average, where it exists, else checkpoint_best.pt, fairseq's hub default); --backend ctranslate2
takes a fairseq-rope-ct2 export as --model-dir, with its own dictionaries and record (sentence-level
models). Input and output are UTF-8; --input/--output default to stdin/stdout.
"""

import os
import sys
import time

from .common import (AVERAGED, InputError, argument_parser, atomic_output, check_output_file, model_checkpoint,
                     write_lines)

PROG = "fairseq-rope-translate"


def parse_args(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("--model-dir", required=True, help="the checkpoints' directory (or a fairseq-rope-ct2 export)")
    ap.add_argument("--data-bin", help="the data-bin the model was trained on: dictionaries and preprocessing.json "
                                       "(backend fairseq)")
    ap.add_argument("--checkpoint-file", help=f"the checkpoint in --model-dir (default: {AVERAGED} where it "
                                              "exists, else checkpoint_best.pt)")
    ap.add_argument("--input", help="UTF-8 text file (default, or -: stdin)")
    ap.add_argument("--output", help="the translation, written atomically (default: stdout)")
    ap.add_argument("--sentences", metavar="FILE", help="also write each sentence and its translation, tab-separated, "
                                                          "one pair a line (a tab inside one written as a space)")
    ap.add_argument("--keep-line-breaks", action="store_true",
                    help="translate every line on its own (hard-wrapped lines are not joined)")
    ap.add_argument("--backend", choices=["fairseq", "ctranslate2"], default="fairseq", help="(default: %(default)s)")
    ap.add_argument("--beam", type=int, default=4, help="(default: %(default)s)")
    ap.add_argument("--lenpen", type=float, default=0.6, help="(default: %(default)s)")
    ap.add_argument("--batch-size", type=int, default=32, help="sentences per batch (default: %(default)s)")
    ap.add_argument("--device", help="cpu or cuda (default: cuda when torch sees a GPU, else cpu)")
    return ap.parse_args(argv)


def read_text(path):
    """The input as text: the file (or stdin when ``path`` is None or "-"), strictly UTF-8, not empty."""
    name = path or "stdin"
    if path is not None and path != "-":
        if os.path.isdir(path):
            raise InputError(PROG, f"--input {path} is a directory; give a text file")
        if not os.path.isfile(path):
            raise InputError(PROG, f"--input file not found: {path}")
        with open(path, "rb") as f:
            data = f.read()
    else:
        data = sys.stdin.buffer.read()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(PROG, f"{name} is UTF-16 (it starts with a UTF-16 byte-order mark); convert it to UTF-8, "
                               "e.g. with iconv -f utf-16 -t utf-8")
    try:
        text = data.decode("utf-8-sig")  # (a UTF-8 byte-order mark, as some editors write, is not text)
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise InputError(PROG, f"{name}, line {line}: not UTF-8 (byte 0x{data[error.start]:02x}); convert it to "
                               f"UTF-8, e.g. with iconv -f latin1 -t utf-8") from None
    if not text.strip():
        raise InputError(PROG, f"{name} is empty: nothing to translate")
    return text


class Progress:
    """A progress line on a terminal (stderr), with the time left; nothing elsewhere."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.start, self.shown = stream, time.perf_counter(), False

    def __call__(self, done, total):
        if not self.stream.isatty() or total < 20:
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed / done * (total - done) if done else 0
        self.stream.write(f"\r[{PROG}] {done}/{total} sentences, {int(left) // 60}:{int(left) % 60:02d} left ")
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")


def main(argv=None):
    args = parse_args(argv)
    for flag, value in (("--beam", args.beam), ("--batch-size", args.batch_size)):
        if value < 1:
            raise InputError(PROG, f"{flag} must be >= 1, got {value}")
    if not os.path.isdir(args.model_dir):
        raise InputError(PROG, f"--model-dir directory not found: {args.model_dir}")
    if args.backend == "fairseq":
        if not args.data_bin:
            raise InputError(PROG, "--data-bin is needed with the fairseq backend (the dictionaries and the record)")
        if not os.path.isdir(args.data_bin):
            raise InputError(PROG, f"--data-bin directory not found: {args.data_bin}")
        checkpoint = model_checkpoint(PROG, args.model_dir, args.checkpoint_file)
    elif args.data_bin or args.checkpoint_file:
        raise InputError(PROG, "--backend ctranslate2 takes the model, dictionaries and record from --model-dir; "
                               "leave out --data-bin and --checkpoint-file")
    check_output_file(PROG, "--output", args.output)
    check_output_file(PROG, "--sentences", args.sentences)
    if args.sentences and args.output and os.path.abspath(args.sentences) == os.path.abspath(args.output):
        raise InputError(PROG, f"--sentences and --output are the same file ({args.output}); give two")
    text = read_text(args.input)
    if args.backend == "fairseq" and not any(name.startswith("dict.") and name.endswith(".txt")
                                             for name in os.listdir(args.data_bin)):
        raise InputError(PROG, f"--data-bin {args.data_bin} has no dict.*.txt: not a data-bin (fairseq-preprocess's "
                               "output, with the dictionaries the model was trained with)")
    from fairseq_rope.checkpoints import CheckpointError
    from fairseq_rope.hub import check_device, load_translator

    try:
        check_device(args.device)
    except ValueError as error:
        raise InputError(PROG, f"--device: {error}") from None

    try:
        if args.backend == "fairseq":
            mt = load_translator(args.model_dir, args.data_bin, checkpoint_file=checkpoint, beam=args.beam,
                                 lenpen=args.lenpen, device=args.device)
        else:
            mt = load_translator(args.model_dir, backend="ctranslate2", beam=args.beam, lenpen=args.lenpen,
                                 device=args.device)
    except (FileNotFoundError, ValueError, CheckpointError) as error:
        raise InputError(PROG, str(error)) from None
    progress = Progress()
    start = time.perf_counter()
    try:
        if args.backend == "fairseq":
            layout, sentences, translations = mt.translate_text_sentences(
                text, keep_line_breaks=args.keep_line_breaks, batch_size=args.batch_size, progress=progress)
        else:
            layout, sentences, translations = mt.translate_text_sentences(
                text, keep_line_breaks=args.keep_line_breaks, progress=progress)
    except ValueError as error:
        raise InputError(PROG, str(error)) from None
    progress.close()
    from fairseq_rope_text.running_text import Unit, join_text, line_ending

    translation = join_text(layout, translations, line_ending(text))
    if args.output:
        with atomic_output(args.output) as f:
            f.write(translation)
    else:
        sys.stdout.write(translation)
    if args.sentences:
        write_lines(args.sentences, (sentence.replace("\t", " ") + "\t" + translated.replace("\t", " ")
                                     for sentence, translated in zip(sentences, translations)))
    units = [item for item in layout if isinstance(item, Unit)]
    kept = sum(1 for item in layout if isinstance(item, str) and item.strip()) + \
        sum(1 for unit in units for part in unit.parts if part is not None)
    print(f"[{PROG}] {args.input or 'stdin'} -> {args.output or 'stdout'}: {len(sentences)} sentences in {len(units)} "
          f"lines{'' if args.keep_line_breaks else ' (hard-wrapped ones joined)'}, {kept} parts without words kept "
          f"as they are"
          f"{', the pairs in ' + args.sentences if args.sentences else ''}, {time.perf_counter() - start:.1f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
