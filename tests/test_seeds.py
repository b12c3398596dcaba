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
    from scipy import stats

    welch = stats.ttest_ind(chrf["A"], chrf["B"], equal_var=False)
    low, high = welch.confidence_interval(0.95)
    assert a_cell == (f"{statistics.mean(chrf['A']):.2f} ± {statistics.stdev(chrf['A']):.2f} "
                      f"({difference:+.2f} [{low:+.2f}, {high:+.2f}], p={welch.pvalue:.3f})")


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


def test_a_bootstrap_p_under_0001_above_its_floor_is_written_p_less_than_0001_not_p_0000():
    """With more resamples the floor falls below 0.0005: a p between it and 0.0005 is written as every other
    table writes it, "p<0.001", never a rounded "p=0.000"; 0.0005 and above keep three decimals."""
    from fairseq_rope_cli.seeds import p_text

    assert p_text(3 / 10001, 10000) == "p<0.001"
    assert p_text(1 / 10001, 10000) == "p=1/10001 (floor)"
    assert p_text(6 / 10001, 10000) == "p=0.001" and p_text(0.0004999, 100000) == "p<0.001"


def t4_two_sided(t):
    """The two-sided tail of Student's t with 4 degrees of freedom, in closed form:
    F(t) = 1/2 + 3/8 u (1 - u^2 / 3) with u = t / sqrt(4 + t^2) * 2 (so that u = sin of the angle), i.e.
    P(|T| > t) = 1 - u (3 - u^2) / 2 with u = t / sqrt(4 + t^2)."""
    u = abs(t) / (4 + t * t) ** 0.5
    return 1 - u * (3 - u * u) / 2


def test_welch_over_three_seeds_gives_students_textbook_p_and_interval():
    """(1, 2, 3) against (4, 5, 6): difference -3, standard error sqrt(1/3 + 1/3), t = -3.674, Welch's degrees of
    freedom 4 exactly (equal variances and sizes): p from t(4)'s closed form, 0.0213; the 95% interval
    -3 -+ t(4; 0.975) * se with t(4; 0.975) = 2.7764 (the tables' value)."""
    from fairseq_rope_cli.seeds import welch_test

    result = welch_test([1, 2, 3], [4, 5, 6])
    se = (2 / 3) ** 0.5
    assert result["difference"] == pytest.approx(-3, abs=1e-12)
    assert result["t"] == pytest.approx(-3 / se, abs=1e-12) and result["df"] == pytest.approx(4, abs=1e-12)
    assert result["p"] == pytest.approx(t4_two_sided(3 / se), abs=1e-12)
    assert result["p"] == pytest.approx(0.0213, abs=5e-5)
    assert result["interval"] == pytest.approx([-3 - 2.7764451 * se, -3 + 2.7764451 * se], abs=1e-6)


def test_welch_is_two_sided_at_the_normal_limit_z_196_gives_p_005():
    """Many seeds a side, scores constructed so that the difference is 1.96 standard errors: t is 1.96
    with ~4,000 degrees of freedom, where Student's t is the normal: two-sided p = 0.0500 (a one-sided test
    would give 0.025)."""
    from fairseq_rope_cli.seeds import welch_test

    x = np.random.default_rng(0).standard_normal(2000)
    x = (x - x.mean()) / x.std(ddof=1)  # mean 0, sd 1 exactly
    se = (2 / 2000) ** 0.5
    result = welch_test(list(1.96 * se + x), list(x[::-1]))
    assert result["t"] == pytest.approx(1.96, abs=1e-9)
    assert result["p"] == pytest.approx(0.05, abs=2e-4)
    # t(3998; 0.975) = 1.96055: the interval starts 0.00055 se below 0
    assert result["interval"][0] == pytest.approx(-0.00055 * se, abs=2e-5 * se) and result["interval"][1] == pytest.approx(
        2 * 1.96 * se + 0.00055 * se, abs=2e-5 * se)


