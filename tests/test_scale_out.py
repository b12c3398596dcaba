"""Distributed training on the CPU and crash recovery, through the recipe's shell steps.

Two fairseq-train processes (gloo) must train exactly like one process accumulating the same
two batches per update; a training run SIGKILLed at a random moment must, once train.sh is run
again, end with the parameters of a run that was never interrupted; averaging and evaluation
killed midway must leave nothing partial under a final name.
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from conftest import free_port, model_of, run_tool
from test_recipes import RECIPE, REPO, TINY_MODEL, forked_commands, lines, make_corpus, recipe_env, step

from fairseq_rope_checkpoints import load_checkpoint


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    base = tmp_path_factory.mktemp("scale_out")
    raw = make_corpus(base / "raw", train=300)
    env = recipe_env(base / "work", RAW_DIR=raw, BPE_MERGES=150, ARCH="rope_transformer",
                     EXTRA_TRAIN_ARGS=TINY_MODEL, WARMUP_UPDATES=2, LR=1e-3, MAX_TOKENS=500, LOG_INTERVAL=1)
    step("prepare.sh", forked_commands(env))
    return dict(work=base / "work", env=env)  # (the kills' runs: fairseq's commands as installed)


def max_difference(a, b):
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def updates_of(path):
    return load_checkpoint(str(path))["optimizer_history"][-1]["num_updates"]


# fairseq-train as installed, except that every rank also dumps its model after each checkpoint
# (fairseq saves rank 0's only): put first on PATH, train.sh runs it for every rank
RANK_DUMPING_TRAIN = """#!{python}
import os, sys, torch
from fairseq import checkpoint_utils
from fairseq_cli import train

save_checkpoint = checkpoint_utils.save_checkpoint

def save_checkpoint_and_dump_rank(cfg, trainer, epoch_itr, val_loss):
    result = save_checkpoint(cfg, trainer, epoch_itr, val_loss)
    name = f"rank{{trainer.data_parallel_rank}}_update{{trainer.get_num_updates()}}.pt"
    torch.save(trainer.get_model().state_dict(), os.path.join(os.environ["RANK_DUMP_DIR"], name))
    return result

