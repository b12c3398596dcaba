"""The old path of the ``rope_transformer`` model: it lives in fairseq_rope/rope/model.py (this module only
re-exports)."""

from .rope.model import RoPETransformerModel  # noqa: F401
