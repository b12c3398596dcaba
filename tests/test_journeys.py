"""A user's journeys through the translator, whichever engine runs it: the Python API's documented calls
and the installed commands, with their defaults, on trained models of every encoding the default engine
covers (RoPE, the transformer, Shaw's RPE, T5's bias), with ctranslate2 installed and without it. Each
command runs in a fresh process, as a user runs it. What the docs promise equal is compared: the same
translations; the same scores within float32 rounding, and equal to fairseq's own scorer
(fairseq-generate --score-reference). A change of a default (engine, rotation, splitter) runs through these."""

import json
import math
import re
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
import torch

from conftest import REVERSAL_MODELS, USER_DIR, free_port, run_tool, word_document, word_runs
from fairseq_rope_text.preprocessing import resolve

pytest.importorskip("ctranslate2")  # in the test extras; without it there is one engine and nothing to compare

TEXT = 30  # test sentences each journey translates


@pytest.fixture(scope="module")
def setup(reversal_models, tmp_path_factory):
    """The shared models, each copied as checkpoint_best.pt into a directory of its own (the exports the
    default engine makes go beside it), and a data-bin with its preprocessing record (as prepare.sh writes
    one); the test sentences raw, in running text (two paragraphs, an indented line) and as documents; and a
    copy of the environment in which ctranslate2 cannot be imported (a module of that name that fails, first
    on the path), for the commands."""
    root, checkpoints = reversal_models
    base = tmp_path_factory.mktemp("journeys")
    shutil.copytree(root / "bin", base / "bin")
    resolve(str(root / "bin"), "src", "tgt", bpe_codes=str(root / "codes")).write(str(base / "bin"))
    models = {}
    for name, checkpoint in checkpoints.items():
        (base / name).mkdir()
        shutil.copyfile(checkpoint, base / name / "checkpoint_best.pt")
        models[name] = base / name
    sources = (root / "raw.src").read_text().splitlines()[:TEXT]
    (base / "test.src").write_text("".join(s + "\n" for s in sources))
    (base / "text.src").write_text(" ".join(sources[:4]) + "\n    " + sources[4] + "\n\n" + "\n".join(sources[5:12]))
    (base / "docids").write_text("".join(f"{n // 7}\n" for n in range(len(sources))))
    # a page whose paragraphs hold inline elements, and a subtitle file with cue tags
    words = next(s.split() for s in sources[12:] if len(s.split()) >= 6)
    (base / "page.html").write_text(
        f"<html><body><h1>{sources[13]}</h1>\n<p>{' '.join(words[:2])} <b>{' '.join(words[2:4])}</b> "
        f"{' '.join(words[4:])}</p>\n<p><a href='x.html'>{sources[14]}</a> <code>w1 w2</code> {sources[15]}</p>"
        "</body></html>\n")
    (base / "talk.srt").write_text(f"1\n00:00:01,000 --> 00:00:02,000\n<i>{sources[16]}</i>\n\n"
                                   f"2\n00:00:03,000 --> 00:00:04,000\n{{\\an8}}{sources[17]}\n")
    # the page's two paragraphs as a Word document: a bold run, a hyperlink
    (base / "page.docx").write_bytes(word_document([
        [" ".join(words[:2]) + " ", (" ".join(words[2:4]), {"bold": True}), " " + " ".join(words[4:])],
        [(sources[14], {"link": "https://example.org/x"}), " " + sources[15]]]))
    hidden = base / "no-ctranslate2"
    hidden.mkdir()
    (hidden / "ctranslate2.py").write_text("raise ImportError(\"No module named 'ctranslate2'\")\n")
    without = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH")])))
    return dict(base=base, bin=base / "bin", models=models, sources=sources, words=words, root=root, without=without,
                env={True: dict(os.environ), False: without})


@pytest.fixture(scope="module")
def translators(setup):
    """{name: (the default translator, backend="fairseq")} of every model, as a user loads them."""
    from fairseq_rope.hub import load_translator

    return {name: (load_translator(path, setup["bin"], device="cpu", threads=1),
                   load_translator(path, setup["bin"], device="cpu", backend="fairseq"))
            for name, path in setup["models"].items()}


