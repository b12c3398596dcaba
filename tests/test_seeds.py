"""Scores across training seeds (fairseq_rope_cli/seeds.py): the mean, the spread, and the paired bootstrap over
seeds and sentences, against a hand computation and against sacreBLEU's own paired bootstrap test."""

import random
import statistics

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from fairseq_rope_cli.seeds import (compare_seeds, mean_sd, metric_score, sacrebleu_statistics, same_outputs,
                                   seeds_and_sentences_test)


def percent_of_sentences(stats):
    """A metric that is the mean of per-sentence values (statistics: value, 1), in percent."""
    return 100 * stats[0] / stats[1]


def sentences(*values):
    return np.array([[v, 1.0] for v in values])


def test_bootstrap_over_seeds_and_sentences_matches_a_hand_computation():
    """Two test sentences; the system has two seeds with per-sentence scores (1, 0) and (0, 0), the baseline
    one seed with (0, 0.2). Observed: mean(50, 0) - 10 = 15.

    Every resample draws two sentences (00, 01, 10, 11: 1/4 each) and two of the system's seeds (s1 s1: 1/4,
    s1 s2 or s2 s1: 1/2, s2 s2: 1/4); the system's score is the mean over its drawn seeds:
      sentences 00: s1 scores 100, s2 0, baseline 0    -> |d| = 100, 50, 0   (1/4, 1/2, 1/4)
      01 or 10:     s1 50, s2 0, baseline 10           -> |d| = 40, 15, 10   (1/4, 1/2, 1/4)
      11:           s1 0, s2 0, baseline 20            -> |d| = 20
    E|d| = 1/4 * 50 + 1/2 * 20 + 1/4 * 20 = 27.5, so |d| - E|d| > 15 where |d| > 42.5: |d| = 100 (1/16) or
    50 (1/8): p = 3/16 = 0.1875. (Without resampling the seeds it would be 1/4; with the baseline's own
    sentences drawn apart from the system's, again another value.)"""
    system = [sentences(1, 0), sentences(0, 0)]
    baseline = [sentences(0, 0.2)]
    n = 40000
    result = seeds_and_sentences_test(system, baseline, percent_of_sentences, n_samples=n, seed=3)
    assert result["difference"] == pytest.approx(15.0, abs=1e-9)
    assert result["p"] == pytest.approx(3 / 16, abs=4 * (3 / 16 * 13 / 16 / n) ** 0.5)  # 4 standard errors


def test_one_seed_per_system_is_sacrebleus_paired_bootstrap_resample_for_resample():
    random.seed(5)
    words = "Der Hund , die Katze läuft ! ein rotes Haus ? liest 42 Bücher .".split()
    refs = [" ".join(random.choices(words, k=random.randint(1, 12))) for _ in range(80)] + [""]

    def noisy(p):
        return [" ".join(w if random.random() > p else random.choice(words) for w in r.split()) for r in refs]

    systems = [("base", noisy(0.3)), ("a", noisy(0.33)), ("b", noisy(0.5))]
    signatures, table = PairedTest(systems, {"BLEU": BLEU(), "chrF": CHRF()}, references=[refs],
                                   test_type="bs", n_samples=500)()
    ours = compare_seeds([(name, [hyps]) for name, hyps in systems], refs, {"bleu": BLEU(), "chrf": CHRF()},
                         500, 12345)
    for i, (name, _) in enumerate(systems):
        for short, key in (("bleu", "BLEU"), ("chrf", "chrF2")):
            assert ours[name][short] == pytest.approx(table[key][i].score, abs=1e-9)
            assert ours[name][short + "_sd"] is None and ours[name]["seeds"] == 1
            if i:
                assert ours[name][short + "_p"] == table[key][i].p_value
    assert 0.001 < ours["a"]["chrf_p"] < 0.5  # a p-value that could tell a wrong draw


def test_systems_with_several_seeds_report_each_seed_their_mean_and_spread():
    refs = ["Der Hund läuft .", "Die Katze liest ein Buch !", "42 rote Häuser ?"]
    seeds = [["Der Hund läuft .", "Die Katze liest .", "42 Häuser ?"],
             ["Ein Hund läuft .", "Die Katze liest ein Buch !", "rote Häuser"],
             ["Der Hund .", "Katze Buch", "42 rote Häuser ?"]]
    out = compare_seeds([("base", seeds[:1]), ("sys", seeds), ("same", seeds[:1])], refs,
                        {"bleu": BLEU(), "chrf": CHRF()}, 200, 1)
    each = [CHRF().corpus_score(h, [refs]).score for h in seeds]
    assert out["sys"]["chrf_seeds"] == pytest.approx(each, abs=1e-9)
    assert out["sys"]["chrf"] == pytest.approx(statistics.mean(each), abs=1e-9)
    assert out["sys"]["chrf_sd"] == pytest.approx(statistics.stdev(each), abs=1e-9)
    assert out["sys"]["seeds"] == 3 and 0 < out["sys"]["chrf_p"] <= 1
    assert out["same"]["chrf_p"] == 1.0 and out["same"]["bleu_p"] == 1.0  # the baseline against itself
    assert out["base"]["chrf_p"] is None


