"""fairseq-rope-compare (scores by source length, paired bootstrap, table, plot), fairseq-rope-plot-training
and the length study's data maker.

Fixtures (tests/fixtures/analysis/): src.en / ref.de are 120 pairs of recipes/wmt14_en_de/make_sample_corpus.py
(seed 7); hyp_a.de / hyp_b.de are the references with words dropped and swapped (fixed seeds), so
the two "systems" differ by a few BLEU. fairseq_train_{json,simple}.log are the logs of one real
fairseq-train run each (rope_transformer, 60 updates, --eval-bleu; the model dump is cut out).
"""

import json
import math
import os
import random
import re
import statistics
import subprocess
import sys

import pytest
import sacrebleu

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(REPO, "tests", "fixtures", "analysis")
BIN = os.path.dirname(sys.executable)
COMPARE = os.path.join(BIN, "fairseq-rope-compare")
PLOT_TRAINING = os.path.join(BIN, "fairseq-rope-plot-training")
SACREBLEU = os.path.join(BIN, "sacrebleu")
SRC, REF, HYP_A, HYP_B = (os.path.join(FIX, f) for f in ("src.en", "ref.de", "hyp_a.de", "hyp_b.de"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

from fairseq_rope_cli import plot_training  # noqa: E402


def run(command, *args, check=True):
    """An installed command, or a recipe script (*.py) run by this interpreter."""
    env = dict(os.environ)
    env.pop("SACREBLEU_SEED", None)
    command = [sys.executable, command] if command.endswith(".py") else [command]
    result = subprocess.run([*command, *map(str, args)], capture_output=True, text=True, env=env)
    if check and result.returncode:
        raise AssertionError(f"{command} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """fairseq-rope-compare on the fixtures, baseline first: (result JSON, markdown, png path)."""
    out = tmp_path_factory.mktemp("compare")
    run(COMPARE, "--src", SRC, "--ref", REF, "--hyp", f"base={HYP_A}", "--hyp", f"rope={HYP_B}",
        "--buckets", "5,10,20,30", "--out-md", out / "t.md", "--out-png", out / "t.png", "--out-json", out / "t.json",
        "--train-max-words", 20)
    return json.loads((out / "t.json").read_text()), (out / "t.md").read_text(), out / "t.png"


def test_overall_scores_equal_the_sacrebleu_cli(compared):
    res, _, _ = compared
    for name, hyp in (("base", HYP_A), ("rope", HYP_B)):
        cli = subprocess.run([SACREBLEU, REF, "-i", hyp, "-m", "bleu", "chrf", "-b", "-w", "4"],
                             capture_output=True, text=True, check=True)
        bleu, chrf = json.loads(cli.stdout)
        assert round(res["overall"][name]["bleu"], 4) == pytest.approx(bleu, abs=1e-4)
        assert round(res["overall"][name]["chrf"], 4) == pytest.approx(chrf, abs=1e-4)
    assert res["signatures"]["BLEU"].endswith(f"tok:13a|smooth:exp|version:{sacrebleu.__version__}")


def test_paired_bootstrap_equals_the_sacrebleu_cli(compared):
    """Same p-values and confidence intervals as `sacrebleu --paired-bs` (JSON output crashes under numpy 2)."""
    res, _, _ = compared
    cli = subprocess.run([SACREBLEU, REF, "-i", HYP_A, HYP_B, "-m", "bleu", "chrf", "-w", "4", "--paired-bs",
                          "-f", "text"], capture_output=True, text=True, check=True).stdout
    p_bleu, p_chrf = (float(p) for p in re.findall(r"\(p = ([0-9.]+)\)", cli))
    rope = res["overall"]["rope"]
    assert round(rope["bleu_p"], 4) == p_bleu and round(rope["chrf_p"], 4) == p_chrf
    assert 0.001 < rope["bleu_p"] < 0.5  # a real test, not a saturated one
    ci = re.search(r"hyp_b\.de │ [0-9.]+ \([0-9.]+ ± ([0-9.]+)\)", cli).group(1)
    assert round(rope["bleu_ci"], 4) == float(ci)
    assert res["overall"]["base"]["bleu_p"] is None


def test_bucket_scores_equal_sacrebleu_on_the_subset(compared):
    res, _, _ = compared
    src, ref = lines(SRC), lines(REF)
    hyps = {"base": lines(HYP_A), "rope": lines(HYP_B)}
    lengths = [len(s.split()) for s in src]
    assert [b["label"] for b in res["buckets"]] == ["1-5", "6-10", "11-20", "21-30", "31+"]
    assert sum(b["sentences"] for b in res["buckets"]) == len(src)
    for b in res["buckets"]:
        hi = b["max_words"] or 10**9
        idx = [i for i, n in enumerate(lengths) if b["min_words"] <= n <= hi]
        assert b["sentences"] == len(idx) > 0
        for name, h in hyps.items():
            sub_h, sub_r = [h[i] for i in idx], [[ref[i] for i in idx]]
            assert b["scores"][name]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(sub_h, sub_r).score, abs=1e-9)
            assert b["scores"][name]["chrf"] == pytest.approx(sacrebleu.corpus_chrf(sub_h, sub_r).score, abs=1e-9)
            bleu = sacrebleu.corpus_bleu(sub_h, sub_r)
            assert b["scores"][name]["len_ratio"] == pytest.approx(bleu.sys_len / bleu.ref_len, abs=1e-12)
        assert b["scores"]["rope"]["bleu_p"] is not None


def test_one_bucket_against_the_sacrebleu_cli(compared, tmp_path):
    res, _, _ = compared
    bucket = res["buckets"][2]  # 11-20 words
    keep = [i for i, s in enumerate(lines(SRC)) if 11 <= len(s.split()) <= 20]
    (tmp_path / "ref").write_text("".join(lines(REF)[i] + "\n" for i in keep), encoding="utf-8")
    (tmp_path / "hyp").write_text("".join(lines(HYP_B)[i] + "\n" for i in keep), encoding="utf-8")
    cli = subprocess.run([SACREBLEU, tmp_path / "ref", "-i", tmp_path / "hyp", "-b", "-w", "4"],
                         capture_output=True, text=True, check=True)
    assert round(bucket["scores"]["rope"]["bleu"], 4) == float(cli.stdout)


def test_markdown_and_png(compared):
    res, md, png = compared
    rope = res["overall"]["rope"]
    low, high = rope["bleu"] - rope["bleu_ci"], rope["bleu"] + rope["bleu_ci"]  # one run: the CI, not a ±
    assert f"| rope | {rope['bleu']:.2f} [{low:.2f}, {high:.2f}] (+" in md and " ± " not in md.split("| Run |")[1]
    assert "| 21-30 *(unseen)* |" in md and "| 11-20 | " in md
    assert "BLEU signature: `nrefs:1|bs:1000|seed:12345|" in md
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_result_json_inputs(tmp_path, compared):
    """The evaluate step's result.json (fairseq-rope-score): hypotheses and reference come from it."""
    paths = []
    for name, hyp in (("transformer", HYP_A), ("rope_transformer", HYP_B)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"run_name": name, "reference": REF, "hyps_detok": hyp, "test_set": "fixture",
                                    "sacrebleu": 0.0, "n_sentences": 120}))
        paths.append(path)
    run(COMPARE, "--src", SRC, "--result", paths[0], "--result", f"rope={paths[1]}", "--buckets", "5,10,20,30",
        "--out-json", tmp_path / "r.json")
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["runs"] == ["transformer", "rope"]
    assert res["overall"]["rope"] == compared[0]["overall"]["rope"]
    assert res["buckets"] == [{**b, "scores": {{"base": "transformer"}.get(k, k): v for k, v in b["scores"].items()}}
                              for b in compared[0]["buckets"]]


def test_wrong_number_of_lines_names_the_file_and_both_counts(tmp_path):
    short = tmp_path / "short.de"
    short.write_text("".join(line + "\n" for line in lines(HYP_B)[:117]), encoding="utf-8")
    r = run(COMPARE, "--src", SRC, "--ref", REF, "--hyp", f"base={HYP_A}", "--hyp", f"rope={short}", check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"hypothesis file {short} (run 'rope') has 117 lines but the source {SRC} has 120 lines" in r.stderr


def test_missing_files_are_all_named(tmp_path):
    r = run(COMPARE, "--src", tmp_path / "nope.en", "--ref", REF, "--hyp", f"base={HYP_A}",
            "--hyp", f"rope={tmp_path / 'gone.de'}", "--result", tmp_path / "absent.json", check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"source file (--src): {tmp_path / 'nope.en'}" in r.stderr
    assert f"hypothesis file of run 'rope': {tmp_path / 'gone.de'}" in r.stderr
    assert f"result JSON: {tmp_path / 'absent.json'}" in r.stderr


def test_bad_buckets_and_reference_mismatch(tmp_path):
    r = run(COMPARE, "--src", SRC, "--ref", REF, "--hyp", f"a={HYP_A}", "--buckets", "10,5", check=False)
    assert r.returncode == 1 and "--buckets must be increasing" in r.stderr
    short_ref = tmp_path / "ref.de"
    short_ref.write_text("x\n")
    r = run(COMPARE, "--src", SRC, "--ref", short_ref, "--hyp", f"a={HYP_A}", check=False)
    assert r.returncode == 1 and f"the reference {short_ref} has 1 lines but the source {SRC} has 120" in r.stderr


# --------------------------------------------------------------------------- fairseq-rope-plot-training

JSON_LOG, SIMPLE_LOG = (os.path.join(FIX, f"fairseq_train_{fmt}.log") for fmt in ("json", "simple"))


def test_json_and_simple_logs_parse_to_the_same_curves():
    a, b = plot_training.parse_log(JSON_LOG), plot_training.parse_log(SIMPLE_LOG)
    assert sorted(a["train_inner"]) == [10, 20, 30, 40, 50, 60]
    assert sorted(a["valid"]) == [20, 28, 40, 56, 60]
    for kind, key in (("train_inner", "loss"), ("train", "loss"), ("valid", "loss"), ("valid", "nll_loss"),
                      ("valid", "bleu")):
        assert plot_training.series(a, kind, key) == plot_training.series(b, kind, key), (kind, key)
    assert a["train_inner"][10]["loss"] == 11.87 and a["valid"][60]["loss"] == 9.202


def test_resumed_log_keeps_the_later_value(tmp_path):
    log = tmp_path / "train.log"
    text = open(JSON_LOG, encoding="utf-8").read()
    replay = ('2026-11-22 05:00:00 | INFO | train_inner | {"epoch": 2, "update": 1.4, "loss": "5.5", '
              '"num_updates": "40"}\n# 2026-11-22 05:00:01 fairseq-train ...\n')
    log.write_text(text + replay, encoding="utf-8")
    records = plot_training.parse_log(str(log))
    assert records["train_inner"][40]["loss"] == 5.5 and records["train_inner"][30]["loss"] == 10.244


def test_plot_training_writes_a_png(tmp_path):
    out = tmp_path / "curves.png"
    r = run(PLOT_TRAINING, f"json={JSON_LOG}", f"simple={SIMPLE_LOG}", "--out", out)
    assert out.read_bytes().startswith(PNG_MAGIC) and out.stat().st_size > 10_000
    assert "json: " in r.stderr and "5 validations (5 with BLEU), up to update 60" in r.stderr
    # a directory stands for DIR/train.log and names the run
    run_dir = tmp_path / "rope"
    run_dir.mkdir()
    (run_dir / "train.log").write_text(open(SIMPLE_LOG, encoding="utf-8").read(), encoding="utf-8")
    r = run(PLOT_TRAINING, run_dir, "--out", tmp_path / "one.png", "--loss", "nll_loss")
    assert "rope: " in r.stderr and (tmp_path / "one.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("copies", [1, 3, 6])
def test_plot_training_keeps_a_long_title_inside_the_image(tmp_path, copies):
    """The title band's leftmost and rightmost columns stay background: a title of one to six times the
    study's (up to 250 characters) is drawn whole (one of 250 was cut at both edges), centred."""
    import matplotlib.image
    import numpy as np

    title = " ".join(["Debian manuals, seed 1 to 30,000 updates"] * copies)
    out = tmp_path / "curves.png"
    run(PLOT_TRAINING, f"json={JSON_LOG}", "--out", out, "--title", title)
    pixels = matplotlib.image.imread(out)[:, :, :3]
    band = pixels[: int(0.3 * 120)]  # the title's 0.3 inch at the saved 120 dpi
    inked = np.where((band < 0.5).any(axis=(0, 2)))[0]
    assert inked.size, "no title drawn"
    assert inked.min() >= 4 and inked.max() <= band.shape[1] - 5, (inked.min(), inked.max(), band.shape)
    left, right = inked.min(), band.shape[1] - 1 - inked.max()
    assert abs(left - right) <= 3  # centred


@pytest.mark.parametrize("entries", [2, 5, 8, 12])
def test_a_legend_of_several_rows_stays_above_the_panels(tmp_path, entries):
    """save_figure's band grows with the legend's rows: the legend's lowest point is above the panel's top
    (a fixed band let a legend of four rows, fairseq-rope-tune extrapolate's of two runs, cover the panel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fairseq_rope_cli.common import save_figure

    fig, ax = plt.subplots(figsize=(8, 4.6))
    for k in range(entries):
        ax.plot([0, 1], [k, k + 1], label=f"run {k}: fit from 8,000 (flat at 83,200, limit 2.300)")
    save_figure(fig, ax, "title", 2, str(tmp_path / "f.png"))
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # (the figure is closed: measured on a canvas of its own)
    assert fig.legends[0].get_window_extent(renderer).y0 > ax.get_window_extent(renderer).y1


@pytest.mark.parametrize("last", [600, 8000, 40000, 400000])
def test_the_updates_axis_labels_do_not_run_into_each_other(last):
    """updates_axis on a panel 4.6 inches wide (plot-training's): no two tick labels overlap, in thousands
    ("40k") where the axis reaches 10,000 (the default ticks every 5,000 printed 10000150002000025000...)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fairseq_rope_cli.common import updates_axis

    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    ax.plot([0, last], [3, 2])
    updates_axis(ax)
    fig.canvas.draw()
    low, high = ax.get_xlim()
    labels = [t for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high and t.get_text()]
    boxes = sorted((t.get_window_extent().x0, t.get_window_extent().x1) for t in labels)
    plt.close(fig)
    assert len(boxes) >= 3 and all(a[1] < b[0] for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in labels]
    texts = [t.get_text() for t in labels]
    assert all(t == "0" or t.endswith("k") for t in texts) == (last >= 10000), texts


def test_plot_training_errors(tmp_path):
    r = run(PLOT_TRAINING, f"a={tmp_path / 'none.log'}", "--out", tmp_path / "x.png", check=False)
    assert r.returncode == 1 and f"log of run 'a': {tmp_path / 'none.log'}" in r.stderr
    empty = tmp_path / "empty.log"
    empty.write_text("nothing to see\n")
    r = run(PLOT_TRAINING, f"a={empty}", "--out", tmp_path / "x.png", check=False)
    assert r.returncode == 1 and "no fairseq training statistics" in r.stderr and str(empty) in r.stderr
    assert not (tmp_path / "x.png").exists()


def write_valid_log(path, losses):
    """A fairseq-train JSON log with validations {update: nll_loss} (train_inner lines too, one per update),
    in a folder made for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for update, loss in losses.items():
        lines.append(f'2026-12-02 04:00:00 | INFO | train_inner | {{"epoch": 1, "loss": "{loss + 1}", '
                     f'"nll_loss": "{loss + 0.5}", "num_updates": "{update}"}}')
        lines.append(f'2026-12-02 04:00:01 | INFO | valid | {{"epoch": 1, "valid_loss": "{loss + 1}", '
                     f'"valid_nll_loss": "{loss}", "valid_num_updates": "{update}"}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_loss_at_equal_updates_gives_each_systems_seeds_mean_and_welchs_interval(tmp_path):
    """A NAME given once per seed is one system: the table at equal updates has its mean ± sd over seeds,
    the difference to the first system with the 95% interval of Welch's test (scipy's, recomputed here),
    and per seed the first validation at or below the first system's final mean; the default rows end at
    the last update every run has (a seed that stopped earlier bounds them)."""
    from scipy import stats

    base = {1: {100: 6.0, 200: 5.0, 300: 4.50, 400: 4.20}, 2: {100: 6.2, 200: 5.1, 300: 4.60, 400: 4.56},
            3: {100: 6.1, 200: 5.3, 300: 4.55, 400: 4.25}}
    rope = {1: {100: 5.8, 200: 4.6, 300: 4.25, 400: 4.0}, 2: {100: 5.9, 200: 4.8, 300: 4.30},
            3: {100: 5.7, 200: 4.7, 300: 4.15, 400: 4.1}}
    specs = [f"transformer={write_valid_log(tmp_path / f't{s}.log', v)}" for s, v in base.items()]
    specs += [f"rope={write_valid_log(tmp_path / f'r{s}.log', v)}" for s, v in rope.items()]
    out = tmp_path / "loss.md"
    run(PLOT_TRAINING, *specs, "--out", tmp_path / "c.png", "--loss", "nll_loss", "--out-md", out, "--title", "T")
    table = out.read_text()
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", table, re.M))
    assert sorted(map(int, rows)) == [100, 200, 300]  # rope's seed 2 stopped at 300
    for update in (100, 200, 300):
        b = [base[s][update] for s in (1, 2, 3)]
        r = [rope[s][update] for s in (1, 2, 3)]
        cells = rows[str(update)].split(" | ")
        assert cells[0] == f"{statistics.mean(b):.3f} ± {statistics.stdev(b):.3f}"
        low, high = stats.ttest_ind(r, b, equal_var=False).confidence_interval(0.95)
        assert cells[1] == (f"{statistics.mean(r):.3f} ± {statistics.stdev(r):.3f} "
                            f"({statistics.mean(r) - statistics.mean(b):+.3f} [{low:+.3f}, {high:+.3f}])")
    # the transformer's mean at 300 is 4.55: its seed 2 never reaches it (4.60, 4.56); rope's at 300 (4.6 at 200)
    target = statistics.mean(base[s][300] for s in (1, 2, 3))
    assert f"at or below transformer's mean at update 300 ({target:.3f})" in table
    assert "| transformer | 300, –, 300 |" in table and "| rope | 300, 300, 300 |" in table
    r = run(PLOT_TRAINING, *specs, "--out", tmp_path / "d.png", "--out-md", tmp_path / "x.md", "--at", "100,400",
            "--loss", "nll_loss", check=False)
    assert r.returncode == 1 and "not every run validated at update(s) 400" in r.stderr
    r = run(PLOT_TRAINING, specs[0], specs[0], "--out", tmp_path / "e.png", check=False)
    assert r.returncode == 1 and "the same log is given twice" in r.stderr


def test_tuning_table_says_when_a_choice_is_at_the_edge_of_the_learning_rates_tried():
    """A system whose lowest valid loss is at the largest (or smallest) of three or more learning rates gets
    a note that the best may lie beyond the grid; one whose best is inside it, or with two rates only, none."""
    from fairseq_rope_cli import tune

    points = [(system, lr, 250, loss, "") for system, losses in (("inside", (5.0, 4.0, 4.5)), ("edge", (5.0, 4.5, 4.0)),
                                                                 ("low", (3.0, 4.5, 4.0)))
              for lr, loss in zip(("1e-3", "2e-3", "4e-3"), losses)]
    points += [("two", "1e-3", 250, 5.0, ""), ("two", "2e-3", 250, 4.0, "")]
    table = tune.grid_table(points, tune.choose(points), 2000)
    notes = dict(re.findall(r"^- (\w+): (.*)$", table, re.M))
    assert notes["inside"] == "lr 2e-3, warm-up 250 (valid loss 4.000, 0.500 below the next)"
    assert notes["edge"].endswith("; the largest learning rate tried: the best may lie beyond it (extend TUNE_LRS)")
    assert notes["low"].startswith("lr 1e-3,") and "the smallest learning rate tried" in notes["low"]
    assert "beyond" not in notes["two"]


def law_drop(a, b, c, budget, last):
    """The relative drop of a + b (t/1000)^-c over the last `last` of `budget` updates (flat's criterion)."""
    def f(t):
        return a + b * (t / 1000) ** -c
    return (f((1 - last) * budget) - f(budget)) / f((1 - last) * budget)


def law_flat_from(a, b, c, last, drop, low, high):
    """The budget between low and high at which the law's drop crosses `drop`, by bisection on law_drop."""
    assert law_drop(a, b, c, low, last) > drop > law_drop(a, b, c, high, last)
    while high - low > 1e-3:
        mid = (low + high) / 2
        low, high = (mid, high) if law_drop(a, b, c, mid, last) > drop else (low, mid)
    return low


@pytest.mark.parametrize("a, b, c, last, drop", [
    (2.3, 3.0, 0.68, 0.2, 0.01), (2.3, 2.0, 0.62, 0.2, 0.01), (1.0, 5.0, 1.5, 0.2, 0.01),
    (3.5, 0.8, 0.3, 0.2, 0.005), (2.3, 3.0, 0.68, 0.5, 0.03), (0.4, 9.0, 1.1, 0.1, 0.002),
    (2.3, 3.0, 0.6834567, 0.2, 0.01),  # (an exponent between two points of the coarse grid)
])
def test_extrapolate_recovers_the_power_law_and_the_budget_at_which_it_is_flat(tmp_path, a, b, c, last, drop):
    """Validations on a + b (t/1000)^-c, at a run's irregular updates (every 200 and at epoch ends): the fit
    gives the law back, and the projected budget is where the law's own drop over the last `last` of the
    updates crosses `drop` (found here by bisection on the law, not by the tool's closed form)."""
    from fairseq_rope_cli import tune

    updates = sorted(set(range(6000, 30001, 200)) | set(range(5715, 30001, 715)))
    log = write_valid_log(tmp_path / "run" / "train.log", {u: a + b * (u / 1000) ** -c for u in updates})
    fa, fb, fc, sd, at_end = tune.power_law(updates, [a + b * (u / 1000) ** -c for u in updates])
    assert (fa, fb, fc) == pytest.approx((a, b, c), rel=2e-6) and sd < 1e-6 and at_end is None
    low = law_flat_from(a, b, c, last, drop, 30000.0, 3e7)
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"law={log.parent}", "--from", 8000, "--from", 15000,
            "--last", last, "--drop", drop, "--out-md", tmp_path / "x.md")
    lines_ = r.stdout.splitlines()
    assert [l.split(" on (")[0] for l in lines_] == [f"law: valid nll_loss from update {u}" for u in (8000, 15000)]
    for line in lines_:
        m = re.search(r"\((\d+) validations, last 30000\): ([\d.]+) \+ ([\d.]+) \(t/1000\)\^-([\d.]+), residual sd "
                      r"([\d.]+); flat at about ([\d,]+) updates \(x([\d.]+)\), where it is ([\d.]+); it tends to ([\d.]+) "
                      rf"\(criterion: < {100 * drop:g}% over the last {100 * last:g}%\)$", line)
        assert m, line
        assert [float(m[i]) for i in (2, 3, 4)] == pytest.approx([a, b, c], abs=0.0005) and float(m[5]) < 1e-4
        assert int(m[6].replace(",", "")) == pytest.approx(float(f"{low:.3g}"), abs=0.5)
        assert float(m[7]) == pytest.approx(low / 30000, abs=0.05)
        assert float(m[8]) == pytest.approx(a + b * (low / 1000) ** -c, abs=0.0005)
    assert int(re.search(r"from update 8000 on \((\d+) validations", lines_[0])[1]) == sum(u >= 8000 for u in updates)
    table = (tmp_path / "x.md").read_text()
    assert re.search(rf"^\| law \| 15000 \| {sum(u >= 15000 for u in updates)} \| {a:.3f} \| {b:.3f} \| {c:.3f} \| ",
                     table, re.M), table


def test_extrapolate_until_fits_the_validations_up_to_an_update_and_sets_the_prediction_beside_the_log(tmp_path):
    """--until 20000 on a run that follows a + b (t/1000)^-c to 20,000 updates and then sits 0.05 above it:
    the fit is the law's (the later validations left out), and the law's value at the last validation is
    printed beside the logged one; an --until before the first validation is an error naming both."""
    a, b, c = 2.3, 3.0, 0.68
    updates = list(range(4000, 30001, 200))
    write_valid_log(tmp_path / "run" / "train.log",
                    {u: a + b * (u / 1000) ** -c + (0.05 if u > 20000 else 0) for u in updates})
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'run'}", "--until", 20100,
            "--from", 8000, "--out-md", tmp_path / "x.md")
    assert r.stdout.startswith(f"x: valid nll_loss from update 8000 on ({len(range(8000, 20001, 200))} validations, "
                               f"last 20000): 2.300 + 3.000 (t/1000)^-0.680, residual sd 0.0000; "), r.stdout
    assert r.stdout.endswith(f"; at update 30000 it predicts {a + b * 30 ** -c:.3f}, the log has {a + b * 30 ** -c + 0.05:.3f}\n")
    assert f"| at update 30000 it predicts {a + b * 30 ** -c:.3f}, the log has {a + b * 30 ** -c + 0.05:.3f} |" in (tmp_path / "x.md").read_text()
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'run'}", "--out-png", tmp_path, check=False)
    assert r.returncode == 1 and f"--out-png {tmp_path} is a directory" in r.stderr and r.stdout == ""
    for until in (3000, 0):
        r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'run'}", "--until", until, check=False)
        assert r.returncode == 1 and f"--until {until}: {tmp_path / 'run'} has no validation at or before it (first: 4000)" in r.stderr


