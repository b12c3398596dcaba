"""The rotary options of a ``rope_transformer``: one validated object, built once from fairseq's args.

Every ``--rope-*`` flag is a field here; the model, each self-attention, the rotation and the
CTranslate2 export read this object, never the flags. A bad value fails when the object is made,
with one message per flag naming it and what it accepts.
"""

from dataclasses import dataclass, fields
from typing import ClassVar, Dict, Optional

from .self_attention import SELF_ATTENTION_ONLY

LAYOUTS = ("interleaved", "half")
ATTENTIONS = ("softmax", "linear")
# Rotations for inputs longer than the training lengths (none = the paper's), see rotary.py;
# auto: YaRN per sentence, its factor the sentence's source length over the training length L
SCALINGS = ("none", "linear", "ntk", "yarn", "auto")


@dataclass(frozen=True)
class RopeOptions:
    """What ``--rope-*`` sets. Field ``x`` is the flag ``--rope-x`` (``args.rope_x``)."""

    # fairseq features (args names) RoPE cannot run with, and why: refused when the model is built
    refused_features: ClassVar[Dict[str, str]] = SELF_ATTENTION_ONLY

    theta: float = 10000.0  # base of the frequencies theta_i = theta^(-2(i-1)/d), eq. 15
    layout: str = "interleaved"  # channel pairs (2i, 2i+1) as eq. 34, or "half": (i, i + d/2)
    dim: Optional[int] = None  # rotated channels per head (even); None: the whole head
    attention: str = "softmax"  # "linear": RoPE with linear attention, eq. 19
    scaling: str = "none"  # frequencies for inputs longer than in training: SCALINGS
    scaling_factor: float = 1.0  # how many times longer than in training (auto: per sentence instead)
    original_max_positions: Optional[int] = None  # the longest training sequence in tokens (YaRN's L);
    # auto reads L from the model (recorded in training) unless this is set
    random_positions: int = 0  # training only: sorted random positions from [0, N) (0: off)

    def __post_init__(self):
        fail = self._fail
        if not self.theta > 0:
            fail("theta", "must be > 0")
        if self.layout not in LAYOUTS:
            fail("layout", f"must be one of {', '.join(LAYOUTS)}")
        if self.dim is not None and (self.dim < 2 or self.dim % 2):
            fail("dim", "must be an even number >= 2 (the rotated channels of each head)")
        if self.attention not in ATTENTIONS:
            fail("attention", f"must be one of {', '.join(ATTENTIONS)}")
        if self.scaling not in SCALINGS:
            fail("scaling", f"must be one of {', '.join(SCALINGS)}")
        if self.scaling == "none" and self.scaling_factor != 1:
            fail("scaling_factor", "needs a --rope-scaling (linear, ntk or yarn)")
        if self.scaling == "auto" and self.scaling_factor != 1:
            fail("scaling_factor", "is chosen per sentence by --rope-scaling auto (its source length over the "
                                   "training length); leave it at 1")
        if self.original_max_positions is not None and self.original_max_positions < 1:
            fail("original_max_positions", "must be >= 1 (the longest training sequence in tokens)")
        if not self.scaling_factor >= 1:
            fail("scaling_factor", "must be >= 1 (how many times longer than in training)")
        if self.scaling == "yarn" and not (self.original_max_positions or 0) >= 1:
            fail("original_max_positions", "is needed by --rope-scaling yarn: the longest training sequence in tokens")
        if self.scaling in ("yarn", "auto") and self.attention == "linear":
            fail("scaling", f"{self.scaling} scales the softmax's logits (its temperature); it does not apply to "
                            "--rope-attention linear")
        if self.random_positions < 0:
            fail("random_positions", "must be >= 0 (0: off)")
        if self.random_positions and self.attention == "linear":
            fail("random_positions", "is not supported with --rope-attention linear")

    def _fail(self, field: str, what: str):
        raise ValueError(f"--rope-{field.replace('_', '-')} {what}; got {getattr(self, field)!r}")

    def rotary_dim(self, head_dim: int) -> int:
        """The rotated channels of a head of ``head_dim``: ``dim``, or all of them."""
        dim = head_dim if self.dim is None else self.dim
        if dim > head_dim:
            self._fail("dim", f"must be at most the head dim {head_dim}")
        if self.scaling == "ntk" and dim < 4:
            raise ValueError("--rope-scaling ntk needs at least 4 rotated channels (its exponent is d/(d-2)); "
                             f"--rope-dim (or the head dim) gives {dim}")
        return dim

    @classmethod
    def from_args(cls, args) -> "RopeOptions":
        """The options of fairseq's ``args`` (``args.rope_*``; missing ones, as in checkpoints
        saved before an option existed, take the paper's defaults). Checks ``dim`` against the
        encoder's and decoder's head dims."""
        values = {f.name: getattr(args, f"rope_{f.name}") for f in fields(cls)
                  if getattr(args, f"rope_{f.name}", None) is not None}
        options = cls(**values)
        for side in ("encoder", "decoder"):
            embed_dim, heads = getattr(args, f"{side}_embed_dim", None), getattr(args, f"{side}_attention_heads", None)
            if embed_dim and heads:
                options.rotary_dim(embed_dim // heads)
        return options
