"""fairseq-rope-record: a finished run kept as a small record, so that a study goes on after its work
folder is lost or on another machine, without training the run again.

    fairseq-rope-record save docs/records/debian/rope_seed1 --checkpoints work/debian/checkpoints/rope_seed1 \
        --eval work/debian/eval/rope_seed1 --settings train.settings --data-bin work/debian/data-bin \
        --reference work/debian/raw/test.de [--set LENPENS="0.2 0.6 1.0 1.4" ...]
    fairseq-rope-record restore docs/records/debian/rope_seed1 (the same flags)

A record holds what the tables and figures read, not the checkpoints: the run's train.log and train.sh's
.done (the settings it finished with), the test result.json with its paths made relative to the record,
the detokenized hypotheses, the reference scores (the P- lines of fairseq-generate --score-reference, for
the test NLL), the length penalty chosen on valid (lenpen.env) and the valid result.json of each penalty,
and the result, hypotheses and reference scores of each --also-eval folder (another evaluation of the
run's model, under also/<its name>);
and record.json: the settings, the machine, the library versions, the commit and each file's sha256.
The train.log and the reference scores, most of a record's bytes, are kept gzipped (train.log.gz,
score_reference.out.gz; fairseq-rope-compare and fairseq-rope-score read them so), so that records
committed beside the code stay small enough to travel with it; restore writes train.log back as text, and
restores records saved before that (train.log, score_reference.out) as they are.

The settings of a run are train.sh's (--settings: NAME=value lines, as PRINT_SETTINGS=1 train.sh prints
them), where the data-bin's path (DATA_BIN=) is replaced by the sha256 of the binarized data and the
dictionaries (--data-bin), the reference by the sha256 of its text (--reference), and the --set values (the
evaluation's: beam, length penalties, ...). restore rebuilds the run's folders from a record only when
these are equal (exit status 0); with no record, or other settings (each difference printed), it changes
nothing and exits with status 3, so that the run is trained. save writes the record atomically.
"""

import glob
import gzip
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version

from .common import InputError, argument_parser, atomic_output, open_text, write_json

PROG = "fairseq-rope-record"
# the result.json keys that name files: those the record keeps (under their own file names), and those
# it does not keep (dropped from its result.json)
KEPT = ("hyps_detok", "reference_scores")
DROPPED = ("hyps_tok", "generate_output")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_fingerprint(data_bin):
    """One sha256 over the dictionaries and the binarized data of a data-bin (names and contents)."""
    files = sorted(glob.glob(os.path.join(data_bin, "dict.*.txt")) + glob.glob(os.path.join(data_bin, "*.bin"))
                   + glob.glob(os.path.join(data_bin, "*.idx")))
    if not files:
        raise InputError(PROG, f"--data-bin {data_bin}: no dict.*.txt, *.bin or *.idx files (expected prepare.sh's data-bin)")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{os.path.basename(path)} {sha256(path)}\n".encode())
    return digest.hexdigest()


def run_settings(args):
    """The settings a record is compared on, NAME=value lines: train.sh's without the data-bin's path, the
    data and the reference by content, and the --set values."""
    if not os.path.isfile(args.settings):
        raise InputError(PROG, f"--settings file not found: {args.settings}")
    with open(args.settings, encoding="utf-8") as f:
        train = [line for line in f.read().splitlines() if line]
    if not train or any("=" not in line for line in train):
        raise InputError(PROG, f"--settings {args.settings}: expected train.sh's NAME=value lines")
    if not os.path.isfile(args.reference):
        raise InputError(PROG, f"--reference file not found: {args.reference}")
    for value in args.set:
        if "=" not in value:
            raise InputError(PROG, f"--set {value!r}: expected NAME=VALUE")
    return ([line for line in train if not line.startswith("DATA_BIN=")]
            + [f"DATA=sha256:{data_fingerprint(args.data_bin)}", f"REFERENCE=sha256:{sha256(args.reference)}"]
            + list(args.set))


def machine():
    """The CPU (or GPUs) and the versions the run was trained with, in words."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpuinfo = f.read().splitlines()
        names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
        flags = next(line for line in cpuinfo if line.startswith("flags")) + " "
        cpu = f"{names[0]}, {len(names)} cores, {'AVX-512' if ' avx512f ' in flags else 'AVX2' if ' avx2 ' in flags else 'no AVX2'}"
    except (OSError, IndexError, StopIteration):
        pass
    import torch
    gpus = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return {"cpu": cpu, "gpus": gpus or None, "python": platform.python_version(), "torch": torch.__version__,
            "fairseq": next(filter(None, map(installed_version, ("fairseq-fixed", "fairseq"))), None)}


def installed_version(distribution):
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def commit():
    """The commit of this code (git rev-parse HEAD), noting uncommitted changes; None outside a checkout."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    try:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "HEAD") + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(PROG, f"{path}: cannot read it as JSON ({e})")
    if not isinstance(value, dict):
        raise InputError(PROG, f"{path}: expected a JSON object")
    return value


