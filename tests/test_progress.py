"""fairseq-rope-progress: the whole output of a command to its log, progress lines to the terminal."""

import sys
import textwrap

import pytest

from conftest import run_main
from fairseq_rope_cli import progress

# fairseq-train's log lines, as --log-format json and --log-format simple print them
JSON_TRAIN = textwrap.dedent("""\
    import sys, time
    print("2026-11-25 10:00:00 | INFO | fairseq_cli.train | {'_name': 'adam', 'lr': [0.001]}", file=sys.stderr)
    for n in (2, 4, 6):
        print(f'2026-11-25 10:00:0{n} | INFO | train_inner | {{"epoch": 1, "update": 0.{n}, "loss": "{9 - n}.5", '
              f'"ups": "3.1", "num_updates": "{n}", "wall": "{n}"}}', flush=True)
        time.sleep(0.05)
    print('2026-11-25 10:00:07 | INFO | valid | {"epoch": 1, "valid_loss": "2.75", "valid_num_updates": "6"}')
    print("2026-11-25 10:00:08 | INFO | fairseq_cli.train | done training in 7.9 seconds", file=sys.stderr)
    """)
SIMPLE_TRAIN = textwrap.dedent("""\
    print("2026-11-25 10:00:02 | INFO | train_inner | epoch 001:      4 / 10 loss=6.25, nll_loss=6.1, ups=2.5, num_updates=4, lr=0.001")
    print("2026-11-25 10:00:03 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 5.5 | nll_loss 5.2 | num_updates 4")
    """)
GENERATE = textwrap.dedent("""\
    import sys
    print("some warning", file=sys.stderr)
    for i in range(3):
        print(f"S-{i}\\tsource {i}"); print(f"H-{i}\\t-0.5\\thyp {i}")
    print("Generate test with beam=4: BLEU4 = 10.00")
    """)


def script(tmp_path, name, code):
    path = tmp_path / name
    path.write_text(code)
    return [sys.executable, str(path)]


def test_training_progress_from_json_and_simple_logs(tmp_path):
    log = tmp_path / "run" / "train.log"
    proc = run_main(progress.main, "--log", log, "--label", "[train]", "--",
                    *script(tmp_path, "train.py", JSON_TRAIN), "--max-update", "6")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("[train] update 6/6 (100%), train loss 3.5, valid loss 2.75, ")
    assert "updates/s, elapsed 0m0" in lines[0] and "left" not in lines[0]
    text = log.read_text()  # everything, both streams, in the log
    assert "'_name': 'adam'" in text and text.count("train_inner") == 3 and "done training" in text
    proc = run_main(progress.main, "--log", log, "--", *script(tmp_path, "simple.py", SIMPLE_TRAIN),
                    "--max-update=10")
    assert proc.stderr.startswith("update 4/10 (40%), train loss 6.25, valid loss 5.5, measuring speed, elapsed")
    assert log.read_text().startswith(text)  # appended, not overwritten


def test_progress_lines_at_most_every_interval(tmp_path):
    proc = run_main(progress.main, "--log", tmp_path / "train.log", "--interval", "0.04", "--",
                    *script(tmp_path, "train.py", JSON_TRAIN), "--max-update", "12")
    lines = proc.stderr.splitlines()
    assert 2 <= len(lines) <= 5, lines
    assert any("update 4/12 (33%)" in line and "left ~" in line for line in lines), lines


def test_translation_progress_and_atomic_stdout(tmp_path):
    out, log = tmp_path / "generate.out", tmp_path / "generate.log"
    proc = run_main(progress.main, "--log", log, "--stdout", out, "--total", "3", "--",
                    *script(tmp_path, "generate.py", GENERATE))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("sentences 3/3 (100%), ") and "sentences/s" in proc.stderr
    assert out.read_text().count("H-") == 3 and out.read_text().endswith("BLEU4 = 10.00\n")
    assert log.read_text() == "some warning\n" and not (tmp_path / "generate.out.tmp").exists()


def test_failure_shows_the_logs_end_and_keeps_the_status(tmp_path):
    out, log = tmp_path / "generate.out", tmp_path / "x.log"
    failing = "import sys\nfor i in range(50): print('line', i, file=sys.stderr)\nprint('S-0', flush=True)\nsys.exit(3)\n"
    proc = run_main(progress.main, "--log", log, "--stdout", out, "--total", "5", "--tail", "4", "--",
                    *script(tmp_path, "fail.py", failing))
    assert proc.returncode == 3
    assert f"FAILED (exit status 3): {sys.executable}; the last 4 lines of {log}:" in proc.stderr
    assert proc.stderr.rstrip().endswith("    line 46\n    line 47\n    line 48\n    line 49")
    assert not out.exists() and not (tmp_path / "generate.out.tmp").exists()  # no partial output
    assert log.read_text().count("line") == 50


def test_verbose_streams_everything(tmp_path):
    proc = run_main(progress.main, "--log", tmp_path / "train.log", "--verbose", "--",
                    *script(tmp_path, "train.py", JSON_TRAIN), "--max-update", "6")
    assert "'_name': 'adam'" in proc.stderr and proc.stderr.count("train_inner") == 3


@pytest.mark.parametrize("args, message", [
    (["--log", "x.log"], "no command given: put it after --"),
    (["--log", "x.log", "--total", "0", "--", "true"], "--total must be >= 1 (the sentences to translate); got 0"),
    (["--log", "x.log", "--", "no-such-command-here"], "cannot run no-such-command-here"),
])
def test_bad_input_is_named(tmp_path, args, message):
    proc = run_main(progress.main, *[str(tmp_path / a) if a == "x.log" else a for a in args])
    assert proc.returncode == 1 and message in proc.stderr


def test_speed_and_time_left_count_from_the_first_update_seen(monkeypatch):
    """updates/s is measured from the first update this command saw (not from its start, which
    includes fairseq's start-up), and the time left is the remaining updates at that speed."""
    clock = iter([100.0, 110.0, 112.0, 112.0])  # start; first log line (update 10); update 50; now
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    state = progress.Progress(["fairseq-train", "--max-update", "250"], None)
    state.read('| INFO | train_inner | {"loss": "5.0", "num_updates": "10"}', "stderr")
    state.read('| INFO | train_inner | {"loss": "4.0", "num_updates": "50"}', "stderr")
    assert state.line() == "update 50/250 (20%), train loss 4.0, 20.00 updates/s, elapsed 0m12s, left ~0m10s"