@pytest.mark.parametrize("a, b, c", [(2.0, 0.1, 1.5), (2.0, 1.0, 0.04)])
def test_extrapolate_says_when_the_law_is_flat_already(tmp_path, a, b, c):
    """A law already flat at the last validation: from the budget where its drop crosses 1% (found by
    bisection on the law), or at every budget where no window of a fifth drops 1% (1 - 0.8^0.04 < 1%)."""
    write_valid_log(tmp_path / "run" / "train.log", {u: a + b * (u / 1000) ** -c for u in range(1000, 30001, 500)})
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'run'}", "--from", 1000)
    if 1 - 0.8 ** c < 0.01:
        verdict = "flat by the law at every budget"
    else:
        verdict = f"flat by the law already (from {round(law_flat_from(a, b, c, 0.2, 0.01, 1.0, 30000.0)):,})"
    assert f"; {verdict}, where it is {a + b * 30 ** -c:.3f}; " in r.stdout, r.stdout


def test_extrapolate_on_noisy_validations_stays_near_the_law():
    """Validations with noise of sd 0.008 bits about a + b (t/1000)^-c (the spread of a real run's about its
    fit): the fitted limit and exponent stay near the law's."""
    from fairseq_rope_cli import tune

    rng = random.Random(3)
    updates = list(range(8000, 40001, 200))
    fa, fb, fc, sd, _ = tune.power_law(updates, [2.3 + 3.0 * (u / 1000) ** -0.68 + rng.gauss(0, 0.008) for u in updates])
    assert abs(fa - 2.3) < 0.1 and abs(fc - 0.68) < 0.15 and sd == pytest.approx(0.008, abs=0.002)


