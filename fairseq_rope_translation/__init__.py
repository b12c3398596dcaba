"""fairseq-rope's translation wing: text in, translations out, with a model the plugin (``fairseq_rope``) defines.

A package beside the plugin, not inside it: ``--user-dir fairseq_rope`` imports the plugin's ``__init__``,
which must not carry what translates text, and the commands and the server ask what a model directory is
(:mod:`.model_files`) before torch or fairseq are imported, which no module under ``fairseq_rope/`` can
do (importing one imports fairseq). Imports go one way: this wing imports the plugin, the text side
(``fairseq_rope_text``) and the checkpoint reader (``fairseq_rope_checkpoints``); the plugin, the
text side and the checkpoint reader never import it; the commands and the server import it.

    interface.py      TranslatorInterface: the methods every engine has, the text-level ones written once
    texts.py          texts of a format -> the sentences to translate -> the texts translated (torch-free)
    model_files.py    what a model directory is: a fairseq-rope-ct2 export or checkpoints (torch-free)
    fairseq_engine.py the engine on fairseq: fairseq's hub interface with the prefix-forced search
    ct2_spec.py       a checkpoint's CTranslate2 spec, per encoding (EXPORTERS), or why not
    ct2_export.py     the export written atomically, with the dictionaries and the record
    ct2_cache.py      exports made once per content and reused (load_translator's default)
    ct2_engine.py     the engine on CTranslate2, decoding as fairseq's
    loader.py         load_translator: the engine chosen once

The library's lines (which engine, why) are records of the logger ``fairseq_rope_translation``, shown on
stderr as ``[fairseq-rope] ...`` unless the application routes them elsewhere (fairseq-rope-serve: into
its levelled log).
"""

import logging
import sys


class _Stderr(logging.StreamHandler):
    """stderr as it is when a line is written (a test's capture, a redirected stream), not at import."""

    def __init__(self):
        logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr


LOG = logging.getLogger(__name__)
if not LOG.handlers:
    _handler = _Stderr()
    _handler.setFormatter(logging.Formatter("[fairseq-rope] %(message)s"))
    LOG.addHandler(_handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False  # (not again through fairseq's root handler, in fairseq's format)
