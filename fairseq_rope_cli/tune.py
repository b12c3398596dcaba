"""fairseq-rope-tune: settings chosen on the valid set, and whether training has stopped improving.

    fairseq-rope-tune grid transformer=work/debian/tune/checkpoints/transformer_lr1e-3_wu250 ... --updates 2000 \
        --out-md debian_tuning.md --out-env chosen.env
    fairseq-rope-tune flat transformer=work/debian/checkpoints/transformer_seed1 rope=... [--last 0.2] [--drop 0.01] \
        [--mean-of 5] [--until 42000]
    fairseq-rope-tune lenpen work/debian/eval/rope_seed1/valid_lenpen*/result.json [--out-env lenpen.env]
    fairseq-rope-tune extrapolate transformer=work/debian/checkpoints/transformer_seed1 ... [--from 8000 ...] [--until 24000] \
        [--out-md projection.md] [--out-png projection.png]

grid: each run is SYSTEM=DIR, a folder train.sh trained (its .settings give the learning rate and
warm-up; its train.log the validations). The point of a system with the lowest valid loss at
--updates (fairseq's nll_loss, base 2: the model's cross-entropy, without the label-smoothing term,
which is the same for every point) is chosen, with a note where it is the smallest or largest of three
or more learning rates (the best may lie beyond the grid); a point whose log has no validation at exactly
--updates is an error (not yet trained that far). --out-env writes LR_<system>= and
WARMUP_UPDATES_<system>= lines for run.sh.

flat: a run has stopped improving when its valid loss at the last validation is less than --drop
(relative, default 1%) below its value at the validation closest to (1 - --last) of the way
(default: the last fifth of the updates). --mean-of K takes each end of the window as the mean of the K
validations up to and including it (a single validation moves by its noise): the run needs K validations
up to the window's start and K after it, so that the two means share none. --until UPDATE checks each
run on its validations at or before UPDATE (the run as it stood then). Prints one line a run; exit
status 0 only when every run is flat, 3 when some is not.

extrapolate: where a run that is not flat yet is heading. The power law L(t) = a + b (t/1000)^-c of least
squared error through the run's validations from update --from on (for each exponent c on a grid 0.001
apart, then 0.000001 apart around the best, a and b by linear least squares), and the budget T at which
that law is flat by flat's criterion (its drop over the last --last of the updates under --drop): with
x = (1 - last)^-c, the drop is b (T/1000)^-c (x - 1) / (a + b (T/1000)^-c x), under --drop from
(T/1000)^-c = drop a / (b (x - 1 - drop x)) on, and at every budget where x - 1 - drop x <= 0.
--from may be given several times: the fits from later updates show how far the projection depends on
where the fit starts (default: from a quarter and from half of the last validation's update). --until
fits only the validations up to an update and prints the law's prediction at the log's last validation
beside its loss: how well a fit made earlier predicted the rest of the run. a is the loss the law tends
to. All of this is an extrapolation, which holds only as long as the loss goes on falling as it did (an
inverse square root schedule keeps the learning rate falling; a change of schedule or over-fitting
breaks it), and it has no interval: how much it moves shows in the fits from later updates. A fit from
fewer than 4 validations, or that does not fall (b <= 0), tends to a loss at or below zero, or needs an
exponent at the grid's end (0.001 or 5) gives no projection, says why, and makes the exit status 3
(0: every fit projected). --out-md: the fits as a table; --out-png: the validations and the laws drawn on
to past the furthest projected budget.

lenpen: result.json files of evaluate.sh on the valid set (GEN_SUBSET=valid, one per length penalty):
the one with the highest BLEU (ties: the penalty closest to the paper's 0.6), per system.
"""

import json
import math
import os
import sys

import numpy as np

from .common import (InputError, argument_parser, atomic_output, check_output_file, parse_named, save_figure,
                     updates_axis)
from .plot_training import parse_log

PROG = "fairseq-rope-tune"
PAPER_LENPEN = 0.6


