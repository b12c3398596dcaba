"""Translate raw sentences from Python with a trained model, like fairseq's hub interface.

    from fairseq_rope.hub import load_translator
    mt = load_translator("work/sample/checkpoints/rope_transformer", "work/sample/data-bin",
                         checkpoint_file="checkpoint_avg_last5.pt")
    mt.translate(["The small dog sees the red house."])  # beam 4, length penalty 0.6

The translator (fairseq_rope_translation.interface.TranslatorInterface: text -> subwords -> beam search ->
text) has the paper's decoding defaults and checked paths. The text is turned into subwords as the training
text was: by the preprocessing prepare.sh recorded in the data-bin (``preprocessing.json``, read through
``--bpe recorded``, fairseq_rope.recorded_bpe), and translations are joined and detokenized as
fairseq-rope-score does. Works for every encoding's checkpoints, averaged ones included.

By default (``backend="auto"``) it runs on CTranslate2 wherever that gives the same translations (an
export made once and cached, see :func:`load_translator`), else on fairseq, with the same methods
either way; ``backend="fairseq"`` always gives fairseq's hub interface (:class:`Translator`). A directory
written by ``fairseq-rope-ct2`` (which holds the dictionaries and the record itself) loads alone:

    mt = load_translator("work/sample/ct2/rope", threads=4)

The documented way in; the code lives in the translation wing (fairseq_rope_translation: loader.py,
fairseq_engine.py), which this module re-exports. Importing the plugin (``--user-dir fairseq_rope``)
does not import it.
"""

from fairseq_rope_translation.fairseq_engine import Translator  # noqa: F401
from fairseq_rope_translation.interface import TranslatorInterface  # noqa: F401
from fairseq_rope_translation.loader import (BACKENDS, check_device, ctranslate2_translator,  # noqa: F401
                                             load_translator, why_not_ctranslate2)