@pytest.mark.parametrize("law, message", [
    (lambda u: 2.0 + 0.00001 * u, "it does not fall (the best power law rises)"),
    (lambda u: 9.0 - 0.5 * math.log(u), "it does not fall like a power of the updates: the best exponent is the grid's smallest, 0.001"),
    (lambda u: 3.0 + 1e4 * (u / 1000) ** -7.0, "it does not fall like a power of the updates: the best exponent is the grid's largest, 5"),
    (lambda u: -1.0 + 3.0 * (u / 1000) ** -0.2, "the best power law tends to -1.000, at or below zero"),
])
def test_extrapolate_says_which_fit_gives_no_projection_and_still_projects_the_others(tmp_path, law, message):
    """A run whose loss rises, falls like a logarithm or heads below zero gets no projection, with the
    reason, exit status 3; the other run given is still projected."""
    for name, losses in (("bad", {u: law(u) for u in range(2000, 20001, 500)}),
                         ("good", {u: 2.3 + 3.0 * (u / 1000) ** -0.68 for u in range(2000, 20001, 500)})):
        write_valid_log(tmp_path / name / "train.log", losses)
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'bad'}", f"y={tmp_path / 'good'}",
            "--from", 2000, "--out-png", tmp_path / "p.png", check=False)
    assert r.returncode == 3 and r.stdout.startswith(
        f"x: valid nll_loss from update 2000 on (37 validations, last 20000): no projection: {message}"), r.stdout
    assert "\ny: valid nll_loss from update 2000 on (37 validations, last 20000): 2.300 + 3.000 (t/1000)^-0.680, " in r.stdout
    assert (tmp_path / "p.png").read_bytes().startswith(PNG_MAGIC)  # (the figure all the same)


