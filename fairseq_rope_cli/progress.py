"""Runs a fairseq command with its whole output in a log file and a few progress lines on the terminal.

    fairseq-rope-progress --log SAVE_DIR/train.log -- fairseq-train DATA ... --max-update 100000
    fairseq-rope-progress --log EVAL/generate.log --stdout EVAL/generate.out --total 3003 -- fairseq-generate ...

Everything the command prints (stderr, and stdout unless --stdout) is appended, complete, to --log.
The terminal (stderr) gets, at most every --interval seconds and once at the end:
  * for fairseq-train: update N/M (M from its --max-update), the last train loss and valid loss from
    fairseq's log lines (--log-format json or simple), updates/s since this command started, the
    time elapsed and an estimate of the time left;
  * for anything given --total N: the lines of its stdout that start with "S-" (fairseq-generate's
    source lines: sentences done) out of N, sentences/s, elapsed and left.
--stdout FILE writes the command's stdout to FILE.tmp and renames it to FILE only when the command
succeeds. --verbose streams everything to the terminal as well (the recipe's VERBOSE=1). When the
command fails, the last --tail lines of the log and its path are printed, and this command exits
with the command's status.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque

from .common import InputError, argument_parser

PROG = "fairseq-rope-progress"
LOG_LINE = re.compile(r"\| (train_inner|train|valid) \| (.*)$")


def parse_args(argv):
    p = argument_parser(PROG, __doc__)
    p.add_argument("--log", required=True, help="append the command's whole output here")
    p.add_argument("--stdout", help="the command's stdout goes to this file instead (atomically)")
    p.add_argument("--total", type=int, help="sentences to translate: progress counts S- lines of stdout")
    p.add_argument("--label", default="", help="what the progress lines start with (e.g. [train])")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between progress lines (default: 30)")
    p.add_argument("--tail", type=int, default=30, help="log lines shown when the command fails (default: 30)")
    p.add_argument("--verbose", action="store_true", help="also stream the whole output to the terminal")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        raise InputError(PROG, "no command given: put it after --, e.g. -- fairseq-train DATA ...")
    if args.total is not None and args.total < 1:
        raise InputError(PROG, f"--total must be >= 1 (the sentences to translate); got {args.total}")
    if not args.interval > 0:
        raise InputError(PROG, f"--interval must be > 0 seconds; got {args.interval}")
    return args


def max_update(command):
    """The value of --max-update in a fairseq-train command line, or None."""
    for i, word in enumerate(command):
        if word == "--max-update" and i + 1 < len(command):
            return int(command[i + 1])
        if word.startswith("--max-update="):
            return int(word.split("=", 1)[1])
    return None


def fairseq_stats(text):
    """The statistics of one fairseq log record: JSON ({"loss": "4.3", ...}) or simple
    ("epoch 001: 50 / 5 loss=4.3, ..." for train_inner, "... | loss 4.3 | num_updates 50" otherwise)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            return {k: str(v) for k, v in json.loads(text).items()}
        except ValueError:
            return {}
    stats = dict(re.findall(r"(\w+)=([^,\s]+)", text))
    stats.update(re.findall(r"(?:^|\| )(\w+) ([^|\s]+)(?= \||$)", text))
    return stats


