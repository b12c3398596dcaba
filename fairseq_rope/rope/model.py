"""The rotary Transformer: fairseq's ``transformer`` with RoPE in every self-attention.

Registered as model ``rope_transformer`` with architectures named after fairseq's:
``rope_transformer`` (= base), ``rope_transformer_wmt_en_de``, ``rope_transformer_wmt_en_de_big``,
``rope_transformer_vaswani_wmt_en_de_big``, ``rope_transformer_iwslt_de_en``.

Everything but the self-attention module is fairseq's (fairseq_rope/encodings.py: the scaffold every
encoding shares): embeddings, layers, cross-attention, incremental decoding, checkpoints. By default there
are no additive token-position embeddings (the paper's RoFormer); ``--add-token-positional-embeddings``
restores them. What RoPE needs of the scaffold is in options.py.
"""

from fairseq.models import register_model
from fairseq.models.transformer import transformer_vaswani_wmt_en_de_big

from ..encodings import SIZES, EncodingTransformerModel, register_architectures
from .options import RopeOptions


@register_model("rope_transformer")
class RoPETransformerModel(EncodingTransformerModel):
    """Transformer with Rotary Position Embedding in encoder and decoder self-attention."""

    encoding = RopeOptions


register_architectures(RoPETransformerModel, sizes={**SIZES, "_vaswani_wmt_en_de_big": transformer_vaswani_wmt_en_de_big})
