"""fairseq-rope-compare: compares two or more translation runs: sacreBLEU and chrF overall and by source length.

    fairseq-rope-compare --src test.en --ref test.de --hyp baseline=eval/base/hyps.detok.de --hyp rope=eval/rope/hyps.detok.de \
        [--buckets 10,20,30,40] [--out-md cmp.md] [--out-png cmp.png] [--out-json cmp.json]
    fairseq-rope-compare --src raw/test.en --result eval/transformer/result.json --result eval/rope/result.json ...

Runs, in the order given (the first is the one the others are tested against):
  --hyp NAME=FILE       detokenized hypotheses, one line per sentence, in test-set order;
  --result [NAME=]FILE  a result JSON of fairseq-rope-score (the recipe's evaluate step):
                        its "hyps_detok" file is scored; NAME defaults to its "system" (the recipe's
                        run with SEEDS: the run without its _seedS), else its "run_name";
                        --ref defaults to its "reference" (all such JSONs must agree).
A NAME given more than once is one system trained with several seeds, each FILE a seed's output.
Scores: sacreBLEU (default 13a tokenization, mixed case) and chrF (chrF2) of every run, on the
whole test set and on each source-length bucket. Source length = whitespace-separated words of
the raw source line; --buckets 10,20,30,40 gives 1-10, 11-20, 21-30, 31-40 and 41+.
Significance: sacrebleu's paired bootstrap resampling (sacrebleu.significance.PairedTest,
test_type "bs", as `sacrebleu --paired-bs`) of every run against the first, overall and per
bucket; seed 12345 unless SACREBLEU_SEED is set, so the p-values are reproducible.
With several seeds (any NAME given more than once): every score is the mean over the run's seeds, ±
their sample standard deviation, each seed's score listed, and the test is the paired bootstrap over
seeds and sentences (fairseq_rope_cli/seeds.py; with one seed per run it is sacreBLEU's test).
Also per run and bucket: the hypothesis/reference length ratio and the share of hypotheses that
repeat one word 4 or more times in a row (how often a model falls into a loop).
Test NLL: where every run is a --result JSON with "reference_scores" (evaluate.sh's fairseq-generate
--score-reference), each run's NLL of the references (fairseq's nll_loss, bits per target token) on the
sentences scored, with the same tests over seeds as BLEU and chrF (no bootstrap: it resamples outputs).
Where every run's result JSON has them: its parameters (fairseq-train's count, evaluate.sh records it)
beside its scores, and each seed's length penalty beside its scores by seed.
--lines FIRST-LAST scores those lines only (one of several test sets written one after the other,
e.g. the Debian corpus's test_prose and test_help in its test.*; the markdown says which lines).
Outputs: a markdown table (stdout and --out-md), a PNG plot of BLEU and chrF by bucket
(--out-png), and every number as JSON (--out-json).
"""

import argparse
import json
import os
import sys

from .common import InputError, argument_parser, atomic_output, check_output_file, parse_named, read_lines, save_figure, write_json

PROG = "fairseq-rope-compare"


# --------------------------------------------------------------------------- inputs


class RunAction(argparse.Action):
    """Collects --hyp and --result into one ordered list of (kind, name, path)."""

    def __call__(self, parser, namespace, value, option_string=None):
        runs = getattr(namespace, self.dest, None) or []
        kind = "hyp" if option_string == "--hyp" else "result"
        name, path = parse_named(value)
        if name is None:
            if kind == "hyp":
                parser.error(f"--hyp expects NAME=FILE, got '{value}'")
            name = ""
        elif not name or not path:
            parser.error(f"{option_string} expects NAME=FILE, got '{value}'")
        runs.append((kind, name, path))
        setattr(namespace, self.dest, runs)


