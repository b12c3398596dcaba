"""Scores of systems trained with several seeds: mean, standard deviation, and a test against a baseline
that accounts for both the training seeds and the test sentences.

A system is one or more replicas (its runs with different training seeds), each a list of hypotheses of
the same test set. Its score is the mean over replicas of the corpus metric (sacreBLEU, chrF); the spread
is the sample standard deviation over replicas (Clark et al. 2011).

The test is a paired bootstrap over sentences and seeds. Each of ``n_samples`` resamples draws the test
sentences with replacement (the same sentences for every system: they are paired) and, for each system
on its own, its replicas with replacement (seeds are not paired: seed 1 of one system has nothing to do
with seed 1 of another); a system's resampled score is the mean over its drawn replicas of the metric on
the drawn sentences. The p-value is sacreBLEU's (and Koehn's): the share of resamples whose absolute
difference, centred on its mean over resamples, exceeds the observed absolute difference, with +1 in
numerator and denominator (p = 1 when the observed difference is 0). With one replica per system this is sacreBLEU's paired bootstrap test,
resample for resample (same seed, same draws of sentences).

Why not sacreBLEU's tests as they are: they take one output per system, so they measure how a
difference varies with the test sentences, not with the training seed.
"""

import os
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
    differences = np.abs(resampled(system) - resampled(baseline))
    centred = differences - differences.mean()
    # no difference observed (e.g. a BLEU of 0 for both): nothing to test, p = 1 (sacreBLEU's count would give
    # 1/(n+1) when every resample ties too)
    p = 1.0 if observed == 0 else (np.sum(centred > abs(observed)) + 1) / (n_samples + 1)
    return {"difference": float(observed), "p": float(p), "samples": n_samples}


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
    Returns {name: {"seeds": R, "bleu": mean, "bleu_sd": sd or None, "bleu_seeds": [...], "bleu_p": p or None,
    ... the same for chrf}}."""
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
            identical = name != first and same_outputs(stats[short][name], stats[short][first])
            entry[f"{short}_p"] = None if name == first else 1.0 if identical else seeds_and_sentences_test(
                stats[short][name], stats[short][first], score, n_samples, seed)["p"]
        out[name] = entry
    return out


def p_text(p: float, n_samples: int) -> str:
    """A p-value as the tables write it: "p=0.012"; at the test's floor, where no resample is as extreme
    as the observed difference and the bootstrap cannot give less than 1/(n_samples + 1), "p=1/1001 (floor)"
    rather than a rounded 0.001 that reads as a measured value."""
    if abs(p - 1 / (n_samples + 1)) < 1e-12:
        return f"p=1/{n_samples + 1} (floor)"
    return f"p={p:.3f}"
