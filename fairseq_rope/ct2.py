"""The documented path of CTranslate2's side (fairseq_rope.ct2.CTranslate2Translator, EXPORTERS), re-exported
from the translation wing: the spec (fairseq_rope_translation.ct2_spec), the export (ct2_export), the cache
(ct2_cache) and the engine (ct2_engine)."""

from fairseq_rope_translation.ct2_cache import (CACHE, EXPORT_FORMAT, cache_dirs, cache_key,  # noqa: F401
                                                cached_export, remove_stale_exports)
from fairseq_rope_translation.ct2_engine import (FAIRSEQ_ONLY, CTranslate2Translator, fairseq_max_len,  # noqa: F401
                                                 subword_text)
from fairseq_rope_translation.ct2_export import export, load_model  # noqa: F401
from fairseq_rope_translation.ct2_spec import (EXPORTERS, Exporter, ExportError, check_exportable,  # noqa: F401
                                               checkpoint_args, exporter_of, model_name_of, model_spec)
from fairseq_rope_translation.model_files import METADATA  # noqa: F401