def reference_scores_lines(path):
    """The P- lines of fairseq-generate --score-reference (what the test NLL is computed from), from its
    output or from a record's gzipped copy (a restored run's)."""
    with open_text(path) as f:
        return [line for line in f if line.startswith("P-")]


def write_gzip(path, data: bytes):
    """data gzipped into path, atomically; the same bytes give the same file (no name or time in the header)."""
    with atomic_output(path, "wb") as f:
        f.write(gzip.compress(data, compresslevel=9, mtime=0))


def save_result(eval_dir, out):
    """An evaluation folder's result.json into the folder out, with the files it names that a record keeps
    (their paths then relative to out)."""
    result_path = os.path.join(eval_dir, "result.json")
    if not os.path.isfile(result_path):
        raise InputError(PROG, f"{result_path} not found (a record is saved from a finished run)")
    os.makedirs(out, exist_ok=True)
    result = load_json(result_path)
    for key in KEPT:
        if result.get(key):
            name = os.path.basename(result[key])
            if key == "reference_scores":
                name = name if name.endswith(".gz") else name + ".gz"
                write_gzip(os.path.join(out, name), "".join(reference_scores_lines(result[key])).encode("utf-8"))
            else:
                shutil.copyfile(result[key], os.path.join(out, name))
            result[key] = name
    for key in DROPPED:
        result.pop(key, None)
    result["reference"] = os.path.basename(result["reference"])
    write_json(os.path.join(out, "result.json"), result)


def restore_result(folder, eval_dir, reference, record):
    """save_result's folder back into eval_dir, the paths of its result.json absolute again."""
    os.makedirs(eval_dir, exist_ok=True)
    result = load_json(os.path.join(folder, "result.json"))
    for key in KEPT:
        if result.get(key):
            shutil.copyfile(os.path.join(folder, result[key]), os.path.join(eval_dir, result[key]))
            result[key] = os.path.abspath(os.path.join(eval_dir, result[key]))
    result["reference"] = os.path.abspath(reference)
    result["record"] = os.path.abspath(record)
    write_json(os.path.join(eval_dir, "result.json"), result)


def also_name(eval_dir):
    return os.path.join("also", os.path.basename(os.path.normpath(eval_dir)))


def save(args, settings):
    for path in (os.path.join(args.checkpoints, ".done"), os.path.join(args.checkpoints, "train.log")):
        if not os.path.isfile(path):
            raise InputError(PROG, f"--checkpoints: {path} not found (a record is saved from a finished run)")
    with open(os.path.join(args.checkpoints, ".done"), encoding="utf-8") as f:
        done = f.read()
    with open(args.settings, encoding="utf-8") as f:
        if f.read().strip() != done.strip():
            raise InputError(PROG, f"{args.checkpoints}/.done differs from --settings {args.settings}: "
                                   "the run finished with other settings than the record would name")
    tmp = args.record.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(os.path.join(args.checkpoints, "train.log"), "rb") as f:
        write_gzip(os.path.join(tmp, "train.log.gz"), f.read())
    with atomic_output(os.path.join(tmp, "done")) as f:
        f.write(done)
    save_result(args.eval, tmp)
    for eval_dir in args.also_eval:
        save_result(eval_dir, os.path.join(tmp, also_name(eval_dir)))
    lenpen_env = os.path.join(args.eval, "lenpen.env")
    if os.path.isfile(lenpen_env):
        shutil.copyfile(lenpen_env, os.path.join(tmp, "lenpen.env"))
    for valid_json in sorted(glob.glob(os.path.join(args.eval, "valid_lenpen*", "result.json"))):
        valid = load_json(valid_json)
        for key in KEPT + DROPPED:
            valid.pop(key, None)
        valid["reference"] = os.path.basename(valid.get("reference", ""))
        write_json(os.path.join(tmp, os.path.basename(os.path.dirname(valid_json)) + ".json"), valid)
    files = {name: sha256(os.path.join(tmp, name)) for name in
             sorted(os.path.relpath(os.path.join(folder, n), tmp) for folder, _, names in os.walk(tmp) for n in names)}
    write_json(os.path.join(tmp, "record.json"), {
        "run": os.path.basename(os.path.normpath(args.record)), "settings": settings, "machine": machine(),
        "commit": commit(), "saved": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "files": files})
    shutil.rmtree(args.record, ignore_errors=True)
    os.replace(tmp, args.record)
    print(f"[{PROG}] {args.record}: saved ({len(files)} files)", file=sys.stderr)
    return 0


