"""fairseq-rope-plot-training: plots training curves from fairseq-train logs: train loss, valid loss and valid BLEU against updates.

    fairseq-rope-plot-training rope=work/sample/checkpoints/rope/train.log baseline=work/sample/checkpoints/transformer \
        --out curves.png [--loss loss|nll_loss] [--valid-subset valid] [--title T]

Each run is NAME=PATH (or just PATH, named after its directory); PATH is a log file or a
directory holding train.log (where recipes/wmt14_en_de/train.sh tees fairseq-train's output).
All runs go on one chart, one colour per run.

Read from the log (stdout/stderr of fairseq-train, any other lines are ignored):
  --log-format json    "... | INFO | train_inner | {"epoch": 1, ..., "loss": "9.7", "num_updates": "100", ...}"
                       "... | INFO | valid | {"epoch": 1, "valid_loss": "9.5", "valid_bleu": "3.1",
                        "valid_num_updates": "200", ...}"
  --log-format simple  "... | INFO | train_inner | epoch 001:  100 / 280 loss=9.7, ..., num_updates=100, ..."
                       "... | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.5 | bleu 3.1 | ... |
                        num_updates 200"
Train loss comes from the train_inner lines (every --log-interval updates), or from the
end-of-epoch "train" lines when a log has none; valid BLEU is plotted when logged (--eval-bleu).
A log appended to by a resumed run repeats some updates: the later value wins.
Losses are fairseq's: base 2, "loss" label-smoothed when training with label smoothing.
"""

import json
import os
import re
import sys

from .common import InputError, argument_parser, parse_named, save_figure

PROG = "fairseq-rope-plot-training"
LINE = re.compile(r"\|\s*INFO\s*\|\s*(?P<tag>[\w.\-]+)\s*\|\s*(?P<msg>.*?)\s*$")
SIMPLE_INNER = re.compile(r"^epoch \d+:\s+\d+\s*/\s*\d+\s+(?P<stats>.*)$")


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _parse_simple_pairs(text, sep, kv):
    out = {}
    for part in text.split(sep):
        key, _, value = part.strip().partition(kv)
        if key and value:
            out[key.strip()] = value.strip()
    return out


def parse_log(path, valid_subset="valid"):
    """{"train_inner": {update: stats}, "train": {...}, "valid": {...}}; stats are {name: float}, unprefixed."""
    records = {"train_inner": {}, "train": {}, "valid": {}}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            tag, msg = m.group("tag"), m.group("msg")
            if tag == "train_inner":
                kind = "train_inner"
            elif tag == "train":
                kind = "train"
            elif tag == valid_subset:
                kind = "valid"
            else:
                continue
            stats = None
            if msg.startswith("{"):  # --log-format json
                try:
                    raw = json.loads(msg)
                except json.JSONDecodeError:
                    continue
                prefix = "" if kind == "train_inner" else tag + "_"
                stats = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)} if prefix else raw
            elif kind == "train_inner":  # --log-format simple
                sm = SIMPLE_INNER.match(msg)
                if sm:
                    stats = _parse_simple_pairs(sm.group("stats"), ",", "=")
            elif msg.startswith("epoch "):
                stats = _parse_simple_pairs(msg, "|", " ")
                if kind == "valid" and f"valid on '{valid_subset}' subset" not in msg:
                    continue
            if not stats:
                continue
            values = {k: _number(v) for k, v in stats.items()}
            update = values.get("num_updates")
            if update is None:
                continue
            records[kind][int(update)] = {k: v for k, v in values.items() if v is not None}
    return records


def series(records, kind, key):
    points = sorted((u, s[key]) for u, s in records[kind].items() if key in s)
    return [u for u, _ in points], [v for _, v in points]


def run_name(path):
    """A run's default name: its directory's name (the log's directory for a log file)."""
    base = path.rstrip("/")
    return os.path.basename(base if os.path.isdir(base) else os.path.dirname(os.path.abspath(base))) or base


def resolve(spec):
    name, path = parse_named(spec, default_name=run_name)
    if os.path.isdir(path):
        path = os.path.join(path, "train.log")
    return name, path


def plot(runs, out, loss_key="loss", title="Training curves"):
    """runs = [(name, records)]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_bleu = any(series(r, "valid", "bleu")[0] for _, r in runs)
    panels = [("train", f"train {loss_key} (base 2)"), ("valid", f"valid {loss_key} (base 2)")]
    if has_bleu:
        panels.append(("bleu", "valid BLEU (fairseq --eval-bleu)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, records) in enumerate(runs):
        color = colors[i % len(colors)]
        for ax, (panel, _) in zip(axes, panels):
            if panel == "train":
                xs, ys = series(records, "train_inner", loss_key)
                if not xs:
                    xs, ys = series(records, "train", loss_key)
                ax.plot(xs, ys, color=color, lw=1.4, label=name)
            else:
                xs, ys = series(records, "valid", loss_key if panel == "valid" else "bleu")
                ax.plot(xs, ys, color=color, lw=1.4, marker="o", ms=3, label=name)
    for ax, (_, ylabel) in zip(axes, panels):
        ax.set_xlabel("updates")
        ax.set_title(ylabel, fontsize=10)
        ax.grid(alpha=0.3)
    save_figure(fig, axes[0], title, min(len(runs), 5), out)


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("runs", nargs="+", metavar="NAME=PATH", help="a run's fairseq-train log (file, or directory with train.log)")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--loss", default="loss", choices=("loss", "nll_loss"),
                    help="which loss to plot (default: %(default)s; label-smoothed when training with it)")
    ap.add_argument("--valid-subset", default="valid", help="validation subset to plot (default: %(default)s)")
    ap.add_argument("--title", default="Training curves")
    args = ap.parse_args(argv)
    resolved = [resolve(spec) for spec in args.runs]
    missing = [f"log of run '{n}': {p}" for n, p in resolved if not os.path.isfile(p)]
    if missing:
        raise InputError(PROG, "file(s) not found:\n  " + "\n  ".join(missing))
    names = [n for n, _ in resolved]
    if len(set(names)) != len(names):
        raise InputError(PROG, f"run names must be unique, got {', '.join(names)} (name them: NAME=PATH)")
    runs = []
    for name, path in resolved:
        records = parse_log(path, args.valid_subset)
        if not records["train_inner"] and not records["train"] and not records["valid"]:
            raise InputError(PROG, f"no fairseq training statistics in {path} (run '{name}'): expected lines of "
                             f"fairseq-train with --log-format json or simple")
        n_train = len(records["train_inner"]) or len(records["train"])
        bleu = sum("bleu" in s for s in records["valid"].values())
        last = max([*records["train_inner"], *records["train"], *records["valid"]])
        print(f"[{PROG}] {name}: {path}: {n_train} train points, {len(records['valid'])} validations"
              f"{f' ({bleu} with BLEU)' if bleu else ''}, up to update {last}", file=sys.stderr)
        runs.append((name, records))
    plot(runs, args.out, args.loss, args.title)
    print(f"[{PROG}] wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
