"""The text side of fairseq-rope, standard library only at import time: how a sentence becomes model
input and back (``preprocessing``, the record prepare.sh writes with the data) and the document
format (``documents``). Both the plugin (``fairseq_rope``) and the commands (``fairseq_rope_cli``)
read them from here; nothing here imports either.
"""
