"""What the fairseq-rope-* commands share: their --help, user errors, atomic outputs, line files,
NAME=PATH, figures.

Only the standard library at import time, so that every command's ``--help`` starts at once.
"""

import argparse
import contextlib
import gzip
import math
import os
from typing import Optional


def argument_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A command's parser: its module docstring's first paragraph as the description, the rest
    (usage examples, details) after the options, line breaks kept."""
    first, _, rest = doc.partition("\n\n")
    return argparse.ArgumentParser(prog=prog, description=first, epilog=rest or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


class InputError(SystemExit):
    """A user error (a missing file, a bad value): ``PROG: error: message`` on stderr and exit
    status 1, no traceback. A SystemExit, so a command's main() needs no wrapper."""

    def __init__(self, prog: str, message: str):
        super().__init__(f"{prog}: error: {message}")


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "w", suffix: str = ".tmp"):
    """Opens ``path + suffix`` for writing and renames it to ``path`` once the block ends without
    an error, so that an interrupted run never leaves a partial file under the final name. On an
    error the temporary file is removed. ``mode`` "w"/"wb"; text is UTF-8 with "\\n" line ends.
    ``mode=None`` yields the temporary path instead of a file (for writers that take a path)."""
    tmp = path + suffix
    try:
        if mode is None:
            yield tmp
        else:
            with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": "\n"})) as f:
                yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def check_output_file(prog: str, flag: str, path: Optional[str]):
    """``flag``'s ``path`` must be a file that can be written: checked before the long work starts, so
    that a wrong name does not cost the whole run (None: not asked for)."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(prog, f"{flag} {path} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise InputError(prog, f"{flag} {path}: its folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(prog, f"{flag} {path} cannot be written (permissions)")


AVERAGED = "checkpoint_avg_last5.pt"  # what the recipe's average.sh writes


def model_checkpoint(prog: str, model_dir: str, checkpoint_file: Optional[str]) -> str:
    """The checkpoint to translate with in ``model_dir``: ``checkpoint_file`` (--checkpoint-file), else the
    recipe's average where it exists, else checkpoint_best.pt (fairseq's hub default); one that is not
    there is named with the flag."""
    checkpoint = checkpoint_file or (AVERAGED if os.path.isfile(os.path.join(model_dir, AVERAGED))
                                     else "checkpoint_best.pt")
    if not os.path.isfile(os.path.join(model_dir, checkpoint)):
        raise InputError(prog, f"checkpoint not found: {os.path.join(model_dir, checkpoint)} (--checkpoint-file)")
    return checkpoint


def write_json(path: str, value):
    """Writes ``value`` as indented UTF-8 JSON with a final newline, atomically."""
    import json

    with atomic_output(path) as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_lines(path: str, lines):
    """Writes ``lines`` (without line ends), one per line, atomically."""
    with atomic_output(path) as f:
        f.writelines(line + "\n" for line in lines)


def decode_lines(path: str, prog: str = "fairseq-rope"):
    """Yields the lines of a UTF-8 text file without their "\\n"; only "\\n" ends a line, as fairseq
    and sacrebleu read text (str.splitlines would also split at U+2028, form feeds, ...). A line
    that is not UTF-8 stops it with an InputError naming the file, the line and the byte."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(prog, f"{path}, line {number}: not UTF-8 (byte 0x{raw[error.start]:02x} at "
                                       f"byte {error.start + 1} of the line); convert the file to UTF-8, "
                                       f"e.g. with iconv -f latin1 -t utf-8") from None
            yield line[:-1] if line.endswith("\n") else line


