"""RoPE as a position encoding: the rotary options of a ``rope_transformer`` (one validated object,
made from fairseq's args) and what RoPE asks of the shared scaffold (fairseq_rope/encodings.py), with
the hooks every encoding has: its self-attention (eq. 34, attention.py, or eq. 19 with
``--rope-attention linear``, linear_attention.py), the training length each stack records
(``stack_buffers``: ``original_max_positions``), and at each forward its :class:`RopeInputs`: the
random positions of training and the per-sentence factors of ``--rope-scaling auto``. The model is
registered in model.py.

Every ``--rope-*`` flag is a field here; the model, each self-attention, the rotation and the
CTranslate2 export read this object, never the flags. A bad value fails when the object is made,
with one message per flag naming it and what it accepts.
"""

import logging
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import Tensor

from ..encodings import PositionEncoding, SelfAttention
from .attention import RopeInputs, RotaryMultiheadAttention
from .linear_attention import RotaryLinearAttention

logger = logging.getLogger(__name__)

LAYOUTS = ("interleaved", "half")
ATTENTIONS = ("softmax", "linear")
# Rotations for inputs longer than the training lengths (none = the paper's), see rotary.py;
# auto: YaRN per sentence, its factor the sentence's source length over the training length L
SCALINGS = ("none", "linear", "ntk", "yarn", "auto")
# How the rotation runs (rotary.py); every one computes eq. 34 from the same table
ROTATIONS = ("auto", "eager", "triton", "compile")


