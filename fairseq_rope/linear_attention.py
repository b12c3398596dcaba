"""The old path of RoPE with linear attention (eq. 19): it lives in fairseq_rope/rope/linear_attention.py
(this module only re-exports)."""

from .rope.linear_attention import EPS, RotaryLinearAttention, elu_feature_map, rope_linear_attention  # noqa: F401