def read_settings(folder):
    """train.sh's record of a run ($SAVE_DIR/.settings: NAME=value lines)."""
    path = os.path.join(folder, ".settings")
    if not os.path.isfile(path):
        raise InputError(PROG, f"{path} not found: {folder} is not a folder train.sh trained")
    settings = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.rstrip("\n").partition("=")
            if sep:
                settings[key] = value
    for key in ("LR", "WARMUP_UPDATES"):
        if key not in settings:
            raise InputError(PROG, f"{path} has no {key}= line")
    return settings


def valid_losses(folder, key="nll_loss"):
    """{update: valid loss} from the folder's train.log."""
    log = os.path.join(folder, "train.log")
    if not os.path.isfile(log):
        raise InputError(PROG, f"{log} not found (train.sh writes it)")
    records = parse_log(log)
    return {u: s[key] for u, s in records["valid"].items() if key in s}


def grid_points(specs, updates):
    """[(system, lr, warmup, valid loss at `updates`, folder)], in the order given."""
    points = []
    for spec in specs:
        system, folder = parse_named(spec)
        if not system:
            raise InputError(PROG, f"'{spec}': expected SYSTEM=DIR")
        settings = read_settings(folder)
        losses = valid_losses(folder)
        if updates not in losses:
            reached = max(losses) if losses else 0
            raise InputError(PROG, f"{folder}: no validation at update {updates} in its train.log (last: {reached}); "
                             f"train it to --updates first")
        points.append((system, settings["LR"], int(settings["WARMUP_UPDATES"]), losses[updates], folder))
    return points


def choose(points):
    """{system: its point with the lowest valid loss}."""
    best = {}
    for point in points:
        if point[0] not in best or point[3] < best[point[0]][3]:
            best[point[0]] = point
    return best


def grid_table(points, best, updates):
    systems = list(dict.fromkeys(p[0] for p in points))
    lrs = list(dict.fromkeys(p[1] for p in points))
    warmups = list(dict.fromkeys(p[2] for p in points))
    at = {(p[0], p[1], p[2]): p[3] for p in points}
    lines = [f"Valid loss (fairseq's nll_loss, base 2) after {updates} updates, one seed; **bold**: the "
             f"point chosen for the system (lowest).", ""]
    lines.append("| system | warm-up | " + " | ".join(f"lr {lr}" for lr in lrs) + " |")
    lines.append("|---|---:|" + "---:|" * len(lrs))
    for system in systems:
        for wu in warmups:
            cells = []
            for lr in lrs:
                value = at.get((system, lr, wu))
                if value is None:
                    cells.append("")
                    continue
                text = f"{value:.3f}"
                chosen = best[system]
                cells.append(f"**{text}**" if (chosen[1], chosen[2]) == (lr, wu) else text)
            lines.append(f"| {system} | {wu} | " + " | ".join(cells) + " |")
    lines.append("")
    for system in systems:
        chosen = best[system]
        others = sorted(p[3] for p in points if p[0] == system and p is not chosen)
        margin = f", {others[0] - chosen[3]:.3f} below the next" if others else ""
        lines.append(f"- {system}: lr {chosen[1]}, warm-up {chosen[2]} (valid loss {chosen[3]:.3f}{margin})"
                     + edge_note(points, chosen))
    return "\n".join(lines) + "\n"


def edge_note(points, chosen):
    """Where a system's chosen learning rate is the smallest or the largest of three or more it tried, the
    best may lie beyond the grid: a note saying which end, to extend it (TUNE_LRS); else ""."""
    tried = sorted({float(p[1]) for p in points if p[0] == chosen[0]})
    if len(tried) < 3 or tried[0] < float(chosen[1]) < tried[-1]:
        return ""
    end = "largest" if float(chosen[1]) == tried[-1] else "smallest"
    return f"; the {end} learning rate tried: the best may lie beyond it (extend TUNE_LRS)"


def run_grid(args):
    points = grid_points(args.runs, args.updates)
    best = choose(points)
    table = grid_table(points, best, args.updates)
    sys.stdout.write(table)
    if args.out_md:
        with atomic_output(args.out_md) as f:
            f.write(table)
    if args.out_env:
        with atomic_output(args.out_env) as f:
            for system, (_, lr, wu, loss, _) in best.items():
                f.write(f"LR_{system}={lr}\nWARMUP_UPDATES_{system}={wu}  # valid loss {loss:.4f} at {args.updates}\n")


