"""The translation wing's two torch-free decisions, each written once: what a model directory is
(model_files: load_translator, fairseq-rope-translate and fairseq-rope-serve ask it), and texts split
into the sentences to translate and joined back (SplitTexts: the translators and the server)."""

import os
import subprocess
import sys

import pytest

from fairseq_rope_translation.model_files import (EXPORT_ON_FAIRSEQ, EXPORT_WITH_DATA_BIN, NO_DATA_BIN, ModelFiles,
                                                  model_files)
from fairseq_rope_translation.texts import SplitTexts


@pytest.fixture
def dirs(tmp_path):
    export, checkpoints = tmp_path / "export", tmp_path / "checkpoints"
    export.mkdir()
    checkpoints.mkdir()
    (export / "model.bin").write_bytes(b"")
    (checkpoints / "checkpoint_best.pt").write_bytes(b"")
    return str(export), str(checkpoints)


@pytest.mark.parametrize("backend", ["auto", "ctranslate2", "fairseq"])
def test_an_export_and_checkpoints_are_told_apart(dirs, backend):
    export, checkpoints = dirs
    assert model_files(export, None, backend) == ModelFiles(True, EXPORT_ON_FAIRSEQ if backend == "fairseq" else None)
    assert model_files(export, "data-bin", backend) == ModelFiles(True, EXPORT_WITH_DATA_BIN)
    assert model_files(checkpoints, None, backend) == ModelFiles(False, NO_DATA_BIN)
    assert model_files(checkpoints, "data-bin", backend) == ModelFiles(False, None)


def test_the_decision_imports_no_torch():
    """The commands check their arguments with it before torch is imported (a new interpreter)."""
    code = ("import sys, fairseq_rope_translation.model_files, fairseq_rope_translation.texts; "
            "print(sorted(m for m in ('torch', 'fairseq', 'fairseq_rope') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    assert done.returncode == 0 and done.stdout == "[]\n", done.stderr


def test_texts_split_into_sentences_and_joined_back_in_place():
    texts = ["One two. Three four.\n\n- Five six.\n", "", "7 8"]
    split = SplitTexts(texts, "text", "en")
    assert split.sentences == ["One two.", "Three four.", "Five six."] and not split.align
    assert split.join([s.upper() for s in split.sentences]) == ["ONE TWO. THREE FOUR.\n\n- FIVE SIX.\n", "", "7 8"]


def test_inline_markup_asks_for_the_alignment_and_subtitles_keep_their_cues():
    assert SplitTexts(["<p>One <b>two</b>.</p>"], "html", "en").align
    plain = SplitTexts(["<p>One two.</p><p>Three.</p>"], "html", "en")
    assert plain.sentences == ["One two.", "Three."] and not plain.align
    assert plain.join(["Eins zwei.", "Drei."]) == ["<p>Eins zwei.</p><p>Drei.</p>"]
    cue = SplitTexts(["One two\nthree four."], "srt", "en")
    assert cue.join([s.upper() for s in cue.sentences]) == ["ONE TWO\nTHREE FOUR."] and not cue.align
    assert SplitTexts(["<i>One two.</i>"], "vtt", "en").align
