"""Scores of systems trained with several seeds: mean, standard deviation, and tests against a baseline.

A system is one or more replicas (its runs with different training seeds), each a list of hypotheses of
the same test set. Its score is the mean over replicas of the corpus metric (sacreBLEU, chrF); the spread
is the sample standard deviation over replicas (Clark et al. 2011).

Three tests of a difference, each answering its own question:

* ``welch_test``: the seeds as the samples. Welch's t on the per-seed scores (unequal variances,
  Welch-Satterthwaite degrees of freedom; scipy), two-sided, with the confidence interval of the
  difference of the means. With three seeds a side its degrees of freedom are 2 to 4: the t tails are
  wide, as they should be when three values are all one knows of a system's spread.
* ``welch_contrast``: the same for a contrast of several systems' means, such as the interaction
  (A - B) - (C - D) of two differences.
* ``permutation_test``: the seeds as the samples, exact: every split of the pooled per-seed scores into
  groups of the two sizes (scipy's ``permutation_test``, all splits enumerated), two-sided (twice the
  smaller tail, at most 1). Its smallest possible p is ``permutation_floor`` (2 / C(n + m, n): 0.10 with
  3 + 3 seeds, 0.008 with 5 + 5); it assumes nothing about the scores' distribution.
* ``seeds_and_sentences_test``: the paired bootstrap over sentences and seeds (how the difference moves
  with the test sentences as well). Each of ``n_samples`` resamples draws the test sentences with
  replacement (the same for every system: they are paired) and, for each system on its own, its replicas
  with replacement; a system's resampled score is the mean over its drawn replicas of the metric on the
  drawn sentences. The p-value is sacreBLEU's ``--paired-bs`` convention (Koehn 2004's reading): the share
  of resamples whose absolute difference, centred on its mean over resamples, exceeds the observed
  absolute difference, +1 in numerator and denominator (p = 1 for no observed difference). For a
  difference well above its spread that is one tail of the bootstrap distribution, about half of a
  two-sided p; and drawing three seeds with replacement gives the resampled mean (R - 1) / R of its
  variance with normal tails: with few seeds it *under*-states the seeds' spread. The interval beside it
  is the percentile 95% interval of the resampled difference. With one replica per system this is
  sacreBLEU's paired bootstrap test, resample for resample (same seed, same draws of sentences).

``holm`` corrects the p-values of several tests at once (Holm's step-down, e.g. one per length bucket).
"""

import os
import math
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np


def mean_sd(values: Sequence[float]) -> Dict:
    """``{"mean", "sd", "values"}``; sd is the sample standard deviation (n - 1), None for one value."""
    values = [float(v) for v in values]
    mean = sum(values) / len(values)
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return {"mean": mean, "sd": sd, "values": values}


def bootstrap_seed() -> Optional[int]:
    """The resampling seed: SACREBLEU_SEED as sacreBLEU reads it (default 12345; "none": unseeded)."""
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return None if seed.lower() == "none" else int(seed)


def seeds_and_sentences_test(system: Sequence[np.ndarray], baseline: Sequence[np.ndarray],
                             score: Callable[[np.ndarray], float], n_samples: int = 1000,
                             seed: Optional[int] = 12345) -> Dict:
    """The paired bootstrap over sentences and seeds of ``system`` against ``baseline``.

    Args:
        system, baseline: one array per replica, N sentences x K sufficient statistics (the corpus score
            of a set of sentences is ``score`` of their statistics' sum); N equal everywhere.
        score: the corpus metric of summed statistics (K,) -> float.
    Returns ``{"difference": observed mean difference, "p": p-value, "samples": n_samples}``.
    """
    n = system[0].shape[0]
    if any(s.shape[0] != n for s in list(system) + list(baseline)):
        raise ValueError("every replica must score the same test sentences")
    rng = np.random.default_rng(seed)
    sentences = rng.choice(n, size=(n_samples, n), replace=True)  # as sacreBLEU draws them

    def resampled(replicas):  # n_samples scores: the mean over drawn replicas on the drawn sentences
        drawn = rng.choice(len(replicas), size=(n_samples, len(replicas)), replace=True)
        per_replica = np.array([[score(r[idx].sum(0)) for r in replicas] for idx in sentences])  # samples x R
        return np.take_along_axis(per_replica, drawn, axis=1).mean(1)

    observed = (np.mean([score(r.sum(0)) for r in system]) - np.mean([score(r.sum(0)) for r in baseline]))
    signed = resampled(system) - resampled(baseline)
    differences = np.abs(signed)
    centred = differences - differences.mean()
    # no difference observed (e.g. a BLEU of 0 for both): nothing to test, p = 1 (sacreBLEU's count would give
    # 1/(n+1) when every resample ties too)
    p = 1.0 if observed == 0 else (np.sum(centred > abs(observed)) + 1) / (n_samples + 1)
    low, high = np.percentile(signed, [2.5, 97.5])
    return {"difference": float(observed), "p": float(p), "interval": [float(low), float(high)], "samples": n_samples}


