"""fairseq-rope-average: averages the parameters of fairseq checkpoints (Vaswani et al.: "the last 5 checkpoints").

    fairseq-rope-average --inputs CKPT_DIR --num-update-checkpoints 5 --output avg.pt
    fairseq-rope-average --inputs CKPT_DIR --num-epoch-checkpoints 5 [--checkpoint-upper-bound 40] --output avg.pt
    fairseq-rope-average --inputs a.pt b.pt c.pt --output avg.pt

Same command line and averaging rule as fairseq's scripts/average_checkpoints.py, which is not
shipped in the fairseq wheel and cannot load checkpoints under torch >= 2.6. Here:
  * checkpoints are loaded with torch.load(weights_only=True) through fairseq_rope's allowlist
    (argparse.Namespace, numpy), never with arbitrary unpickling;
  * only state["model"] is averaged; every other entry (cfg, optimizer history, extra_state)
    comes from the first input (the newest checkpoint when selected by number);
  * floating point tensors are summed in float32 or wider (float16/bfloat16 are accumulated in
    float32 and saved as float32, as upstream does for float16), integer tensors are
    floor-divided;
  * inputs must agree: same parameter names, same shapes, same model architecture
    (cfg.model.arch); otherwise an error names the two files and what differs;
  * --output may not be one of the inputs, and is written to a temporary file in the same
    directory and renamed, so an interrupted run never leaves a truncated checkpoint.

Selection (--num-*-checkpoints): --inputs must be one directory; checkpoint<EPOCH>.pt or
checkpoint_<EPOCH>_<UPDATE>.pt files are sorted by that number, those above
--checkpoint-upper-bound dropped, and the highest N taken (an error if fewer than N exist).
"""

import collections
import os
import re
import sys

from .common import InputError, argument_parser, atomic_output

PROG = "fairseq-rope-average"


def last_n_checkpoints(directory, n, update_based, upper_bound=None):
    """Paths of the ``n`` checkpoints with the highest epoch/update number, highest first."""
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt$" if update_based else r"checkpoint(\d+)\.pt$")
    found = []
    for name in os.listdir(directory):
        match = pattern.fullmatch(name)
        if match:
            number = int(match.group(1))
            if upper_bound is None or number <= upper_bound:
                found.append((number, name))
    found.sort(reverse=True)
    if len(found) < n:
        kind = "checkpoint_<epoch>_<update>.pt" if update_based else "checkpoint<epoch>.pt"
        bound = f" with number <= {upper_bound}" if upper_bound is not None else ""
        raise InputError(PROG, f"found {len(found)} {kind} files{bound} in {directory}, "
                         f"need {n}: {', '.join(name for _, name in found) or 'none'}")
    return [os.path.join(directory, name) for _, name in found[:n]]


def model_arch(state):
    """The architecture name stored in a checkpoint (cfg.model.arch, or args.arch of old ones)."""
    cfg = state.get("cfg")
    model_cfg = cfg.get("model") if isinstance(cfg, dict) else getattr(cfg, "model", None)
    if model_cfg is None and state.get("args") is not None:
        model_cfg = state["args"]
    if model_cfg is None:
        return None
    if isinstance(model_cfg, dict):
        return model_cfg.get("arch", model_cfg.get("_name"))
    return getattr(model_cfg, "arch", getattr(model_cfg, "_name", None))


