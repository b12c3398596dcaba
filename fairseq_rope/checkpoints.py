"""Loading fairseq checkpoints with ``torch.load(weights_only=True)``, never without it.

Since torch 2.6 ``torch.load`` only unpickles tensors and plain containers unless told
otherwise. fairseq checkpoints of add_args-style models (``transformer``, ours) also
pickle an ``argparse.Namespace`` (the model config) and, with ``--eval-bleu``, numpy
arrays in the training metrics. We allowlist exactly those classes; a checkpoint that
needs anything else (e.g. a pickle that calls ``os.system``) is refused and nothing in it
runs. Turning weights_only off would let any checkpoint run code.
"""

import argparse

import numpy
import torch

FAIRSEQ_CHECKPOINT_GLOBALS = [
    argparse.Namespace,  # cfg.model / args of add_args-style models
    numpy.ndarray,  # --eval-bleu counts in extra_state["metrics"]
    numpy.dtype,
    numpy.dtypes.Int64DType,
    numpy._core.multiarray._reconstruct,
]


class UnsafeCheckpointError(RuntimeError):
    pass


def allow_fairseq_checkpoints():
    """Adds what fairseq checkpoints contain to torch's weights_only allowlist."""
    torch.serialization.add_safe_globals(FAIRSEQ_CHECKPOINT_GLOBALS)


def load_checkpoint(path, map_location="cpu"):
    """``torch.load(path, weights_only=True)`` with an error that names the file and what it refused."""
    allow_fairseq_checkpoints()
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint not found: {path}") from None
    except Exception as error:
        if "Weights only load failed" not in str(error):
            raise
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:
            unsafe = []
        allowed = {f"{g.__module__}.{g.__qualname__}" for g in FAIRSEQ_CHECKPOINT_GLOBALS}
        unsafe = ", ".join(name for name in unsafe if name not in allowed) or "pickle instructions torch's safe loader refuses"
        raise UnsafeCheckpointError(
            f"{path}: refusing to load this checkpoint: its pickle needs {unsafe}, which a fairseq "
            f"checkpoint never contains and which could run code. Nothing from it was executed. "
            f"Only load it with weights_only=False if you trust whoever made it.\n{error}"
        ) from None
