"""RoPE, Rotary Position Embedding (RoFormer, Su et al. 2021): one position encoding among the others,
its modules in this package, which imports from the scaffold (fairseq_rope/encodings.py,
fairseq_rope/self_attention.py) only, as every encoding does. Importing it registers the
``rope_transformer`` model and its architectures.

  * options.py: ``RopeOptions``, every ``--rope-*`` flag as a field, and what RoPE asks of the
    scaffold (its self-attention, the training length each stack records, each forward's inputs);
  * attention.py: ``RopeInputs`` (each forward's random positions and ``auto`` factors) and
    ``RotaryMultiheadAttention``, the self-attention with q and k rotated;
  * linear_attention.py: eq. 19, ``rope_linear_attention`` and ``RotaryLinearAttention``;
  * rotary.py: ``RotaryEmbedding``, the frequencies (with the scalings), the cos/sin table, eq. 34;
  * fused_rotary.py: eq. 34 as one Triton kernel, forward and backward;
  * model.py: the ``rope_transformer`` model and its architectures.
"""

from .attention import RopeInputs, RotaryMultiheadAttention  # noqa: F401
from .linear_attention import RotaryLinearAttention, rope_linear_attention  # noqa: F401
from .model import RoPETransformerModel  # noqa: F401
from .options import RopeOptions  # noqa: F401
from .rotary import RotaryEmbedding, apply_rotary  # noqa: F401