def test_welch_with_one_side_constant_has_the_other_sides_degrees_of_freedom():
    """(5, 5, 5) against (1, 2, 3): the whole variance is the baseline's, so df = 2 and P(|T| > t) for t(2) is
    1 - t / sqrt(2 + t^2): t = 3 / sqrt(1/3) = 5.196, p = 0.0351."""
    from fairseq_rope_cli.seeds import welch_test

    result = welch_test([5, 5, 5], [1, 2, 3])
    t = 3 / (1 / 3) ** 0.5
    assert result["df"] == pytest.approx(2, abs=1e-12)
    assert result["p"] == pytest.approx(1 - t / (2 + t * t) ** 0.5, abs=1e-12)
    assert welch_test([5, 5, 5], [4, 4, 4]) is None and welch_test([5], [1, 2, 3]) is None  # nothing to test


def test_the_exact_permutation_test_over_3_and_3_seeds_cannot_go_below_010():
    """With 3 + 3 seeds there are C(6, 3) = 20 splits: the most extreme observed split and its mirror give the
    least two-sided p, 2/20 = 0.10, however far apart the systems are; with 5 + 5, 2/252."""
    from fairseq_rope_cli.seeds import permutation_floor, permutation_test

    far = permutation_test([30.0, 31.0, 32.0], [1.0, 2.0, 3.0])
    assert far["p"] == pytest.approx(0.1, abs=1e-12) and far["floor"] == pytest.approx(0.1, abs=1e-12)
    assert far["difference"] == pytest.approx(29, abs=1e-12)
    assert permutation_floor(5, 5) == pytest.approx(2 / 252, abs=1e-15)
    assert permutation_test([10.0, 11, 12, 13, 14], [1.0, 2, 3, 4, 5])["p"] == pytest.approx(2 / 252, abs=1e-12)


def test_the_permutation_test_counts_splits_by_hand():
    """Pooled scores 1..6, system (1, 2, 4): its difference is (2 * 7 - 21) / 3. Splits whose system sum is <= 7:
    (1, 2, 3) and (1, 2, 4), 2 of 20: the lower tail 0.10, the upper far larger, two-sided 2 x 0.10 = 0.20.
    The same split the other way round (the system is (3, 5, 6)) gives the same p. System (1, 3, 5), sum 9:
    sums 6, 7, 8, 8, 9, 9, 9 are <= 9 (7 of 20 splits), two-sided 2 x 0.35 = 0.70."""
    from fairseq_rope_cli.seeds import permutation_test

    assert permutation_test([1.0, 2.0, 4.0], [3.0, 5.0, 6.0])["p"] == pytest.approx(0.2, abs=1e-12)
    assert permutation_test([3.0, 5.0, 6.0], [1.0, 2.0, 4.0])["p"] == pytest.approx(0.2, abs=1e-12)
    assert permutation_test([1.0, 5.0, 3.0], [4.0, 2.0, 6.0])["p"] == pytest.approx(0.7, abs=1e-12)


def test_the_sentence_bootstrap_p_is_one_tail_and_its_interval_is_the_differences():
    """One seed a side, a metric that is the mean of per-sentence values, 4,000 sentences: the bootstrap
    difference is close to normal with the paired standard error s / sqrt(n). With the observed difference
    1.96 standard errors, a two-sided test gives 0.05; sacreBLEU's rule (centred |d*| above |d|) gives
    about one tail, 0.025; the percentile interval is d -+ 1.96 se, its lower end near 0."""
    n = 4000
    x = np.random.default_rng(1).standard_normal(n)
    x = (x - x.mean()) / x.std()  # the per-sentence differences: mean 0, sd 1 (population)
    se = 1 / n ** 0.5
    d = x + 1.96 * se
    system = np.stack([d + 5.0, np.ones(n)], axis=1)  # statistics (value, 1): the metric is their mean
    baseline = np.stack([np.full(n, 5.0), np.ones(n)], axis=1)
    result = seeds_and_sentences_test([system], [baseline], lambda s: s[0] / s[1], n_samples=20000, seed=2)
    assert result["difference"] == pytest.approx(1.96 * se, abs=1e-12)
    assert result["p"] == pytest.approx(0.025, abs=0.005)
    low, high = result["interval"]
    assert low == pytest.approx(0, abs=0.05 * se) and high == pytest.approx(2 * 1.96 * se, abs=0.05 * se)


