"""The recorded preprocessing as fairseq's extension point: ``--bpe recorded``.

    fairseq-interactive DATA_BIN --user-dir fairseq_rope --path CKPT --bpe recorded --beam 4 --lenpen 0.6

applies what prepare.sh recorded in ``DATA_BIN/preprocessing.json`` (fairseq_rope_text.preprocessing):
the source side is pretokenized and split into subwords as the training text was (Moses without
escaping, with punctuation normalization; subword-nmt with its vocabulary filter, or sentencepiece),
and a translation is joined and detokenized as fairseq-rope-score does. It stands for fairseq's
``--tokenizer`` and ``--bpe`` together: give no ``--tokenizer`` (one beside it is refused). The record
is read from the task's data directory unless ``--preprocessing`` names another directory or record;
its languages are the task's (``--source-lang``/``--target-lang``), else the record's. For a data-bin made before records,
what it tells is applied, said in one line with the command that writes the record.
"""

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Optional

from fairseq.data.encoders import register_bpe
from fairseq.dataclass import FairseqDataclass
from omegaconf import II

from fairseq_rope_text import preprocessing

LOG = logging.getLogger(__name__)  # (fairseq's commands show it in their log)

@dataclass
class RecordedPreprocessingConfig(FairseqDataclass):
    preprocessing: Optional[str] = field(
        default=None, metadata={"help": "the data-bin (or its preprocessing.json) whose recorded preprocessing is "
                                        "applied (default: the task's data directory)"})
    # the task's data directory and languages (fairseq passes an interpolation through only for a field
    # without help, which gets no command-line flag)
    task_data: Optional[str] = II("task.data")
    task_source_lang: Optional[str] = II("task.source_lang")
    task_target_lang: Optional[str] = II("task.target_lang")
    tokenizer: Optional[str] = II("tokenizer._name")  # fairseq's --tokenizer, refused beside --bpe recorded


@register_bpe("recorded", dataclass=RecordedPreprocessingConfig)
class RecordedPreprocessing:
    """fairseq's BPE interface (encode: raw source text -> subwords; decode: subwords -> text) over a record."""

    def __init__(self, cfg):
        if cfg.tokenizer:
            raise ValueError(f"{os.path.basename(sys.argv[0])}: error: --bpe recorded applies the data's recorded "
                             f"pretokenization itself: leave out --tokenizer {cfg.tokenizer} (the text would be "
                             "tokenized twice)")
        path = cfg.preprocessing or str(cfg.task_data).split(":")[0]  # (data shards a:b:c share a record)
        record = (preprocessing.read(path) if os.path.isfile(path) else
                  preprocessing.resolve(path, cfg.task_source_lang, cfg.task_target_lang))
        if record.context:
            LOG.warning(f"{record.origin}: the model was trained with {record.context} sentences of context; "
                        f"fairseq's commands translate each line without them: use fairseq-rope-doc-translate or "
                        f"fairseq-rope-translate")
        self._use(record, cfg.task_source_lang, cfg.task_target_lang)

    @classmethod
    def of(cls, record: preprocessing.Preprocessing, source_lang: Optional[str] = None,
           target_lang: Optional[str] = None) -> "RecordedPreprocessing":
        """The interface over a record already read (the Python API's, which may be assumed for an old data-bin)."""
        self = cls.__new__(cls)
        self._use(record, source_lang, target_lang)
        return self

    def _use(self, record, source_lang, target_lang):
        self.record = record
        self.source_lang = source_lang or record.source_lang
        self.target_lang = target_lang or record.target_lang

    def encode(self, x: str) -> str:
        return self.record.encode(x, self.source_lang)

    def decode(self, x: str) -> str:
        return self.record.decode(x, self.target_lang)
