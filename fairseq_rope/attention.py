"""The old path of RoPE's self-attention: it lives in fairseq_rope/rope/attention.py (this module only
re-exports)."""

from .rope.attention import RopeInputs, RotaryMultiheadAttention  # noqa: F401
