"""The old path of RoPE's options: they live in fairseq_rope/rope/options.py (this module only re-exports)."""

from .rope.options import ATTENTIONS, LAYOUTS, ROTATIONS, SCALINGS, RopeOptions, record_length  # noqa: F401
