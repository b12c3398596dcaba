"""fairseq-rope-serve's web service: LibreTranslate's API and a web page over translators.

It imports the text layer (fairseq_rope_text), the translation wing's torch-free texts module
(fairseq_rope_translation.texts) and Starlette, never the model library nor the engines: a translator is
any object with ``translate``/``encode`` (fairseq_rope_translation.fairseq_engine.Translator,
fairseq_rope_translation.ct2_engine.CTranslate2Translator), loaded by the command (fairseq_rope_cli.serve)
and handed to :func:`fairseq_rope_server.app.make_app`.
"""
