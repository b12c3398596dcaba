"""fairseq-rope-corpus and debian_corpus.sh: a parallel corpus from pages translated one by one.

Pages written here in the structure of Debian's manuals (DocBook's p, Publican's div.para, navigation,
tables of contents, code blocks); the command runs in its own process as the recipe runs it, and its
outputs are checked against the pairs each page was written with. The build from Debian's own packages
runs where apt-get reaches the archive."""

import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from conftest import BIN, USER_DIR, run_tool

pytest.importorskip("lxml")
pytest.importorskip("galechurch")

from fairseq_rope_text import parallel_pages as pp  # noqa: E402

RECIPE = os.path.join(os.path.dirname(USER_DIR), "recipes", "wmt14_en_de")


def page(body: str) -> str:
    return (f'<html><head><meta charset="utf-8"><title>t</title></head><body>'
            f'<div class="navheader"><p>Previous chapter and next chapter links</p></div>'
            f'<div class="toc"><p>Contents of this chapter in a list</p></div>{body}</body></html>')


# page name: (English body, German body, the pairs it must give, the pairs it must not give)
PAGES = {
    "install": (
        "<h1>Installing the whole system</h1>"
        "<p>The installer asks for your language first. It then asks for the keyboard layout.</p>"
        '<div class="para">Choose a mirror near you, please. The download is much faster then.</div>'
        "<pre>apt-get install the-package-name now</pre>"
        '<p>Run <code class="command">apt-get update --fix-missing</code> as root.</p>'
        "<p>This paragraph was left in English by the translators.</p>"
        "<table><tr><td>An option name in a table cell</td></tr></table>"
        "<ul><li>Open the file manager and select the folder.</li></ul>",
        "<h1>Das ganze System installieren</h1>"
        "<p>Das Installationsprogramm fragt zuerst nach Ihrer Sprache. Dann fragt es nach der Tastaturbelegung.</p>"
        '<div class="para">Wählen Sie bitte einen Spiegel in Ihrer Nähe, damit der Download viel schneller ist.</div>'
        "<pre>apt-get install the-package-name now</pre>"
        '<p>Führen Sie <code class="command">apt-get update --fix-missing</code> als root aus.</p>'
        "<p>This paragraph was left in English by the translators.</p>"
        "<table><tr><td>Ein Optionsname in einer Tabellenzelle</td></tr></table>"
        "<ul><li>Öffnen Sie den Dateimanager und wählen Sie den Ordner.</li></ul>",
        [("The installer asks for your language first.", "Das Installationsprogramm fragt zuerst nach Ihrer Sprache."),
         ("It then asks for the keyboard layout.", "Dann fragt es nach der Tastaturbelegung."),
         ("Choose a mirror near you, please. The download is much faster then.",
          "Wählen Sie bitte einen Spiegel in Ihrer Nähe, damit der Download viel schneller ist."),
         ("Open the file manager and select the folder.", "Öffnen Sie den Dateimanager und wählen Sie den Ordner.")],
        ["apt-get", "left in English", "option name", "Installing", "Contents", "Previous"]),
    "network": (  # the German page has a paragraph more: pairing follows the structure around it
        "<p>The network is configured by the installer.</p>"
        "<p>A wireless card needs its firmware in most cases.</p>"
        "<p>Version 12 of the system is released today.</p>",
        "<p>Das Netzwerk wird vom Installationsprogramm eingerichtet.</p>"
        "<p>Dieser Absatz steht nur in der deutschen Übersetzung: ein Hinweis der Übersetzer auf die deutsche "
        "Mailingliste, auf der Fragen zur Installation in deutscher Sprache gestellt werden können.</p>"
        "<p>Eine WLAN-Karte braucht meistens ihre Firmware.</p>"
        "<p>Version 12 des Systems ist heute erschienen.</p>",
        [("The network is configured by the installer.", "Das Netzwerk wird vom Installationsprogramm eingerichtet.")],
        ["nur in der deutschen"]),
    "upgrade": (  # a near copy of "printing"'s last sentence, and a pair twice
        "<p>Version 13 of the system is released today.</p>"
        "<p>Read the release notes before the upgrade.</p><p>Read the release notes before the upgrade.</p>",
        "<p>Version 13 des Systems ist heute erschienen.</p>"
        "<p>Lesen Sie vor dem Upgrade die Hinweise zur Veröffentlichung.</p>"
        "<p>Lesen Sie vor dem Upgrade die Hinweise zur Veröffentlichung.</p>",
        [("Version 13 of the system is released today.", "Version 13 des Systems ist heute erschienen."),
         ("Read the release notes before the upgrade.", "Lesen Sie vor dem Upgrade die Hinweise zur Veröffentlichung.")],
        []),
    "mail": (  # the same German as "relay"'s, other English: a near copy on the German side only
        "<p>Mail is delivered by the local server.</p>",
        "<p>Die Post wird vom lokalen Server zugestellt.</p>",
        [("Mail is delivered by the local server.", "Die Post wird vom lokalen Server zugestellt.")], []),
    "relay": (
        "<p>The local server delivers the mail.</p>",
        "<p>Die Post wird vom lokalen Server zugestellt.</p>",
        [("The local server delivers the mail.", "Die Post wird vom lokalen Server zugestellt.")], []),
    "mirrors": (  # a sentence that "install" joins with another in one pair
        "<p>The download is much faster then.</p><p>Mirrors are listed on the project's web site.</p>",
        "<p>Der Download ist dann viel schneller.</p><p>Spiegel sind auf der Website des Projekts aufgeführt.</p>",
        [("The download is much faster then.", "Der Download ist dann viel schneller."),
         ("Mirrors are listed on the project's web site.", "Spiegel sind auf der Website des Projekts aufgeführt.")],
        []),
    "printing": (  # upgrade's first pair, a version apart: a near copy
        "<p>Printers are set up in the settings of the desktop.</p><p>The printer must be switched on first.</p>"
        "<p>Version 12 of the system is released today.</p>",
        "<p>Drucker werden in den Einstellungen der Arbeitsumgebung eingerichtet.</p>"
        "<p>Der Drucker muss zuerst eingeschaltet sein.</p><p>Version 12 des Systems ist heute erschienen.</p>",
        [("Printers are set up in the settings of the desktop.",
          "Drucker werden in den Einstellungen der Arbeitsumgebung eingerichtet."),
         ("The printer must be switched on first.", "Der Drucker muss zuerst eingeschaltet sein."),
         ("Version 12 of the system is released today.", "Version 12 des Systems ist heute erschienen.")],
        []),
}