@dataclass(frozen=True)
class RopeOptions(PositionEncoding):
    """What ``--rope-*`` sets. Field ``x`` is the flag ``--rope-x`` (``args.rope_x``)."""

    prefix = "rope"
    title = "Rotary position embedding (RoFormer)"
    # the longest sequence of a training forward, in tokens (padding excluded, EOS included), the largest
    # over all processes of a distributed run; 0 = not recorded (checkpoints saved before it was, a
    # baseline's). Saved with the model, it is the training length L of --rope-scaling auto.
    stack_buffers = {"original_max_positions": lambda: torch.zeros((), dtype=torch.long)}
    encoder_output_fields = ("scaling_factors",)  # encoder_out["rope_scaling_factors"]
    tiny_model_variants = {"rope": (), "rope random": ("--rope-random-positions", "64"),
                           "rope linear": ("--rope-attention", "linear")}

    theta: float = field(default=10000.0, metadata={  # eq. 15
        "metavar": "F", "help": "base of the rotation frequencies theta_i = F^(-2(i-1)/d)"})
    layout: str = field(default="interleaved", metadata={  # channel pairs (2i, 2i+1) as eq. 34, or (i, i + d/2)
        "metavar": "L", "help": "pairing of rotated channels: 'interleaved' (the paper's eq. 34) or 'half' "
                                "(GPT-NeoX rotate_half)"})
    dim: Optional[int] = field(default=None, metadata={
        "metavar": "N", "default": "the whole head", "help": "channels rotated per head, even"})
    attention: str = field(default="softmax", metadata={
        "metavar": "A", "help": "self-attention of encoder and decoder: 'softmax' or 'linear': the paper's eq. 19, "
                                "RoPE with linear attention, phi(x) = elu(x) + 1, O(length); no attention weights "
                                "and no --attention-dropout in linear mode (cross-attention stays softmax and keeps "
                                "both)"})
    scaling: str = field(default="none", metadata={
        "metavar": "S", "help": "frequencies for inputs longer than in training: 'none' (the paper's), 'linear' "
                                "(position interpolation, positions / F), 'ntk' (NTK-aware: base * F^(d/(d-2))), "
                                "'yarn' (YaRN: per-frequency interpolation and its softmax temperature; needs "
                                "--rope-original-max-positions) or 'auto' (YaRN per sentence, factor = source "
                                "length / training length, none for sentences no longer than in training; the "
                                "training length is recorded by the model); usually set at generation time with "
                                "--model-overrides"})
    scaling_factor: float = field(default=1.0, metadata={
        "metavar": "F", "help": "how many times longer the inputs are than in training (>= 1)"})
    original_max_positions: Optional[int] = field(default=None, metadata={
        "metavar": "L", "help": "the longest training sequence in tokens (YaRN's L; for 'auto' it overrides the "
                                "length the model recorded in training)"})
    random_positions: int = field(default=0, metadata={
        "metavar": "N", "default": "0: off", "help": "in training, give each sentence's tokens sorted random "
                                                     "positions from [0, N) instead of 0, 1, 2, ... (randomized "
                                                     "positional encodings, Ruoss et al. 2023), so that distances "
                                                     "longer than the training sentences are seen; evaluation and "
                                                     "generation use 0, 1, 2, ..."})

    rotation: str = field(default="auto", metadata={
        "metavar": "R", "help": "how the rotation runs (the same eq. 34): 'auto' (a fused Triton kernel where it runs, "
                                "a GPU or TRITON_INTERPRET=1, once it passed a probe there; eager otherwise), 'eager' (element-wise torch "
                                "operations), 'triton' (the kernel, or an error where it cannot run) or 'compile' "
                                "(the eager rotation compiled by torch.compile)"})

    def __post_init__(self):
        fail = self.fail
        if not self.theta > 0:
            fail("theta", "must be > 0")
        if self.layout not in LAYOUTS:
            fail("layout", f"must be one of {', '.join(LAYOUTS)}")
        if self.dim is not None and (self.dim < 2 or self.dim % 2):
            fail("dim", "must be an even number >= 2 (the rotated channels of each head)")
        if self.rotation not in ROTATIONS:
            fail("rotation", f"must be one of {', '.join(ROTATIONS)}")
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

    def rotary_dim(self, head_dim: int) -> int:
        """The rotated channels of a head of ``head_dim``: ``dim``, or all of them."""
        dim = head_dim if self.dim is None else self.dim
        if dim > head_dim:
            self.fail("dim", f"must be at most the head dim {head_dim}")
        if self.scaling == "ntk" and dim < 4:
            raise ValueError("--rope-scaling ntk needs at least 4 rotated channels (its exponent is d/(d-2)); "
                             f"--rope-dim (or the head dim) gives {dim}")
        return dim

    def check_model(self, args):
        """``dim`` against the encoder's and decoder's head dims; linear attention's attention dropout."""
        for side in ("encoder", "decoder"):
            embed_dim, heads = getattr(args, f"{side}_embed_dim", None), getattr(args, f"{side}_attention_heads", None)
            if embed_dim and heads:
                self.rotary_dim(embed_dim // heads)
        if self.attention == "linear" and getattr(args, "attention_dropout", 0) > 0:
            logger.warning("--rope-attention linear forms no attention weights in self-attention: --attention-dropout "
                           "%g applies to cross-attention only", args.attention_dropout)

    # ---- what RoPE asks of the scaffold ----

    def build_self_attention(self, embed_dim: int, num_heads: int, causal: bool, **fairseq_args) -> SelfAttention:
        """Softmax attention with eq. 34, or linear attention (eq. 19), as --rope-attention says."""
        attention = RotaryLinearAttention if self.attention == "linear" else RotaryMultiheadAttention
        return attention(embed_dim, num_heads, self, causal=causal, **fairseq_args)

    def forward_inputs(self, coder, tokens: Tensor, encoder_out: Optional[dict] = None) -> RopeInputs:
        """In training, records the length and draws the random positions (``positions``, B x T); under
        --rope-scaling auto outside training, the sentences' YaRN factors (``scaling_factors``, B)
        and L (``training_length``): the encoder computes them from its source, the decoder reads its
        source's from the encoder's output."""
        if coder.training:
            record_length(coder, tokens)
        if encoder_out is None:
            factors = self.scaling_factors(coder, tokens)
        else:
            factors = self.encoder_output(encoder_out, "scaling_factors")
        return RopeInputs(positions=self.draw_random_positions(coder, tokens), scaling_factors=factors,
                          training_length=None if factors is None else self.training_length(coder))

    def draw_random_positions(self, coder, tokens: Tensor) -> Optional[Tensor]:
        """--rope-random-positions N, in training: the T slots of each sentence get T distinct positions
        drawn from [0, N) and sorted (randomized positional encodings, Ruoss et al. 2023), the same in
        every self-attention of this forward, so that distances up to N are seen in training. In
        evaluation (and incremental decoding) positions stay the slot index: None."""
        n = self.random_positions
        if not (coder.training and n):
            return None
        B, T = tokens.shape
        if T > n:
            raise ValueError(f"--rope-random-positions {n} is less than the length of a training batch ({T} tokens, "
                             f"padding included): raise it above --max-source/target-positions")
        return torch.rand(B, n, device=tokens.device).topk(T, dim=1).indices.sort(dim=1).values

    def training_length(self, coder) -> int:
        """L of --rope-scaling auto: --rope-original-max-positions, else the length recorded in training."""
        length = self.original_max_positions or int(coder.original_max_positions)
        if length < 1:
            raise ValueError("--rope-scaling auto needs the training length L: this model records none (it was saved "
                             "before fairseq-rope recorded it, or never trained); give it as "
                             "--rope-original-max-positions (model_overrides {'rope_original_max_positions': L}), "
                             "the longest training sentence in tokens")
        return length

    def scaling_factors(self, encoder, src_tokens: Tensor) -> Optional[Tensor]:
        """--rope-scaling auto, outside training: each sentence's YaRN factor, its source length (tokens,
        EOS included) over the encoder's training length L, at least 1 (B, float64). None where no
        sentence is longer than L (all factors 1 change nothing: the plain path) or otherwise."""
        if encoder.training or self.scaling != "auto":
            return None
        factors = (src_tokens.ne(encoder.padding_idx).sum(1).to(torch.float64) / self.training_length(encoder))
        factors = factors.clamp(min=1)
        return factors if bool((factors > 1).any()) else None


def record_length(coder, tokens: Tensor):
    """In training: ``coder.original_max_positions`` := the longest sequence seen so far, in tokens
    (padding excluded, EOS included), the largest over all processes of a distributed run."""
    longest = tokens.ne(coder.padding_idx).sum(1).max()
    if torch.distributed.is_available() and torch.distributed.is_initialized() \
            and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(longest, op=torch.distributed.ReduceOp.MAX)
    coder.original_max_positions.copy_(torch.maximum(coder.original_max_positions, longest))