def test_extrapolate_needs_four_validations_from_its_start_and_fits_each_start_once(tmp_path):
    write_valid_log(tmp_path / "run" / "train.log", {u: 2.0 + 3.0 * (u / 1000) ** -0.5 for u in range(100, 600, 100)})
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'run'}", "--from", 300, "--from", 100,
            "--from", 300, "--out-md", tmp_path / "x.md", check=False)
    assert r.returncode == 3 and r.stdout.splitlines()[1] == (
        "x: valid nll_loss from update 300 on (3 validations, last 500): no projection: a power law of three "
        "parameters needs at least 4 validations (an earlier --from)"), r.stdout
    assert len(r.stdout.splitlines()) == 2 and r.stdout.startswith("x: valid nll_loss from update 100 on (5 validations")
    assert len((tmp_path / "x.md").read_text().splitlines()[-1].split("|")) == len((tmp_path / "x.md").read_text().splitlines()[-3].split("|"))
    r = run(os.path.join(BIN, "fairseq-rope-tune"), "extrapolate", f"x={tmp_path / 'run'}", "--drop", "1.5", check=False)
    assert r.returncode == 1 and "--drop 1.5: expected a relative drop between 0 and 1" in r.stderr


# --------------------------------------------------------------------------- fairseq-rope-tune flat

