"""The fairseq-rope-* commands, beside the plugin as fairseq_cli is beside fairseq.

One module per command, each with ``main(argv=None)``, also runnable as ``python -m fairseq_rope_cli.<module>``:

    fairseq-rope-average         average.py        checkpoint averaging (fairseq's flags, weights-only loading)
    fairseq-rope-prep            prep.py           tokenize / detokenize / clean / sgm / spm-train / subwords / record / concat-pairs / context
    fairseq-rope-score           score.py          fairseq-generate output -> hypotheses, sacreBLEU, paper BLEU, JSON
    fairseq-rope-results         results.py        result JSONs -> one markdown table
    fairseq-rope-compare         compare.py        runs by source length, paired bootstrap, table and plot
    fairseq-rope-plot-training   plot_training.py  fairseq-train logs -> loss and BLEU curves
    fairseq-rope-ct2             ct2_convert.py    a checkpoint -> CTranslate2 model (fairseq_rope_translation.ct2_export)
    fairseq-rope-ct2-generate    ct2_generate.py   beam search with CTranslate2, printed as fairseq-generate prints it
    fairseq-rope-checkpoint      checkpoint.py     a run's checkpoints for the recipe: resume point, final name, fit
    fairseq-rope-progress        progress.py       a fairseq command's output to its log, progress lines to the terminal
    fairseq-rope-doc-translate   doc_translate.py  documents translated in order, each sentence with its context
    fairseq-rope-contrastive     contrastive.py    a contrastive pronoun test (ContraPro's format) scored in context
    fairseq-rope-translate       translate.py      plain text of any length -> its translation, the layout kept

Shared helpers live in common.py. The package does not import fairseq_rope (and so fairseq) at
import time, so that every ``--help`` answers at once; the commands that need it import it when
they run.
"""
