"""``--task translation_resumable``: fairseq's translation task whose runs resume exactly.

fairseq 0.12 builds the training batches once, from ``seed + epoch`` of the epoch the run
*starts* in, and reuses them in every later epoch (only their order is reshuffled). A run
resumed from a checkpoint of epoch E >= 2 therefore builds them from ``seed + E`` and trains on
differently composed batches than the run that never stopped (measured: parameters 4e-4 apart
15 updates after resuming in epoch 2, identical when resuming in epoch 1). fairseq already knows
how to rebuild the batches every epoch from ``seed + epoch`` (``rebuild_batches``), but its
translation task has no such option; this task is the translation task with it switched on, so
an interrupted run and an uninterrupted one see the same batches in every epoch.
"""

from dataclasses import dataclass, field

from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask


@dataclass
class ResumableTranslationConfig(TranslationConfig):
    rebuild_batches: bool = field(
        default=True, metadata={"help": "rebuild the batches every epoch from seed + epoch (fairseq's "
                                        "rebuild_batches), so that a resumed run trains on the same batches"})


@register_task("translation_resumable", dataclass=ResumableTranslationConfig)
class ResumableTranslationTask(TranslationTask):
    """fairseq's ``translation`` task, with ``rebuild_batches`` on by default."""