# pairs a page may give: after a paragraph that one language lacks, Gale & Church by length alone cannot
# tell which paragraphs pair (here it pairs the German-only paragraph with the next English one, which the
# length ratio then drops, and the last English one with two German ones: left out)
MAY = {("A wireless card needs its firmware in most cases.", "Eine WLAN-Karte braucht meistens ihre Firmware."),
       ("Version 12 of the system is released today.", "Version 12 des Systems ist heute erschienen.")}


def letters(text):  # the test's own near-copy rule: letters only, case ignored
    return re.sub(r"[^a-zäöüß]", "", text.lower())


def keys(line):  # the line and each of its sentences
    return ({letters(line)} | {letters(x) for x in re.split(r"(?<=[.!?])\s+", line)}) - {""}


def check_held_out(splits, test_pairs, valid_pairs):
    """Whole pages in one split each, the held-out sets within their quotas, and no training pair (nor a
    sentence in one) with an English or German near copy among the held-out ones; the same for valid
    against test."""
    page_split = {}
    for split, rows in splits.items():
        for _, _, docid in rows:
            assert page_split.setdefault(docid, split) == split, f"{docid} in {split} and {page_split[docid]}"
    assert 0 < len(splits["test"]) <= test_pairs and 0 < len(splits["valid"]) <= valid_pairs
    test = {k for en, de, _ in splits["test"] for x in (en, de) for k in keys(x)}
    valid = {k for en, de, _ in splits["valid"] for x in (en, de) for k in keys(x)}
    assert not [r for r in splits["valid"] if (keys(r[0]) | keys(r[1])) & test]
    assert not [r for r in splits["train"] if (keys(r[0]) | keys(r[1])) & (test | valid)]
    return page_split


def write_pages(root):
    for name, (en, de, _, _) in PAGES.items():
        for lang, body in (("en", en), ("de", de)):
            path = root / f"manual-{lang}" / "usr" / "share" / "doc" / "manual" / lang / f"{name}.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page(body), encoding="utf-8")
    sources = root / "sources.tsv"
    sources.write_text("# test\nmanual\tmanual-en/usr/share/doc/manual/en/(.*)\\.html\t"
                       "manual-de/usr/share/doc/manual/de/\\1.html\n", encoding="utf-8")
    return sources


def read_split(out, split):
    lines = {lang: (out / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
             for lang in ("en", "de", "docids")}
    assert len(lines["en"]) == len(lines["de"]) == len(lines["docids"])
    return list(zip(lines["en"], lines["de"], lines["docids"]))


def test_pages_pair_by_structure_hold_out_whole_pages_and_drop_what_is_not_prose(tmp_path):
    sources = write_pages(tmp_path / "pages")
    out = tmp_path / "raw"
    result = run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages",
                      "--out", out, "--test-pairs", 3, "--valid-pairs", 3, "--min-words", 3)
    splits = {s: read_split(out, s) for s in ("test", "valid", "train")}
    assert json.loads(result.stdout) == {s: len(rows) for s, rows in splits.items()}
    page_split = check_held_out(splits, 3, 3)
    got = [(en, de) for rows in splits.values() for en, de, _ in rows]
    assert len(got) == len(set(got)), "a pair twice"
    held_out = {k for s in ("test", "valid") for en, de, _ in splits[s] for x in (en, de) for k in keys(x)}
    for name, (_, _, pairs, never) in PAGES.items():
        split = page_split.get(f"manual/{name}")
        for en, de in pairs:
            if (en, de) not in got:  # only a near copy of a held-out pair (or a sentence in one) is missing
                assert (keys(en) | keys(de)) & held_out, f"{name}: missing {en!r}"
            else:
                assert (en, de, f"manual/{name}") in splits[split], f"{name}: {en!r} in another page's split"
        assert not [x for x in got if any(word in x[0] + x[1] for word in never)]
    expected = {(en, de) for _, _, pairs, _ in PAGES.values() for en, de in pairs}
    assert set(got) <= expected | MAY
    report = json.loads((out / "report.json").read_text())
    assert report["pairs"] == {s: len(rows) for s, rows in splits.items()}
    assert report["pages"] == {s: len({d for _, _, d in rows}) for s, rows in splits.items()}
    manual = report["sources"]["manual"]
    assert {s: manual[s] for s in splits} == report["pairs"] and manual["kept"] == len(got)
    assert report["dropped"]["untranslated"] == 1 and report["dropped"]["code"] == 1
    assert report["dropped"]["duplicate"] == 1 and report["dropped"]["ratio"] == 1
    assert report["dropped"]["near_copy_of_held_out"] == sum(1 for _, _, p, _ in PAGES.values() for x in p if x not in got)
    assert manual["pages"] == len(PAGES)
    assert manual["paired_paragraphs"] == 5 + 2 + 3 + 3 + 1 + 1 + 2
    assert report["alignment"]["sentence_pairs"] == manual["sentence_pairs"]
    # the sample of test pairs to read
    sample = (out / "alignment_sample.tsv").read_text(encoding="utf-8").splitlines()
    assert sample[0].split("\t") == ["page", "page_alignment_agrees", "disagreement", "source", "target"]
    assert {tuple(line.split("\t")[3:]) for line in sample[1:]} <= {(en, de) for en, de, _ in splits["test"]}
    # the same seed holds out the same pages; other seeds other ones, each time with the rules above, and
    # among them the near copies of each kind are caught
    again = run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages",
                     "--out", tmp_path / "again", "--test-pairs", 3, "--valid-pairs", 3)
    assert (tmp_path / "again" / "test.en").read_bytes() == (out / "test.en").read_bytes(), again.stderr
    orders, caught = set(), set()
    for seed in range(1, 13):
        run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages",
                 "--out", tmp_path / f"seed{seed}", "--test-pairs", 3, "--valid-pairs", 3, "--seed", seed)
        rows = {s: read_split(tmp_path / f"seed{seed}", s) for s in ("test", "valid", "train")}
        check_held_out(rows, 3, 3)
        orders.add(tuple(d for _, _, d in rows["test"]))
        held = {d.split("/")[1] for s in ("test", "valid") for _, _, d in rows[s]}
        for a, b, kind in (("printing", "upgrade", "version"), ("mail", "relay", "german side"),
                           ("install", "mirrors", "sentence inside a joined pair")):
            if (a in held) != (b in held):  # one page held out, the other not: check_held_out saw to it
                caught.add(kind)
    assert len(orders) > 1 and caught == {"version", "german side", "sentence inside a joined pair"}, caught