def welch_test(system: Sequence[float], baseline: Sequence[float], confidence: float = 0.95) -> Optional[Dict]:
    """Welch's two-sided t-test of ``mean(system) - mean(baseline)`` with the per-seed scores as the
    samples: ``{"difference", "t", "df", "p", "interval"}`` (the ``confidence`` interval of the difference),
    or None where a side has fewer than two scores or neither side varies (no spread to test against)."""
    from scipy import stats

    a, b = np.asarray(system, dtype="float64"), np.asarray(baseline, dtype="float64")
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return None
    result = stats.ttest_ind(a, b, equal_var=False)
    interval = result.confidence_interval(confidence)
    return {"difference": float(a.mean() - b.mean()), "t": float(result.statistic), "df": float(result.df),
            "p": float(result.pvalue), "interval": [float(interval.low), float(interval.high)]}


def welch_contrast(groups: Sequence[Sequence[float]], weights: Sequence[float],
                   confidence: float = 0.95) -> Optional[Dict]:
    """Welch's two-sided t-test of a contrast of group means, ``sum(weights[i] * mean(groups[i]))``, with
    the per-seed scores as the samples and each group's own variance: standard error
    ``sqrt(sum(w_i^2 s_i^2 / n_i))``, Welch-Satterthwaite degrees of freedom
    ``se^4 / sum((w_i^2 s_i^2 / n_i)^2 / (n_i - 1))``. With weights (1, -1) it is ``welch_test``; with
    (1, -1, -1, 1) over (A, B, C, D) it is the interaction (A - B) - (C - D): whether B's difference to
    A differs from D's to C (e.g. RoPE's lead over the transformer at two head sizes). Returns
    ``{"difference", "t", "df", "p", "interval"}``, or None where a group has fewer than two scores or no
    group varies."""
    from scipy import stats

    if len(groups) != len(weights):
        raise ValueError(f"{len(groups)} groups but {len(weights)} weights")
    arrays = [np.asarray(g, dtype="float64") for g in groups]
    if any(len(a) < 2 for a in arrays):
        return None
    parts = np.array([w * w * a.var(ddof=1) / len(a) for w, a in zip(weights, arrays)])
    if not parts.sum() > 0:
        return None
    estimate = float(sum(w * a.mean() for w, a in zip(weights, arrays)))
    se = math.sqrt(parts.sum())
    df = float(parts.sum() ** 2 / sum(v * v / (len(a) - 1) for v, a in zip(parts, arrays)))
    t = estimate / se
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return {"difference": estimate, "t": t, "df": df, "p": float(2 * stats.t.sf(abs(t), df)),
            "interval": [estimate - half, estimate + half]}


def permutation_floor(n: int, m: int) -> float:
    """The smallest two-sided p an exact permutation test over n + m scores can give: 2 / C(n + m, n)."""
    return min(1.0, 2 / math.comb(n + m, n))


def permutation_test(system: Sequence[float], baseline: Sequence[float]) -> Optional[Dict]:
    """The exact two-sided permutation test of the difference of the means over the pooled per-seed scores
    (every split enumerated): ``{"difference", "p", "floor"}``; None where a side has fewer than two scores
    (scipy's condition; with one, the floor would be 2 / (n + 1) at best)."""
    from scipy import stats

    a, b = np.asarray(system, dtype="float64"), np.asarray(baseline, dtype="float64")
    if len(a) < 2 or len(b) < 2:
        return None
    result = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                    permutation_type="independent", alternative="two-sided",
                                    n_resamples=np.inf, vectorized=True)
    return {"difference": float(a.mean() - b.mean()), "p": float(min(1.0, result.pvalue)),
            "floor": permutation_floor(len(a), len(b))}