TUNE = os.path.join(BIN, "fairseq-rope-tune")
MEANS = "each end of the window the mean of the {} validations up to it"


def noisy_run(tmp_path, seed=5, end=16000):
    """A run whose valid loss falls like a power law with noise of sd 0.008 bits, validated every 200 updates
    and at the end of each epoch (every 715), as fairseq logs it: {update: loss}."""
    rng = random.Random(seed)
    updates = sorted(set(range(200, end + 1, 200)) | set(range(715, end + 1, 715)))
    losses = {u: 2.3 + 3.0 * (u / 1000) ** -0.68 + rng.gauss(0, 0.008) for u in updates}
    write_valid_log(tmp_path / "run" / "train.log", losses)
    return losses


@pytest.mark.parametrize("mean_of", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("until", [None, 13100, 9000])
def test_flat_mean_of_takes_each_end_of_the_window_as_the_mean_of_the_validations_up_to_it(tmp_path, mean_of, until):
    """--mean-of K: the loss at the window's start (the validation nearest 80% of the last update) and at its
    end (the last validation, or the last at or before --until) is the mean of the K validations up to and
    including it; the drop between the two means decides, in the line and the table."""
    losses = noisy_run(tmp_path)
    updates = sorted(u for u in losses if until is None or u <= until)
    end = updates[-1]
    start = {None: 12800, 13100: 10400, 9000: 7200}[until]  # (80% of 16,000, 13,000 and 9,000)
    assert end * 0.8 == start and start in updates
    i = updates.index(start)
    before = statistics.fmean(losses[u] for u in updates[i - mean_of + 1:i + 1])
    after = statistics.fmean(losses[u] for u in updates[-mean_of:])
    drop = (before - after) / before
    args = ["flat", f"x={tmp_path / 'run'}", "--mean-of", mean_of, "--drop", 0.03, "--out-md", tmp_path / "f.md"]
    r = run(TUNE, *args, *(["--until", until] if until else []), check=False)
    verdict = "flat" if drop < 0.03 else "still improving"  # (both verdicts among the cases: drops of 2.6-3.7%)
    means = f" ({MEANS.format(mean_of)})" if mean_of > 1 else ""
    assert r.stdout == (f"x: valid nll_loss {before:.4f} at {start} -> {after:.4f} at {end}{means}: {100 * drop:+.2f}% "
                        f"lower, {verdict} (criterion: < 3% over the last 20%)\n"), r.stderr
    assert r.returncode == (0 if verdict == "flat" else 3)
    table = (tmp_path / "f.md").read_text()
    assert table.splitlines()[0] == (
        "Flat: valid nll_loss less than 3% lower (relative) over the last 20% of the updates (fairseq-rope-tune flat), "
        f"each run at its last validation{f' at or before update {until}' if until else ''}"
        f"{'; ' + MEANS.format(mean_of) if mean_of > 1 else ''}.")
    assert f"| x | run | {start} | {before:.4f} | {end} | {after:.4f} | {100 * drop:+.2f}% | {verdict} |" in table


@pytest.mark.parametrize("last, start", [(0.2, 700), (0.25, 700), (0.3, 700), (0.35, 700), (0.4, 500)])
def test_flat_window_starts_at_the_validation_nearest_its_fraction_the_earlier_on_a_tie(tmp_path, last, start):
    """Validations at 500, 700, 900 and 1000: the window of the last 20% starts at 800, as near 700 as 900
    (the earlier, 700, is taken); 25% (750) and 30% (700) also give 700, 35% (650) 700, 40% (600) 500."""
    losses = {500: 3.0, 700: 2.9, 900: 2.85, 1000: 2.8}
    write_valid_log(tmp_path / "run" / "train.log", losses)
    r = run(TUNE, "flat", f"x={tmp_path / 'run'}", "--last", last, check=False)
    drop = (losses[start] - 2.8) / losses[start]
    assert r.stdout.startswith(f"x: valid nll_loss {losses[start]:.4f} at {start} -> 2.8000 at 1000: {100 * drop:+.2f}% lower")


def test_flat_mean_of_is_not_moved_by_one_noisy_validation(tmp_path):
    """A run falling 1.2% over its last fifth whose validation at the window's start happens to lie 0.02 low
    (a single validation's noise): flat by single validations (0.40%), still improving by the mean of five
    (2.499 -> 2.473, 1.04%)."""
    losses = {u: 2.5 * (1 - 0.012 * (u - 16000) / 4000) for u in range(200, 20001, 200)}
    losses[16000] -= 0.02
    write_valid_log(tmp_path / "run" / "train.log", losses)
    single = run(TUNE, "flat", f"x={tmp_path / 'run'}", check=False)
    assert single.returncode == 0 and "+0.40% lower, flat" in single.stdout, single.stdout
    five = run(TUNE, "flat", f"x={tmp_path / 'run'}", "--mean-of", 5, check=False)
    assert five.returncode == 3 and five.stdout == (
        f"x: valid nll_loss 2.4990 at 16000 -> 2.4730 at 20000 ({MEANS.format(5)}): +1.04% lower, still improving "
        "(criterion: < 1% over the last 20%)\n")


@pytest.mark.parametrize("args, up_to, after", [
    (("--mean-of", 3), 8, 2),  # the window starts at 8,000: 2 validations after it
    (("--mean-of", 9), 8, 2),
    (("--mean-of", 2, "--last", 0.9), 1, 9),  # starts at 1,000: 1 validation up to it
    (("--mean-of", 3, "--last", 0.75), 2, 8),  # starts at 2,000 (the earlier of 2,000 and 3,000, both 500 from 2,500)
])
def test_flat_needs_k_validations_on_each_side_of_the_windows_start(tmp_path, args, up_to, after):
    """--mean-of K needs K validations up to the window's start and K after it (two means sharing a
    validation measure less than the drop): too few on either side is an error naming the folder, the
    validations on each side and what is needed."""
    write_valid_log(tmp_path / "run" / "train.log", {u: 3 - u / 10000 for u in range(1000, 10001, 1000)})
    r = run(TUNE, "flat", f"x={tmp_path / 'run'}", *args, check=False)
    start = 1000 * up_to
    assert r.returncode == 1 and r.stdout == "" and (
        f"{tmp_path / 'run'}: {up_to} validation(s) up to the window's start (update {start}) and {after} after it; "
        f"--mean-of {args[1]} needs {args[1]} on each side (a smaller --mean-of, or another --last)") in r.stderr, r.stderr


def test_flat_errors_name_the_flag_or_the_folder(tmp_path):
    """Two validations the least (here --until leaves one), a K under 1 and an --until under 1: errors."""
    write_valid_log(tmp_path / "run" / "train.log", {u: 3 - u / 10000 for u in range(1000, 10001, 1000)})
    assert run(TUNE, "flat", f"x={tmp_path / 'run'}", "--mean-of", 2, check=False).returncode == 3
    r = run(TUNE, "flat", f"x={tmp_path / 'run'}", "--until", 1999, check=False)
    assert r.returncode == 1 and (f"{tmp_path / 'run'}: its train.log has 1 validation(s) at or before update 1999; "
                                  "flat needs two") in r.stderr, r.stderr
    for flag in ("--mean-of", "--until"):
        for k in (0, -2):
            r = run(TUNE, "flat", f"x={tmp_path / 'run'}", flag, k, check=False)
            assert r.returncode == 1 and f"{flag} {k}: expected a" in r.stderr and "1 or more" in r.stderr, r.stderr


# --------------------------------------------------------------------------- length_study_data.py

LENGTH_DATA = os.path.join(REPO, "recipes", "wmt14_en_de", "length_study_data.py")
MAKE_SAMPLE = os.path.join(REPO, "recipes", "wmt14_en_de", "make_sample_corpus.py")


def test_length_study_corpus(tmp_path):
    """Train/valid only up to the limit; test stratified by bucket, unseen in the sample; deterministic."""
    sample = tmp_path / "sample"
    run(MAKE_SAMPLE, "--out-dir", sample, "--train", 400, "--valid", 30, "--test", 30)
    args = ["--sample-dir", sample, "--max-train-words", 8, "--buckets", "8,16", "--per-bucket", 20, "--pool", 400]
    run(LENGTH_DATA, *args, "--out-dir", tmp_path / "a")
    run(LENGTH_DATA, *args, "--out-dir", tmp_path / "b")
    for name in ("train.en", "train.de", "valid.en", "valid.de", "test.en", "test.de"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    out = tmp_path / "a"
    train = list(zip(lines(out / "train.en"), lines(out / "train.de")))
    kept = [p for p in zip(lines(sample / "train.en"), lines(sample / "train.de")) if len(p[0].split()) <= 8]
    assert train == kept and len(train) > 50
    assert all(len(en.split()) <= 8 for en in lines(out / "valid.en"))
    test = lines(out / "test.en")
    assert len(test) == len(lines(out / "test.de")) == 60
    sizes = [len(s.split()) for s in test]
    assert all(n <= 8 for n in sizes[:20]) and all(8 < n <= 16 for n in sizes[20:40]) and all(n > 16 for n in sizes[40:])
    seen = set(lines(sample / "train.en") + lines(sample / "valid.en") + lines(sample / "test.en"))
    assert not seen & set(test)
    assert "1-8: 20, 9-16: 20, 17+: 20" in (out / "README").read_text()


def test_compare_counts_hypotheses_that_repeat_a_word_four_times():
    """The share of hypotheses with one word 4+ times in a row, overall and per bucket: a loop
    ("die die die die") counts, three in a row or the same word apart do not."""
    from fairseq_rope_cli.compare import compare, repeats

    assert repeats("und die die die die Katze") and not repeats("die die die Katze die")
    assert not repeats("a b a b a b a b") and not repeats("")
    src = ["a b", "c d", "e f g h i j k", "l m n o p q r"]
    refs = ["die Katze", "der Hund", "es war einmal ein Haus", "und noch ein Haus"]
    hyps = ["die die die die", "der Hund", "es es es war", "und noch noch noch noch ein Haus"]
    result = compare(src, refs, [("run", [hyps])], [2], n_samples=10)  # one run, one seed
    assert result["overall"]["run"]["repeat_share"] == 0.5
    assert [b["scores"]["run"]["repeat_share"] for b in result["buckets"]] == [0.5, 0.5]


def test_best_above_picks_the_run_with_the_best_bleu_on_the_longer_sentences(tmp_path):
    """--best-above N: the run whose sacreBLEU is highest on the sentences of more than N words (not
    overall), named in the JSON ("best") and under the table, with every run's BLEU on them."""
    src = write(tmp_path / "src", ["a b", "c d", "e f g h i j k l", "m n o p q r s t"])
    ref = write(tmp_path / "ref", ["die Katze", "der Hund", "es war einmal ein Haus am See", "und noch ein Haus am See"])
    short = write(tmp_path / "short", ["die Katze", "der Hund", "es war", "und"])  # right on short sentences
    long_ = write(tmp_path / "long", ["Katze", "Hund", "es war einmal ein Haus am See", "und noch ein Haus am See"])
    out = run(COMPARE, "--src", src, "--ref", ref, "--hyp", f"short={short}", "--hyp", f"long={long_}",
              "--buckets", "2", "--best-above", 2, "--out-json", tmp_path / "c.json", "--bootstrap-samples", 10)
    result = json.loads((tmp_path / "c.json").read_text())
    assert result["best"] == "long" and result["best_above"]["sentences"] == 2
    assert result["best_above"]["bleu"]["long"] == pytest.approx(100.0)
    assert result["best_above"]["bleu"]["short"] == pytest.approx(sacrebleu.corpus_bleu(
        ["es war", "und"], [["es war einmal ein Haus am See", "und noch ein Haus am See"]]).score)
    assert result["overall"]["short"]["bleu"] != result["overall"]["long"]["bleu"]
    assert "Best BLEU on the 2 sentences of more than 2 words: **long**" in out.stdout
    bad = run(COMPARE, "--src", src, "--ref", ref, "--hyp", f"short={short}", "--best-above", 20, check=False)
    assert bad.returncode == 1 and "--best-above 20: no source sentence has more than 20 words" in bad.stderr


def write(path, lines_):
    path.write_text("".join(line + "\n" for line in lines_), encoding="utf-8")
    return path


def test_identical_runs_are_not_significantly_different(tmp_path):
    """A run whose hypotheses are the first run's has p = 1 (sacrebleu's bootstrap alone reports
    its smallest p-value, 1/(n+1), for a difference of exactly zero)."""
    src = write(tmp_path / "src", ["a b", "c d", "e f"])
    ref = write(tmp_path / "ref", ["die Katze", "der Hund", "es war"])
    hyp = write(tmp_path / "hyp", ["die Katze", "Hund", "es war einmal"])
    run(COMPARE, "--src", src, "--ref", ref, "--hyp", f"a={hyp}", "--hyp", f"b={hyp}", "--buckets", "2",
        "--out-json", tmp_path / "c.json", "--bootstrap-samples", 100)
    result = json.loads((tmp_path / "c.json").read_text())
    assert result["overall"]["b"]["bleu_p"] == result["overall"]["b"]["chrf_p"] == 1.0