def test_holm_adjusts_the_kth_smallest_by_m_minus_k_plus_one_and_keeps_the_order():
    from fairseq_rope_cli.seeds import holm

    assert holm([0.01, 0.04, 0.03, None, 0.5]) == pytest.approx([0.04, 0.09, 0.09, None, 0.5], abs=1e-12)
    assert holm([0.3, 0.6]) == [0.6, 0.6] and holm([None]) == [None] and holm([]) == []


def test_every_system_after_the_first_carries_the_tests_over_seeds_and_the_first_none():
    refs = ["Der Hund läuft .", "Die Katze liest ein Buch !", "42 rote Häuser ?"]
    seeds = [["Der Hund läuft .", "Die Katze liest .", "42 Häuser ?"],
             ["Ein Hund läuft .", "Die Katze liest ein Buch !", "rote Häuser"],
             ["Der Hund .", "Katze Buch", "42 rote Häuser ?"]]
    base = [["Hund", "Katze", "Haus"], ["Der Hund", "liest ein Buch", "Häuser ?"], ["läuft", "Die Katze", "42"]]
    out = compare_seeds([("base", base), ("sys", seeds)], refs, {"chrf": CHRF()}, 200, 1)
    each = [CHRF().corpus_score(h, [refs]).score for h in seeds]
    each_base = [CHRF().corpus_score(h, [refs]).score for h in base]
    from scipy import stats

    assert out["sys"]["chrf_welch"]["p"] == pytest.approx(stats.ttest_ind(each, each_base, equal_var=False).pvalue,
                                                          abs=1e-12)
    assert out["sys"]["chrf_permutation"]["floor"] == pytest.approx(0.1, abs=1e-12)
    low, high = out["sys"]["chrf_interval"]
    assert low < out["sys"]["chrf"] - out["base"]["chrf"] < high
    assert all(out["base"][f"chrf_{k}"] is None for k in ("p", "interval", "welch", "permutation"))


def test_the_interaction_of_two_differences_is_welchs_t_on_the_contrast_with_satterthwaite_df():
    """(A - B) - (C - D) with A = (1, 2, 3), B = (5, 5, 5), C = (4, 4, 4), D = (2, 3, 4): contrast
    (2 - 5) - (4 - 3) = -4; only A and D vary (variance 1, 3 seeds each), so se = sqrt(1/3 + 1/3) and the
    Welch-Satterthwaite df = (2/3)^2 / ((1/3)^2 / 2 + (1/3)^2 / 2) = 4 exactly: p from t(4)'s closed form,
    the interval -4 -+ t(4; 0.975) se. Weights (1, -1) are Welch's two-sample test (scipy's), unequal sizes
    and variances included; a group of one seed or no spread anywhere: nothing to test."""
    from fairseq_rope_cli.seeds import welch_contrast, welch_test

    result = welch_contrast([[1, 2, 3], [5, 5, 5], [4, 4, 4], [2, 3, 4]], (1, -1, -1, 1))
    se = (2 / 3) ** 0.5
    assert result["difference"] == pytest.approx(-4, abs=1e-12)
    assert result["t"] == pytest.approx(-4 / se, abs=1e-12) and result["df"] == pytest.approx(4, abs=1e-12)
    assert result["p"] == pytest.approx(t4_two_sided(4 / se), abs=1e-12)
    assert result["interval"] == pytest.approx([-4 - 2.7764451 * se, -4 + 2.7764451 * se], abs=1e-6)
    a, b = [20.3, 21.1, 20.9, 20.5, 20.5], [17.7, 19.2, 19.1]
    two = welch_contrast([a, b], (1, -1))
    one = welch_test(a, b)
    for key in ("difference", "t", "df", "p"):
        assert two[key] == pytest.approx(one[key], rel=1e-12), key
    assert two["interval"] == pytest.approx(one["interval"], rel=1e-12)
    assert welch_contrast([[1, 2], [3], [1, 2], [3, 4]], (1, -1, -1, 1)) is None
    assert welch_contrast([[1, 1], [3, 3], [2, 2], [4, 4]], (1, -1, -1, 1)) is None
    with pytest.raises(ValueError, match="4 groups but 2 weights"):
        welch_contrast([[1, 2]] * 4, (1, -1))