def holm(p_values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm's step-down adjustment of several p-values (None: no test, left out and kept as None): the k-th
    smallest of m is multiplied by m - k + 1, made non-decreasing, capped at 1."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: List[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for k, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - k) * p))
        adjusted[i] = running
    return adjusted


def same_outputs(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """Whether two systems' replicas have the same statistics (a system against itself: p = 1, as
    fairseq-rope-compare reports it for one run)."""
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def sacrebleu_statistics(metric, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """N x K sufficient statistics of sacreBLEU ``metric`` (BLEU, CHRF) per sentence, as sacreBLEU's own
    paired tests compute them (``sacrebleu.significance``)."""
    return np.array(metric._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype="float64")


def metric_score(metric) -> Callable[[np.ndarray], float]:
    """The corpus score of summed statistics, for ``metric``."""
    return lambda stats: float(metric._compute_score_from_stats(list(stats)).score)


def compare_seeds(systems: List[tuple], references: Sequence[str], metrics: Dict, n_samples: int,
                  seed: Optional[int]) -> Dict:
    """Every system's mean, standard deviation and per-seed scores, and the test against the first system.

    ``systems``: [(name, [hypotheses of replica 1, ...])]; ``metrics``: {"bleu": BLEU(), "chrf": CHRF()}.
    Returns {name: {"seeds": R, "bleu": mean, "bleu_sd": sd or None, "bleu_seeds": [...],
    "bleu_p": the bootstrap's p (sacreBLEU's convention), "bleu_interval": its 95% interval of the difference,
    "bleu_welch": welch_test's dict or None, "bleu_permutation": permutation_test's dict, ... the same for
    chrf}}; the tests are None for the first system."""
    out = {}
    stats = {short: {name: [sacrebleu_statistics(m, h, references) for h in replicas] for name, replicas in systems}
             for short, m in metrics.items()}
    first = systems[0][0]
    for name, replicas in systems:
        entry = {"seeds": len(replicas)}
        for short, m in metrics.items():
            score = metric_score(m)
            spread = mean_sd([score(s.sum(0)) for s in stats[short][name]])
            entry.update({short: spread["mean"], f"{short}_sd": spread["sd"], f"{short}_seeds": spread["values"]})
            if name == first:
                entry.update({f"{short}_{k}": None for k in ("p", "interval", "welch", "permutation")})
                continue
            if same_outputs(stats[short][name], stats[short][first]):  # the baseline itself: nothing to test
                bootstrap = {"p": 1.0, "interval": [0.0, 0.0]}
            else:
                bootstrap = seeds_and_sentences_test(stats[short][name], stats[short][first], score, n_samples, seed)
            entry.update({f"{short}_p": bootstrap["p"], f"{short}_interval": bootstrap["interval"],
                          f"{short}_welch": welch_test(spread["values"], out[first][f"{short}_seeds"]),
                          f"{short}_permutation": permutation_test(spread["values"], out[first][f"{short}_seeds"])})
        out[name] = entry
    return out


def p_number(p: float) -> str:
    """A p-value as a table's p column writes it: "0.012"; below 0.0005 "<0.001" (a rounded 0.000 would read as
    no chance at all)."""
    return "<0.001" if p < 0.0005 else f"{p:.3f}"


def p_value(p: float) -> str:
    """A p-value in running text: "p=0.012", "p<0.001"."""
    number = p_number(p)
    return "p" + (number if number.startswith("<") else "=" + number)


def p_text(p: float, n_samples: int) -> str:
    """A resampling test's p-value: as p_value writes it, but at the test's floor, where no resample is as
    extreme as the observed difference and the bootstrap cannot give less than 1/(n_samples + 1),
    "p=1/1001 (floor)" rather than a rounded 0.001 that reads as a measured value."""
    if abs(p - 1 / (n_samples + 1)) < 1e-12:
        return f"p=1/{n_samples + 1} (floor)"
    return p_value(p)
