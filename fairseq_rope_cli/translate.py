"""fairseq-rope-translate: plain text of any length in, its translation out, the layout kept.

    fairseq-rope-translate --model-dir work/sample/checkpoints/rope_transformer --data-bin work/sample/data-bin \
        < README.txt > README.de.txt
    fairseq-rope-translate --model-dir work/sample/ct2/rope --input mail.txt --output mail.de.txt

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

Files by their format: an --input ending in .html or .htm (the text between tags), .srt or .vtt
(subtitles: each cue's text, its lines joined, translated and wrapped back into as many lines; numbers,
timings, settings and the WebVTT header kept byte for byte) or .docx (Word: each paragraph, in the body,
tables, headers and footers, its style kept, its bold, italic and linked words on their translation:
pip install 'fairseq-rope[files]') is translated unit by unit, each unit as running text, and
written to --output in the same format (a .docx needs --output); --format txt, html, srt, vtt or docx
to say it (stdin is text unless --format says otherwise). Any other file is plain text, as above. Inline
elements open inside one another deeper than --nesting-limit (100) are refused, naming the file and the limit,
before the model loads.
(fairseq_rope_text.files, docs/usage.md.)

--model-dir holds the checkpoint (--checkpoint-file; default: checkpoint_avg_last5.pt, the recipe's
average, where it exists, else checkpoint_best.pt, fairseq's hub default), or is a fairseq-rope-ct2
export (with its own dictionaries and record; no --data-bin). --backend auto (the default) translates
with CTranslate2 where it gives fairseq's translations (ctranslate2 installed; RoPE, the transformer,
Shaw's RPE or T5's bias; a sentence-level model), from a float32 export made on first use and kept in
ct2-cache/ beside the checkpoint (keyed by its content; one line on stderr says which), else with
fairseq, one line saying why; --backend fairseq or ctranslate2 to choose. Input and output are UTF-8;
--input/--output default to stdin/stdout.
"""

import os
import sys
import time

from fairseq_rope_translation.model_files import model_files

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
    ap.add_argument("--format", choices=["txt", "html", "srt", "vtt", "docx"],
                    help="the input's format (default: --input's extension's where it is .html, .htm, .srt, .vtt or "
                         ".docx, else txt: running text)")
    ap.add_argument("--sentences", metavar="FILE", help="also write each sentence and its translation, tab-separated, "
                                                          "one pair a line (a tab inside one written as a space)")
    ap.add_argument("--nesting-limit", type=int, default=100,
                    help="inline elements (<b>, <a>, a cue's <i>) open inside one another in an .html, .srt or .vtt "
                         "input; a deeper file is refused, naming the limit, before the model loads; 0: no limit "
                         "(default: %(default)s)")
    ap.add_argument("--keep-line-breaks", action="store_true",
                    help="translate every line on its own (hard-wrapped lines are not joined)")
    ap.add_argument("--backend", choices=["auto", "fairseq", "ctranslate2"], default="auto",
                    help="auto: CTranslate2 where it gives fairseq's translations, else fairseq (default: %(default)s)")
    ap.add_argument("--quantization", choices=["int8", "int8_float32", "int16", "float16", "bfloat16", "float32"],
                    help="CTranslate2's computation type, the weights quantized as the model loads (default: "
                         "float32; int8: faster on most CPUs, translations may differ: docs/deployment.md)")
    ap.add_argument("--beam", type=int, default=4, help="(default: %(default)s)")
    ap.add_argument("--lenpen", type=float, default=0.6, help="(default: %(default)s)")
    ap.add_argument("--max-len-b", type=int, default=200,
                    help="longest translation of a sentence, in subwords (fairseq-generate's; default: %(default)s)")
    ap.add_argument("--batch-size", type=int, default=32, help="sentences per batch (default: %(default)s)")
    ap.add_argument("--device", help="cpu or cuda (default: cuda when torch sees a GPU, else cpu)")
    return ap.parse_args(argv)


def read_bytes(path):
    """The input's bytes: the file (or stdin when ``path`` is None or "-")."""
    if path is not None and path != "-":
        if os.path.isdir(path):
            raise InputError(PROG, f"--input {path} is a directory; give a text file")
        if not os.path.isfile(path):
            raise InputError(PROG, f"--input file not found: {path}")
        with open(path, "rb") as f:
            return f.read()
    return sys.stdin.buffer.read()


def read_text(path):
    """The input as text: the file (or stdin when ``path`` is None or "-"), strictly UTF-8, not empty."""
    name = path or "stdin"
    data = read_bytes(path)
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


def input_format(args):
    """The format the input is read in: --format, else --input's extension's where it is a file format
    other than .txt (fairseq_rope_text.files), else "txt" (running text, stdin too)."""
    from fairseq_rope_text.files import EXTENSIONS

    if args.format:
        return args.format
    if args.input is None or args.input == "-":
        return "txt"
    return EXTENSIONS.get(os.path.splitext(args.input)[1].lower(), "txt")


def read_document(path, fmt, nesting_limit=0):
    """The input read as a file of format ``fmt`` (fairseq_rope_text.files.Document), with text to translate,
    its inline elements nested at most ``nesting_limit`` deep (0: no limit)."""
    from fairseq_rope_text.files import FileError, read_document as read
    from fairseq_rope_text.markup import MarkupError, check_nesting

    name = path if path not in (None, "-") else "stdin"
    try:
        document = read(read_bytes(path), fmt, name)
        check_nesting(document.units, document.markup, nesting_limit)
    except FileError as error:
        raise InputError(PROG, str(error)) from None
    except MarkupError as error:
        raise InputError(PROG, f"{name}: {error}; --nesting-limit raises the limit (0: none)") from None
    if not document.units:
        raise InputError(PROG, f"{name} holds no text to translate")
    return document