def reference_scores(setup, name):
    """fairseq's own scorer: fairseq-generate --score-reference on the binarized test set, each target's
    log-probability for the first TEXT sentences: its H- score (the mean over its tokens and end of sentence,
    base 2, printed in full) times its P- line's count of tokens, in natural log."""
    out = run_tool("fairseq-generate", setup["bin"], "--user-dir", USER_DIR, "--path",
                   setup["models"][name] / "checkpoint_best.pt", "--gen-subset", "test", "--score-reference",
                   "--cpu", "--batch-size", "16")
    means, counts = {}, {}
    for line in out.stdout.splitlines():
        if line.startswith("H-"):
            means[int(line.split("\t")[0][2:])] = float(line.split("\t")[1])
        elif line.startswith("P-"):
            counts[int(line.split("\t")[0][2:])] = len(line.split("\t")[1].split())
    return [math.log(2) * means[n] * counts[n] for n in range(TEXT)]


@pytest.mark.parametrize("name", REVERSAL_MODELS)
def test_the_default_translator_is_the_fairseq_translator_method_for_method(setup, translators, name):
    """load_translator's default object (CTranslate2 here) against backend="fairseq": the same interface,
    its engine readable, and every documented method the same result of the same type: translations equal;
    scores within float32 rounding of each other and of fairseq-generate --score-reference."""
    from fairseq_rope.translator import TranslatorInterface

    default, fairseq = translators[name]
    sources = setup["sources"]
    assert (default.engine, fairseq.engine) == ("ctranslate2", "fairseq")
    assert isinstance(default, TranslatorInterface) and isinstance(fairseq, TranslatorInterface)
    for attribute in ("source_lang", "target_lang", "beam", "lenpen", "max_len_b"):
        assert getattr(default, attribute) == getattr(fairseq, attribute), attribute
    assert default.longest_training_source() == fairseq.longest_training_source() > 0
    translations = fairseq.translate(sources)
    assert len(set(translations)) > TEXT // 2, translations
    assert default.translate(sources) == translations
    assert default.translate(sources[3]) == fairseq.translate(sources[3]) == translations[3]
    text = (setup["base"] / "text.src").read_text()
    assert default.translate_text(text) == fairseq.translate_text(text)
    assert default.translate_text_sentences(text) == fairseq.translate_text_sentences(text)
    documents = [sources[:7], sources[7:9], sources[9:20]]
    assert default.translate_documents(documents) == fairseq.translate_documents(documents) == \
        [translations[:7], translations[7:9], translations[9:20]]
    subwords = [default.subwords(s) for s in sources[:8]]
    assert subwords == [fairseq.subwords(s) for s in sources[:8]]
    assert default.translate_subwords(subwords) == fairseq.translate_subwords(subwords) == \
        [[t] for t in translations[:8]]
    for nbest in (default.translate_subwords(subwords, nbest=3), fairseq.translate_subwords(subwords, nbest=3)):
        assert [n[0] for n in nbest] == translations[:8] and all(1 <= len(n) <= 3 for n in nbest)
    for sentence in sources[:5]:
        ids = fairseq.encode(sentence)
        assert isinstance(default.encode(sentence), torch.LongTensor) and torch.equal(default.encode(sentence), ids)
    targets = (setup["root"] / "test.tgt").read_text().splitlines()[:TEXT]  # (the BPE'd references)
    references = [t.replace("@@ ", "") for t in targets]
    expected = reference_scores(setup, name)
    for mt in (default, fairseq):
        scores = mt.score(sources, references)
        assert scores == pytest.approx(expected, rel=1e-5, abs=1e-5), mt.engine
        assert mt.score_in_context([([], [], s, t) for s, t in zip(sources, references)]) == scores
        ids = fairseq.tgt_dict.encode_line(targets[0], add_if_not_exist=False)
        assert mt.decode(ids) == references[0]


def test_what_ctranslate2_does_not_have_names_the_backend_that_does(translators):
    """fairseq's own hub members on the CTranslate2 translator: one line naming backend='fairseq', never a bare
    missing attribute; fairseq's generation keywords likewise."""
    default, fairseq = translators["interleaved"]
    for name in ("models", "task", "generate", "cfg"):
        assert getattr(fairseq, name) is not None
        with pytest.raises(AttributeError, match=rf"'{name}' is fairseq's: this translator runs on CTranslate2; "
                                                 r"load_translator\(\.\.\., backend='fairseq'\)"):
            getattr(default, name)
    with pytest.raises(ValueError, match=r"translate\(\): sampling are fairseq's generation options"):
        default.translate("w1 w2", sampling=True)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        default.no_such_thing
    with pytest.raises(ValueError, match="takes two lists of sentences of the same length"):
        default.score(["w1"], ["w2", "w3"])