def duration(seconds):
    seconds = int(round(seconds))
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class Progress:
    """What a command has done so far, from its output lines; ``line()`` says it in one line."""

    def __init__(self, command, total):
        self.start, self.total, self.max_update = time.monotonic(), total, max_update(command)
        self.name = os.path.basename(command[0])
        self.sentences = 0
        self.update = self.first_update = self.first_update_time = None
        self.train_loss = self.valid_loss = None

    def read(self, line, stream):
        if self.total is not None and stream == "stdout" and line.startswith("S-"):
            self.sentences += 1
            return
        found = LOG_LINE.search(line)
        if not found:
            return
        kind, stats = found[1], fairseq_stats(found[2])
        if kind == "valid":
            self.valid_loss = stats.get("valid_loss", stats.get("loss", self.valid_loss))
            return
        if "num_updates" in stats:
            self.update = int(float(stats["num_updates"]))
            if self.first_update is None:
                self.first_update, self.first_update_time = self.update, time.monotonic()
        if kind == "train_inner":
            self.train_loss = stats.get("loss", self.train_loss)

    def line(self, finished=False):
        elapsed = time.monotonic() - self.start
        if self.total is None and self.update is None:  # neither fairseq-train nor a translation
            return f"{self.name} {'finished in' if finished else 'running, elapsed'} {duration(elapsed)}"
        if self.total is not None:
            rate = self.sentences / elapsed if elapsed > 0 else 0.0
            left = f", left ~{duration((self.total - self.sentences) / rate)}" if rate and self.sentences < self.total else ""
            return (f"sentences {self.sentences}/{self.total} ({self.sentences / self.total:.0%}), {rate:.1f} sentences/s, "
                    f"elapsed {duration(elapsed)}{left}")
        parts = [f"update {self.update}" + (f"/{self.max_update} ({self.update / self.max_update:.0%})" if self.max_update else "")]
        if self.train_loss is not None:
            parts.append(f"train loss {self.train_loss}")
        if self.valid_loss is not None:
            parts.append(f"valid loss {self.valid_loss}")
        done = self.update - self.first_update  # the speed since the first update this command saw
        since = time.monotonic() - self.first_update_time
        rate = done / since if since > 0 else 0.0
        parts.append(f"{rate:.2f} updates/s" if done else "measuring speed")
        parts.append(f"elapsed {duration(elapsed)}")
        if done and self.max_update and self.update < self.max_update:
            parts.append(f"left ~{duration((self.max_update - self.update) / rate)}")
        return ", ".join(parts)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.path.isdir(args.log):
        raise InputError(PROG, f"--log {args.log} is a directory; give a file name (its folder is made if missing)")
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    try:
        process = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, errors="replace", bufsize=1)
    except OSError as error:
        raise InputError(PROG, f"cannot run {args.command[0]}: {error.strerror}") from None
    # stopping this command stops the command it runs (the previous handlers come back at the end)
    previous = {sig: signal.signal(sig, lambda signum, frame: process.send_signal(signum))
                for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return run(args, process)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(args, process):
    """Reads the command's output to its end (see the module docstring); its exit status."""
    progress = Progress(args.command, args.total)
    tail = deque(maxlen=args.tail)
    lock = threading.Lock()
    say = lambda text: print(f"{args.label} {text}".lstrip(), file=sys.stderr, flush=True)
    out_path = args.stdout + ".tmp" if args.stdout else None
    last_said = [time.monotonic()]

    with open(args.log, "a", encoding="utf-8") as log, \
            (open(out_path, "w", encoding="utf-8") if out_path else open(os.devnull, "w")) as out:
        def pump(stream, name):
            for line in stream:
                with lock:
                    if name == "stdout" and out_path:
                        out.write(line)
                    else:
                        log.write(line)
                        log.flush()
                        tail.append(line.rstrip("\n"))
                    if args.verbose:
                        sys.stderr.write(line)
                    progress.read(line, name)
                    now = time.monotonic()
                    if not args.verbose and now - last_said[0] >= args.interval:
                        last_said[0] = now
                        say(progress.line())

        threads = [threading.Thread(target=pump, args=(process.stdout, "stdout")),
                   threading.Thread(target=pump, args=(process.stderr, "stderr"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        status = process.wait()
    if status:
        if out_path:
            os.remove(out_path)
        shown = "".join(f"\n    {line}" for line in tail)
        say(f"FAILED (exit status {status}): {args.command[0]}; " +
            (f"the last {len(tail)} lines of {args.log}:{shown}" if tail else f"it wrote nothing to {args.log}"))
        raise SystemExit(status if status > 0 else 128 - status)  # killed by a signal: as a shell reports it
    if out_path:
        os.replace(out_path, args.stdout)
    if not args.verbose:
        say(progress.line(finished=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