def test_compare_tests_the_interaction_of_four_systems_over_their_seeds(tmp_path, capsys):
    """fairseq-rope-compare --interaction A,B,C,D: the row gives (A - B) - (C - D) of the systems' mean
    sacreBLEU (each seed's file scored by sacreBLEU), Welch's interval and two-sided p on the contrast;
    an unknown name or a system of one seed is refused, naming the flag."""
    import json

    from scipy import stats

    from fairseq_rope_cli import compare
    from fairseq_rope_cli.common import InputError

    src = ["the dog runs .", "the cat reads a book !", "42 red houses ?", "a house"]
    refs = ["Der Hund läuft .", "Die Katze liest ein Buch !", "42 rote Häuser ?", "ein Haus"]
    outputs = {"A": [["Der Hund läuft .", "Die Katze liest .", "42 Häuser ?", "ein Haus"],
                     ["Ein Hund läuft .", "Die Katze liest ein Buch !", "rote Häuser", "Haus"],
                     ["Der Hund läuft .", "Die Katze liest ein Buch !", "42 rote Häuser", "ein Haus"]],
               "B": [["Der Hund .", "Katze Buch", "42 rote Häuser ?", "Haus"],
                     ["Hund", "Die Katze liest ein Buch", "Häuser ?", "ein"]],
               "C": [["Der Hund läuft .", "Die Katze liest ein Buch !", "42 Häuser ?", "Haus"],
                     ["Der Hund .", "Die Katze liest ein Buch", "42 rote Häuser ?", "ein Haus"]],
               "D": [["Der Hund läuft", "Katze liest ein Buch !", "rote Häuser ?", "ein Haus"],
                     ["Die Hunde laufen .", "Die Katze liest !", "42 rote Häuser ?", "Haus"],
                     ["Hund läuft .", "Katze", "42 ?", "ein Haus"]]}
    (tmp_path / "src.en").write_text("".join(line + "\n" for line in src), encoding="utf-8")
    (tmp_path / "ref.de").write_text("".join(line + "\n" for line in refs), encoding="utf-8")
    argv = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de"), "--bootstrap-samples", "20"]
    for name, seeds in outputs.items():
        for k, hyps in enumerate(seeds):
            path = tmp_path / f"{name}{k}.de"
            path.write_text("".join(line + "\n" for line in hyps), encoding="utf-8")
            argv += ["--hyp", f"{name}={path}"]
    compare.main(argv + ["--interaction", "A,B,C,D", "--out-json", str(tmp_path / "out.json")])
    table = capsys.readouterr().out
    bleu = {name: [BLEU().corpus_score(h, [refs]).score for h in seeds] for name, seeds in outputs.items()}
    means = {name: float(np.mean(v)) for name, v in bleu.items()}
    contrast = (means["A"] - means["B"]) - (means["C"] - means["D"])
    parts = {name: np.var(v, ddof=1) / len(v) for name, v in bleu.items()}
    se = sum(parts.values()) ** 0.5
    df = sum(parts.values()) ** 2 / sum(parts[n] ** 2 / (len(bleu[n]) - 1) for n in bleu)
    half = stats.t.ppf(0.975, df) * se
    p = 2 * stats.t.sf(abs(contrast) / se, df)
    row = next(line for line in table.splitlines() if line.startswith("| (A - B) - (C - D) |"))
    assert row.split(" | ")[1] == f"{contrast:+.2f} [{contrast - half:+.2f}, {contrast + half:+.2f}], p={p:.3f} (df {df:.1f})"
    saved = json.loads((tmp_path / "out.json").read_text())["interactions"][0]
    assert saved["runs"] == ["A", "B", "C", "D"] and saved["bleu"]["difference"] == pytest.approx(contrast, abs=1e-9)
    assert abs(contrast) > 1, "the four systems' differences are alike: the test cannot tell a sign error"
    with pytest.raises(InputError, match="--interaction 'A,B,C,E': no run is named 'E'"):
        compare.main(argv + ["--interaction", "A,B,C,E"])
    with pytest.raises(InputError, match=r"--interaction takes four run names A,B,C,D .*, got 'A,B,C'$"):
        compare.main(argv + ["--interaction", "A,B,C"])
    one = argv[:argv.index(f"C={tmp_path / 'C1.de'}") - 1] + argv[argv.index(f"C={tmp_path / 'C1.de'}") + 1:]
    with pytest.raises(InputError, match="run 'C' has one seed"):
        compare.main(one + ["--interaction", "A,B,C,D"])