def test_translate_warns_of_running_text_on_either_engine(translators):
    """translate() given one string with several sentences translates it as one, and warns, on both engines."""
    for mt in translators["interleaved"]:
        with pytest.warns(UserWarning, match="translates the string as one sentence, but it holds several"):
            mt.translate("W1 w2 w3. W4 w5 w6.")


def test_without_ctranslate2_the_default_is_fairseq_with_the_same_translations(setup, translators, monkeypatch,
                                                                               capfd):
    """ctranslate2 not importable: load_translator's default says why in one line and gives the fairseq
    translator, whose every translation is the CTranslate2 default's."""
    from fairseq_rope.hub import load_translator

    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    capfd.readouterr()
    mt = load_translator(setup["models"]["interleaved"], setup["bin"], device="cpu")
    assert mt.engine == "fairseq"
    assert "translating with fairseq, not CTranslate2: ctranslate2 is not installed" in capfd.readouterr().err
    default, _ = translators["interleaved"]
    assert mt.translate(setup["sources"]) == default.translate(setup["sources"])


def command(setup, installed, tool, *args):
    return run_tool(tool, *args, env=dict(setup["env"][installed], OMP_NUM_THREADS="1"))


JOURNEYS = {"interleaved-with-ctranslate2": ("interleaved", True),
            "interleaved-without-ctranslate2": ("interleaved", False)}


@pytest.mark.parametrize("name, installed", [*JOURNEYS.values(), ("baseline", True)],
                         ids=[*JOURNEYS, "baseline-with-ctranslate2"])
def test_fairseq_rope_translate_as_documented_gives_the_same_text_with_and_without_ctranslate2(
        setup, translators, name, installed):
    """fairseq-rope-translate --model-dir --data-bin --input (README's command, no --backend): exit 0 and
    fairseq's translate_text, whether ctranslate2 is installed (its default) or not (fairseq)."""
    out = command(setup, installed, "fairseq-rope-translate", "--model-dir", setup["models"][name], "--data-bin",
                  setup["bin"], "--input", setup["base"] / "text.src")
    assert out.stdout == translators[name][1].translate_text((setup["base"] / "text.src").read_text())
    assert ("translating with CTranslate2" in out.stderr) == installed, out.stderr


@pytest.mark.parametrize("name, installed", [*JOURNEYS.values(), ("rpe", True)],
                         ids=[*JOURNEYS, "rpe-with-ctranslate2"])
def test_fairseq_rope_doc_translate_on_a_sentence_level_model_with_and_without_ctranslate2(
        setup, translators, name, installed, tmp_path):
    """fairseq-rope-doc-translate on a sentence-level model (the K = 0 row of a document study), with the
    arguments docs/documents.md shows: exit 0, each sentence's translation as the API's translate_documents
    gives it, on either engine; --generate-output's scores are fairseq's hypothesis scores."""
    default, fairseq = translators[name]
    args = ["--checkpoint", setup["models"][name] / "checkpoint_best.pt", "--data-bin", setup["bin"], "--input",
            setup["base"] / "test.src", "--output", tmp_path / "out.txt", "--generate-output", tmp_path / "gen.txt"]
    command(setup, installed, "fairseq-rope-doc-translate", *args)
    command(setup, installed, "fairseq-rope-doc-translate", *args[:6], "--docids", setup["base"] / "docids",
            "--output", tmp_path / "documents.txt")
    translations = (tmp_path / "out.txt").read_text().splitlines()
    assert translations == (tmp_path / "documents.txt").read_text().splitlines()
    assert translations == [doc[0] for doc in default.translate_documents([[s] for s in setup["sources"]])]
    assert translations == [doc[0] for doc in fairseq.translate_documents([[s] for s in setup["sources"]])]
    assert len((tmp_path / "gen.txt").read_text().splitlines()) == TEXT