def test_a_paragraph_of_other_sentence_counts_is_aligned_by_length():
    en = ["Choose a mirror.", "It is faster.", "Then start the installation of the whole system now."]
    de = ["Wählen Sie einen Spiegel, denn so geht es schneller.",
          "Dann beginnen Sie die Installation des ganzen Systems jetzt."]
    beads = pp.sentence_beads(en, de)
    assert beads == [((0, 1), (0,)), ((2,), (1,))]
    assert pp.sentence_beads(en[:2], de) == [((0,), (0,)), ((1,), (1,))]  # as many: one by one


def test_paragraphs_of_pages_whose_structures_differ_pair_only_with_the_same_element_path():
    block = lambda path, n: pp.Block(f"html/body/{path}", " ".join(["word"] * n), 0.0)
    same = [block("p", 8), block("ul/li", 12), block("p", 20)]
    assert pp.paired_blocks(same, [block("p", 9), block("ul/li", 13), block("p", 21)]) == [(0, 0), (1, 1), (2, 2)]
    # a list item in English where German has a paragraph: Gale & Church pairs them by length, the paths do not
    assert pp.paired_blocks(same, [block("p", 9), block("p", 13), block("p", 21)]) == [(0, 0), (2, 2)]


def test_page_blocks_keep_prose_and_leave_out_code_navigation_headings_and_tables():
    blocks = pp.page_blocks(page(PAGES["install"][0]).encode(), "install.html")
    texts = [b.text for b in blocks]
    assert texts == ["The installer asks for your language first. It then asks for the keyboard layout.",
                     "Choose a mirror near you, please. The download is much faster then.",
                     "Run apt-get update --fix-missing as root.",
                     "This paragraph was left in English by the translators.",
                     "Open the file manager and select the folder."]
    assert blocks[2].code_share == pytest.approx(len("apt-get update --fix-missing") / len(texts[2]))
    assert [b.code_share for i, b in enumerate(blocks) if i != 2] == [0.0] * 4
    assert blocks[1].path == "html/body/div" and blocks[0].path == "html/body/p"
    nested = page('<div class="para">Run this: <div class="screen"><pre>dpkg -i foo.deb</pre></div> and wait.</div>')
    assert pp.page_blocks(nested.encode(), "x.html") == [pp.Block("html/body/div", "Run this: and wait.", 0.0)]
    latin1 = page("<p>Grüße aus Köln</p>").replace("utf-8", "iso-8859-1").encode("latin-1")
    assert pp.page_blocks(latin1, "x.html")[0].text == "Grüße aus Köln"


def test_the_filter_names_why_a_pair_is_dropped():
    f = pp.Filter(min_words=3, max_ratio=2.0, max_code_share=0.5)
    assert f.reason("Click the OK button.", "Click the OK button!", 0) == "untranslated"
    assert f.reason("Run this command as root.", "Führen Sie diesen Befehl aus.", 0.6) == "code"
    assert f.reason("Save it.", "Speichern Sie es.", 0) == "short"
    assert f.reason("Save the file now.", "Speichern Sie die Datei jetzt sofort, bevor Sie das Programm "
                    "schließen und den Rechner ausschalten.", 0) == "ratio"
    assert f.reason("Save the file now.", "Speichern Sie die Datei jetzt.", 0) is None
    assert pp.disagreement("Use port 8080 here.", "Nutzen Sie hier Port 8081.", 1.5) == "numbers"
    assert pp.disagreement("See https://debian.org now.", "Siehe https://debian.de jetzt.", 1.5) == "urls"


