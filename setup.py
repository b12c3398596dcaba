from setuptools import find_packages, setup

setup(
    name="fairseq-rope",
    version="0.4.0",
    description="Rotary Position Embedding (RoFormer) for fairseq machine translation",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=find_packages(include=["fairseq_rope", "fairseq_rope.*", "fairseq_rope_cli", "fairseq_rope_cli.*",
                                    "fairseq_rope_text", "fairseq_rope_text.*", "fairseq_rope_server",
                                    "fairseq_rope_server.*", "fairseq_rope_checkpoints",
                                    "fairseq_rope_translation", "fairseq_rope_translation.*"]),
    package_data={"fairseq_rope_server": ["web/index.html"]},
    python_requires=">=3.10,<3.14",
    install_requires=[
        # fairseq's main branch with the dataclass fix for Python 3.11+, public source;
        # see docs/installation.md#why-fairseq-fixed.
        "fairseq-fixed==0.12.3.1",
        "torch>=2.6",
        "numpy",
        # the two-sided tests over training seeds (Welch's t, the exact permutation test: fairseq_rope_cli/seeds.py)
        "scipy>=1.11",
        "sacrebleu>=2.3,<3",
        "sacremoses>=0.1",
        "subword-nmt>=0.3.8",
        "sentencepiece>=0.1.99",
        # sentence segmentation of running text (fairseq-rope-translate, translate_text): Moses' rules for
        # the 24 languages they cover, sentencex's for the others (docs/serving.md)
        "sentence-splitter>=1.4",
        "sentencex>=1.0",
    ],
    entry_points={
        "console_scripts": [
            "fairseq-rope-average = fairseq_rope_cli.average:main",
            "fairseq-rope-prep = fairseq_rope_cli.prep:main",
            "fairseq-rope-score = fairseq_rope_cli.score:main",
            "fairseq-rope-results = fairseq_rope_cli.results:main",
            "fairseq-rope-compare = fairseq_rope_cli.compare:main",
            "fairseq-rope-plot-training = fairseq_rope_cli.plot_training:main",
            "fairseq-rope-ct2 = fairseq_rope_cli.ct2_convert:main",
            "fairseq-rope-ct2-generate = fairseq_rope_cli.ct2_generate:main",
            "fairseq-rope-checkpoint = fairseq_rope_cli.checkpoint:main",
            "fairseq-rope-progress = fairseq_rope_cli.progress:main",
            "fairseq-rope-doc-translate = fairseq_rope_cli.doc_translate:main",
            "fairseq-rope-contrastive = fairseq_rope_cli.contrastive:main",
            "fairseq-rope-translate = fairseq_rope_cli.translate:main",
            "fairseq-rope-serve = fairseq_rope_cli.serve:main",
            "fairseq-rope-corpus = fairseq_rope_cli.corpus:main",
            "fairseq-rope-tune = fairseq_rope_cli.tune:main",
            "fairseq-rope-record = fairseq_rope_cli.record:main",
        ],
    },
    extras_require={
        "plots": ["matplotlib>=3.7"],
        # fairseq-rope-ct2: rotary encoder/decoder specs; checked with 4.8.5
        "ct2": ["ctranslate2>=4.8,<5"],
        # Word documents (.docx) for fairseq-rope-translate and POST /translate_file (fairseq_rope_text.files)
        "files": ["python-docx>=1.1"],
        # fairseq-rope-corpus pages: HTML pages (lxml), Gale & Church's sentence alignment (galechurch);
        # fairseq-rope-corpus lexical: the word aligner that scores every pair (eflomal)
        "corpus": ["lxml>=4.9", "galechurch>=0.1", "eflomal>=2.0"],
        # fairseq-rope-serve: an ASGI app (Starlette; python-multipart for form bodies) on uvicorn; files too
        "serve": ["starlette>=0.37", "uvicorn>=0.29", "python-multipart>=0.0.9", "python-docx>=1.1"],
        "test": ["pytest>=7", "pytest-xdist>=3", "filelock>=3.12", "ctranslate2>=4.8,<5", "hypothesis>=6.100",
                 # the server's tests: its extra, a real client (deep-translator), a real browser (selenium)
                 "starlette>=0.37", "uvicorn>=0.29", "python-multipart>=0.0.9", "httpx>=0.27",
                 "deep-translator>=1.11", "selenium>=4.20", "python-docx>=1.1",
                 "lxml>=4.9", "galechurch>=0.1", "eflomal>=2.0"],
    },
)
