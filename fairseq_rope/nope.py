"""NoPE: no position information in self-attention (Kazemnejad et al., NeurIPS 2023).

fairseq's attention, with no position embeddings and no position term: an encoder layer cannot tell
one order of its tokens from another (it is permutation-equivariant); the decoder's future mask is its
only source of order. Kazemnejad et al. find decoder-only models learn positions that way; Gumma et al.
(2024) report that it does not work for encoder-decoder translation. Registered as
``nope_transformer`` and its sizes, a control for the other encodings.
"""

from dataclasses import dataclass

from fairseq.models import register_model

from .encodings import EncodingTransformerModel, PositionEncoding, register_architectures


@dataclass(frozen=True)
class NoPE(PositionEncoding):
    """NoPE has no options."""

    prefix = "nope"
    title = "NoPE: no position information (Kazemnejad et al. 2023): no options"


@register_model("nope_transformer")
class NoPETransformerModel(EncodingTransformerModel):
    """Transformer without position information in its self-attention."""

    encoding = NoPE


register_architectures(NoPETransformerModel)
