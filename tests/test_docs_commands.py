"""Every shell command shown in README.md, the recipe README and docs/ is one a user can run: each in the
strongest form that runs here without data or a GPU.

  * fairseq-train / -generate / -preprocess / -interactive: parsed by fairseq's own parser with the
    plugin, architecture and task as written (an unknown flag or architecture fails);
  * fairseq-rope-* and python scripts/*.py: every --flag the page uses is in the command's --help;
  * bash recipes/...: the script exists and reads every variable the page sets for it (in the script,
    common.sh or a step it runs); train.sh runs with DRY_RUN=1 and prints its command.
"""

import contextlib
import glob
import functools
import io
import os
import re
import shlex
import subprocess
import sys

import pytest
from fairseq import options

from conftest import BIN, USER_DIR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = os.path.join(REPO, "recipes", "wmt14_en_de")
PAGES = ["README.md", "recipes/wmt14_en_de/README.md",
         *sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))]
FAIRSEQ_PARSERS = {"fairseq-train": options.get_training_parser, "fairseq-generate": options.get_generation_parser,
                   "fairseq-interactive": options.get_interactive_generation_parser,
                   "fairseq-preprocess": options.get_preprocessing_parser}
NOT_CHECKED = {".", "cd", "pip", "git", "sacrebleu", "export", "ls", "cat"}  # other tools' commands


def split_commands(line):
    """The commands of a shell line: split at &&, ||, ; and | outside quotes."""
    parts, current, quote, i = [], "", None, 0
    while i < len(line):
        c = line[i]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif line.startswith(("&&", "||"), i) or c in ";|":
            parts.append(current.strip())
            current, i = "", i + (2 if line.startswith(("&&", "||"), i) else 1)
            continue
        current += c
        i += 1
    return [part for part in parts + [current.strip()] if part]


def shown_commands():
    """(page:line, env, words) of every command in the pages' ```bash blocks, continuation lines joined."""
    found = []
    for page in PAGES:
        text = open(os.path.join(REPO, page), encoding="utf-8").read()
        for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
            start = text[:block.start()].count("\n") + 2
            pending, first = "", None
            for offset, line in enumerate(block.group(1).splitlines()):
                if not pending and (not line.strip() or line.lstrip().startswith("#")):
                    continue
                first = first if pending else start + offset
                pending += line[:-1] + " " if line.endswith("\\") else line
                if line.endswith("\\"):
                    continue
                for part in split_commands(pending.split(" > ")[0]):
                    # ("..." elides the rest of a command; a subshell's parentheses are not part of it)
                    words = [w for w in shlex.split(part.strip("() "), comments=True) if w != "..."]
                    env = {}
                    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                        name, value = words.pop(0).split("=", 1)
                        env[name] = value
                    if words and words[0] == "(.":  # "( . venv/bin/activate && ..."
                        continue
                    if words:
                        found.append((f"{page}:{first}", env, words))
                pending = ""
    return found


COMMANDS = shown_commands()


def kind(words):
    if words[0] in ("bash", "sh") and len(words) > 1:
        return "recipe" if words[1].startswith("recipes/") else "other"
    if words[0].startswith("python") or words[0].endswith("/python"):
        script = next((w for w in words[1:] if w.endswith(".py")), None)
        return "script" if script and script.startswith("scripts/") else "other"
    if words[0] in FAIRSEQ_PARSERS:
        return "fairseq"
    if words[0].startswith("fairseq-rope-"):
        return "tool"
    return "other"


def flags_of(words):
    return {w.split("=")[0] for w in words if re.match(r"^--[a-z0-9][a-z0-9-]*", w)}


def test_the_pages_show_commands_of_every_kind():
    kinds = {kind(words) for _, _, words in COMMANDS}
    assert {"recipe", "script", "fairseq", "tool"} <= kinds and len(COMMANDS) > 40
    others = sorted({words[0] for _, _, words in COMMANDS if kind(words) == "other"} - NOT_CHECKED)
    assert not [o for o in others if o.startswith(("fairseq", "scripts/"))], others


