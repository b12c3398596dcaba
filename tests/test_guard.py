"""Importing the plugin next to a fairseq it cannot run with fails with a message that says what to do."""

import os
import subprocess
import sys

import pytest

BROKEN_ON_PY311 = "raise ValueError(\"mutable default <class 'fairseq.dataclass.configs.CommonConfig'> for field common is not allowed: use default_factory\")\n"
OLD_RELEASE = "__version__ = '0.12.2'\n"


@pytest.mark.parametrize("init, cause", [(BROKEN_ON_PY311, "mutable default"), (OLD_RELEASE, "Found fairseq 0.12.2")])
def test_incompatible_fairseq_is_named(tmp_path, init, cause):
    package = tmp_path / "fairseq"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text(init)
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / "transformer.py").write_text("class TransformerEncoderBase: pass\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))  # the fake fairseq first; fairseq_rope as installed
    result = subprocess.run([sys.executable, "-c", "import fairseq_rope"], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: fairseq-rope needs fairseq >= 0.12.3 as packaged by fairseq-fixed==0.12.3.1")
    assert "pip install 'fairseq-fixed==0.12.3.1'" in last and cause in last