def test_the_interaction_table_writes_a_p_below_0001_as_p_less_than_0001_like_every_other_table():
    """A contrast's p under 0.0005 reads "p<0.001" (as in the seed tables), never a rounded "p=0.000"; others keep
    three decimals."""
    from fairseq_rope_cli import compare

    def test(p):
        return {"difference": 1.69, "interval": [0.92, 2.45], "p": p, "df": 13.2}

    table = compare.render_interactions([{"runs": ["A", "B", "C", "D"], "bleu": test(0.0002), "chrf": test(0.0123),
                                          "nll": None}])
    row = next(line for line in table.splitlines() if line.startswith("| (A - B) - (C - D) |"))
    assert row.split(" | ")[1:] == ["+1.69 [+0.92, +2.45], p<0.001 (df 13.2)", "+1.69 [+0.92, +2.45], p=0.012 (df 13.2)",
                                    "– |"]


def test_with_eight_seeds_a_side_the_exact_permutation_cell_writes_p_below_0001_and_its_floor_not_0000(tmp_path):
    """fairseq-rope-compare with 8 + 8 seeds, every seed of one system above every seed of the other: the exact
    permutation p is its floor, 2 / C(16, 8) = 0.000155, which the tests table writes as "<0.001 (0.00016)"
    (three decimals would write "0.000 (0.000)"); Welch's p of a gap this clear is "<0.001" too."""
    import math

    from conftest import run_tool

    words = "the daemon runs every night and writes its log to the disk".split()
    refs = [" ".join(words[i:] + words[:i]) for i in range(12)]
    (tmp_path / "src.en").write_text("".join(f"source sentence {i} of the test set\n" for i in range(12)))
    (tmp_path / "ref.de").write_text("".join(r + "\n" for r in refs))
    args = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de")]
    for system, damaged in (("base", 6), ("better", 1)):
        for seed in range(8):
            hyps = []
            for i, ref in enumerate(refs):
                tokens = ref.split()
                for k in range(damaged + (i + seed) % 2):  # seeds differ, every "better" one above every "base" one
                    tokens[(3 * k + seed) % len(tokens)] = f"x{k}"
                hyps.append(" ".join(tokens))
            path = tmp_path / f"{system}{seed}.de"
            path.write_text("".join(h + "\n" for h in hyps))
            args += ["--hyp", f"{system}={path}"]
    run_tool("fairseq-rope-compare", *args, "--bootstrap-samples", "100", "--out-md", str(tmp_path / "cmp.md"))
    rows = [line.split(" | ") for line in (tmp_path / "cmp.md").read_text().splitlines()
            if line.startswith("| better | BLEU |") or line.startswith("| better | chrF |")]
    assert len(rows) == 2 and 2 / math.comb(16, 8) < 0.0005
    for row in rows:
        assert row[4] == "<0.001" and row[5] == "<0.001 (0.00016)", row