def parse_buckets(text):
    try:
        edges = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(PROG, f"--buckets must be increasing positive integers separated by commas, got '{text}'")
    if not edges or any(e < 1 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise InputError(PROG, f"--buckets must be increasing positive integers separated by commas, got '{text}'")
    return edges


def parse_lines(text, n_lines):
    """--lines FIRST-LAST (1-based, inclusive) of a file of n_lines lines."""
    first, sep, last = text.partition("-")
    if not (sep and first.isdigit() and last.isdigit()):
        raise InputError(PROG, f"--lines expects FIRST-LAST (line numbers, e.g. 1-1200), got '{text}'")
    first, last = int(first), int(last)
    if not 1 <= first <= last <= n_lines:
        raise InputError(PROG, f"--lines {text}: expected 1 <= FIRST <= LAST <= {n_lines} (the lines of the source)")
    return first, last


def bucket_bounds(edges):
    """[(lo, hi or None, label)]: 1-10, 11-20, ..., 41+ for edges 10,20,30,40."""
    bounds, lo = [], 1
    for e in edges:
        bounds.append((lo, e, f"{lo}-{e}" if e > lo else f"{lo}"))
        lo = e + 1
    bounds.append((lo, None, f"{lo}+"))
    return bounds


def beside(file, json_path):
    """A file a result JSON names: as written where it is absolute or exists from here, else in the JSON's
    own folder (a record of fairseq-rope-record keeps its files there under their own names)."""
    if os.path.isabs(file) or os.path.isfile(file):
        return file
    return os.path.join(os.path.dirname(json_path), file)


def resolve_runs(args):
    """[(name, hypothesis path)], the reference path, the result JSONs' test set (if any) and, per run, its
    result JSON ({} for a --hyp run)."""
    missing, runs, refs_from_json, test_sets, results = [], [], [], set(), []
    for kind, name, path in args.runs:
        if kind == "hyp":
            if not os.path.isfile(path):
                missing.append(f"hypothesis file of run '{name}': {path}")
            runs.append((name, path))
            results.append({})
            continue
        if not os.path.isfile(path):
            missing.append(f"result JSON{f' of run {name!r}' if name else ''}: {path}")
            runs.append((name or path, None))
            results.append({})
            continue
        try:
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
        except json.JSONDecodeError as error:
            raise InputError(PROG, f"{path} is not valid JSON: {error}")
        if not isinstance(result, dict) or "hyps_detok" not in result:
            raise InputError(PROG, f"{path} has no 'hyps_detok': not a result JSON of fairseq-rope-score")
        name = (name or result.get("system") or result.get("run_name") or result.get("arch")
                or os.path.basename(os.path.dirname(path)))
        hyp = beside(result["hyps_detok"], path)
        if not os.path.isfile(hyp):
            missing.append(f"hypothesis file of run '{name}' (\"hyps_detok\" in {path}): {hyp}")
        if result.get("reference"):
            refs_from_json.append((path, result["reference"]))
        if result.get("test_set"):
            test_sets.add(result["test_set"])
        if result.get("reference_scores"):
            result["reference_scores"] = beside(result["reference_scores"], path)
            if not os.path.isfile(result["reference_scores"]):
                missing.append(f"reference scores of run '{name}' (\"reference_scores\" in {path}): "
                               f"{result['reference_scores']}")
        runs.append((name, hyp))
        results.append(result)
    ref = args.ref
    if ref is None:
        if not refs_from_json:
            raise InputError(PROG, "no reference: give --ref FILE (needed unless every run is a --result JSON naming one)")
        distinct = sorted({os.path.abspath(r) for _, r in refs_from_json})
        if len(distinct) > 1:
            raise InputError(PROG, "the result JSONs name different references (" + "; ".join(
                f"{p}: {r}" for p, r in refs_from_json) + "): give --ref FILE to choose")
        ref = refs_from_json[0][1]
    for what, path in (("source file (--src)", args.src), ("reference file", ref)):
        if not os.path.isfile(path):
            missing.insert(0, f"{what}: {path}")
    if missing:
        raise InputError(PROG, "file(s) not found:\n  " + "\n  ".join(missing))
    names = [n for n, _ in runs]
    if "=" in "".join(names) or "|" in "".join(names):
        raise InputError(PROG, "run names may not contain '=' or '|'")
    seen = {}
    for name, hyp in runs:
        if os.path.abspath(hyp) in seen.get(name, []):
            raise InputError(PROG, f"run '{name}' is given the same hypotheses twice ({hyp}): a name given more "
                             "than once is one run trained with several seeds, each with its own output")
        seen.setdefault(name, []).append(os.path.abspath(hyp))
    return runs, ref, sorted(test_sets), results


# --------------------------------------------------------------------------- scoring


def metrics():
    from sacrebleu.metrics import BLEU, CHRF

    return {"BLEU": BLEU(), "chrF": CHRF()}


REPEAT_RUN = 4  # a hypothesis "repeats" when one word occurs this many times in a row


def repeats(hypothesis, run=REPEAT_RUN):
    """Whether a word (whitespace-separated) occurs ``run`` or more times in a row: the loops
    ("die die die die ...") a model falls into on inputs far longer than in training."""
    words, count = hypothesis.split(), 1
    for previous, word in zip(words, words[1:]):
        count = count + 1 if word == previous else 1
        if count >= run:
            return True
    return False


def add_length_ratio(scores, named_hyps, refs):
    """For every run: sacreBLEU's hypothesis/reference length ratio (its brevity penalty input) and
    the share of hypotheses that repeat a word 4+ times in a row."""
    from sacrebleu.metrics import BLEU

    for name, hyps in named_hyps:
        b = BLEU().corpus_score(hyps, [refs])
        scores[name]["len_ratio"] = b.sys_len / b.ref_len if b.ref_len else 0.0
        scores[name]["repeat_share"] = sum(map(repeats, hyps)) / len(hyps) if hyps else 0.0
    return scores


def score_subset(named_hyps, refs, n_samples):
    """Scores of every run on these sentences, with paired bootstrap p-values against the first run.

    Returns ({run: {"bleu", "chrf", "bleu_ci", "chrf_ci", "bleu_p", "chrf_p", "bleu_interval", "chrf_interval"}},
    signatures) where p (sacreBLEU's) and the interval (the bootstrap's percentile 95% interval of the
    difference to the first run, seeds.py's draws) are None for the first run, and CI is the half-width of
    sacreBLEU's bootstrap 95% interval of the score.
    """
    from sacrebleu.significance import PairedTest

    from .seeds import bootstrap_seed, metric_score, sacrebleu_statistics, seeds_and_sentences_test

    named_hyps = list(named_hyps)
    if len(named_hyps) >= 2:
        test = PairedTest(named_hyps, metrics(), references=[refs], test_type="bs", n_samples=n_samples)
        signatures, table = test()
        keys = [k for k in table if k != "System"]  # "BLEU", "chrF2" in the order of metrics()
        out = {}
        for i, (name, hyps) in enumerate(named_hyps):
            out[name] = {}
            identical = i and hyps == named_hyps[0][1]  # sacrebleu's test gives p = 1/(n+1) for no difference
            for short, key in zip(("bleu", "chrf"), keys):
                r = table[key][i]
                out[name].update({short: float(r.score), f"{short}_ci": _maybe(r.ci),
                                  f"{short}_p": (1.0 if identical else _maybe(r.p_value)) if i else None,
                                  f"{short}_interval": None})
        for short, metric in zip(("bleu", "chrf"), metrics().values()):  # the difference's bootstrap interval
            first = [sacrebleu_statistics(metric, named_hyps[0][1], refs)]
            for name, hyps in named_hyps[1:]:
                out[name][f"{short}_interval"] = seeds_and_sentences_test(
                    [sacrebleu_statistics(metric, hyps, refs)], first, metric_score(metric), n_samples,
                    bootstrap_seed())["interval"]
        return out, {k: str(v) for k, v in signatures.items()}
    name, hyps = named_hyps[0]
    out, sigs = {name: {}}, {}
    for short, metric in zip(("bleu", "chrf"), metrics().values()):
        s = metric.corpus_score(hyps, [refs])
        out[name].update({short: float(s.score), f"{short}_ci": None, f"{short}_p": None})
        sigs[s.name] = str(metric.get_signature())
    return out, sigs


def _maybe(x):
    return None if x is None else float(x)


def score_seeds(systems, refs, n_samples):
    """Every system's mean, standard deviation and per-seed scores, its test against the first system
    (seeds.py), and the length ratio and repeat share averaged over its seeds."""
    from .seeds import bootstrap_seed, compare_seeds

    out = compare_seeds(systems, refs, dict(zip(("bleu", "chrf"), metrics().values())), n_samples, bootstrap_seed())
    for name, replicas in systems:
        each = add_length_ratio({i: {} for i in range(len(replicas))}, list(enumerate(replicas)), refs)
        for key in ("len_ratio", "repeat_share"):
            out[name][key] = sum(e[key] for e in each.values()) / len(replicas)
    return out


def add_nll(scores, nll):
    """Every run's test NLL (``nll`` = {name: [each seed's [(sum of log2 probabilities, tokens)]]}): the mean
    over its seeds, and with seeds the standard deviation and the two tests over seeds against the first run."""
    from .score import corpus_nll
    from .seeds import mean_sd, permutation_test, welch_test

    first, seeds = next(iter(nll)), any(len(replicas) > 1 for replicas in nll.values())
    for name, replicas in nll.items():
        spread = mean_sd([corpus_nll(r) for r in replicas])
        entry = {"nll": spread["mean"], "nll_p": None, "nll_interval": None, "nll_welch": None,
                 "nll_permutation": None}
        if seeds:
            entry.update({"nll_sd": spread["sd"], "nll_seeds": spread["values"]})
            if name != first:
                entry["nll_welch"] = welch_test(spread["values"], scores[first]["nll_seeds"])
                entry["nll_permutation"] = permutation_test(spread["values"], scores[first]["nll_seeds"])
        scores[name].update(entry)
    return scores


def compare(src, refs, runs, edges, n_samples, nll=None):
    """All the numbers, as a JSON-able dict. ``runs`` = [(name, [hypotheses of each seed])]; lists of
    equal length. With one seed per run: sacreBLEU's paired bootstrap; with several: seeds.py's.
    ``nll``: {name: [each seed's reference scores]} (add_nll), or None."""
    lengths = [len(s.split()) for s in src]
    seeds = any(len(replicas) > 1 for _, replicas in runs)
    if seeds:
        overall = score_seeds(runs, refs, n_samples)
        signatures = {m.corpus_score(runs[0][1][0], [refs]).name: str(m.get_signature()) for m in metrics().values()}
    else:
        runs = [(name, replicas[0]) for name, replicas in runs]
        overall, signatures = score_subset(runs, refs, n_samples)
        add_length_ratio(overall, runs, refs)
    if nll:
        add_nll(overall, nll)
    buckets = []
    for lo, hi, label in bucket_bounds(edges):
        idx = [i for i, n in enumerate(lengths) if n >= lo and (hi is None or n <= hi)]
        entry = {"label": label, "min_words": lo, "max_words": hi, "sentences": len(idx), "scores": None}
        if idx:
            sub_refs = [refs[i] for i in idx]
            if seeds:
                subset = [(name, [[h[i] for i in idx] for h in replicas]) for name, replicas in runs]
                entry["scores"] = score_seeds(subset, sub_refs, n_samples)
            else:
                subset = [(name, [h[i] for i in idx]) for name, h in runs]
                entry["scores"], _ = score_subset(subset, sub_refs, n_samples)
                add_length_ratio(entry["scores"], subset, sub_refs)
        buckets.append(entry)
    return {
        "runs": [name for name, _ in runs],
        "seeds": {name: len(replicas) for name, replicas in runs} if seeds else None,
        "sentences": len(src),
        "source_words": {"min": min(lengths), "max": max(lengths), "mean": round(sum(lengths) / len(lengths), 2)},
        "bucket_edges": edges,
        "bootstrap_samples": n_samples if len(runs) > 1 else 0,
        "bootstrap_seed": os.environ.get("SACREBLEU_SEED", "12345"),
        "signatures": signatures,
        "nll": "fairseq's nll_loss of the references (bits per target token), fairseq-generate --score-reference"
               if nll else None,
        "overall": overall,
        "buckets": buckets,
    }


def parse_interaction(text, seeds):
    """--interaction A,B,C,D: four systems of the comparison (``seeds``: {name: its number of seeds}), each
    with two or more seeds."""
    names = [n.strip() for n in text.split(",")]
    if len(names) != 4 or not all(names):
        raise InputError(PROG, f"--interaction takes four run names A,B,C,D (the contrast (A - B) - (C - D)), got '{text}'")
    for name in names:
        if name not in seeds:
            raise InputError(PROG, f"--interaction '{text}': no run is named '{name}' (runs: {', '.join(seeds)})")
        if seeds[name] < 2:
            raise InputError(PROG, f"--interaction '{text}': run '{name}' has one seed; the test over seeds needs "
                                   f"two or more for each of the four")
    return names


def interaction(res, names):
    """(A - B) - (C - D) over seeds for every measure (seeds.welch_contrast on the per-seed scores):
    whether B's difference to A differs from D's to C."""
    from .seeds import welch_contrast

    overall = res["overall"]
    out = {"runs": names}
    for metric in ("bleu", "chrf", "nll") if res.get("nll") else ("bleu", "chrf"):
        out[metric] = welch_contrast([overall[n][f"{metric}_seeds"] for n in names], (1, -1, -1, 1))
    return out


def render_interactions(found):
    from .seeds import p_value

    lines = ["", "Interactions over seeds: the contrast (A - B) - (C - D) of the four systems' means, its 95% "
                 "interval and the two-sided p of Welch's t on it (each system's own variance, Welch-Satterthwaite "
                 "degrees of freedom; fairseq_rope_cli/seeds.py's welch_contrast); –: no spread to test.", ""]
    measures = [m for m in ("bleu", "chrf", "nll") if m in found[0]]
    lines += ["| contrast | " + " | ".join({"bleu": "BLEU", "chrf": "chrF", "nll": "test NLL"}[m]
                                                   for m in measures) + " |",
              "|---|" + "---:|" * len(measures)]
    for entry in found:
        a, b, c, d = entry["runs"]
        cells = []
        for m in measures:
            test, digits = entry[m], 3 if m == "nll" else 2
            cells.append("–" if test is None else f"{test['difference']:+.{digits}f} "
                         f"{_signed_interval(test['interval'], digits)}, {p_value(test['p'])} (df {test['df']:.1f})")
        lines.append(f"| ({a} - {b}) - ({c} - {d}) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def add_run_facts(res, runs, results):
    """What the result JSONs say of each run beside its scores: its parameters (fairseq-train's count, as
    evaluate.sh records it; a range where its seeds differ) and each seed's length penalty, under
    res["parameters"] and res["lenpen"] where every run has them, else None."""
    parameters, lenpen = {}, {}
    for (name, _), result in zip(runs, results):
        parameters.setdefault(name, []).append(result.get("parameters"))
        lenpen.setdefault(name, []).append(result.get("lenpen"))
    def known(facts):
        return all(v is not None for values in facts.values() for v in values)

    res["parameters"] = {n: sorted(set(v)) for n, v in parameters.items()} if known(parameters) else None
    res["lenpen"] = lenpen if known(lenpen) else None
    return res


def best_above(src, refs, runs, words):
    """The run with the best sacreBLEU (its seeds' mean) on the sentences of more than ``words`` source
    words (the first such run on a tie), with every run's BLEU there."""
    from sacrebleu.metrics import BLEU

    idx = [i for i, s in enumerate(src) if len(s.split()) > words]
    if not idx:
        raise InputError(PROG, f"--best-above {words}: no source sentence has more than {words} words")
    bleu = {name: sum(BLEU().corpus_score([h[i] for i in idx], [[refs[i] for i in idx]]).score for h in replicas)
            / len(replicas) for name, replicas in runs}
    return {"min_words": words + 1, "sentences": len(idx), "run": max(bleu, key=bleu.get), "bleu": bleu}


# --------------------------------------------------------------------------- outputs


def _signed_interval(interval, digits=2):
    return f"[{interval[0]:+.{digits}f}, {interval[1]:+.{digits}f}]"


def score_cell(scores, name, metric, first, n_samples, ci=False, test=True):
    """``score`` (with seeds ± their standard deviation; with one run and ``ci``, the bootstrap 95%
    confidence interval in brackets) and, for runs after the first, (difference, its 95% interval:
    Welch's over the seeds where both runs have two or more, else the bootstrap's; with ``test``, the
    two-sided p over seeds (Welch's), or with one seed sacreBLEU's bootstrap p). The test NLL with three
    decimals, the scores with two."""
    from .seeds import p_text, p_value

    s, digits = scores[name], 3 if metric == "nll" else 2
    text = f"{s[metric]:.{digits}f}"
    if f"{metric}_seeds" in s:
        if s.get(f"{metric}_sd") is not None:
            text += f" ± {s[f'{metric}_sd']:.{digits}f}"
    elif ci and s.get(f"{metric}_ci") is not None:
        text += f" [{s[metric] - s[f'{metric}_ci']:.2f}, {s[metric] + s[f'{metric}_ci']:.2f}]"
    if name == first:
        return text
    d = s[metric] - scores[first][metric]
    welch = s.get(f"{metric}_welch")
    interval = welch["interval"] if welch else s.get(f"{metric}_interval")
    parts = [f"{d:+.{digits}f}" + (f" {_signed_interval(interval, digits)}" if interval else "")]
    if test and welch:
        parts.append(p_value(welch["p"]))
    elif test and s.get(f"{metric}_p") is not None and f"{metric}_seeds" not in s:
        parts.append(f"bootstrap {p_text(s[f'{metric}_p'], n_samples)}")
    return text + f" ({', '.join(parts)})"


def _floor_text(floor):
    """The exact permutation test's floor, 2 / C(n_a + n_b, n_a): three decimals, or two significant digits below
    0.0005, where many seeds take it (8 + 8: 0.00016) and three decimals would read 0.000."""
    return f"{floor:.3f}" if floor >= 0.0005 else f"{floor:.2g}"


def _tests_table(res, first):
    """Every test of every run against the first, overall, as rows: difference, Welch's interval and p,
    the exact permutation p and its floor, the bootstrap's interval and p."""
    from .seeds import p_number, p_text

    lines = ["| Run | metric | difference | 95% CI (Welch, seeds) | p (Welch, two-sided) | p (exact permutation, "
             "two-sided; floor) | 95% interval (bootstrap) | p (bootstrap, sacreBLEU's) |",
             "|---|---|---:|---|---:|---:|---|---:|"]
    for name in res["runs"][1:]:
        s = res["overall"][name]
        for metric, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("nll", "test NLL")):
            if metric not in s:
                continue
            welch, perm, digits = s[f"{metric}_welch"], s[f"{metric}_permutation"], 3 if metric == "nll" else 2
            lines.append(" | ".join([
                f"| {name}", label, f"{s[metric] - res['overall'][first][metric]:+.{digits}f}",
                _signed_interval(welch["interval"], digits) if welch else "–",
                p_number(welch["p"]) if welch else "–",
                f"{p_number(perm['p'])} ({_floor_text(perm['floor'])})" if perm else "–",
                _signed_interval(s[f"{metric}_interval"]) if s[f"{metric}_interval"] else "–",
                p_text(s[f"{metric}_p"], res["bootstrap_samples"]) if s[f"{metric}_p"] is not None else "–"]) + " |")
    return lines


def _show(path):
    """A path for the table: relative to the working directory when below it."""
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def render_markdown(res, title, src_path, ref_path, hyp_paths, test_sets, train_max_words=None, notes=()):
    runs, first = res["runs"], res["runs"][0]
    sw = res["source_words"]
    lines = [f"## {title}", ""]
    named = "; ".join(test_sets)
    count = f"{res['sentences']} sentences"
    what = (named if count in named else f"{named} ({count})") if named else count
    lines.append(f"- Test set: {what}; source `{_show(src_path)}` ({sw['min']}-{sw['max']} words, mean {sw['mean']}), "
                 f"reference `{_show(ref_path)}`.")
    lines.append("- Hypotheses: " + "; ".join(f"{n}: `{_show(p)}`" for n, p in hyp_paths) + ".")
    if train_max_words:
        lines.append(f"- Longest training source: {train_max_words} words; buckets marked *unseen* hold only "
                     f"longer sources.")
    lines += [f"- {note}" for note in notes]
    lines.append("")
    seeds = res.get("seeds")
    if seeds:
        lines.append(f"Each run: the mean ± sample standard deviation over its training seeds (each seed's score "
                     f"below). In parentheses: the difference of the means to **{first}**, its 95% confidence "
                     f"interval and the two-sided p of Welch's t-test with the seeds as the samples "
                     f"(docs/evaluation.md, across training seeds); every test below the table. By length: the "
                     f"difference and its interval, no test (one per bucket would be many tests at once).")
        lines.append("")
    elif len(runs) > 1:
        lines.append(f"In brackets after a score: sacreBLEU's bootstrap 95% confidence interval. In parentheses: "
                     f"the difference to **{first}** and the p of sacreBLEU's paired bootstrap test "
                     f"({res['bootstrap_samples']} resamples, seed {res['bootstrap_seed']}): the share of resamples "
                     f"whose centred |difference| exceeds the observed one, about half of a two-sided p for a "
                     f"clear difference; (floor): no resample as extreme, the least p the test can give. One output "
                     f"per run: it says how the difference moves with the test sentences, not with the training "
                     f"seed. By length: the difference alone.")
        lines.append("")
    head, align = ("| Run | seeds |", "|---|---:|") if seeds else ("| Run |", "|---|")
    parameters = res.get("parameters")
    if parameters:
        head, align = head + " parameters |", align + "---:|"
    measures = ("bleu", "chrf", "nll") if res.get("nll") else ("bleu", "chrf")
    lines += [head + " BLEU | chrF |" + (" test NLL (bits/token) |" if res.get("nll") else "")
              + " hyp/ref length | repeating |", align + "---:|" * len(measures) + "---:|---:|"]
    for name in runs:
        cells = [score_cell(res["overall"], name, m, first, res["bootstrap_samples"], ci=True) for m in measures]
        overall = res["overall"][name]
        size = "–".join(f"{n:,}" for n in sorted({parameters[name][0], parameters[name][-1]})) if parameters else ""
        lines.append(f"| {name} |{f' {seeds[name]} |' if seeds else ''}{f' {size} |' if parameters else ''} "
                     + " | ".join(cells) + " | "
                     f"{overall['len_ratio']:.2f} | {100 * overall['repeat_share']:.1f}% |")
    if seeds:
        lenpen = res.get("lenpen")
        lines += ["", "Each seed's score, in the order given:", "",
                  "| Run | BLEU by seed | chrF by seed |" + (" test NLL by seed |" if res.get("nll") else "")
                  + (" length penalty by seed |" if lenpen else ""),
                  "|---|---|---|" + ("---|" if res.get("nll") else "") + ("---|" if lenpen else "")]
        for name in runs:
            by_seed = [", ".join(f"{v:.{3 if m == 'nll' else 2}f}" for v in res["overall"][name][f"{m}_seeds"])
                       for m in measures]
            if lenpen:
                by_seed.append(", ".join(f"{v:g}" for v in lenpen[name]))
            lines.append(f"| {name} | " + " | ".join(by_seed) + " |")
        lines += ["", f"Tests against **{first}** (overall): Welch's t and the exact permutation test take the "
                      f"per-seed scores as the samples; the bootstrap resamples seeds and sentences "
                      f"({res['bootstrap_samples']} resamples, seed {res['bootstrap_seed']}) and its p is "
                      f"sacreBLEU's convention (about one tail)"
                      + ("; it resamples translations, so the test NLL has none." if res.get("nll") else "."),
                  ""] + _tests_table(res, first)
    lines += ["", "By source length (words):", ""]
    header = (["Source words", "Sentences"] + [f"BLEU {n}" for n in runs] + [f"chrF {n}" for n in runs]
              + ["hyp/ref length " + " / ".join(runs), "repeating (%) " + " / ".join(runs)])
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|---:|" + "---:|" * (2 * len(runs) + 2))
    for b in res["buckets"]:
        label = b["label"]
        if train_max_words and b["min_words"] > train_max_words:
            label += " *(unseen)*"
        if not b["scores"]:
            cells = ["–"] * (2 * len(runs) + 2)
        else:
            cells = [score_cell(b["scores"], n, m, first, res["bootstrap_samples"], test=False)
                     for m in ("bleu", "chrf") for n in runs]
            cells.append(" / ".join(f"{b['scores'][n]['len_ratio']:.2f}" for n in runs))
            cells.append(" / ".join(f"{100 * b['scores'][n]['repeat_share']:.0f}" for n in runs))
        lines.append(f"| {label} | {b['sentences']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"repeating: the share of hypotheses in which one word occurs {REPEAT_RUN} or more times in a row.")
    lines.append("")
    for name, sig in res["signatures"].items():
        lines.append(f"{name} signature: `{sig}`")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_png(res, path, title, train_max_words=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res["runs"]
    buckets = [b for b in res["buckets"] if b["scores"]]
    labels = [f"{b['label']}\n(n={b['sentences']})" for b in buckets]
    group = len(buckets) * (1 + 0.25 * len(runs))  # width that one panel needs, in bar groups
    if group > 8:  # many buckets: the panels one above the other
        fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.2 * group), 9))
    else:
        fig, axes = plt.subplots(1, 2, figsize=(max(9, 1.6 * group), 5))
    width = 0.8 / len(runs)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, metric, ylabel in ((axes[0], "bleu", "sacreBLEU"), (axes[1], "chrf", "chrF")):
        for j, name in enumerate(runs):
            xs = [i + (j - (len(runs) - 1) / 2) * width for i in range(len(buckets))]
            ys = [b["scores"][name][metric] for b in buckets]
            overall = res["overall"][name][metric]
            sds = [b["scores"][name].get(f"{metric}_sd") for b in buckets]  # with seeds: error bars
            yerr = [sd or 0.0 for sd in sds] if any(sd is not None for sd in sds) else None
            label = f"{name} (all: {overall:.1f}" + (f", {res['seeds'][name]} seeds)" if res.get("seeds") else ")")
            bars = ax.bar(xs, ys, width, yerr=yerr, capsize=2, label=label, color=colors[j % len(colors)])
            for bar, y in zip(bars, ys):
                ax.annotate(f"{y:.1f}", (bar.get_x() + bar.get_width() / 2, y), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=7)
        top = max([b["scores"][n][metric] + (b["scores"][n].get(f"{metric}_sd") or 0) for b in buckets for n in runs]
                  + [1.0])
        ax.set_ylim(0, top * 1.22)
        if train_max_words:
            unseen = [i for i, b in enumerate(buckets) if b["min_words"] > train_max_words]
            if unseen:
                ax.axvspan(min(unseen) - 0.5, len(buckets) - 0.5, color="0.9", zorder=0)
                ax.text(min(unseen) - 0.45, top * 1.2, f"longer than any\ntraining source\n(> {train_max_words} words)",
                        fontsize=7, va="top", ha="left", color="0.3")
        ax.set_xticks(range(len(buckets)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlim(-0.5, len(buckets) - 0.5)
        ax.set_xlabel("source length (words)")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        ax.set_title(f"{ylabel} by source length", fontsize=10)
    save_figure(fig, axes[0], title, min(len(runs), 4), path)


def write_text(path, text):
    with atomic_output(path) as f:
        f.write(text)


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("--src", required=True, help="raw source file of the test set (one sentence per line)")
    ap.add_argument("--ref", help="raw reference file (default: the result JSONs' 'reference')")
    ap.add_argument("--hyp", dest="runs", action=RunAction, metavar="NAME=FILE", help="a run's detokenized hypotheses")
    ap.add_argument("--result", dest="runs", action=RunAction, metavar="[NAME=]FILE",
                    help="a run's result JSON (fairseq-rope-score)")
    ap.add_argument("--buckets", default="10,20,30,40", help="bucket edges in source words (default: %(default)s)")
    ap.add_argument("--bootstrap-samples", type=int, default=1000, help="paired bootstrap resamples (default 1000)")
    ap.add_argument("--title", default="Translation quality by source length")
    ap.add_argument("--train-max-words", type=int,
                    help="longest training source in words: marks the longer buckets as unseen lengths")
    ap.add_argument("--note", action="append", default=[], help="a line of text for the markdown, under the heading")
    ap.add_argument("--out-md", help="write the markdown table here")
    ap.add_argument("--out-png", help="write the plot here (PNG)")
    ap.add_argument("--out-json", help="write every number here (JSON)")
    ap.add_argument("--lines", metavar="FIRST-LAST",
                    help="score only these lines (1-based, inclusive) of the source, reference and every run's "
                         "hypotheses: one test set of several written one after the other")
    ap.add_argument("--interaction", action="append", default=[], metavar="A,B,C,D",
                    help="with seeds: the test of (A - B) - (C - D) over seeds (Welch), for BLEU, chrF and the test "
                         "NLL: whether B's difference to A differs from D's to C (e.g. "
                         "rope_4heads,transformer_4heads,rope_2heads,transformer_2heads); repeatable")
    ap.add_argument("--best-above", type=int, metavar="N",
                    help="also choose the run with the best BLEU on the sentences of more than N source words: "
                         "its name is \"best\" in --out-json, the BLEU of every run there \"best_above\", and a "
                         "line under the table says it (how the length study picks a setting on validation data)")
    args = ap.parse_args(argv)
    if not args.runs:
        ap.error("give at least one run: --hyp NAME=FILE or --result FILE.json")
    if args.bootstrap_samples < 1:
        raise InputError(PROG, f"--bootstrap-samples must be >= 1, got {args.bootstrap_samples}")
    for flag in ("--out-md", "--out-png", "--out-json"):
        check_output_file(PROG, flag, getattr(args, flag[2:].replace("-", "_"), None))
    if args.best_above is not None and args.best_above < 0:
        raise InputError(PROG, f"--best-above must be >= 0 (source words), got {args.best_above}")
    edges = parse_buckets(args.buckets)
    runs, ref_path, test_sets, results = resolve_runs(args)
    scored = [r.get("reference_scores") for r in results]

    src, refs = read_lines(args.src), read_lines(ref_path)
    if len(refs) != len(src):
        raise InputError(PROG, f"the reference {ref_path} has {len(refs)} lines but the source {args.src} has {len(src)}")
    if not src:
        raise InputError(PROG, f"the source file {args.src} is empty")
    hyps = {}  # name: the hypotheses of each of its seeds, in the order given
    for name, path in runs:
        lines = read_lines(path)
        if len(lines) != len(src):
            raise InputError(PROG, f"hypothesis file {path} (run '{name}') has {len(lines)} lines but the source "
                             f"{args.src} has {len(src)} lines: one detokenized hypothesis per test sentence, "
                             f"in test order, is expected")
        hyps.setdefault(name, []).append(lines)
    hyps = list(hyps.items())
    nll = None
    if all(scored):  # every run with its reference scores: the test NLL
        from .score import read_reference_scores

        nll = {}
        for (name, _), path in zip(runs, scored):
            nll.setdefault(name, []).append(read_reference_scores(path, len(src), ref_path, PROG))
    if args.lines:
        first, last = parse_lines(args.lines, len(src))
        src, refs = src[first - 1:last], refs[first - 1:last]
        hyps = [(name, [h[first - 1:last] for h in seeds]) for name, seeds in hyps]
        if nll:
            nll = {name: [r[first - 1:last] for r in seeds] for name, seeds in nll.items()}
        args.note = [f"Lines {first}-{last} of the test set ({last - first + 1} sentences).", *args.note]

    contrasts = [parse_interaction(text, {name: len(seeds) for name, seeds in hyps}) for text in args.interaction]
    res = compare(src, refs, hyps, edges, args.bootstrap_samples, nll)
    add_run_facts(res, runs, results)
    paths = {}
    for name, path in runs:
        paths.setdefault(name, []).append(path)
    res["files"] = {"source": args.src, "reference": ref_path,
                    "hypotheses": paths if res["seeds"] else {name: p[0] for name, p in paths.items()}}
    md = render_markdown(res, args.title, args.src, ref_path, runs, test_sets, args.train_max_words,
                         args.note)
    if contrasts:
        res["interactions"] = [interaction(res, names) for names in contrasts]
        md += render_interactions(res["interactions"])
    if args.best_above is not None:
        res["best_above"] = best_above(src, refs, hyps, args.best_above)
        res["best"] = res["best_above"]["run"]
        scores = ", ".join(f"{name} {bleu:.2f}" for name, bleu in res["best_above"]["bleu"].items())
        md += (f"\nBest BLEU on the {res['best_above']['sentences']} sentences of more than {args.best_above} "
               f"words: **{res['best']}** ({scores}).\n")
    sys.stdout.write(md)
    if args.out_md:
        write_text(args.out_md, md)
    if args.out_json:
        write_json(args.out_json, res)
    if args.out_png:
        render_png(res, args.out_png, args.title, args.train_max_words)
    for path in (args.out_md, args.out_png, args.out_json):
        if path:
            print(f"[{PROG}] wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
