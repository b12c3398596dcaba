"""fairseq-rope-checkpoint: what the recipe's steps need to know about a run's checkpoints, as JSON.

    fairseq-rope-checkpoint resume     SAVE_DIR                  -> {"updates": N, "restored": PATH or null}
    fairseq-rope-checkpoint final-name CHECKPOINT --max-update N -> {"name": "checkpoint_E_N.pt" or null}
    fairseq-rope-checkpoint fits       CHECKPOINT --data-bin DIR [--source-lang en --target-lang de]

resume: the updates SAVE_DIR/checkpoint_last.pt holds (0 without one). fairseq writes
checkpoint_<epoch>_<update>.pt atomically but then *copies* it to checkpoint_last.pt, so a kill
during that copy leaves a truncated checkpoint_last.pt from which fairseq-train cannot resume; the
newest complete numbered checkpoint holds the same state. A damaged checkpoint_last.pt is therefore
kept as checkpoint_last.pt.damaged and replaced (atomically) by a copy of that checkpoint, named
in "restored". No complete checkpoint to restore from is an error.

final-name: fairseq saves no checkpoint_<epoch>_<update>.pt for an update that ends an epoch
(only checkpoint_last.pt, with --no-epoch-checkpoints). When CHECKPOINT holds update N, the name
that update would have had (the epoch it ended); null when it holds another update.

fits: whether CHECKPOINT loads (weights only) and its embeddings have the sizes of the
dictionaries in --data-bin; an error names both otherwise. Prints {"fits": true}.

Results go to stdout as one JSON object; what was done, to stderr; user errors end with
``fairseq-rope-checkpoint: error: ...`` and status 1.
"""

import glob
import json
import os
import re
import shutil
import sys

from .common import InputError, argument_parser

PROG = "fairseq-rope-checkpoint"


def updates_of(path):
    """The updates a checkpoint holds, or None (with the reason on stderr) when it cannot be loaded."""
    from fairseq_rope_checkpoints import load_checkpoint

    try:
        return load_checkpoint(path)["optimizer_history"][-1]["num_updates"]
    except Exception as error:  # a truncated, damaged or foreign file: the caller decides
        print(f"[{PROG}] cannot load {path}: {str(error).splitlines()[0]}", file=sys.stderr)
        return None


def resume(save_dir):
    """(updates of checkpoint_last.pt, the checkpoint it was restored from or None)."""
    last = os.path.join(save_dir, "checkpoint_last.pt")
    if not os.path.exists(last):
        return 0, None
    updates = updates_of(last)
    if updates is not None:
        return updates, None
    numbered = glob.glob(os.path.join(save_dir, "checkpoint_*_*.pt"))
    numbered.sort(key=lambda path: int(re.search(r"_([0-9]+)\.pt$", path).group(1)), reverse=True)
    for restored in numbered:
        updates = updates_of(restored)
        if updates is not None:
            break
    else:
        raise InputError(PROG, f"{last} is damaged and {save_dir} holds no complete checkpoint_<epoch>_<update>.pt "
                               f"to resume from; move {last} away to train from scratch")
    os.replace(last, last + ".damaged")
    shutil.copyfile(restored, last + ".tmp")
    os.replace(last + ".tmp", last)
    print(f"[{PROG}] {last} was damaged (kept as {os.path.basename(last)}.damaged): restored from {restored}",
          file=sys.stderr)
    return updates, restored  # the copy holds what was loaded from ``restored``


def final_name(checkpoint, max_update):
    """checkpoint_<epoch>_<max_update>.pt when ``checkpoint`` holds update ``max_update``, else None."""
    from fairseq_rope_checkpoints import CheckpointError, load_checkpoint

    try:
        state = load_checkpoint(checkpoint)
    except CheckpointError as error:
        raise InputError(PROG, str(error))
    updates = state["optimizer_history"][-1]["num_updates"]
    if updates != max_update:
        return None
    itr = state["extra_state"]["train_iterator"]
    epoch = itr["epoch"] - 1 if itr["iterations_in_epoch"] == 0 else itr["epoch"]  # saved after the epoch's end
    return f"checkpoint_{epoch}_{updates}.pt"


def need_path(path, what, isdir=False):
    if not (os.path.isdir(path) if isdir else os.path.isfile(path)):
        raise InputError(PROG, f"{what} not found: {path}")


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser("resume", help="the updates of checkpoint_last.pt, restored if damaged",
                       description="The updates SAVE_DIR/checkpoint_last.pt holds; a damaged one is restored "
                                   "from the newest complete numbered checkpoint.")
    p.add_argument("save_dir", metavar="SAVE_DIR")
    p = sub.add_parser("final-name", help="the numbered name of a run's last update",
                       description="The checkpoint_<epoch>_<update>.pt name of CHECKPOINT when it holds update N.")
    p.add_argument("checkpoint", metavar="CHECKPOINT")
    p.add_argument("--max-update", type=int, required=True, metavar="N")
    p = sub.add_parser("fits", help="whether a checkpoint fits a data-bin's dictionaries",
                       description="Loads CHECKPOINT (weights only) and checks its embeddings against --data-bin.")
    p.add_argument("checkpoint", metavar="CHECKPOINT")
    p.add_argument("--data-bin", required=True)
    p.add_argument("--source-lang")
    p.add_argument("--target-lang")
    args = ap.parse_args(argv)

    if args.cmd == "resume":
        need_path(args.save_dir, "SAVE_DIR", isdir=True)
        updates, restored = resume(args.save_dir)
        result = {"updates": updates, "restored": restored}
    elif args.cmd == "final-name":
        need_path(args.checkpoint, "CHECKPOINT")
        if args.max_update < 1:
            raise InputError(PROG, f"--max-update must be >= 1, got {args.max_update}")
        result = {"name": final_name(args.checkpoint, args.max_update)}
    else:
        from fairseq_rope_checkpoints import CheckpointError, check_fits

        need_path(args.checkpoint, "CHECKPOINT")
        need_path(args.data_bin, "--data-bin", isdir=True)
        try:
            check_fits(args.checkpoint, args.data_bin, args.source_lang, args.target_lang)
        except CheckpointError as error:
            raise InputError(PROG, str(error))
        result = {"fits": True}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
