"""The README and the docs hold: every relative link and image resolves (anchors included), and every
command, recipe variable and model flag the README names exists."""

import argparse
import glob
import os
import re

import pytest

from fairseq_rope.model import RoPETransformerModel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(["README.md", "CHANGELOG.md", "recipes/wmt14_en_de/README.md",
                *(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def read(page):
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        return f.read()


def without_code(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page):
    return {slug(line.lstrip("#")) for line in without_code(read(page)).splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_and_images_resolve(page):
    broken = []
    for target in LINK.findall(without_code(read(page))):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(REPO, os.path.dirname(page), path)) if path else os.path.join(REPO, page)
        if not os.path.exists(resolved):
            broken.append(f"{target}: no such file")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(os.path.relpath(resolved, REPO)):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page}: {broken}"


def test_the_link_check_tells_a_broken_link():
    assert "no-such-heading" not in anchors("README.md") and "citation-and-license" in anchors("README.md")
    assert slug("The sample run's figures") == "the-sample-runs-figures"


def test_commands_named_in_the_readme_are_installed():
    named = set(re.findall(r"\bfairseq-rope-[a-z0-9-]*[a-z0-9]", read("README.md")))
    installed = set(re.findall(r'"(fairseq-rope-[a-z0-9-]+) = ', read("setup.py")))
    assert named and named <= installed, named - installed


def test_model_flags_named_in_the_readme_exist():
    """Every --rope-*, --rpe-*, --t5bias-* flag the README and the position encodings page name is one
    of the models' flags."""
    from fairseq_rope.alibi import ALiBiTransformerModel
    from fairseq_rope.shaw import ShawRPETransformerModel
    from fairseq_rope.t5_bias import T5BiasTransformerModel

    flags = set()
    for model in (RoPETransformerModel, ShawRPETransformerModel, T5BiasTransformerModel, ALiBiTransformerModel):
        parser = argparse.ArgumentParser(conflict_handler="resolve")
        model.add_args(parser)
        flags |= {option for action in parser._actions for option in action.option_strings}
    pattern = r"--(?:rope-[a-z-]*[a-z]|rpe-[a-z-]*[a-z]|t5bias-[a-z-]*[a-z]|add-token-positional-embeddings)\b"
    for page in ("README.md", "docs/position_encodings.md"):
        named = set(re.findall(pattern, read(page)))
        assert len(named) >= 3 and named <= flags, (page, named - flags)


def test_recipe_variables_named_in_the_readme_exist():
    """Every VAR=... of a README command and every `VAR` in backquotes is read by a recipe step
    or by scripts/setup_env.sh."""
    text = read("README.md")
    named = set(re.findall(r"\b([A-Z][A-Z0-9_]+)=", text)) | set(re.findall(r"`([A-Z][A-Z0-9_]+)`", text))
    scripts = "".join(read(os.path.relpath(p, REPO)) for p in
                      [*glob.glob(os.path.join(REPO, "recipes", "wmt14_en_de", "*.sh")),
                       os.path.join(REPO, "scripts", "setup_env.sh")])
    missing = {name for name in named if not re.search(r"\$\{?" + name + r"\b", scripts)}
    assert len(named) >= 8 and not missing, missing


def test_readme_reads_in_a_few_minutes():
    """README is for users: the two commands first, then how to use it, at most 250 lines (details live in docs/)."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move details to docs/"