checkpoint_utils.save_checkpoint = save_checkpoint_and_dump_rank
sys.exit(train.cli_main())
"""


# two ranks, as test_two_cpu_processes_... compares them with one process, and the run that
# test_rank_killed_... must end with when a rank is killed and the run resumed
RANKS = dict(CPU_WORKERS="2", UPDATE_FREQ="1", DROPOUT="0", MAX_UPDATE="20", SAVE_INTERVAL_UPDATES="5")


@pytest.fixture(scope="module")
def two_ranks(prepared, tmp_path_factory):
    """CPU_WORKERS=2, never interrupted, every rank dumping its model after each checkpoint (RANK_DUMPING_TRAIN):
    (train.sh's process, its save dir, the dumps' dir)."""
    bindir, dumps = tmp_path_factory.mktemp("rank_dumping_bin"), tmp_path_factory.mktemp("rank_dumps")
    (bindir / "fairseq-train").write_text(RANK_DUMPING_TRAIN.format(python=sys.executable))
    (bindir / "fairseq-train").chmod(0o755)
    proc = step("train.sh", dict(prepared["env"], **RANKS, RUN_NAME="two_ranks", RANK_DUMP_DIR=str(dumps),
                                 MASTER_PORT=str(free_port()),
                                 PATH=f"{bindir}:{os.path.dirname(sys.executable)}:{os.environ['PATH']}"))
    return proc, prepared["work"] / "checkpoints" / "two_ranks", dumps


def test_two_cpu_processes_train_like_one_process_with_update_freq_2(prepared, two_ranks):
    """CPU_WORKERS=2 (2 ranks x 1 batch per update) against CPU_WORKERS=1 with UPDATE_FREQ=2: fairseq
    shards the same shuffled batch list across ranks (rank r takes batches r, r+2, ...) and
    --update-freq groups consecutive batches, so with the same seed, --max-tokens and no dropout
    every update sees the same two batches; gradients are summed and divided by the same sample size."""
    proc, two, dumps = two_ranks
    assert "on CPU (2 process(es))" in proc.stderr and "500 tokens/batch x update-freq 1 x 2 worker(s)" in proc.stderr
    assert "distributed init (rank 0)" in (two / "train.log").read_text()
    assert "distributed init (rank 1)" in (two / "train.rank1.log").read_text()
    step("train.sh", forked_commands(dict(prepared["env"], **dict(RANKS, CPU_WORKERS="1", UPDATE_FREQ="2"),
                                          RUN_NAME="one_rank")))
    for update in (5, 10, 15, 20):
        rank0 = torch.load(dumps / f"rank0_update{update}.pt")
        rank1 = torch.load(dumps / f"rank1_update{update}.pt")
        assert max_difference(rank0, rank1) == 0.0, f"ranks differ after update {update}"
    one = prepared["work"] / "checkpoints" / "one_rank"
    assert updates_of(two / "checkpoint_last.pt") == updates_of(one / "checkpoint_last.pt") == 20
    assert max_difference(model_of(two / "checkpoint_last.pt"), rank0) == 0.0
    first = next(two.glob("checkpoint_*_5.pt"))
    assert max_difference(model_of(first), model_of(two / "checkpoint_last.pt")) > 1e-4  # it trained
    # the two ways give the same weights, bit for bit: the sums of two gradients are the same float operations
    assert max_difference(model_of(first), model_of(one / first.name)) == 0.0
    assert max_difference(model_of(two / "checkpoint_last.pt"), model_of(one / "checkpoint_last.pt")) == 0.0


def test_cpu_workers_refused_with_gpus_and_failing_rank_stops_all(prepared):
    env = dict(prepared["env"], RUN_NAME="bad_workers", MAX_UPDATE="2")
    proc = step("train.sh", dict(env, CPU_WORKERS="2", NGPU="2", CUDA_VISIBLE_DEVICES="0,1", DRY_RUN="1"), ok=False)
    assert "CPU_WORKERS=2 is for training on the CPU (NGPU=0); found NGPU=2" in proc.stderr
    proc = step("train.sh", dict(env, CPU_WORKERS="two"), ok=False)
    assert "CPU_WORKERS must be an integer >= 1, got 'two'" in proc.stderr
    # a rank that cannot start (its port is taken by a listening socket) ends the whole run
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        start = time.time()
        proc = step("train.sh", dict(env, CPU_WORKERS="2", MASTER_PORT=str(taken.getsockname()[1])), ok=False,
                    timeout=300)
    assert "a training process failed" in proc.stderr
    assert time.time() - start < 240


RUN = dict(MAX_UPDATE="60", SAVE_INTERVAL_UPDATES="5", KEEP_INTERVAL_UPDATES="3", DROPOUT="0.1")


@pytest.fixture(scope="module")
def uninterrupted(prepared):
    """The reference run, never interrupted (its commands forked: the killed runs' are as installed)."""
    env = dict(forked_commands(prepared["env"]), RUN_NAME="uninterrupted", **RUN)
    save = prepared["work"] / "checkpoints" / "uninterrupted"
    proc = subprocess.Popen(["bash", os.path.join(RECIPE, "train.sh")], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not (save / "checkpoint_last.pt").exists() and proc.poll() is None:
        time.sleep(0.01)
    first = time.time()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return dict(model=model_of(save / "checkpoint_last.pt"), window=time.time() - first, save=save)


SEEDS = (1, 9, 6)  # the kills: after updates 13, 34 and 55 of 60 (+ 0.17 s, 0.18 s, 0.17 s)


@pytest.fixture(scope="module")
def killed_and_resumed(prepared, uninterrupted):
    """One run per seed, SIGKILLed (train.sh's whole process group, as a power cut would) at a moment
    drawn over the whole run: once its log shows update U, U uniform in 5 .. 59 (from the first
    checkpoint to the last update), plus a delay uniform in 0 .. 0.3 s, so that kills fall in
    updates, in checkpoint writes and in fairseq's copy to checkpoint_last.pt; then train.sh is run
    again. The runs go side by side; moments are counted in updates, not seconds, so that the load
    of the machine does not move them."""
    runs = {}
    for seed in SEEDS:
        env = dict(prepared["env"], RUN_NAME=f"killed{seed}", **RUN)
        proc = subprocess.Popen(["bash", os.path.join(RECIPE, "train.sh")], env=env, cwd=REPO,
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        draw = random.Random(seed)
        runs[seed] = dict(env=env, proc=proc, save=prepared["work"] / "checkpoints" / f"killed{seed}", killed=None,
                          update=draw.randint(5, 59), delay=draw.uniform(0, 0.3))
    deadline = time.time() + 600
    while any(run["killed"] is None for run in runs.values()):
        for seed, run in runs.items():
            if run["killed"] is not None:
                continue
            log = run["save"] / "train.log"
            if "reached" not in run and log.exists() and \
                    int(max(re.findall(r'"num_updates": "([0-9]+)"', log.read_text()), key=int, default=0)) >= run["update"]:
                run["reached"] = time.time()
            if "reached" in run and time.time() - run["reached"] >= run["delay"]:
                assert run["proc"].poll() is None, f"run {seed} ended before the kill"
                os.killpg(run["proc"].pid, signal.SIGKILL)
                run["proc"].wait()
                run["killed"] = updates_of_any(run["save"])
            assert run["killed"] is not None or run["proc"].poll() is None, f"run {seed} ended before its kill"
        assert time.time() < deadline
        time.sleep(0.005)
    for run in runs.values():
        assert not (run["save"] / ".done").exists()
        # (run again as a user would after the kill; its commands forked: nothing kills this one)
        run["resume"] = subprocess.Popen(["bash", os.path.join(RECIPE, "train.sh")], env=forked_commands(run["env"]),
                                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for run in runs.values():
        run["stdout"], run["stderr"] = run["resume"].communicate(timeout=600)
        assert run["resume"].returncode == 0, run["stderr"][-3000:]
    return runs


def updates_of_any(save):
    """The update count of checkpoint_last.pt, or of the newest loadable numbered checkpoint where
    checkpoint_last.pt was cut mid-copy (what train.sh resumes from)."""
    try:
        return updates_of(save / "checkpoint_last.pt")
    except Exception:
        pass
    counts = []
    for path in save.glob("checkpoint_*_*.pt"):
        try:
            counts.append(updates_of(path))
        except Exception:
            pass
    return max(counts, default=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_training_killed_at_random_moment_resumes_to_uninterrupted_result(killed_and_resumed, uninterrupted, seed):
    """Running train.sh again after the kill resumes from checkpoint_last.pt and ends with the
    uninterrupted run's parameters, bit for bit: fairseq restores the data iterator mid-epoch, the
    optimizer and the scheduler and re-seeds dropout every update, and the translation_resumable
    task builds every epoch's batches as the uninterrupted run did."""
    run = killed_and_resumed[seed]
    assert run["update"] - 5 <= run["killed"] <= run["update"] + 10  # the checkpoint before the kill
    assert f"resuming from {run['save']}/checkpoint_last.pt ({run['killed']} updates)" in run["stderr"]
    if run["killed"] == 60:  # killed after fairseq-train ended, before train.sh marked the run done
        assert "checkpoint_last.pt already holds update 60: fairseq-train is not run again" in run["stderr"]
    else:  # from where it was killed, not from scratch
        loaded = re.findall(r"Loaded checkpoint \S+checkpoint_last.pt \(epoch [0-9]+ @ ([0-9]+) updates\)",
                            (run["save"] / "train.log").read_text())  # fairseq's output: the resumed run's is last
        assert loaded and int(loaded[-1]) == run["killed"]
    assert updates_of(run["save"] / "checkpoint_last.pt") == 60
    assert max_difference(model_of(run["save"] / "checkpoint_last.pt"), uninterrupted["model"]) == 0.0


def test_rank_killed_mid_training_stops_the_others_and_the_rerun_resumes_to_the_uninterrupted_result(prepared,
                                                                                                      two_ranks):
    """CPU_WORKERS=2: rank 1 SIGKILLed in the middle of training (once rank 0 has logged update 10 of
    20): train.sh stops rank 0 and fails at once, naming the logs, leaving no process running; run
    again, it resumes from the last checkpoint and ends with the uninterrupted run's weights (two_ranks)."""
    reference = two_ranks[1]
    save = prepared["work"] / "checkpoints" / "rank_killed"
    env = dict(prepared["env"], **RANKS, RUN_NAME="rank_killed", MASTER_PORT=str(free_port()))
    proc = subprocess.Popen(["bash", os.path.join(RECIPE, "train.sh")], env=env, cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = save / "train.log"
    while not (log.exists() and re.search(r'"num_updates": "1[0-9]"', log.read_text())):
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        time.sleep(0.01)
    rank1 = subprocess.run(["pgrep", "-g", str(proc.pid), "-f", "--", "--distributed-rank 1"], capture_output=True,
                           text=True).stdout.split()
    assert rank1, "rank 1 not found"
    killed_at = time.time()
    for pid in rank1:
        os.kill(int(pid), signal.SIGKILL)
    assert proc.wait(timeout=120) == 1
    assert time.time() - killed_at < 60  # rank 0 does not wait for its peer for long
    stderr = proc.stderr.read()
    assert "a training process failed" in stderr and f"{save}/train.rank*.log" in stderr
    for _ in range(100):  # a process already exiting (no command line left) gets 10 s to be gone
        ps = subprocess.run(["ps", "-o", "stat=,cmd=", "-g", str(proc.pid)], capture_output=True, text=True).stdout
        running = [line for line in ps.splitlines() if line.strip() and not line.lstrip().startswith("Z")]  # not exited
        if not running:
            break
        time.sleep(0.1)
    assert not running, f"processes of the failed run still running: {running}"
    killed = updates_of_any(save)
    assert 5 <= killed < 20
    resumed = step("train.sh", forked_commands(dict(env, MASTER_PORT=str(free_port()))))  # (no kill: forked)
    assert f"resuming from {save}/checkpoint_last.pt ({killed} updates)" in resumed.stderr
    assert updates_of(save / "checkpoint_last.pt") == 20
    assert max_difference(model_of(save / "checkpoint_last.pt"), model_of(reference / "checkpoint_last.pt")) == 0.0


def session_processes(sid):
    """The processes still running (not zombies) in session ``sid``: 'pid command' lines."""
    ps = subprocess.run(["ps", "-ww", "-eo", "sid=,stat=,pid=,args="], capture_output=True, text=True).stdout
    return [" ".join(fields[2:]) for fields in (line.split() for line in ps.splitlines())
            if fields and fields[0] == str(sid) and not fields[1].startswith("Z")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_multi_process_recipe_leaves_none_of_its_processes(prepared, sig):
    """train.sh with CPU_WORKERS=2 stopped while its ranks train (SIGTERM as `kill` sends it, SIGINT as
    Ctrl-C does to the script): it exits, and within seconds no process of its session is left, rank 0's
    fairseq-rope-progress and fairseq-train included."""
    env = dict(prepared["env"], CPU_WORKERS="2", UPDATE_FREQ="1", MAX_UPDATE="100000", SAVE_INTERVAL_UPDATES="1000",
               RUN_NAME=f"stopped_{sig.name}", MASTER_PORT=str(free_port()))
    log = prepared["work"] / "checkpoints" / env["RUN_NAME"] / "train.log"
    # the signal's default disposition, whatever this test inherited: a suite started as a background job
    # (or by nohup) ignores SIGINT, and bash cannot undo an ignore it is started with
    proc = subprocess.Popen(["bash", os.path.join(RECIPE, "train.sh")], env=env, cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    try:
        while not (log.exists() and '"num_updates": "2"' in log.read_text()):
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            time.sleep(0.05)
        assert any("--distributed-rank 1" in p for p in session_processes(proc.pid))
        proc.send_signal(sig)
        status = proc.wait(timeout=60)
        deadline = time.time() + 30
        while session_processes(proc.pid) and time.time() < deadline:
            time.sleep(0.2)
        left = session_processes(proc.pid)
        assert not left, f"still running after train.sh stopped: {left}"
    finally:  # whatever failed, leave nothing to the rest of the suite
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)])
    assert status == 128 + sig  # as a shell reports a command stopped by the signal


def test_truncated_checkpoint_last_is_restored_from_newest_complete_checkpoint(prepared, uninterrupted,
                                                                                killed_and_resumed):
    """fairseq copies checkpoint_<e>_<u>.pt to checkpoint_last.pt non-atomically: a kill during the
    copy leaves it truncated. train.sh resumes from the newest complete numbered checkpoint (here
    update 55, epochs into the run) and still ends with the uninterrupted run's parameters."""
    run = killed_and_resumed[SEEDS[0]]
    env = forked_commands(run["env"])  # (no kill here)
    save, last = run["save"], run["save"] / "checkpoint_last.pt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    next(save.glob("checkpoint_*_60.pt")).unlink()
    newest = next(save.glob("checkpoint_*_55.pt"))
    (save / ".done").unlink()
    proc = step("train.sh", env)
    assert f"cannot load {last}" in proc.stderr
    assert f"{last} was damaged (kept as checkpoint_last.pt.damaged): restored from {newest}" in proc.stderr
    assert re.search(r"Loaded checkpoint \S+checkpoint_last.pt \(epoch [0-9]+ @ 55 updates\)", (save / "train.log").read_text())
    assert (save / "checkpoint_last.pt.damaged").read_bytes() == data[: len(data) // 2]
    assert max_difference(model_of(last), uninterrupted["model"]) == 0.0
    # finished but not marked done (killed between fairseq-train's end and train.sh's): fairseq-train
    # would run one more update before checking --max-update, so train.sh does not start it
    (save / ".done").unlink()
    proc = step("train.sh", env)
    assert "checkpoint_last.pt already holds update 60: fairseq-train is not run again" in proc.stderr
    assert updates_of(last) == 60 and (save / ".done").exists()
    # nothing complete left to resume from: the error names the file and what to do
    for path in save.glob("checkpoint_*.pt"):
        path.write_bytes(b"not a checkpoint")
    proc = step("train.sh", dict(env, MAX_UPDATE="70", ALLOW_CHANGED_SETTINGS="1"), ok=False)
    assert f"{last} is damaged and {save} holds no complete checkpoint_<epoch>_<update>.pt" in proc.stderr


def content(path):
    """What a complete output holds, without what differs between identical runs (timings, dates)."""
    if path.suffix == ".pt":
        return {k: v.tolist() for k, v in model_of(path).items()}
    if path.suffix == ".json":
        return {k: v for k, v in json.loads(path.read_text()).items() if k != "date"}
    return [line for line in lines(path) if not line.startswith("Translated ")]


@pytest.mark.parametrize("script,seed", [("average.sh", 4), ("evaluate.sh", 5)])
def test_killed_average_or_evaluate_leaves_no_partial_output(prepared, uninterrupted, script, seed):
    """A kill at a random moment of averaging or evaluation leaves under the final names only
    complete files (or none); the re-run completes and gives what an uninterrupted run gives."""
    eval_dir = prepared["work"] / "eval" / script
    env = dict(prepared["env"], RUN_NAME="uninterrupted", SAVE_DIR=str(uninterrupted["save"]), AVERAGE_LAST="3",
               EVAL_DIR=str(eval_dir), GEN_MAX_TOKENS="2000")
    if script == "evaluate.sh":
        step("average.sh", env)
    start = time.time()
    step(script, env)
    duration = time.time() - start  # the kill falls inside a run as long as this one
    outputs = ([uninterrupted["save"] / "checkpoint_avg_last3.pt"] if script == "average.sh" else
               sorted(p for p in eval_dir.iterdir() if p.is_file() and p.suffix != ".log"))  # logs are appended to
    assert len(outputs) >= (1 if script == "average.sh" else 4), outputs
    complete = {path: content(path) for path in outputs}
    for path in outputs:
        path.unlink()
    fraction = random.Random(seed).uniform(0.3, 0.9)
    for attempt in range(6):
        proc = subprocess.Popen(["bash", os.path.join(RECIPE, script)], env=env, cwd=REPO, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(fraction * duration)
        if proc.poll() is None:
            break
        # this run was quicker than the first (less load on the machine) and ended before the kill:
        # its outputs must be complete; remove them and kill the next run earlier
        assert proc.returncode == 0, f"{script} failed (exit {proc.returncode})"
        for path in outputs:
            assert content(path) == complete[path], path
            path.unlink()
        fraction /= 2
    else:
        pytest.fail(f"{script} ended before the kill {attempt + 1} times")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for path in outputs:
        assert not path.exists() or content(path) == complete[path], f"partial {path} after the kill"
    step(script, forked_commands(env))  # (the re-run: nothing kills it)
    for path in outputs:
        assert content(path) == complete[path], path


# --------------------------------------------------------------------------- the docs' bad-input table

def bad_input_rows():
    """(case, message) of each row of the "Bad input" table of docs/troubleshooting.md; the message
    is the text in backquotes of its last column, with <raw>, <work>, <dir> standing for the case's paths."""
    with open(os.path.join(REPO, "docs", "troubleshooting.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Bad input", 1)[1]
    table = section[section.index("\n| case |"):].strip().split("\n\n")[0]
    rows = []
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[-1])))
    return rows


def bad_raw_corpus(path, **changes):
    """A small parallel corpus (train/valid/test) with the given files replaced by raw bytes."""
    path.mkdir()
    for split, n in (("train", 60), ("valid", 4), ("test", 4)):
        for lang in ("en", "de"):
            (path / f"{split}.{lang}").write_text("".join(f"the house number {i} is {lang}\n" for i in range(n)))
    for name, data in changes.items():
        (path / name.replace("_", ".")).write_bytes(data)
    return path


def in_private_mount(mount, target, *command):
    """Runs command in a private mount namespace where ``mount`` ("ro" or "tmpfs") is applied to
    target (root only; the mount disappears with the process). None where that cannot be done."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    how = (f"mount --bind -o ro {target} {target}" if mount == "ro" else f"mount -t tmpfs -o size=256k tmpfs {target}")
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", how], capture_output=True)
    if probe.returncode != 0:
        return None
    return subprocess.run(["unshare", "--mount", "sh", "-c", f'{how} && exec "$@"', "sh", *command],
                          capture_output=True, text=True, timeout=300)


def run_case(case, prepared, uninterrupted, tmp_path):
    """Runs one row's case; returns (completed process, {placeholder: path})."""
    raw, save = tmp_path / "raw", uninterrupted["save"]
    average = os.path.join(os.path.dirname(sys.executable), "fairseq-rope-average")
    inputs = sorted(str(p) for p in save.glob("checkpoint_*_*.pt"))[:2]
    env = forked_commands(recipe_env(tmp_path / "work", RAW_DIR=raw, BPE_MERGES=50))
    recipe = forked_commands(prepared["env"])  # (prepared's run with the commands forked: no kills here)
    train_env = dict(recipe, RUN_NAME="bad", MAX_UPDATE="2")

    def tool(name, *args):  # an installed command, forked as conftest.run_tool does
        return run_tool(name, *args, check=False, timeout=300)

    if case == "parallel files of unequal length":
        bad_raw_corpus(raw, train_de=b"one line\n")
        return step("prepare.sh", env, ok=False), dict(raw=raw)
    if case == "bytes that are not UTF-8":
        bad_raw_corpus(raw, valid_en=b"the house\ncaf\xe9 au lait\nx\ny\n")
        return step("prepare.sh", env, ok=False), dict(raw=raw)
    if case == "empty lines":
        bad_raw_corpus(raw, test_en=b"the house\n\nx\ny\n",
                       train_de=b"".join(b"das haus nummer %d ist de\n" % i if i != 4 else b"\n" for i in range(60)))
        return step("prepare.sh", env), dict(raw=raw, work=tmp_path / "work")
    if case == "a missing file":
        bad_raw_corpus(raw)
        (raw / "test.de").unlink()
        return step("prepare.sh", env, ok=False), dict(raw=raw)
    if case == "a truncated or corrupt checkpoint":  # every tool that reads a checkpoint says the same
        damaged = tmp_path / "damaged.pt"
        damaged.write_bytes(open(inputs[0], "rb").read()[:20000])
        said = f"{damaged}: not a readable checkpoint (20,000 bytes; truncated or damaged"
        data_bin = str(prepared["work"] / "data-bin")
        others = {
            "fairseq-rope-ct2": tool("fairseq-rope-ct2", "--checkpoint", damaged, "--data-bin", data_bin,
                                     "--output-dir", tmp_path / "ct2"),
            "fairseq-rope-checkpoint fits": tool("fairseq-rope-checkpoint", "fits", damaged, "--data-bin", data_bin),
            "evaluate.sh": step("evaluate.sh", dict(recipe, CHECKPOINT=str(damaged),
                                                    EVAL_DIR=str(tmp_path / "eval")), ok=False),
        }
        for name, other in others.items():
            assert other.returncode != 0 and said in other.stderr, (name, other.stderr[-2000:])
        from fairseq_rope.hub import load_translator

        with pytest.raises(Exception) as raised:  # what a script of the Python API gets
            load_translator(str(tmp_path), data_bin, "damaged.pt")
        assert said in str(raised.value), raised.value
        return tool("fairseq-rope-average", "--inputs", damaged, inputs[1], "--output", tmp_path / "avg.pt"), \
            dict(dir=tmp_path)
    if case == "a run started again with other settings":
        env = dict(recipe, RUN_NAME="changed", MAX_UPDATE="2")
        step("train.sh", env)
        return step("train.sh", dict(env, LR="2e-3"), ok=False), dict(work=prepared["work"])
    if case == "averaging checkpoints of different architectures":
        state = load_checkpoint(inputs[1])
        state["cfg"]["model"].arch = "transformer"  # a Namespace, as fairseq saves add_args-style models
        torch.save(state, tmp_path / "baseline.pt")
        return tool("fairseq-rope-average", "--inputs", inputs[0], tmp_path / "baseline.pt", "--output",
                    tmp_path / "avg.pt"), dict(dir=tmp_path)
    if case == "an odd `--rope-dim`":
        return step("train.sh", dict(train_env, EXTRA_TRAIN_ARGS=TINY_MODEL + " --rope-dim 3"), ok=False), {}
    if case == "an unknown architecture":
        return step("train.sh", dict(train_env, ARCH="rope_transformer_tiny"), ok=False), {}
    if case == "a dictionary that does not match the checkpoint":
        other = tmp_path / "data-bin"
        shutil.copytree(prepared["work"] / "data-bin", other)
        for lang in ("en", "de"):
            with open(other / f"dict.{lang}.txt", "a") as f:
                f.write("extra 1\n")
        step("average.sh", dict(recipe, SAVE_DIR=str(save), AVERAGE_LAST="2"))
        return step("evaluate.sh", dict(recipe, SAVE_DIR=str(save), DATA_BIN=str(other),
                                        CHECKPOINT=str(save / "checkpoint_avg_last2.pt"),
                                        EVAL_DIR=str(tmp_path / "eval")), ok=False), dict(dir=tmp_path)
    if case == "document ids that do not fit their text":
        bad_raw_corpus(raw, train_docids=b"d1\n" * 60, valid_docids=b"v1\n", test_docids=b"t1\n" * 4)
        return step("prepare.sh", dict(env, CONTEXT="2"), ok=False), dict(raw=raw)
    if case == "a document whose sentences are not consecutive":
        (tmp_path / "test.en").write_text("One.\nTwo.\nThree.\nFour.\n")
        (tmp_path / "test.docids").write_text("d1\nd2\nd1\nd1\n")
        return tool("fairseq-rope-doc-translate", "--checkpoint", inputs[0], "--data-bin", prepared["work"] / "data-bin",
                    "--context", "1", "--input", tmp_path / "test.en", "--docids", tmp_path / "test.docids"), \
            dict(dir=tmp_path)
    if case == "a directory that cannot be written":
        (tmp_path / "ro").mkdir()
        return in_private_mount("ro", tmp_path / "ro", average, "--inputs", *inputs, "--output",
                                str(tmp_path / "ro" / "avg.pt")), dict(dir=tmp_path)
    if case == "a full disk":
        (tmp_path / "full").mkdir()
        return in_private_mount("tmpfs", tmp_path / "full", average, "--inputs", *inputs, "--output",
                                str(tmp_path / "full" / "avg.pt")), dict(dir=tmp_path)
    raise AssertionError(f"bad-input row of docs/troubleshooting.md without a test case: {case!r}")


def test_bad_input_table_lists_every_case():
    cases = [case for case, _ in bad_input_rows()]
    assert len(cases) == 14 and all(messages for _, messages in bad_input_rows())
    assert {"parallel files of unequal length", "a full disk", "an unknown architecture"} <= set(cases)


@pytest.mark.parametrize("case,messages", bad_input_rows(), ids=[c for c, _ in bad_input_rows()])
def test_bad_input_row_is_what_the_user_gets(prepared, uninterrupted, tmp_path, case, messages):
    """Each row of the bad-input table of docs/troubleshooting.md: its case run for real, and every message the
    row quotes appears in what the command printed."""
    proc, paths = run_case(case, prepared, uninterrupted, tmp_path)
    if proc is None:
        pytest.skip("needs root and a private mount namespace (unshare) to make a read-only or full file system")
    output = proc.stdout + proc.stderr
    for message in messages:
        for name, path in paths.items():
            message = message.replace(f"<{name}>", str(path))
        assert message in output, f"{case}: {message!r} not in:\n{output[-3000:]}"
    if case in ("a truncated or corrupt checkpoint", "averaging checkpoints of different architectures",
                "a directory that cannot be written", "a full disk"):
        assert proc.returncode != 0 and not list(tmp_path.glob("**/avg.pt*")), "an output was left behind"


def test_rerun_with_other_settings_is_refused_unless_allowed(prepared):
    """train.sh records the settings a run starts with; a re-run with other values (LR, MAX_UPDATE,
    EXTRA_TRAIN_ARGS) stops before training, naming each setting with both values and how to go
    on; ALLOW_CHANGED_SETTINGS=1 continues the run from its checkpoint with the new values."""
    env = dict(forked_commands(prepared["env"]), RUN_NAME="settings", MAX_UPDATE="2", SAVE_INTERVAL_UPDATES="2")
    save = prepared["work"] / "checkpoints" / "settings"
    # a run that fails at start-up (a bad flag) has no checkpoint: the corrected command is not refused
    step("train.sh", dict(env, EXTRA_TRAIN_ARGS=env["EXTRA_TRAIN_ARGS"] + " --rope-dim 3"), ok=False)
    assert (save / ".settings").exists() and not list(save.glob("checkpoint*.pt"))
    step("train.sh", env)
    assert "LR=0.001\n" in (save / ".settings").read_text()
    changed = dict(env, LR="2e-3", MAX_UPDATE="4", EXTRA_TRAIN_ARGS=env["EXTRA_TRAIN_ARGS"] + " --attention-dropout 0.1")
    proc = step("train.sh", changed, ok=False)
    assert proc.returncode == 1 and f"{save} was started with other settings" in proc.stderr
    assert "  LR: 0.001 -> 2e-3" in proc.stderr and "  MAX_UPDATE: 2 -> 4" in proc.stderr
    assert "--attention-dropout 0.1" in proc.stderr and "ALLOW_CHANGED_SETTINGS=1" in proc.stderr
    assert "TASK:" not in proc.stderr and "fairseq-train" not in proc.stdout  # only what changed; nothing ran
    assert load_checkpoint(str(save / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 2
    proc = step("train.sh", dict(changed, ALLOW_CHANGED_SETTINGS="1"))
    assert "continuing" in proc.stderr and "resuming from" in proc.stderr and "(2 updates)" in proc.stderr
    assert load_checkpoint(str(save / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 4
    assert "LR=2e-3\n" in (save / ".settings").read_text()
    assert "already trained" in step("train.sh", changed).stderr  # the new settings are the run's now