def flatness(losses, last, mean_of=1):
    """(update at the start of the window, its loss, last update, its loss, relative drop) of two or more
    validations; with mean_of K, each end's loss is the mean of the K validations up to and including it.
    ValueError where either side of the window's start has fewer than K (the two means must not share one)."""
    updates = sorted(losses)
    end = updates[-1]
    target = end * (1 - last)
    start = min(updates[:-1], key=lambda u: (abs(u - target), u))
    i, j = updates.index(start), len(updates) - 1
    if i + 1 < mean_of or j - i < mean_of:
        raise ValueError(f"{i + 1} validation(s) up to the window's start (update {start}) and {j - i} after it")
    before = sum(losses[u] for u in updates[i + 1 - mean_of:i + 1]) / mean_of
    after = sum(losses[u] for u in updates[j + 1 - mean_of:]) / mean_of
    return start, before, end, after, (before - after) / before


def check_last(last):
    """flat's and extrapolate's window: a fraction of the updates."""
    if not 0 < last < 1:
        raise InputError(PROG, f"--last {last}: expected a fraction of the updates between 0 and 1")


def run_flat(args):
    check_last(args.last)
    if not args.drop > 0:
        raise InputError(PROG, f"--drop {args.drop}: expected a relative drop above 0, e.g. 0.01")
    if args.mean_of < 1:
        raise InputError(PROG, f"--mean-of {args.mean_of}: expected a number of validations, 1 or more")
    if args.until is not None and args.until < 1:
        raise InputError(PROG, f"--until {args.until}: expected an update, 1 or more")
    means = f"each end of the window the mean of the {args.mean_of} validations up to it" if args.mean_of > 1 else ""
    until = f" at or before update {args.until}" if args.until is not None else ""
    all_flat, rows = True, []
    for spec in args.runs:
        name, folder = parse_named(spec, default_name=lambda p: os.path.basename(p.rstrip("/")))
        losses = valid_losses(folder, args.loss)
        if args.until is not None:
            losses = {u: loss for u, loss in losses.items() if u <= args.until}
        if len(losses) < 2:
            raise InputError(PROG, f"{folder}: its train.log has {len(losses)} validation(s){until}; "
                             "flat needs two")
        try:
            start, before, end, after, drop = flatness(losses, args.last, args.mean_of)
        except ValueError as split:
            raise InputError(PROG, f"{folder}: {split}{until}; --mean-of {args.mean_of} needs {args.mean_of} on "
                             "each side (a smaller --mean-of, or another --last)") from None
        flat = drop < args.drop
        all_flat &= flat
        print(f"{name}: valid {args.loss} {before:.4f} at {start} -> {after:.4f} at {end}{f' ({means})' if means else ''}: "
              f"{100 * drop:+.2f}% lower, {'flat' if flat else 'still improving'} "
              f"(criterion: < {100 * args.drop:g}% over the last {100 * args.last:g}%)")
        rows.append(f"| {name} | {os.path.basename(os.path.normpath(folder))} | {start} | {before:.4f} | {end} | "
                    f"{after:.4f} | {100 * drop:+.2f}% | {'flat' if flat else 'still improving'} |\n")
    if args.out_md:
        with atomic_output(args.out_md) as f:
            f.write(f"Flat: valid {args.loss} less than {100 * args.drop:g}% lower (relative) over the last "
                    f"{100 * args.last:g}% of the updates (fairseq-rope-tune flat), each run at its last validation"
                    f"{until}{'; ' + means if means else ''}.\n\n"
                    f"| system | run | from update | valid {args.loss} | to update | valid {args.loss} | lower by | |\n"
                    "|---|---|---:|---:|---:|---:|---:|---|\n")
            f.writelines(rows)
    return 0 if all_flat else 3


MAX_EXPONENT = 5.0


