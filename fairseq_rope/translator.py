"""The documented path of the translator interface (fairseq_rope_translation.interface), re-exported."""

from fairseq_rope_translation.interface import EngineError, TranslatorInterface, warn_if_running_text  # noqa: F401
