"""fairseq-rope: Rotary Position Embedding (RoFormer) for fairseq translation models.

Use with any fairseq command line: ``--user-dir fairseq_rope --arch rope_transformer_wmt_en_de``.
Importing the package registers the ``rope_transformer`` model and its architectures, the
baselines it is measured against (``rpe_transformer``: Shaw's relative positions, ``t5bias_transformer``:
T5's relative bias, ``alibi_transformer``: ALiBi, ``nope_transformer``: no positions, each in fairseq's
sizes), the
``translation_resumable`` task (translation whose interrupted runs resume exactly), ``--bpe recorded``
(the preprocessing prepare.sh recorded with the data, for fairseq-interactive and the hub), and
allowlists what fairseq checkpoints pickle for ``torch.load(weights_only=True)``.
"""

__version__ = "0.4.0"

REQUIRED_FAIRSEQ = "fairseq-fixed==0.12.3.1"


import logging  # noqa: E402

# fairseq's text-to-speech task, which translation never uses, configures logging when fairseq is
# imported and logs that tensorboardX is missing: a line that would open every command's output
logging.getLogger("fairseq.tasks.text_to_speech").setLevel(logging.WARNING)


def _check_fairseq():
    """Fails early, and clearly, on a fairseq that cannot run this plugin."""
    hint = (
        f"fairseq-rope needs fairseq >= 0.12.3 as packaged by {REQUIRED_FAIRSEQ} "
        f"(fairseq's main branch patched for Python 3.11+). Install it with: "
        f"pip uninstall -y fairseq ve-fairseq; pip install '{REQUIRED_FAIRSEQ}'"
    )
    try:
        import fairseq
        from fairseq.models.transformer import TransformerEncoderBase  # noqa: F401
    except Exception as error:  # 0.12.2 on Python 3.11 raises ValueError, absent raises ImportError
        raise ImportError(f"{hint}. Importing fairseq failed with: {error!r}") from error
    version = tuple(int(part) for part in fairseq.__version__.split(".")[:3] if part.isdigit())
    if version < (0, 12, 3):
        raise ImportError(f"{hint}. Found fairseq {fairseq.__version__} at {fairseq.__file__}.")


_check_fairseq()

from fairseq_rope_checkpoints import allow_fairseq_checkpoints  # noqa: E402

allow_fairseq_checkpoints()

from . import rope  # noqa: E402,F401  RoPE, a package of its own (fairseq_rope/rope/)
from .rope import RopeOptions, RoPETransformerModel, RotaryEmbedding, RotaryLinearAttention  # noqa: E402,F401
from .rope import RotaryMultiheadAttention, apply_rotary  # noqa: E402,F401
from . import recorded_bpe  # noqa: E402,F401  --bpe recorded: the data's recorded preprocessing
from .task import ResumableTranslationTask  # noqa: E402,F401
from . import alibi, nope, shaw, t5_bias  # noqa: E402,F401  the other position encodings, one module each