def power_law(updates, losses):
    """(a, b, c, residual sd, end) of L(t) = a + b (t/1000)^-c of least squared error through the points
    (updates, losses); `end` names the end of the exponent's grid the best c lies at ("low": 0.001, "high":
    MAX_EXPONENT; the points are then no power law, the true best lying beyond the grid), else None."""
    x = np.asarray(updates, dtype=float) / 1000
    y = np.asarray(losses, dtype=float)

    def fits(exponents):  # each exponent's a, b and squared error, a and b by least squares
        z = x[None, :] ** -exponents[:, None]
        zc = z - z.mean(axis=1, keepdims=True)
        yc = y - y.mean()
        zz = (zc * zc).sum(axis=1)
        b = (zc * yc).sum(axis=1) / zz
        a = y.mean() - b * z.mean(axis=1)
        return a, b, ((yc[None, :] - b[:, None] * zc) ** 2).sum(axis=1)

    coarse = np.arange(1, int(MAX_EXPONENT * 1000) + 1) / 1000
    best = int(np.argmin(fits(coarse)[2]))
    fine = coarse[best] + np.arange(-1000, 1001) / 1e6
    fine = fine[(fine >= coarse[0]) & (fine <= coarse[-1])]
    a, b, sse = fits(fine)
    k = int(np.argmin(sse))
    end = "low" if fine[k] <= coarse[0] else "high" if fine[k] >= coarse[-1] else None
    return float(a[k]), float(b[k]), float(fine[k]), math.sqrt(float(sse[k]) / (len(y) - 3)), end


def flat_from(a, b, c, last, drop):
    """The budget T from which a + b (t/1000)^-c falls less than `drop` (relative) over its last `last`
    of the updates (0 where it does at every budget, math.inf past 10^15 updates)."""
    x = (1 - last) ** -c
    if x - 1 - drop * x <= 0:
        return 0
    log10_budget = 3 - math.log10(drop * a / (b * (x - 1 - drop * x))) / c
    return 10 ** log10_budget if log10_budget < 15 else math.inf


def no_projection(a, b, c, grid_end):
    """Why a fit gives no projection, or None."""
    if b <= 0:
        return "it does not fall (the best power law rises)"
    if grid_end == "low":
        return ("it does not fall like a power of the updates: the best exponent is the grid's smallest, 0.001 "
                "(it falls more like a logarithm of the updates)")
    if grid_end == "high":
        return (f"it does not fall like a power of the updates: the best exponent is the grid's largest, "
                f"{MAX_EXPONENT:g} (it drops more abruptly)")
    if a <= 0:
        return f"the best power law tends to {a:.3f}, at or below zero: not a loss heading for a floor"
    return None


def extrapolate(name, losses, start, end, args):
    """One fit of a run: (its line, its table row, (start, a, b, c, budget) or None without projection)."""
    logged = max(losses)
    points = sorted(u for u in losses if start <= u <= end)
    where = f"{name}: valid {args.loss} from update {start} on ({len(points)} validations, last {end})"
    if len(points) < 4:
        why = "a power law of three parameters needs at least 4 validations (an earlier --from)"
    else:
        a, b, c, sd, grid_end = power_law(points, [losses[u] for u in points])
        why = no_projection(a, b, c, grid_end)
    if why:
        return (f"{where}: no projection: {why}",
                f"| {name} | {start} | {len(points)} | | | | | {end} | {losses[end]:.4f} | no projection: {why} | | |", None)
    budget = flat_from(a, b, c, args.last, args.drop)
    at = end if budget == math.inf else max(budget, end)
    loss_there = a + b * (at / 1000) ** -c
    verdict = ("flat by the law at every budget" if budget == 0 else
               f"flat by the law already (from {round(budget):,})" if budget <= end else
               "flat by the law only past 10^15 updates" if budget == math.inf else
               f"flat at about {float(f'{budget:.3g}'):,.0f} updates (x{budget / end:.1f})")
    later = (f"at update {logged} it predicts {a + b * (logged / 1000) ** -c:.3f}, the log has {losses[logged]:.3f}"
             if logged > end else "")
    line = (f"{where}: {a:.3f} + {b:.3f} (t/1000)^-{c:.3f}, residual sd {sd:.4f}; {verdict}, where it is "
            f"{loss_there:.3f}; it tends to {a:.3f} (criterion: < {100 * args.drop:g}% over the last "
            f"{100 * args.last:g}%){'; ' + later if later else ''}")
    row = (f"| {name} | {start} | {len(points)} | {a:.3f} | {b:.3f} | {c:.3f} | {sd:.4f} | {end} | {losses[end]:.4f} | "
           f"{verdict} | {loss_there:.3f} | {later or '–'} |")
    return line, row, (start, a, b, c, budget)