def ar_archive(members):
    data = b"!<arch>\n"
    for name, content in members:
        data += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(content):<10}`\n".encode() + content
        data += b"\n" if len(content) % 2 else b""
    return data


def tar_xz(files, links=()):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for name, target in dict(links).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


def test_extract_unpacks_a_debian_package_and_refuses_paths_outside(tmp_path):
    files = {"./usr/share/doc/manual/en/a.html": b"<p>odd length</p>", "./usr/share/doc/manual/en/b.html": b"<p>x</p>"}
    deb = tmp_path / "manual.deb"
    data = tar_xz(files, links={"./usr/share/doc/manual/en/index.html": "/usr/share/doc/manual/en/a.html"})
    deb.write_bytes(ar_archive([("debian-binary", b"2.0\n"), ("control.tar.xz", b"odd"),  # odd: padded
                                ("data.tar.xz", data)]))
    run_tool("fairseq-rope-corpus", "extract", deb, tmp_path / "out")
    for name, content in files.items():
        assert (tmp_path / "out" / name).read_bytes() == content
    assert not os.path.lexists(tmp_path / "out" / "usr/share/doc/manual/en/index.html")  # links not unpacked
    cut = tmp_path / "cut.deb"
    cut.write_bytes(deb.read_bytes()[:-100])
    result = run_tool("fairseq-rope-corpus", "extract", cut, tmp_path / "out4", check=False)
    assert result.returncode == 1 and "cut.deb: truncated (data.tar.xz" in result.stderr
    evil = tmp_path / "evil.deb"
    evil.write_bytes(ar_archive([("debian-binary", b"2.0\n"), ("data.tar.xz", tar_xz({"../outside": b"x"}))]))
    result = run_tool("fairseq-rope-corpus", "extract", evil, tmp_path / "out2", check=False)
    assert result.returncode == 1 and "evil.deb" in result.stderr and "../outside" in result.stderr
    assert not (tmp_path / "outside").exists()
    (tmp_path / "text.deb").write_text("not a package")
    result = run_tool("fairseq-rope-corpus", "extract", tmp_path / "text.deb", tmp_path / "out3", check=False)
    assert result.returncode == 1 and "text.deb: not a Debian package" in result.stderr


def test_bad_sources_are_named(tmp_path):
    root = tmp_path / "pages"
    root.mkdir()
    bad = tmp_path / "bad.tsv"
    bad.write_text("manual\tonly-two-fields\n")
    result = run_tool("fairseq-rope-corpus", "pages", "--sources", bad, "--root", root, "--out", tmp_path / "o",
                      check=False)
    assert result.returncode == 1 and f"{bad}, line 1: expected NAME<TAB>REGEX<TAB>REPLACEMENT" in result.stderr
    empty = tmp_path / "empty.tsv"
    empty.write_text("manual\tnowhere/(.*)\\.html\tnowhere-de/\\1.html\n")
    result = run_tool("fairseq-rope-corpus", "pages", "--sources", empty, "--root", root, "--out", tmp_path / "o",
                      check=False)
    assert result.returncode == 1 and "source manual: no English page with its German page" in result.stderr
    assert not (tmp_path / "o").exists()
    sources = write_pages(tmp_path / "pages2")
    blank = tmp_path / "pages2" / "manual-de" / "usr" / "share" / "doc" / "manual" / "de" / "mail.html"
    blank.write_text("  \n")
    result = run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages2",
                      "--out", tmp_path / "o2", check=False)
    assert result.returncode == 1 and f"{blank}: not an HTML page" in result.stderr and "Traceback" not in result.stderr


def apt_reaches_debian():
    if not shutil.which("apt-get"):
        return False
    probe = subprocess.run(["apt-get", "download", "--print-uris", "debian-faq=11.1"], capture_output=True, text=True)
    return probe.returncode == 0 and "debian-faq_11.1_all.deb" in probe.stdout


@pytest.mark.skipif(not apt_reaches_debian(), reason="apt-get cannot reach Debian's archive (debian-faq 11.1) here")
def test_debian_corpus_builds_from_the_archive_and_skips_when_done(tmp_path):
    """debian_corpus.sh on the Debian FAQ in English and German (two packages of its list, 1 MB)."""
    packages = tmp_path / "packages.tsv"
    with open(os.path.join(RECIPE, "debian_packages.tsv")) as f:
        packages.write_text("".join(line for line in f if line.startswith(("debian-faq\t", "debian-faq-de\t"))))
    sources = tmp_path / "sources.tsv"
    with open(os.path.join(RECIPE, "debian_pages.tsv")) as f:
        sources.write_text("".join(line for line in f if line.startswith("debian-faq\t")))
    env = dict(os.environ, WORK_DIR=str(tmp_path / "work"), PACKAGES=str(packages), SOURCES=str(sources),
               TEST_PAIRS="100", VALID_PAIRS="100", PATH=BIN + os.pathsep + os.environ["PATH"])
    script = os.path.join(RECIPE, "debian_corpus.sh")
    first = subprocess.run(["bash", script], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    raw = tmp_path / "work" / "raw"
    splits = {s: read_split(raw, s) for s in ("test", "valid", "train")}
    check_held_out(splits, 100, 100)
    assert len(splits["test"]) > 50 and len(splits["valid"]) > 50 and len(splits["train"]) > 500
    assert (raw / "debian-faq.copyright").is_file() and (raw / "debian-faq-de.copyright").is_file()
    again = subprocess.run(["bash", script], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "corpus already built" in again.stderr


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "corpus")


def fixture_blocks(lang):
    with open(os.path.join(FIXTURES, f"libreoffice_find_toolbar.{lang}.html"), "rb") as f:
        return pp.page_blocks(f.read(), f"find_toolbar.{lang}.html")


def test_a_libreoffice_help_pages_title_bar_index_debug_footer_and_icon_labels_are_not_sentences():
    """The real page's furniture: "LibreOffice 7.4 Help" (title bar), the index, the debug footer's "This page is:"
    and "Title is: Find Toolbar" (German: "Title is: Suchleiste", English kept), the icon tables' labels."""
    for lang, furniture in (("en", ["LibreOffice 7.4 Help", "Title is", "This page is", "debug", "Index",
                                    "Icon", "Find Previous"]),
                            ("de", ["Hilfe für LibreOffice", "Title is", "This page is", "debug", "Index", "Symbol"])):
        texts = [b.text for b in fixture_blocks(lang)]
        assert len(texts) == 8, texts
        assert not [t for t in texts if any(word in t for word in furniture)], texts


def test_platform_alternatives_give_the_default_reading_and_a_module_only_block_is_left_out():
    en, de = fixture_blocks("en"), fixture_blocks("de")
    assert en[1].text == "Use the shortcut Ctrl + F to quickly open the Find toolbar."  # not "CommandCtrl + F"
    assert de[1].text == "Verwenden Sie Strg+F zum schnellen Öffnen der Suchleiste."
    # the Calc-only "Formatted Display" paragraph is not shown by default: in neither language
    assert not [b for b in en if "formatted value" in b.text]
    assert [b.path for b in en] == [b.path for b in de]  # still paired one by one


def test_menu_items_ui_labels_and_keys_count_as_code():
    """LibreOffice's menuitem and keycode, DocBook's guimenu/guilabel/keycap: a menu path is mostly code, and
    the filter drops it as it drops a command."""
    lo = page('<p class="paragraph">Choose <span class="menuitem">Format - Frame and Object - Properties - '
              'Columns</span> tab.</p>')
    docbook = page('<p>Select <span class="guimenu">Image</span> → <span class="guimenuitem">Canvas Size</span> '
                   'and press <span class="keycap">Enter</span>.</p>')
    (menu,), (gui,) = pp.page_blocks(lo.encode(), "lo.html"), pp.page_blocks(docbook.encode(), "gimp.html")
    assert menu.code_share == pytest.approx(len("Format - Frame and Object - Properties - Columns") / len(menu.text))
    assert gui.code_share == pytest.approx(len("ImageCanvas SizeEnter") / len(gui.text), abs=0.02)
    assert pp.Filter(max_code_share=0.5).reason(menu.text, "Wählen Sie Format - Rahmen und Objekt.", menu.code_share) == "code"


def test_the_similarity_join_finds_every_pair_a_brute_force_comparison_finds_at_every_threshold():
    import itertools
    import random

    rng = random.Random(4)
    words = [f"w{i}" for i in range(14)]
    sets = [frozenset(rng.sample(words, rng.randint(1, 9))) for _ in range(250)] + [frozenset()]
    queries = [frozenset(rng.sample(words, rng.randint(0, 9))) for _ in range(60)]
    for threshold in (0.2, 0.34, 0.5, 0.6, 2 / 3, 0.75, 0.8, 1.0):
        brute = sorted((i, j) for i, j in itertools.combinations(range(len(sets)), 2)
                       if sets[i] and sets[j] and len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= threshold - 1e-12)
        assert sorted((i, j) for i, j, _ in pp.similar_pairs(sets, threshold)) == brute, threshold
        near = [max((len(q & s) / len(q | s) for s in sets if q and s and len(q & s) / len(q | s) >= threshold - 1e-12),
                    default=0.0) for q in queries]
        assert pp.nearest_similarity(queries, sets, threshold) == pytest.approx(near, abs=1e-12), threshold
    assert pp.word_set("Choose Format - Cells, 2nd TAB!") == {"choose", "format", "cells", "nd", "tab"}
    with pytest.raises(ValueError, match="threshold"):
        list(pp.similar_pairs(sets, 0))


TOOLS = ["Eraser", "Clone", "Smudge", "Pencil", "Airbrush", "Bucket"]
WERKZEUG = ["Radierer", "Klonen", "Verschmieren", "Stift", "Sprühpistole", "Füllen"]
OWN = [("Rubbing out pixels makes them transparent where an alpha channel exists.",
        "Radierte Pixel werden durchsichtig, wo ein Alphakanal vorhanden ist."),
       ("Copying from a source area needs a click while holding Ctrl first.",
        "Zum Kopieren aus einem Quellbereich klickt man zuerst mit gedrückter Strg-Taste."),
       ("Dragging smears colours along the stroke like wet paint.",
        "Beim Ziehen werden Farben entlang des Strichs wie nasse Farbe verwischt."),
       ("Hard edges without antialiasing suit pixel art best.",
        "Harte Kanten ohne Kantenglättung eignen sich am besten für Pixelkunst."),
       ("Spraying builds up colour gradually while the button stays pressed.",
        "Beim Sprühen baut sich die Farbe allmählich auf, solange die Taste gedrückt bleibt."),
       ("Filling replaces similar neighbouring colours with the foreground.",
        "Beim Füllen werden ähnliche benachbarte Farben durch die Vordergrundfarbe ersetzt.")]


def write_help_and_manual(root):
    """The manual's pages (kind prose) and six help pages (kind help) that each say one template sentence with
    their tool's name ("Eraser tool icon in the Toolbox", GIMP's help) beside sentences of their own."""
    sources = write_pages(root)
    for k, (tool, werkzeug, (own, eigen)) in enumerate(zip(TOOLS, WERKZEUG, OWN)):
        en = f"<p>{tool} tool icon in the Toolbox window.</p><p>{own}</p>"
        de = f"<p>Symbol für das Werkzeug {werkzeug} im Werkzeugfenster.</p><p>{eigen}</p>"
        for lang, body in (("en", en), ("de", de)):
            path = root / f"help-{lang}" / lang / f"tool{k}.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page(body), encoding="utf-8")
    manual = sources.read_text(encoding="utf-8").splitlines()[1]
    sources.write_text(f"{manual}\tprose\nhelp\thelp-en/en/(.*)\\.html\thelp-de/de/\\1.html\thelp\n", encoding="utf-8")
    return sources


def similar(a, b, threshold=0.5):
    wa, wb = (set(re.findall(r"[^\W\d_]+", x.lower())) for x in (a, b))
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= threshold


@pytest.mark.parametrize("max_cluster", [10, 3])
def test_no_training_or_valid_sentence_is_a_template_variant_of_a_test_sentence_and_each_kind_has_its_test_set(
        tmp_path, max_cluster):
    """Held out by similarity: whatever pages a seed holds out, no training or valid pair's English or German is
    within word-set Jaccard 0.5 of a test pair's (checked here by brute force on the files written), nor a
    training pair of a valid one. The six tool pages' template sentences are one cluster: with --max-cluster 10
    it may be held out (its variants elsewhere leave training), with 3 it stays in training (and in no held-out
    set). test_prose holds the manual's pages, test_help the help pages; test.* is the two one after the other."""
    sources = write_help_and_manual(tmp_path / "pages")
    held_templates = 0
    for seed in range(1, 9):
        out = tmp_path / f"seed{seed}"
        run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages", "--out", out,
                 "--test-pairs", 3, "--valid-pairs", 6, "--seed", seed, "--max-cluster", max_cluster)
        splits = {s: read_split(out, s) for s in ("test_prose", "test_help", "test", "valid", "train")}
        assert splits["test"] == splits["test_prose"] + splits["test_help"]
        assert {d.split("/")[0] for _, _, d in splits["test_prose"]} == {"manual"}
        assert {d.split("/")[0] for _, _, d in splits["test_help"]} == {"help"}
        test = [x for en, de, _ in splits["test"] for x in (en, de)]
        valid = [x for en, de, _ in splits["valid"] for x in (en, de)]
        for split, against in (("valid", test), ("train", test + valid)):
            for en, de, _ in splits[split]:
                assert not [x for x in against if similar(en, x) or similar(de, x)], (seed, split, en)
        templates = [en for en, _, _ in splits["test"] + splits["valid"] if "tool icon" in en]
        held_templates += len(templates)
        if max_cluster == 10:  # the template lives in the first of its splits: a test page keeps its variant
            test_pages = {d for _, _, d in splits["test_help"]}
            assert len([en for en, _, _ in splits["test_help"] if "tool icon" in en]) == len(test_pages), seed
        if max_cluster == 3:
            assert not templates and len([en for en, _, _ in splits["train"] if "tool icon" in en]) == len(TOOLS)
        report = json.loads((out / "report.json").read_text())
        assert report["test_lines"] == {"test_prose": 0, "test_help": len(splits["test_prose"])}
        assert all(v[">=0.5"] == 0 for split in report["near_copies"]["held_out_to_training"].values()
                   for v in split.values())
    if max_cluster == 10:
        assert held_templates, "no seed held out a tool page: the template's variants were never tested"


def test_the_overlap_report_measures_what_a_brute_force_count_on_the_files_gives(tmp_path):
    """fairseq-rope-corpus overlap RAW_DIR: for each test set (and valid), the share of sentences whose nearest
    training sentence is at least 0.5 / 0.6 / 0.7 / 0.8 similar, per source, on a corpus written by hand."""
    raw = tmp_path / "raw"
    raw.mkdir()
    train = ["Eraser tool icon in the Toolbox", "Choose Format - Frame and Object - Properties - Hyperlink tab.",
             "The installer asks for your language first.", "Open the file"]
    test = [("Clone tool icon in the Toolbox", "help/clone"),  # 5/7 = 0.71
            ("Choose Format - Frame and Object - Properties - Columns tab.", "help/columns"),  # 7/9 = 0.78
            ("Partitioning is the next step of the installation.", "manual/partitioning"),  # 0.0
            ("Open the folder", "help/folder")]  # {open, the, folder} against {open, the, file}: 2/4 = 0.5 exactly
    for name, lines in (("train.en", train), ("test.en", [t for t, _ in test]), ("test.docids", [d for _, d in test])):
        (raw / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    result = run_tool("fairseq-rope-corpus", "overlap", raw)
    report = json.loads(result.stdout)["test"]
    assert report["help"] == {"sentences": 3, ">=0.5": 1.0, ">=0.6": round(2 / 3, 4), ">=0.7": round(2 / 3, 4),
                              ">=0.8": 0.0}
    assert report["manual"] == {"sentences": 1, ">=0.5": 0.0, ">=0.6": 0.0, ">=0.7": 0.0, ">=0.8": 0.0}
    assert report["all"][">=0.7"] == 0.5 and report["all"][">=0.5"] == 0.75


def farthest(english, k):
    """The pair whose English shares the fewest words with pair k's (the sample's grammar reuses its words: a
    German of a sentence that shares them can read as a translation), the nearest in length among those."""
    words = set(english[k].lower().split())
    return min((i for i in range(len(english)) if i != k),
               key=lambda i: (len(words & set(english[i].lower().split())), abs(len(english[i]) - len(english[k])), i))


def test_the_lexical_check_flags_swapped_pairs_and_passes_translations(tmp_path):
    """fairseq-rope-corpus lexical on 3,000 pairs of the bundled sample (a template grammar's En-De translations)
    in which three test pairs have their German swapped with another's: eflomal, trained on the corpus itself,
    gives those three the scores of mismatched pairs (flagged) and ranks them above every true translation of
    the test set; it flags few of the true translations. Lengths play no part: the swapped Germans are
    sentences of the same corpus. (eflomal's draws differ from run to run: on this grammar some mismatched
    controls score like translations, so the threshold is their 2% quantile; over repeated runs the swapped
    pairs scored 8.4 and more, the translations 5.2 and less but once 7.7, the threshold 6.4 to 7.1.)"""
    sample = os.path.join(RECIPE, "sample")
    read = lambda name: open(os.path.join(sample, name), encoding="utf-8").read().splitlines()
    en, de = read("train.en")[:3000], read("train.de")[:3000]
    raw = tmp_path / "raw"
    raw.mkdir()
    test_en, test_de = en[:200], list(de[:200])
    swapped = [(a, farthest(en, a)) for a in (10, 42, 120)]
    for a, b in swapped:
        test_de[a] = de[b]
    for name, lines in (("train.en", en[200:]), ("train.de", de[200:]), ("test_prose.en", test_en),
                        ("test_prose.de", test_de), ("test_prose.docids", ["sample/test"] * 200)):
        (raw / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    run_tool("fairseq-rope-corpus", "lexical", raw, "--controls", 500, "--control-quantile", 0.02, "--sample", 2)
    scores = [line.split("\t") for line in (raw / "lexical_scores.tsv").read_text().splitlines()[1:]]
    test = {int(line): flag for split, line, _, flag in scores if split == "test_prose"}
    assert len(test) == 200 and all(test[a + 1] == "yes" for a, _ in swapped)
    report = json.loads((raw / "lexical.json").read_text())
    assert report["flagged"]["train"]["all"]["flagged"] < 0.01
    assert report["flagged"]["test_prose"]["sample"]["pairs"] == 200
    sample_rows = (raw / "lexical_sample.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert sorted(row.split("\t")[4] for row in sample_rows) == ["no"] * 2 + ["yes"] * 2


def test_dropping_the_flagged_pairs_rewrites_every_split_and_the_joined_test_set(tmp_path):
    """fairseq-rope-corpus lexical --drop-flagged: the flagged pairs (the swapped ones among them) leave
    test_prose, test_help and train, whose lines stay parallel with their docids; test.* is test_prose then
    test_help again; report.json counts them ("lexical") and says where each test set starts."""
    sample = os.path.join(RECIPE, "sample")
    read = lambda name: open(os.path.join(sample, name), encoding="utf-8").read().splitlines()
    en, de = read("train.en")[:2400], read("train.de")[:2400]
    raw = tmp_path / "raw"
    raw.mkdir()
    sets = {"test_prose": (0, 100), "test_help": (100, 200), "train": (200, 2400)}
    swapped = {a: farthest(en, a) for a in (10, 120, 500)}  # a prose, a help and a training pair: another's German
    de_swapped = list(de)
    for a, b in swapped.items():
        de_swapped[a] = de[b]
    for split, (lo, hi) in sets.items():
        for name, lines in ((f"{split}.en", en[lo:hi]), (f"{split}.de", de_swapped[lo:hi]),
                            (f"{split}.docids", [f"{split.split('_')[-1]}/page{k // 10}" for k in range(lo, hi)])):
            (raw / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (raw / "report.json").write_text(json.dumps({"dropped": {}, "pairs": {}, "test_lines": {"test_prose": 0, "test_help": 100}, "sources": {
        "prose": {"test_prose": 100}, "help": {"test_help": 100}, "train": {"train": 2200}}}))
    run_tool("fairseq-rope-corpus", "lexical", raw, "--controls", 500, "--control-quantile", 0.02, "--sample", 1,
             "--drop-flagged")
    scores = [line.split("\t") for line in (raw / "lexical_scores.tsv").read_text().splitlines()[1:]]
    flagged = {(split, int(line)) for split, line, _, flag in scores if flag == "yes"}
    assert {("test_prose", 11), ("test_help", 21), ("train", 301)} <= flagged
    report = json.loads((raw / "report.json").read_text())
    assert report["dropped"]["lexical"] == len(flagged)
    for split, (lo, hi) in sets.items():
        rows = read_split(raw, split)
        expected = [(en[k], de_swapped[k]) for k in range(lo, hi) if (split, k - lo + 1) not in flagged]
        assert [(e, d) for e, d, _ in rows] == expected
        assert report["pairs"][split] == len(expected)
    assert read_split(raw, "test") == read_split(raw, "test_prose") + read_split(raw, "test_help")
    assert report["test_lines"] == {"test_help": report["pairs"]["test_prose"], "test_prose": 0}
    assert report["sources"]["help"]["test_help"] == report["pairs"]["test_help"]


def test_a_list_of_flagged_pairs_leaves_those_pairs_out_of_the_pages_corpus(tmp_path):
    """lexical --write-flagged writes each flagged pair's key and page; pages --drop-pairs leaves exactly the
    listed pairs out (counted as "listed"), so that a corpus repeats although eflomal's draws do not."""
    from fairseq_rope_cli.corpus import pair_key

    sources = write_pages(tmp_path / "pages")
    full = tmp_path / "full"
    run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages", "--out", full,
             "--test-pairs", 3, "--valid-pairs", 3)
    pairs = [(en, de) for s in ("test", "valid", "train") for en, de, _ in read_split(full, s)]
    listed = pairs[::3]
    flagged = tmp_path / "flagged.tsv"
    flagged.write_text("# every third pair\n" + "".join(f"{pair_key(en, de)}\tmanual/x\n" for en, de in listed))
    out = tmp_path / "out"
    run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages", "--out", out,
             "--test-pairs", 3, "--valid-pairs", 3, "--drop-pairs", flagged)
    left = {(en, de) for s in ("test", "valid", "train") for en, de, _ in read_split(out, s)}
    assert left and left.isdisjoint(listed) and left <= {x for _, _, given, _ in PAGES.values() for x in given} | MAY
    assert json.loads((out / "report.json").read_text())["dropped"]["listed"] == len(listed)
    flagged.write_text("not-a-key\tmanual/x\n")
    bad = run_tool("fairseq-rope-corpus", "pages", "--sources", sources, "--root", tmp_path / "pages", "--out", out,
                   "--drop-pairs", flagged, check=False)
    assert bad.returncode and "flagged.tsv, line 1: expected a pair key (16 hex digits)" in bad.stderr

    # the list lexical writes: the key and the page of every pair it flagged
    sample = os.path.join(RECIPE, "sample")
    read = lambda name: open(os.path.join(sample, name), encoding="utf-8").read().splitlines()
    en, de = read("train.en")[:1500], read("train.de")[:1500]
    de[7] = de[farthest(en, 7)]
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, lines in (("train.en", en), ("train.de", de), ("train.docids", [f"s/p{k}" for k in range(1500)])):
        (raw / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    run_tool("fairseq-rope-corpus", "lexical", raw, "--controls", 300, "--control-quantile", 0.02, "--write-flagged",
             tmp_path / "written.tsv")
    scores = [line.split("\t") for line in (raw / "lexical_scores.tsv").read_text().splitlines()[1:]]
    expected = {f"{pair_key(en[int(line) - 1], de[int(line) - 1])}\ts/p{int(line) - 1}"
                for _, line, _, flag in scores if flag == "yes"}
    written = (tmp_path / "written.tsv").read_text().splitlines()
    assert written[0].startswith("# ") and set(written[1:]) == expected and f"{pair_key(en[7], de[7])}\ts/p7" in expected


def test_a_paragraph_with_fewer_english_sentences_than_german_is_aligned_by_length_too():
    en = ["Choose a mirror.", "Then start the installation of the whole system now."]
    de = ["Wählen Sie einen Spiegel.", "Es geht schneller.", "Dann beginnen Sie die Installation des ganzen Systems jetzt."]
    assert pp.sentence_beads(en, de) == [((0,), (0,)), ((1,), (1, 2))]


def test_each_cleaning_filter_at_its_boundary():
    """--min-words 3: a side of 3 words is kept, of 2 is short; --max-ratio 2: a ratio of exactly 2 is kept;
    --max-code-share 0.5: half code is kept, more is code; the same letters in another case are untranslated."""
    f = pp.Filter(min_words=3, max_ratio=2.0, max_code_share=0.5)
    assert f.reason("Open the file.", "Öffnen Sie die Datei.", 0.0) is None
    assert f.reason("Open it.", "Öffnen Sie die Datei.", 0.0) == "short"
    assert f.reason("aaa bbb cc", "cccc dddd eeee fffff", 0.0) is None  # 10 and 20 characters: 2.0
    assert f.reason("aaa bbb cc", "cccc dddd eeee ffffff", 0.0) == "ratio"  # 10 and 21: 2.1
    assert f.reason("Run the command.", "Führen Sie den Befehl aus.", 0.5) is None
    assert f.reason("Run the command.", "Führen Sie den Befehl aus.", 0.51) == "code"
    assert f.reason("The Debian System Manual", "the DEBIAN system manual", 0.0) == "untranslated"


def test_code_inside_code_stays_code_and_a_paragraph_inside_a_list_item_is_the_block():
    (block,) = pp.page_blocks(page("<p>Run <code>apt <b>install</b> it</code>.</p>").encode(), "x.html")
    # the code's pieces "apt ", "install" (inside <b>, still code), " it", each without the spaces at its ends
    assert block.code_share == pytest.approx(len("aptinstallit") / len("Run apt install it."), abs=1e-12)
    blocks = pp.page_blocks(page("<ul><li><p>The first paragraph of the item.</p><p>Its second one.</p></li></ul>")
                            .encode(), "x.html")
    assert [(b.path.split("/")[-2:], b.text) for b in blocks] == [
        (["li", "p"], "The first paragraph of the item."), (["li", "p"], "Its second one.")]


def test_code_share_counts_characters_with_whitespace_collapsed():
    """The share of code is over the paragraph's text as it is written out (whitespace collapsed): code with
    runs of spaces and newlines inside counts each run as one space."""
    (block,) = pp.page_blocks(page("<p>Type <code>apt    get\n\n   update</code> now.</p>").encode(), "x.html")
    assert block.text == "Type apt get update now."
    assert block.code_share == pytest.approx(len("apt get update") / len(block.text), abs=1e-12)


def test_near_copies_are_found_through_the_german_side_and_through_a_sentence_joined_in_a_pair():
    """template_clusters: two pairs whose English differ but whose German are the same are one template; so are a
    pair and a two-sentence pair (a 2-1 bead) that holds its sentence among others that share nothing with it."""
    from fairseq_rope_cli.corpus import Row, template_clusters

    german = Row("Open the dialog first.", "Öffnen Sie zuerst den Dialog.", True, ("Open the dialog first.",),
                 ("Öffnen Sie zuerst den Dialog.",))
    other_english = Row("Begin by opening that window.", "Öffnen Sie zuerst den Dialog.", True,
                        ("Begin by opening that window.",), ("Öffnen Sie zuerst den Dialog.",))
    joined_en = ("Every mirror of the archive keeps a complete copy of all packages and their sources, updated "
                 "four times a day.", "Open the dialog first.")
    joined_de = ("Jeder Spiegel des Archivs hält eine vollständige Kopie aller Pakete vor.", "Öffnen Sie zuerst den Dialog.")
    joined = Row(" ".join(joined_en), " ".join(joined_de), True, joined_en, joined_de)
    unrelated = Row("The printer needs paper.", "Der Drucker braucht Papier.", True, ("The printer needs paper.",),
                    ("Der Drucker braucht Papier.",))
    for side in ("source", "target"):  # only its parts are copies
        assert pp.jaccard(pp.word_set(getattr(joined, side)), pp.word_set(getattr(german, side))) < 0.5
    cluster = template_clusters([german, other_english, joined, unrelated], 0.5)
    assert cluster[0] == cluster[1] == cluster[2] != cluster[3]


def test_a_template_shared_by_prose_and_help_pages_lives_in_the_first_test_set_and_leaves_every_other(tmp_path):
    """One template whose variants are on every page of two kinds (a manual's and a help's: "Click the Apply
    button to close this dialog window."): whatever pages a seed holds out, the template lives in the first of
    its splits, test_prose (the sources' order, then valid, then training), every test_prose page keeping its
    variant, and no other set holds one, though valid pages may come before test pages in the order pages are
    held out (ranking valid with the test sets passed the other tests)."""
    import itertools

    syllables = ["ba", "ke", "di", "po", "lu", "mi", "sa", "te", "ro", "nu", "fa", "gi"]
    words = ("".join(w) for w in itertools.product(syllables, repeat=3))
    buttons = ["Apply", "Cancel", "Help", "Reset", "Close", "Save", "Open", "Print", "Delete", "Rename",
               "Import", "Export"]
    root = tmp_path / "pages"
    lines = ["# two kinds"]
    for kind, source in (("prose", "manual"), ("help", "help")):
        for k in range(6):
            button = buttons[k + (6 if kind == "help" else 0)]
            en = [f"Click the {button} button to close this dialog window."] + [
                " ".join(next(words) for _ in range(7)).capitalize() + "." for _ in range(2)]
            de = [f"Klicken Sie auf die Schaltfläche {button}, um dieses Dialogfenster zu schließen."] + [
                " ".join(next(words) + "en" for _ in range(7)).capitalize() + "." for _ in range(2)]
            for lang, body in (("en", en), ("de", de)):
                path = root / f"{source}-{lang}" / f"page{k}.html"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(page("".join(f"<p>{s}</p>" for s in body)), encoding="utf-8")
        lines.append(f"{source}\t{source}-en/(.*)\\.html\t{source}-de/\\1.html\t{kind}")
    (root / "sources.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    valid_first = 0
    for seed in range(1, 13):
        out = tmp_path / f"seed{seed}"
        run_tool("fairseq-rope-corpus", "pages", "--sources", root / "sources.tsv", "--root", root, "--out", out,
                 "--test-pairs", 6, "--valid-pairs", 6, "--seed", seed, "--max-cluster", 20)
        splits = {s: read_split(out, s) for s in ("test_prose", "test_help", "valid", "train")}
        # the cluster's first split: test_prose (the sources' order); every page of it keeps its variant
        pages = {d for _, _, d in splits["test_prose"]}
        assert {d for en, _, d in splits["test_prose"] if en.startswith("Click the ")} == pages, seed
        assert not [en for split in ("test_help", "valid", "train") for en, _, _ in splits[split]
                    if en.startswith("Click the ")], seed
        valid_first += bool(splits["valid"])
    assert valid_first, "no seed held out a valid page: the test cannot tell the ranks"


def test_a_sentence_that_gale_and_church_leave_without_a_partner_is_not_a_pair():
    """A paragraph whose English has a long sentence the German lacks: Gale & Church's alignment gives it a
    bead of its own with nothing on the German side (a 1-0 bead); the pairs are the beads with a sentence on
    each side only (an empty side would pair a sentence with nothing)."""
    from fairseq_rope_text.parallel_pages import gale_church, sentence_beads

    english = ["The installer asks for your language first.", " ".join(["word"] * 90) + ".",
               "Then it asks for the keyboard layout."]
    german = ["Das Installationsprogramm fragt zuerst nach Ihrer Sprache.", "Dann fragt es nach der Tastaturbelegung."]
    beads = gale_church(english, german)
    assert ((2,), ()) in beads  # (the aligner's own 1-0 bead: the input can tell)
    assert sentence_beads(english, german) == [bead for bead in beads if bead[0] and bead[1]] == [((0, 1), (0, 1))]