def translate_document(args, mt, fmt, document, start):
    """``document``'s units translated together (mt.translate_texts: every unit's sentences in batches of
    --batch-size, as the server does; HTML with its inline markup), the file written in its format to
    --output (or stdout), --sentences and the summary line as for text."""
    progress = Progress()
    try:
        translations, sentences, translated = mt.translate_texts(
            document.units, document.markup, keep_line_breaks=args.keep_line_breaks, batch_size=args.batch_size,
            progress=progress)
    except ValueError as error:
        raise InputError(PROG, str(error)) from None
    progress.close()
    pairs = list(zip(sentences, translated))
    data = document.write(translations)
    if args.output:
        with atomic_output(args.output, "wb") as f:
            f.write(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    if args.sentences:
        write_lines(args.sentences, (sentence.replace("\t", " ") + "\t" + translated.replace("\t", " ")
                                     for sentence, translated in pairs))
    print(f"[{PROG}] {args.input or 'stdin'} -> {args.output or 'stdout'} ({fmt}): {len(pairs)} sentences in "
          f"{len(document.units)} units{', the pairs in ' + args.sentences if args.sentences else ''}, "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)


class Progress:
    """A progress line on a terminal (stderr), with the time left; nothing elsewhere."""

    def __init__(self, stream=sys.stderr, what="sentences"):
        self.stream, self.start, self.shown, self.what = stream, time.perf_counter(), False, what

    def __call__(self, done, total):
        if not self.stream.isatty() or total < 20:
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed / done * (total - done) if done else 0
        self.stream.write(f"\r[{PROG}] {done}/{total} {self.what}, {int(left) // 60}:{int(left) % 60:02d} left ")
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")


def main(argv=None):
    args = parse_args(argv)
    for flag, value in (("--beam", args.beam), ("--batch-size", args.batch_size), ("--max-len-b", args.max_len_b)):
        if value < 1:
            raise InputError(PROG, f"{flag} must be >= 1, got {value}")
    if args.nesting_limit < 0:
        raise InputError(PROG, f"--nesting-limit must be >= 0, got {args.nesting_limit}")
    if not os.path.isdir(args.model_dir):
        raise InputError(PROG, f"--model-dir directory not found: {args.model_dir}")
    files = model_files(args.model_dir, args.data_bin, args.backend)
    exported = files.export  # a fairseq-rope-ct2 export
    if exported:
        if files.misfit or args.checkpoint_file:
            raise InputError(PROG, f"--model-dir {args.model_dir} is a CTranslate2 export, with its model, dictionaries "
                                   "and record: leave out --data-bin, --checkpoint-file and --backend fairseq")
    else:
        if files.misfit:
            raise InputError(PROG, f"--data-bin is needed with the checkpoints of --model-dir {args.model_dir} (the "
                                   "dictionaries and the record)")
        if not os.path.isdir(args.data_bin):
            raise InputError(PROG, f"--data-bin directory not found: {args.data_bin}")
        checkpoint = model_checkpoint(PROG, args.model_dir, args.checkpoint_file)
    if args.quantization and args.backend == "fairseq":
        raise InputError(PROG, "--quantization is CTranslate2's: not with --backend fairseq")
    check_output_file(PROG, "--output", args.output)
    check_output_file(PROG, "--sentences", args.sentences)
    if args.sentences and args.output and os.path.abspath(args.sentences) == os.path.abspath(args.output):
        raise InputError(PROG, f"--sentences and --output are the same file ({args.output}); give two")
    fmt = input_format(args)
    if fmt == "docx" and not args.output:
        raise InputError(PROG, "a .docx translation is a binary file: give --output FILE.docx (not stdout)")
    text = read_text(args.input) if fmt == "txt" else None
    document = None if fmt == "txt" else read_document(args.input, fmt, args.nesting_limit)
    if not exported and not any(name.startswith("dict.") and name.endswith(".txt")
                                             for name in os.listdir(args.data_bin)):
        raise InputError(PROG, f"--data-bin {args.data_bin} has no dict.*.txt: not a data-bin (fairseq-preprocess's "
                               "output, with the dictionaries the model was trained with)")
    from fairseq_rope_checkpoints import CheckpointError
    from fairseq_rope_translation.loader import check_device, load_translator

    try:
        check_device(args.device)
    except ValueError as error:
        raise InputError(PROG, f"--device: {error}") from None

    try:
        mt = load_translator(args.model_dir, args.data_bin, checkpoint_file=None if exported else checkpoint,
                             beam=args.beam, lenpen=args.lenpen, max_len_b=args.max_len_b, device=args.device,
                             backend=args.backend, compute_type=args.quantization or "default")
    except (FileNotFoundError, ValueError, CheckpointError) as error:
        raise InputError(PROG, str(error)) from None
    start = time.perf_counter()
    if document is not None:
        return translate_document(args, mt, fmt, document, start)
    progress = Progress()
    try:
        layout, sentences, translations = mt.translate_text_sentences(
            text, keep_line_breaks=args.keep_line_breaks, batch_size=args.batch_size, progress=progress)
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