def run_extrapolate(args):
    check_last(args.last)
    if not 0 < args.drop < 1:
        raise InputError(PROG, f"--drop {args.drop}: expected a relative drop between 0 and 1, e.g. 0.01")
    if args.out_png:
        check_output_file(PROG, "--out-png", args.out_png)
    rows, status, curves = [], 0, []
    for spec in args.runs:
        name, folder = parse_named(spec, default_name=lambda p: os.path.basename(p.rstrip("/")))
        losses = valid_losses(folder, args.loss)
        if not losses:
            raise InputError(PROG, f"{folder}: no validation in its train.log")
        end = max(losses)  # the last validation fitted: the log's last, or the last at or before --until
        if args.until is not None:
            end = max((u for u in losses if u <= args.until), default=None)
            if end is None:
                raise InputError(PROG, f"--until {args.until}: {folder} has no validation at or before it "
                                 f"(first: {min(losses)})")
        fits = []
        for start in sorted(set(args.starts or (min(u for u in losses if u >= end * q) for q in (0.25, 0.5)))):
            line, row, fit = extrapolate(name, losses, start, end, args)
            print(line)
            rows.append(row + "\n")
            if fit:
                fits.append(fit)
            else:
                status = 3
        curves.append((name, losses, fits))
    if args.out_md:
        with atomic_output(args.out_md) as f:
            f.write(f"The valid {args.loss} of each run from update 'from' on, fitted by a + b (t/1000)^-c (least "
                    f"squares; fairseq-rope-tune extrapolate), and the budget at which that law is less than "
                    f"{100 * args.drop:g}% lower over the last {100 * args.last:g}% of the updates. An extrapolation: "
                    f"it holds as long as the loss goes on falling as it did.\n\n"
                    "| system | from | validations | a (limit) | b | c | residual sd | last update fitted | its loss | "
                    "flat | loss there | later validations |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
            f.writelines(rows)
    if args.out_png:
        title = args.title or f"valid {args.loss} and the power laws fitted to it"
        plot_projection(curves, args.loss, title, args.out_png)
    return status


def plot_projection(curves, loss, title, out):
    """Each run's validations from the earliest update a fit starts at (solid) and each of its fitted laws
    (dashed, dotted, ...) from where it starts to past the furthest projected budget, a dot where the law
    turns flat."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logged = max(max(losses) for _, losses, _ in curves)
    budgets = [budget for _, _, fits in curves for *_, budget in fits if 0 < budget < math.inf]
    right = min(max([logged, *budgets]) * 1.05, 20 * logged)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["--", ":", "-.", (0, (5, 1))]
    for k, (name, losses, fits) in enumerate(curves):
        color = colors[k % len(colors)]
        first = min((start for start, *_ in fits), default=max(losses) / 4)
        updates = [u for u in sorted(losses) if u >= first]
        ax.plot(updates, [losses[u] for u in updates], color=color, lw=1, label=f"{name}: valid")
        for j, (start, a, b, c, budget) in enumerate(fits):
            t = np.linspace(start, right, 400)
            where = (f"flat at {float(f'{budget:.3g}'):,.0f}" if 0 < budget < math.inf else
                     "flat already" if budget < math.inf else "flat past 10^15")
            ax.plot(t, a + b * (t / 1000) ** -c, color=color, lw=1.4, ls=styles[j % len(styles)],
                    label=f"{name}: fit from {start:,} ({where}, limit {a:.3f})")
            if 0 < budget <= right:
                ax.plot([budget], [a + b * (budget / 1000) ** -c], "o", color=color, ms=5)
    updates_axis(ax)
    ax.set_ylabel(f"valid {loss} (bits)")
    ax.grid(alpha=0.3)
    save_figure(fig, ax, title, 2, out)


def run_lenpen(args):
    by_system = {}
    for path in args.results:
        try:
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(PROG, f"{path}: cannot read a result.json ({e})")
        for key in ("lenpen", "sacrebleu"):
            if key not in result:
                raise InputError(PROG, f"{path} has no '{key}' (expected evaluate.sh's result.json)")
        if result.get("subset", "valid") != "valid":
            raise InputError(PROG, f"{path} scores the {result['subset']} set; the length penalty is chosen on valid")
        system = result.get("system") or result.get("run") or os.path.basename(os.path.dirname(path))
        by_system.setdefault(system, []).append((float(result["lenpen"]), float(result["sacrebleu"]), path))
    lines = []
    for system, tried in by_system.items():
        best = max(tried, key=lambda t: (t[1], -abs(t[0] - PAPER_LENPEN)))
        scores = ", ".join(f"{lp:g}: {b:.2f}" for lp, b, _ in sorted(tried))
        print(f"{system}: length penalty {best[0]:g} (valid BLEU {best[1]:.2f}; tried {scores})")
        lines.append(f"LENPEN_{system}={best[0]:g}\n")
    if args.out_env:
        with atomic_output(args.out_env) as f:
            f.writelines(lines)


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    grid = sub.add_parser("grid", help="the point of lowest valid loss per system")
    grid.add_argument("runs", nargs="+", metavar="SYSTEM=DIR")
    grid.add_argument("--updates", type=int, required=True, help="the budget every point was trained to")
    grid.add_argument("--out-md", help="the table (markdown)")
    grid.add_argument("--out-env", help="LR_<system>, WARMUP_UPDATES_<system> lines for run.sh")
    flat = sub.add_parser("flat", help="has the valid loss stopped falling")
    flat.add_argument("runs", nargs="+", metavar="NAME=DIR")
    flat.add_argument("--last", type=float, default=0.2, help="the window, a fraction of the updates (default 0.2)")
    flat.add_argument("--drop", type=float, default=0.01, help="relative drop under which a run is flat (default 0.01)")
    flat.add_argument("--mean-of", type=int, default=1, metavar="K",
                      help="each end of the window the mean of the K validations up to it (default 1: the "
                      "validation itself); needs K validations up to the window's start and K after it")
    flat.add_argument("--until", type=int, metavar="UPDATE",
                      help="check each run on its validations at or before UPDATE only (the run as it stood then, "
                      "e.g. converge.sh's check at that budget)")
    flat.add_argument("--loss", default="nll_loss", choices=("loss", "nll_loss"))
    flat.add_argument("--out-md", help="the same as a table (markdown)")
    extra = sub.add_parser("extrapolate", help="the budget at which a run's valid loss would be flat, by a power law")
    extra.add_argument("runs", nargs="+", metavar="NAME=DIR")
    extra.add_argument("--from", dest="starts", type=int, action="append", metavar="UPDATE",
                       help="fit the validations from this update on (repeat for several fits; default: from a "
                            "quarter and from half of the last validation's update, or of --until's)")
    extra.add_argument("--until", type=int, metavar="UPDATE",
                       help="fit the validations up to this update only; the law's prediction at the log's last "
                            "validation is printed beside that validation's loss (how well the law predicted)")
    extra.add_argument("--last", type=float, default=0.2, help="flat's window (default 0.2)")
    extra.add_argument("--drop", type=float, default=0.01, help="flat's relative drop (default 0.01)")
    extra.add_argument("--loss", default="nll_loss", choices=("loss", "nll_loss"))
    extra.add_argument("--out-md", help="the fits as a table (markdown)")
    extra.add_argument("--out-png", help="the validations and the fitted laws, to past the furthest projected budget")
    extra.add_argument("--title", help="the figure's title")
    lenpen = sub.add_parser("lenpen", help="the length penalty of highest valid BLEU per system")
    lenpen.add_argument("results", nargs="+", metavar="RESULT_JSON")
    lenpen.add_argument("--out-env", help="LENPEN_<system>= lines")
    args = ap.parse_args(argv)
    if args.command == "grid":
        if args.updates < 1:
            raise InputError(PROG, f"--updates {args.updates}: expected a positive number of updates")
        return run_grid(args)
    if args.command == "flat":
        return run_flat(args)
    if args.command == "extrapolate":
        return run_extrapolate(args)
    return run_lenpen(args)


if __name__ == "__main__":
    sys.exit(main())