def open_text(path: str):
    """A UTF-8 text file opened for reading, gunzipped on the fly when its name ends in .gz (as
    fairseq-rope-record keeps a run's log and reference scores)."""
    return (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8")


def read_lines(path: str, prog: str = "fairseq-rope"):
    """The lines of a UTF-8 text file without their "\\n" (see decode_lines)."""
    return list(decode_lines(path, prog))


def count_lines(path: str) -> int:
    """Number of lines of a file, counted in binary (no decoding)."""
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def parse_named(spec: str, default_name=None):
    """``NAME=PATH`` -> (NAME, PATH); a bare PATH -> (default_name(PATH), PATH), or (None, PATH)."""
    name, sep, path = spec.partition("=")
    if not sep:
        return (default_name(spec) if default_name else None), spec
    return name, path


def updates_axis(ax):
    """The x axis in updates: at most 6 ticks, in thousands ("10k") where the axis reaches 10,000 (five-digit
    numbers under a panel 4.6 inches wide ran into each other)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    def label(x, _):
        return f"{x / 1000:g}k" if x and ax.get_xlim()[1] >= 10000 else f"{x:g}"

    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    ax.set_xlabel("updates")


def save_figure(fig, legend_axes, title: str, ncol: int, path: str):
    """Title and legend (of ``legend_axes``' series) in a band above the panels (of a fixed height, 0.17
    inch more for each row of the legend past the first), the title's font made smaller where the title
    would be wider than the figure, then the PNG written atomically and the figure closed."""
    import matplotlib.pyplot as plt

    handles, labels = legend_axes.get_legend_handles_labels()
    height = fig.get_figheight()  # title and legend take a fixed height in inches, 0.17 more a row past one
    band = 0.5 + 0.17 * max(0, math.ceil(len(labels) / ncol) - 1)
    fig.legend(handles, labels, loc="upper center", ncol=ncol, fontsize=9,
               bbox_to_anchor=(0.5, 1 - 0.3 / height), frameon=False)
    text = fig.suptitle(title, fontsize=11, y=1 - 0.03 / height)
    room = 0.97 * fig.get_figwidth() * fig.dpi  # (pixels at the figure's dpi, as the extent)
    for _ in range(4):  # (a glyph's width is not quite proportional to the size: measured again)
        wide = text.get_window_extent(fig.canvas.get_renderer()).width
        if wide <= room:
            break
        text.set_fontsize(text.get_fontsize() * room / wide * 0.98)
    fig.tight_layout(rect=(0, 0, 1, 1 - band / height))
    with atomic_output(path, mode=None, suffix=".tmp.png") as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)


def documents_argument(prog: str, flag: str, path: str, expected_lines: int, text: str):
    """read_documents for a command's ``flag``: a missing file or ids that do not fit ``text`` are an
    InputError of ``prog`` naming them."""
    from fairseq_rope_text.documents import DocumentError, read_documents

    if not os.path.isfile(path):
        raise InputError(prog, f"{flag} file not found: {path}")
    try:
        return read_documents(path, expected_lines, text)
    except DocumentError as error:
        raise InputError(prog, str(error)) from None


def add_model_arguments(ap):
    """The options that load a trained model for the document commands (fairseq_rope_translation.loader)."""
    ap.add_argument("--checkpoint", required=True, help="a model checkpoint (e.g. checkpoint_avg_last5.pt)")
    ap.add_argument("--data-bin", required=True,
                    help="the fairseq-preprocess directory with its dictionaries and the preprocessing prepare.sh "
                         "recorded (preprocessing.json: pretokenizer, subwords, context), which is applied")
    subword = ap.add_mutually_exclusive_group()
    subword.add_argument("--bpe-codes", help="subword-nmt codes the model was trained with (needed only for a "
                                             "data-bin without a record; else they must be the record's)")
    subword.add_argument("--sentencepiece-model", help="sentencepiece model the model was trained with (as --bpe-codes)")
    ap.add_argument("--tokenization", choices=["moses", "none"],
                    help="how the training text was tokenized before subwords (prepare.sh's PRETOKENIZER; "
                         "default: the record's)")
    ap.add_argument("--context", type=int,
                    help="previous sentences the model was trained with (prepare.sh's CONTEXT; 0: sentence-level; "
                         "default: the record's)")
    ap.add_argument("--batch-size", type=int, default=32, help="sentences per batch (default: %(default)s)")
    ap.add_argument("--device", help="cpu or cuda (default: cuda when torch sees a GPU, else cpu)")
    ap.add_argument("--model-overrides", default="{}",
                    help="model options replaced at load time, as fairseq-generate's (a Python dict)")


def model_preprocessing(args, prog: str):
    """The recorded preprocessing of add_model_arguments' --data-bin (torch not needed: bad input is
    named at once), which the given --bpe-codes, --sentencepiece-model, --tokenization and --context
    must agree with; ``args.context`` is set to the record's when not given."""
    from fairseq_rope_text.preprocessing import PreprocessingError, resolve

    if args.context is not None and args.context < 0:
        raise InputError(prog, f"--context must be >= 0, got {args.context}")
    for flag, path in (("--checkpoint", args.checkpoint), ("--bpe-codes", args.bpe_codes),
                       ("--sentencepiece-model", args.sentencepiece_model)):
        if path and not os.path.isfile(path):
            raise InputError(prog, f"{flag} file not found: {path}")
    if not os.path.isdir(args.data_bin):
        raise InputError(prog, f"--data-bin directory not found: {args.data_bin}")
    try:
        record = resolve(args.data_bin, bpe_codes=args.bpe_codes, sentencepiece_model=args.sentencepiece_model,
                         pretokenizer=args.tokenization, context=args.context)
    except PreprocessingError as error:
        raise InputError(prog, f"--data-bin {args.data_bin}: {error}") from None
    args.context = record.context
    return record


def load_model(args, prog: str, record):
    """The translator of add_model_arguments' options with ``record`` (model_preprocessing) on fairseq, or an
    InputError naming what is wrong. The document commands ask for fairseq whatever is installed: they
    translate with forced target prefixes and print fairseq's hypothesis scores, on every kind of model."""
    import ast

    if args.batch_size < 1:
        raise InputError(prog, f"--batch-size must be >= 1, got {args.batch_size}")
    try:
        overrides = ast.literal_eval(args.model_overrides)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # ({[]: 1}: an unhashable key)
        overrides = None
    if not isinstance(overrides, dict):
        raise InputError(prog, f"--model-overrides must be a Python dict, got {args.model_overrides!r}")
    from fairseq_rope_checkpoints import CheckpointError
    from fairseq_rope_translation.loader import load_translator

    try:
        return load_translator(os.path.dirname(os.path.abspath(args.checkpoint)), args.data_bin,
                               checkpoint_file=os.path.basename(args.checkpoint), preprocessing=record,
                               device=args.device, model_overrides=overrides, backend="fairseq")
    except (FileNotFoundError, ValueError, CheckpointError) as error:
        raise InputError(prog, str(error)) from None