def restore(args, settings):
    record_json = os.path.join(args.record, "record.json")
    if not os.path.isfile(record_json):
        print(f"[{PROG}] {args.record}: no record", file=sys.stderr)
        return 3
    record = load_json(record_json)
    if record.get("settings") != settings:
        recorded, current = record.get("settings") or [], settings
        changes = [f"record {line}" for line in recorded if line not in current] \
            + [f"now {line}" for line in current if line not in recorded]
        print(f"[{PROG}] {args.record}: recorded with other settings ({'; '.join(changes)}): not used", file=sys.stderr)
        return 3
    for name, digest in (record.get("files") or {}).items():
        path = os.path.join(args.record, name)
        if not os.path.isfile(path) or sha256(path) != digest:
            raise InputError(PROG, f"{path}: missing or changed since the record was saved (sha256 in {record_json})")
    for eval_dir in args.also_eval:
        if not os.path.isfile(os.path.join(args.record, also_name(eval_dir), "result.json")):
            raise InputError(PROG, f"--also-eval {eval_dir}: {args.record} holds no {also_name(eval_dir)}")
    os.makedirs(args.checkpoints, exist_ok=True)
    if "train.log.gz" in (record.get("files") or {}):
        with gzip.open(os.path.join(args.record, "train.log.gz"), "rb") as f, \
                atomic_output(os.path.join(args.checkpoints, "train.log"), "wb") as out:
            shutil.copyfileobj(f, out)
    else:  # (a record saved before train.log was kept gzipped)
        shutil.copyfile(os.path.join(args.record, "train.log"), os.path.join(args.checkpoints, "train.log"))
    with open(args.settings, encoding="utf-8") as f:
        current = f.read()
    for name in (".settings", ".done"):  # the settings as train.sh computes them here (its data-bin's path)
        with atomic_output(os.path.join(args.checkpoints, name)) as f:
            f.write(current)
    restore_result(args.record, args.eval, args.reference, args.record)
    for eval_dir in args.also_eval:
        restore_result(os.path.join(args.record, also_name(eval_dir)), eval_dir, args.reference, args.record)
    if os.path.isfile(os.path.join(args.record, "lenpen.env")):
        shutil.copyfile(os.path.join(args.record, "lenpen.env"), os.path.join(args.eval, "lenpen.env"))
    for valid_json in sorted(glob.glob(os.path.join(args.record, "valid_lenpen*.json"))):
        folder = os.path.join(args.eval, os.path.basename(valid_json)[:-len(".json")])
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(valid_json, os.path.join(folder, "result.json"))
    gpus = record["machine"].get("gpus")
    print(f"[{PROG}] {args.record}: restored into {args.checkpoints} and {args.eval} "
          f"(trained on {record['machine'].get('cpu')}{', ' + gpus if gpus else ''} at {record.get('commit')})",
          file=sys.stderr)
    return 0


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("command", choices=("save", "restore"))
    ap.add_argument("record", help="the record's folder (e.g. docs/records/debian/rope_seed1)")
    ap.add_argument("--checkpoints", required=True, help="the run's folder of train.sh (train.log, .done)")
    ap.add_argument("--eval", required=True, help="the run's folder of evaluate.sh (result.json, ...)")
    ap.add_argument("--also-eval", action="append", default=[], metavar="DIR",
                    help="another evaluation of the run's model kept with it (repeatable; e.g. run.sh's ROPE_AUTO "
                         "translation), under also/<its name> in the record")
    ap.add_argument("--settings", required=True, help="train.sh's settings of the run (PRINT_SETTINGS=1 train.sh)")
    ap.add_argument("--data-bin", required=True, help="the binarized data (its contents are part of the settings)")
    ap.add_argument("--reference", required=True, help="the test set's reference (its text is part of the settings)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="an evaluation setting the record is compared on (repeatable)")
    args = ap.parse_args(argv)
    settings = run_settings(args)
    return save(args, settings) if args.command == "save" else restore(args, settings)


if __name__ == "__main__":
    sys.exit(main())
