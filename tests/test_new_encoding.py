"""A new encoding is one module and one import: the tests' own KERPLE-log (tests/kerple), registered
by conftest.py and by nothing else, is in every test that covers every encoding, in the generated table
of docs/position_encodings.md, and gets a CTranslate2 refusal that names it, without a line of those
tests or of the plugin written for it."""

import argparse

import pytest

import test_encodings
import test_features
from fairseq_rope.ct2 import ExportError, check_exportable
from fairseq_rope.encodings import ENCODINGS
from kerple import KerpleLog


def test_the_tests_encoding_is_registered_like_the_plugins():
    assert ENCODINGS["kerple_transformer"] is KerpleLog
    from fairseq.models import ARCH_MODEL_REGISTRY

    assert {"kerple_transformer", "kerple_transformer_wmt_en_de", "kerple_transformer_wmt_en_de_big",
            "kerple_transformer_iwslt_de_en"} <= set(ARCH_MODEL_REGISTRY)


def test_it_is_in_the_formula_decoding_padding_and_precision_tests():
    assert ("kerple_transformer", []) in test_encodings.VARIANTS
    for name in ("test_attention_equals_its_papers_formula_in_float64", "test_incremental_decoding_equals_full_pass",
                 "test_sentence_alone_equals_inside_left_padded_batch", "test_half_precision_runs_in_its_dtype",
                 "test_scores_depend_on_relative_positions_only"):
        marks = getattr(test_encodings, name).pytestmark
        assert any(("kerple_transformer", []) in mark.args[1] for mark in marks if mark.name == "parametrize"), name


def test_it_is_a_column_of_the_feature_matrix_and_of_its_generated_table():
    assert test_features.ENCODINGS["kerple"] == ("kerple_transformer", [])
    assert {feature.name for feature, encoding in test_features.CELLS if encoding == "kerple"} == \
        {feature.name for feature in test_features.FEATURES}
    assert any(encoding == "kerple" for encoding, _, _ in test_features.TWO_FORWARDS)
    table = test_features.matrix_markdown(list(test_features.ENCODINGS))
    head = next(line for line in table.splitlines() if line.startswith("| fairseq feature"))
    assert "| kerple |" in head
    # the published table lists the packaged encodings only
    assert "kerple" not in test_features.matrix_markdown()


def test_ctranslate2_refuses_it_naming_it():
    args = argparse.Namespace(arch="kerple_transformer", decoder_embed_dim=32)
    with pytest.raises(ExportError) as error:
        check_exportable(args, "kerple_transformer")
    assert str(error.value) == ("cannot export to CTranslate2: --arch kerple_transformer: KERPLE-log (Chi et al. "
                                "2022), registered by the tests (kerple.KerpleLog) has no CTranslate2 exporter "
                                "(no entry in fairseq_rope_translation.ct2_spec.EXPORTERS)")
