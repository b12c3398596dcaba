"""fairseq-rope-plot-training: plots training curves from fairseq-train logs: train loss, valid loss and valid BLEU against updates.

    fairseq-rope-plot-training rope=work/sample/checkpoints/rope/train.log baseline=work/sample/checkpoints/transformer \
        --out curves.png [--loss loss|nll_loss] [--valid-subset valid] [--title T]

Each run is NAME=PATH (or just PATH, named after its directory); PATH is a log file or a
directory holding train.log (where recipes/wmt14_en_de/train.sh tees fairseq-train's output).
All runs go on one chart, one colour per run. A NAME given more than once is one system trained with
several seeds, each PATH a seed's log: its curve is the mean over its seeds at the updates every seed
logged, with a band from the lowest to the highest seed.

--out-md FILE: the valid loss (--loss) at equal updates, every system's mean ± sample standard deviation
over its seeds, and for each system after the first the difference of the means with the 95% interval of
Welch's test over the seeds (no p: one test per row would be many tests at once); --at U1,U2,... the
updates (default: up to 10 of the regular validations every run has, evenly spaced, the last included). Below
it, how fast each system gets there: per seed, the first validation at which its valid loss is at or
below the first system's final mean (the first common update of --at's last), "–" where it never is.

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

import collections
import json
import os
import re
import sys

from .common import (InputError, argument_parser, atomic_output, check_output_file, parse_named, save_figure,
                     updates_axis)

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


def mean_series(replicas, kind, key):
    """The updates every replica logged ``key`` at, the mean over replicas there, and the lowest and highest."""
    points = [dict(zip(*series(r, kind, key))) for r in replicas]
    updates = sorted(set.intersection(*(set(p) for p in points))) if points else []
    values = [[p[u] for p in points] for u in updates]
    return updates, [sum(v) / len(v) for v in values], [min(v) for v in values], [max(v) for v in values]


def plot(runs, out, loss_key="loss", title="Training curves"):
    """runs = [(name, [records of each seed])]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_bleu = any(series(r, "valid", "bleu")[0] for _, replicas in runs for r in replicas)
    panels = [("train", f"train {loss_key} (base 2)"), ("valid", f"valid {loss_key} (base 2)")]
    if has_bleu:
        panels.append(("bleu", "valid BLEU (fairseq --eval-bleu)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, replicas) in enumerate(runs):
        color = colors[i % len(colors)]
        label = name + (f" (mean of {len(replicas)} seeds)" if len(replicas) > 1 else "")
        for ax, (panel, _) in zip(axes, panels):
            if panel == "train":
                kind = "train_inner" if all(r["train_inner"] for r in replicas) else "train"
                xs, ys, low, high = mean_series(replicas, kind, loss_key)
                ax.plot(xs, ys, color=color, lw=1.4, label=label)
            else:
                xs, ys, low, high = mean_series(replicas, "valid", loss_key if panel == "valid" else "bleu")
                ax.plot(xs, ys, color=color, lw=1.4, marker="o", ms=3, label=label)
            if len(replicas) > 1:
                ax.fill_between(xs, low, high, color=color, alpha=0.2, lw=0)
    for ax, (_, ylabel) in zip(axes, panels):
        updates_axis(ax)
        ax.set_title(ylabel, fontsize=10)
        ax.grid(alpha=0.3)
    save_figure(fig, axes[0], title, min(len(runs), 5), out)


def parse_at(text):
    try:
        updates = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        updates = []
    if not updates or any(u < 1 for u in updates) or any(b <= a for a, b in zip(updates, updates[1:])):
        raise InputError(PROG, f"--at must be increasing update numbers separated by commas, got '{text}'")
    return updates


def loss_table(runs, loss_key="loss", at=None, rows=10):
    """The valid loss at equal updates (see the module's docstring), as {"updates", "systems": {name:
    {"mean", "sd", "seeds", "welch"} per update}, "target", "reached": {name: [update or None per seed]}}."""
    from .seeds import mean_sd, welch_test

    common = sorted(set.intersection(*(set(series(r, "valid", loss_key)[0]) for _, reps in runs for r in reps)))
    if at is None:  # the regular validations (multiples of the commonest interval, not the epochs' ends), thinned
        gaps = collections.Counter(b - a for a, b in zip(common, common[1:]))
        interval = gaps.most_common(1)[0][0] if gaps else 1
        regular = [u for u in common if u % interval == 0] or common
        step = max(1, -(-len(regular) // rows))
        at = sorted(regular[::-1][::step])
    else:
        missing = [u for u in at if u not in common]
        if missing:
            raise InputError(PROG, f"--at {','.join(map(str, at))}: not every run validated at update(s) "
                             f"{', '.join(map(str, missing))}; updates every run has: "
                             f"{', '.join(map(str, common)) or 'none'}")
    if not at:
        raise InputError(PROG, "the runs have no validation at a common update: nothing to put side by side")
    first = runs[0][0]
    table = {"loss": loss_key, "updates": at, "systems": {}}
    for name, replicas in runs:
        rows_of = []
        for u in at:
            spread = mean_sd([r["valid"][u][loss_key] for r in replicas])
            base = [r["valid"][u][loss_key] for r in runs[0][1]]
            rows_of.append({**spread, "welch": welch_test(spread["values"], base) if name != first else None})
        table["systems"][name] = rows_of
    target = table["systems"][first][-1]["mean"]
    table["target"] = {"update": at[-1], "loss": target}
    table["reached"] = {name: [next((u for u, v in zip(*series(r, "valid", loss_key)) if v <= target), None)
                               for r in replicas] for name, replicas in runs}
    return table


def render_table(table, runs, title):
    first = runs[0][0]
    names = [name for name, _ in runs]
    lines = [f"## {title}", "", f"Valid {table['loss']} (base 2) at equal updates: the mean ± sample standard "
             f"deviation over each system's seeds ({', '.join(f'{n}: {len(r)}' for n, r in runs)}); in "
             f"parentheses the difference to **{first}** and the 95% interval of Welch's test over the seeds "
             f"(none where a system has fewer than two; no p: one test per row would be many).", "",
             "| updates | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for i, u in enumerate(table["updates"]):
        cells = []
        for name in names:
            row = table["systems"][name][i]
            cell = f"{row['mean']:.3f}" + (f" ± {row['sd']:.3f}" if row["sd"] is not None else "")
            if name != first:
                d = row["mean"] - table["systems"][first][i]["mean"]
                interval = row["welch"]["interval"] if row["welch"] else None
                cell += f" ({d:+.3f}" + (f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else "") + ")"
            cells.append(cell)
        lines.append(f"| {u} | " + " | ".join(cells) + " |")
    target = table["target"]
    lines += ["", f"First validation at or below {first}'s mean at update {target['update']} "
                  f"({target['loss']:.3f}), per seed in the order given:", "", "| system | updates |", "|---|---|"]
    for name in names:
        lines.append(f"| {name} | " + ", ".join("–" if u is None else str(u) for u in table["reached"][name]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("runs", nargs="+", metavar="NAME=PATH", help="a run's fairseq-train log (file, or directory with train.log)")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--loss", default="loss", choices=("loss", "nll_loss"),
                    help="which loss to plot (default: %(default)s; label-smoothed when training with it)")
    ap.add_argument("--valid-subset", default="valid", help="validation subset to plot (default: %(default)s)")
    ap.add_argument("--title", default="Training curves")
    ap.add_argument("--out-md", help="write the valid loss at equal updates here (markdown)")
    ap.add_argument("--at", metavar="U1,U2,...", help="the updates of --out-md's rows (default: up to 10 of the "
                                                       "validations every run has)")
    args = ap.parse_args(argv)
    check_output_file(PROG, "--out", args.out)
    check_output_file(PROG, "--out-md", args.out_md)
    at = parse_at(args.at) if args.at else None
    resolved = [resolve(spec) for spec in args.runs]
    missing = [f"log of run '{n}': {p}" for n, p in resolved if not os.path.isfile(p)]
    if missing:
        raise InputError(PROG, "file(s) not found:\n  " + "\n  ".join(missing))
    paths = [os.path.abspath(p) for _, p in resolved]
    if len(set(paths)) != len(paths):
        raise InputError(PROG, "the same log is given twice: a NAME given more than once is one system trained "
                         "with several seeds, each PATH a seed's own log")
    runs = {}
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
        runs.setdefault(name, []).append(records)
    runs = list(runs.items())
    table = loss_table(runs, args.loss, at) if args.out_md else None  # (its errors before any file is written)
    plot(runs, args.out, args.loss, args.title)
    print(f"[{PROG}] wrote {args.out}", file=sys.stderr)
    if table:
        with atomic_output(args.out_md) as f:
            f.write(render_table(table, runs, args.title))
        print(f"[{PROG}] wrote {args.out_md}", file=sys.stderr)


if __name__ == "__main__":
    main()