def average_checkpoints(inputs, log=print):
    """Returns the state of ``inputs[0]`` with ``state["model"]`` replaced by the element-wise mean."""
    import torch

    from fairseq_rope_checkpoints import CheckpointError, load_checkpoint  # weights_only, fairseq's classes allowed

    if not inputs:
        raise InputError(PROG, "no input checkpoints")
    first_state, first_path, first_arch = None, None, None
    sums = collections.OrderedDict()
    dtypes = {}
    for path in inputs:
        try:
            state = load_checkpoint(path)
        except CheckpointError as error:
            raise InputError(PROG, str(error)) from None
        if "model" not in state:
            raise InputError(PROG, f"{path} has no 'model' entry: not a fairseq checkpoint")
        params = state["model"]
        arch = model_arch(state)
        if first_state is None:
            first_state, first_path, first_arch = state, path, arch
            for name, tensor in params.items():
                dtypes[name] = tensor.dtype
                if tensor.is_floating_point():
                    sums[name] = tensor.detach().to(torch.promote_types(tensor.dtype, torch.float32)).clone()
                else:
                    sums[name] = tensor.detach().clone()
            continue
        if arch != first_arch:
            raise InputError(PROG, f"architectures differ: {first_path} is {first_arch!r}, "
                             f"{path} is {arch!r}")
        names, first_names = list(params.keys()), list(sums.keys())
        if names != first_names:
            missing = [k for k in first_names if k not in params][:5]
            extra = [k for k in names if k not in sums][:5]
            detail = f"missing {missing}, unexpected {extra}" if (missing or extra) else "same names, different order"
            raise InputError(PROG, f"parameter names differ between {first_path} and {path}: {detail}")
        for name, tensor in params.items():
            if tensor.shape != sums[name].shape:
                raise InputError(PROG, f"parameter {name} has shape {tuple(sums[name].shape)} in "
                                 f"{first_path} but {tuple(tensor.shape)} in {path}")
            if tensor.is_floating_point() != sums[name].is_floating_point():
                raise InputError(PROG, f"parameter {name} is {dtypes[name]} in {first_path} "
                                 f"but {tensor.dtype} in {path}")
            sums[name] += tensor.detach().to(sums[name].dtype)
        del state, params
    count = len(inputs)
    for name, total in sums.items():
        if total.is_floating_point():
            total.div_(count)
        else:
            total //= count
    first_state["model"] = sums
    return first_state


def main(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("--inputs", required=True, nargs="+",
                    help="checkpoint files, or one directory with --num-epoch/update-checkpoints")
    ap.add_argument("--output", required=True, metavar="FILE", help="where to write the averaged checkpoint")
    num = ap.add_mutually_exclusive_group()
    num.add_argument("--num-epoch-checkpoints", type=int, help="average the last N checkpoint<EPOCH>.pt")
    num.add_argument("--num-update-checkpoints", type=int, help="average the last N checkpoint_<E>_<UPDATE>.pt")
    ap.add_argument("--checkpoint-upper-bound", type=int,
                    help="with --num-*-checkpoints: ignore checkpoints whose epoch/update number is above this")
    args = ap.parse_args(argv)

    n = args.num_epoch_checkpoints or args.num_update_checkpoints
    if n is not None:
        if n < 1:
            raise InputError(PROG, f"--num-*-checkpoints must be >= 1, got {n}")
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            raise InputError(PROG, f"--num-*-checkpoints needs --inputs to be one directory, got {args.inputs}")
        inputs = last_n_checkpoints(args.inputs[0], n, args.num_update_checkpoints is not None,
                                    args.checkpoint_upper_bound)
    else:
        if args.checkpoint_upper_bound is not None:
            raise InputError(PROG, "--checkpoint-upper-bound only applies with --num-epoch-checkpoints or --num-update-checkpoints")
        inputs = args.inputs
        for path in inputs:
            if os.path.isdir(path):
                raise InputError(PROG, f"{path} is a directory: give checkpoint files, or use --num-*-checkpoints")
            if not os.path.isfile(path):
                raise InputError(PROG, f"input checkpoint not found: {path}")
        if len(set(map(os.path.realpath, inputs))) != len(inputs):
            raise InputError(PROG, f"the same checkpoint is given twice in --inputs: {inputs}")

    out_real = os.path.realpath(args.output)
    for path in inputs:
        if os.path.realpath(path) == out_real:
            raise InputError(PROG, f"--output {args.output} is one of the inputs; refusing to overwrite an input checkpoint")
    out_dir = os.path.dirname(out_real)
    if not os.path.isdir(out_dir):
        raise InputError(PROG, f"directory of --output does not exist: {out_dir}")
    if not os.access(out_dir, os.W_OK):  # before the work; root passes this, the write below still checks
        raise InputError(PROG, f"directory of --output is not writable: {out_dir}")

    folders = {os.path.dirname(path) for path in inputs}
    listed = (f"{folders.pop() or '.'}/{{{', '.join(os.path.basename(p) for p in inputs)}}}" if len(folders) == 1
              else ", ".join(inputs))
    print(f"[{PROG}] averaging {len(inputs)} checkpoints: {listed}", file=sys.stderr)
    state = average_checkpoints(inputs, log=lambda msg: print(msg, file=sys.stderr))
    import torch

    try:
        with atomic_output(out_real, "wb", suffix=f".tmp.{os.getpid()}") as f:
            torch.save(state, f)
    except (OSError, RuntimeError) as error:  # torch.save reports a full disk as a RuntimeError
        raise InputError(PROG, f"cannot write --output {args.output}: {error} (nothing was written under that name)") from None
    print(f"[{PROG}] wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
