"""The old path of RoPE's rotation: it lives in fairseq_rope/rope/rotary.py (this module only re-exports;
patch that module, not this one)."""

from .rope.rotary import (  # noqa: F401
    RotaryEmbedding,
    apply_rotary,
    frequencies,
    signed_rows,
    swap_pairs,
    yarn_magnitude,
)
