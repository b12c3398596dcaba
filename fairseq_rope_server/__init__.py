"""fairseq-rope-serve's web service: LibreTranslate's API and a web page over translators.

It imports the text layer (fairseq_rope_text) and Starlette, never the model library: a translator is
any object with ``translate``/``encode`` (fairseq_rope.hub.Translator, fairseq_rope.ct2.CTranslate2Translator),
loaded by the command (fairseq_rope_cli.serve) and handed to :func:`fairseq_rope_server.app.make_app`.
"""
