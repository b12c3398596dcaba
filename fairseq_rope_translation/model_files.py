"""What a model directory is, decided once for load_translator, fairseq-rope-translate and fairseq-rope-serve:
a fairseq-rope-ct2 export (its model, dictionaries and record in it: no data-bin) or checkpoints (with the
data-bin they were trained on). Standard library only: the commands ask before torch is imported."""

import os
from typing import NamedTuple, Optional

EXPORT_MODEL = "model.bin"  # CTranslate2's model file: what makes a directory an export
METADATA = "fairseq_rope_ct2.json"  # what fairseq-rope-ct2 writes beside it (languages, arch, limits)

# what does not fit, each door saying it in its own words
EXPORT_WITH_DATA_BIN = "an export given a data-bin"
EXPORT_ON_FAIRSEQ = "an export with backend fairseq"
NO_DATA_BIN = "checkpoints without their data-bin"


class ModelFiles(NamedTuple):
    """``export``: the directory is a fairseq-rope-ct2 export; ``misfit``: what of the given does not fit it
    (EXPORT_WITH_DATA_BIN, EXPORT_ON_FAIRSEQ, NO_DATA_BIN), None when all does."""
    export: bool
    misfit: Optional[str]


def is_export(model_dir: str) -> bool:
    """Whether ``model_dir`` is a fairseq-rope-ct2 export."""
    return os.path.isfile(os.path.join(model_dir, EXPORT_MODEL))


def model_files(model_dir: str, data_bin: Optional[str] = None, backend: str = "auto") -> ModelFiles:
    """What ``model_dir`` is, and what of ``data_bin`` and ``backend`` does not fit it."""
    export = is_export(model_dir)
    if export and data_bin:
        return ModelFiles(True, EXPORT_WITH_DATA_BIN)
    if export and backend == "fairseq":
        return ModelFiles(True, EXPORT_ON_FAIRSEQ)
    return ModelFiles(export, None if export or data_bin else NO_DATA_BIN)