@pytest.mark.parametrize("installed", [True, False], ids=["with-ctranslate2", "without-ctranslate2"])
def test_fairseq_rope_translate_keeps_a_pages_and_a_subtitles_inline_markup_on_either_engine(
        setup, translators, installed, tmp_path):
    """fairseq-rope-translate --input page.html / talk.srt --output ... (docs/usage.md's files): exit 0, and
    the fairseq translator's translate_texts of the file's units, its inline markup carried across, whether
    ctranslate2 is installed (its default, whose alignment is its attention) or not."""
    from fairseq_rope_text.files import read_document

    _, fairseq = translators["interleaved"]
    for name in ("page.html", "talk.srt", "page.docx"):
        out = tmp_path / f"de.{name}"
        command(setup, installed, "fairseq-rope-translate", "--model-dir", setup["models"]["interleaved"],
                "--data-bin", setup["bin"], "--input", setup["base"] / name, "--output", out)
        data = (setup["base"] / name).read_bytes()
        document = read_document(data, name.split(".")[1], name)
        expected = document.write(fairseq.translate_texts(document.units, document.markup)[0])
        assert (word_runs(out.read_bytes()) == word_runs(expected)) if name.endswith(".docx") else \
            (out.read_bytes() == expected)
    page = (tmp_path / "de.page.html").read_text()
    assert page.count("<b>") == page.count("</b>") == 1 and "<code>w1 w2</code>" in page and "href='x.html'" in page
    assert (tmp_path / "de.talk.srt").read_text().count("{\\an8}") == 1
    # the Word document's bold run and link hold the words that <b> and <a> hold in its paragraphs as HTML
    words, sources = setup["words"], setup["sources"]
    twins = fairseq.translate_texts([f"{' '.join(words[:2])} <b>{' '.join(words[2:4])}</b> {' '.join(words[4:])}",
                                     f"<a href='x.html'>{sources[14]}</a> {sources[15]}"], "html")[0]
    bold = re.search(r"<b>(.*?)</b>", twins[0]).group(1)
    link = re.search(r"<a href='x.html'>(.*?)</a>", twins[1]).group(1)
    runs = word_runs((tmp_path / "de.page.docx").read_bytes())
    assert [text for text, is_bold, _, _ in runs[0] if is_bold] == [bold]
    assert [(text, url) for text, _, _, url in runs[1] if url] == [(link, "https://example.org/x")]


def serve(setup, installed, *flags):
    """fairseq-rope-serve as serving.md starts it (--model MODEL_DIR DATA_BIN), on a free port: (process, URL)."""
    port = free_port()
    process = subprocess.Popen([shutil.which("fairseq-rope-serve") or os.path.join(os.path.dirname(sys.executable),
                                "fairseq-rope-serve"), "--model", str(setup["models"]["interleaved"]),
                                str(setup["bin"]), "--port", str(port), "--threads", "1", *flags],
                               env=dict(setup["env"][installed], OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise AssertionError("the server did not become ready in 120 s")


@pytest.mark.parametrize("installed", [True, False], ids=["with-ctranslate2", "without-ctranslate2"])
def test_fairseq_rope_serve_with_its_defaults_answers_as_the_fairseq_translator(setup, translators, installed):
    """fairseq-rope-serve with its defaults (no --backend): text and HTML as /translate takes them, the fairseq
    translator's translate_text and translate_html, whether ctranslate2 is installed or not."""
    _, fairseq = translators["interleaved"]
    text = (setup["base"] / "text.src").read_text()
    page = (setup["base"] / "page.html").read_text()
    process, url = serve(setup, installed)
    try:
        answers = []
        for q, fmt in ((text, "text"), (page, "html")):
            request = urllib.request.Request(url + "/translate", method="POST", headers={
                "Content-Type": "application/json"}, data=json.dumps({"q": q, "source": "src", "target": "tgt",
                                                                      "format": fmt}).encode())
            with urllib.request.urlopen(request, timeout=120) as response:
                answers.append(json.loads(response.read())["translatedText"])
    finally:
        process.terminate()
        _, err = process.communicate(timeout=60)
    assert answers == [fairseq.translate_text(text), fairseq.translate_html(page)]
    assert ("translating with CTranslate2" in err) == installed, err