@pytest.mark.parametrize("where, env, words", [c for c in COMMANDS if kind(c[2]) == "fairseq"],
                         ids=[c[0] for c in COMMANDS if kind(c[2]) == "fairseq"])
def test_fairseq_command_parses_with_the_plugin(where, env, words):
    args = [USER_DIR if previous == "--user-dir" else word for previous, word in zip([""] + words, words)][1:]
    if "--user-dir" not in args:
        args += ["--user-dir", USER_DIR]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parser = FAIRSEQ_PARSERS[words[0]]()
            if words[0] == "fairseq-preprocess":  # (as fairseq_cli.preprocess parses)
                parser.parse_args(args)
            else:
                options.parse_args_and_arch(parser, args)
        except SystemExit:
            pytest.fail(f"{where}: {' '.join(words)}\n{err.getvalue()[-1500:]}")


TOOL_COMMANDS = [c for c in COMMANDS if kind(c[2]) in ("tool", "script")]


@functools.lru_cache(maxsize=None)
def help_of(command):
    """What ``command --help`` prints, run once per command for every docs line that uses it (a script's
    --help imports torch and fairseq: seconds each)."""
    return subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=REPO).stdout


@pytest.mark.parametrize("where, env, words", TOOL_COMMANDS, ids=[c[0] for c in TOOL_COMMANDS])
def test_tool_command_uses_flags_of_its_help(where, env, words):
    if kind(words) == "tool":
        command = [os.path.join(BIN, words[0])]
    else:
        script = next(w for w in words if w.endswith(".py"))
        command = [sys.executable, os.path.join(REPO, script)]
    if kind(words) == "tool" and len(words) > 1 and re.match(r"^[a-z][a-z-]*$", words[1]):
        command.append(words[1])  # a subcommand (fairseq-rope-prep tokenize, fairseq-rope-checkpoint resume)
    own, passed_on = (words[:words.index("--")], words[words.index("--") + 1:]) if "--" in words else (words, [])
    for command, used in ((command, own), ([sys.executable, os.path.join(REPO, "scripts", "benchmark.py")], passed_on)):
        if not used:
            continue  # (after --: ab_benchmark.py passes them to benchmark.py)
        help_text = help_of(tuple(command))
        assert "usage" in help_text.lower(), f"{where}: {' '.join(command)} --help printed no usage"
        unknown = {flag for flag in flags_of(used) if flag not in help_text}
        assert not unknown, f"{where}: {' '.join(command[-2:])} has no {sorted(unknown)}"


RECIPE_COMMANDS = [c for c in COMMANDS if kind(c[2]) == "recipe"]


def read_by(script):
    """The text of a recipe step and of everything it sources or runs (common.sh, the steps run.sh runs)."""
    text = open(script).read() + open(os.path.join(RECIPES, "common.sh")).read()
    for step in set(re.findall(r'(?:RECIPE_DIR/|stage "[^"]*" )([a-z_]+\.sh)', text)):
        text += open(os.path.join(RECIPES, step)).read()
    return text


@pytest.mark.parametrize("where, env, words", RECIPE_COMMANDS, ids=[c[0] for c in RECIPE_COMMANDS])
def test_recipe_command_sets_variables_its_script_reads(where, env, words, tmp_path):
    script = os.path.join(REPO, words[1])
    assert os.path.isfile(script), f"{where}: no {words[1]}"
    text = read_by(script)
    unread = [name for name in env if not re.search(rf"\b{name}\b", text) and not name.startswith("ARGS_")]
    assert not unread, f"{where}: {words[1]} reads no {unread}"
    if os.path.basename(script) == "train.sh":
        run_env = dict(os.environ, **env)
        run_env.update(DRY_RUN="1", WORK_DIR=str(tmp_path / "work"), PYTHON=sys.executable,
                       PATH=f"{BIN}:{os.environ['PATH']}")
        run_env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(int(env.get("NGPU", 8)))))
        run_env.pop("RAW_DIR", None)
        proc = subprocess.run(["bash", script], env=run_env, capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 0 and "would run: " in proc.stderr, f"{where}:\n{proc.stderr[-2000:]}"