def test_no_difference_is_p_one_and_the_spread_of_one_value_is_none():
    zero = [sentences(0, 0), sentences(0, 0)]
    assert seeds_and_sentences_test(zero, [sentences(0, 0)], percent_of_sentences, 100, 0)["p"] == 1.0
    assert mean_sd([27.5]) == {"mean": 27.5, "sd": None, "values": [27.5]}
    assert mean_sd([1, 2, 4])["sd"] == pytest.approx(statistics.stdev([1, 2, 4]), abs=1e-12)


def test_a_system_whose_first_seed_is_the_baseline_but_has_more_seeds_is_tested_not_taken_for_the_same():
    """Only a system with the baseline's replicas, all of them, is the baseline itself (p = 1 without a test):
    one that shares the baseline's only seed and has another, different one gets the bootstrap's p-value."""
    refs = ["Der Hund läuft .", "Die Katze liest ein Buch !", "42 rote Häuser ?"]
    good = ["Der Hund läuft .", "Die Katze liest .", "42 Häuser ?"]
    bad = ["Ein Tisch", "rot", "Haus"]
    assert same_outputs([sentences(1, 0)], [sentences(1, 0)])
    assert not same_outputs([sentences(1, 0)], [sentences(1, 0), sentences(0, 0)])
    out = compare_seeds([("base", [good]), ("sys", [good, bad])], refs, {"chrf": CHRF()}, 200, 1)
    chrf = CHRF()
    expected = seeds_and_sentences_test([sacrebleu_statistics(chrf, h, refs) for h in (good, bad)],
                                        [sacrebleu_statistics(chrf, good, refs)], metric_score(chrf), 200, 1)["p"]
    assert out["sys"]["chrf"] < out["base"]["chrf"]
    assert out["sys"]["chrf_p"] == expected < 1.0


def test_the_results_table_across_seeds_tests_against_the_baseline_named_not_the_first(tmp_path, capsys):
    """fairseq-rope-results --baseline B with system A listed first: B's row comes first and carries no test,
    A's row gives A's mean chrF minus B's (sacreBLEU's chrF of each seed's file, averaged) and a p-value."""
    import json

    from fairseq_rope_cli import results

    refs = ["Der Hund läuft .", "Die Katze liest ein Buch !", "42 rote Häuser ?"]
    outputs = {("A", 1): ["Der Hund läuft .", "Die Katze liest .", "42 Häuser ?"],
               ("A", 2): ["Ein Hund läuft .", "Die Katze liest ein Buch !", "rote Häuser"],
               ("B", 1): ["Der Hund .", "Katze Buch", "42 rote Häuser ?"],
               ("B", 2): ["Hund", "Die Katze liest ein Buch", "Häuser ?"]}
    (tmp_path / "ref.de").write_text("".join(line + "\n" for line in refs), encoding="utf-8")
    paths = []
    for (system, seed), hyps in outputs.items():
        (tmp_path / f"{system}{seed}.de").write_text("".join(line + "\n" for line in hyps), encoding="utf-8")
        path = tmp_path / f"{system}{seed}.json"
        path.write_text(json.dumps(dict(run_name=f"{system}_seed{seed}", system=system, seed=seed, arch="x",
                                        tokenized_bleu=10.0 * seed, sacrebleu=1.0, n_sentences=3,
                                        reference=str(tmp_path / "ref.de"),
                                        hyps_detok=str(tmp_path / f"{system}{seed}.de"))))
        paths.append(str(path))
    results.main(paths + ["--baseline", "B"])
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith(("| A |", "| B |"))]
    assert [row[:5] for row in rows] == ["| B |", "| A |"]
    chrf = {name: [CHRF().corpus_score(outputs[name, seed], [refs]).score for seed in (1, 2)] for name in "AB"}
    b_cell, a_cell = (row.split(" | ")[3] for row in rows)
    assert b_cell == f"{statistics.mean(chrf['B']):.2f} ± {statistics.stdev(chrf['B']):.2f}"
    difference = statistics.mean(chrf["A"]) - statistics.mean(chrf["B"])
    assert a_cell.startswith(f"{statistics.mean(chrf['A']):.2f} ± {statistics.stdev(chrf['A']):.2f} "
                             f"({difference:+.2f}, p=")


def test_a_resample_that_only_ties_the_observed_difference_does_not_count_against_it():
    """The p-value counts resamples whose centred difference *exceeds* the observed one (sacreBLEU's rule).
    System (1, 0) against baseline (0, 0), one seed each: observed 50; a resample of the two sentences gives
    |d| = 100 (sentences 00), 50 (01, 10) or 0 (11). With two resamples their mean is halfway, so a centred
    difference is at most (100 - 0) / 2 = 50: none exceeds 50 and p = (0 + 1) / (2 + 1) for every draw,
    also where the draws are 00 and 11 and one centred difference equals 50 exactly (1 in 8 seeds)."""
    for seed in range(40):
        result = seeds_and_sentences_test([sentences(1, 0)], [sentences(0, 0)], percent_of_sentences, 2, seed)
        assert result["difference"] == 50.0
        assert result["p"] == pytest.approx(1 / 3), seed


def test_a_p_value_at_the_tests_floor_is_written_as_the_floor():
    from fairseq_rope_cli.seeds import p_text

    assert p_text(1 / 1001, 1000) == "p=1/1001 (floor)"
    assert p_text(2 / 1001, 1000) == "p=0.002"
    assert p_text(1 / 101, 100) == "p=1/101 (floor)" and p_text(1 / 1001, 100) == "p=0.001"
