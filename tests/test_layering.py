"""The packages' layering, read from their source: every import statement (at module level or inside a
function), resolved to the project's modules. fairseq_rope_text (text, standard library) imports none of
the others; fairseq_rope (the library) never imports the server or the command line; fairseq_rope_server
(the web service) never imports the model library or the command line; and no module reaches itself
through the imports of others, lazy ones included."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("fairseq_rope_text", "fairseq_rope_checkpoints", "fairseq_rope", "fairseq_rope_translation",
            "fairseq_rope_server", "fairseq_rope_cli")


def project_modules():
    """{dotted name: path} of every module of the packages and of their subpackages (a package as its
    __init__)."""
    modules = {}
    for package in PACKAGES:
        for folder, _, names in sorted(os.walk(os.path.join(ROOT, package))):
            if "__init__.py" not in names:
                continue
            dotted_folder = os.path.relpath(folder, ROOT).replace(os.sep, ".")
            for name in sorted(names):
                if name.endswith(".py"):
                    dotted = dotted_folder if name == "__init__.py" else f"{dotted_folder}.{name[:-3]}"
                    modules[dotted] = os.path.join(folder, name)
    return modules


def imports_of(dotted, path, modules):
    """The project modules that ``dotted`` imports anywhere in its source: ``from .x import y`` is x (or
    x.y where that is a module), ``from . import y`` is y, ``import a.b`` is a.b."""
    package = dotted if path.endswith("__init__.py") else dotted.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in modules and name != dotted}


def import_graph():
    modules = project_modules()
    return {dotted: imports_of(dotted, path, modules) for dotted, path in modules.items()}


def cycles(graph):
    """Every cycle found by a depth-first walk, each as the list of modules on it."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    assert len(graph) > 30 and graph["fairseq_rope.rope.options"] >= {"fairseq_rope.rope.attention",
                                                                      "fairseq_rope.encodings"}
    assert cycles(graph) == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles(graph))


@pytest.mark.parametrize("package, forbidden", [("fairseq_rope_text", ("fairseq_rope", "fairseq_rope_server", "fairseq_rope_cli",
                                                                      "fairseq_rope_checkpoints")),
                                                ("fairseq_rope_checkpoints", ("fairseq_rope", "fairseq_rope_server",
                                                                              "fairseq_rope_cli", "fairseq_rope_text")),
                                                ("fairseq_rope", ("fairseq_rope_server", "fairseq_rope_cli")),
                                                ("fairseq_rope_translation", ("fairseq_rope_server", "fairseq_rope_cli")),
                                                ("fairseq_rope_server", ("fairseq_rope", "fairseq_rope_cli"))])
def test_lower_layers_never_import_higher_ones(package, forbidden):
    graph = import_graph()
    wrong = {f"{module} -> {target}" for module, targets in graph.items()
             if module == package or module.startswith(package + ".")
             for target in targets if target.split(".")[0] in forbidden}
    assert not wrong, sorted(wrong)


def test_the_walk_sees_lazy_imports_and_cycles():
    """The walker itself: an import inside a function counts, and a two-module loop is reported."""
    modules = project_modules()
    loader = imports_of("fairseq_rope_translation.loader", modules["fairseq_rope_translation.loader"], modules)
    assert "fairseq_rope_translation.ct2_engine" in loader  # imported inside CTranslate2's branch of a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_the_checkpoint_commands_never_import_fairseq(tmp_path):
    """fairseq-rope-average and fairseq-rope-checkpoint (resume, final-name: each train.sh and average.sh
    step) read checkpoints with torch alone: fairseq is not imported (it takes seconds), here in a new
    interpreter that runs them on checkpoints as fairseq-train saves them."""
    import subprocess
    import sys

    script = f"""
import sys, torch
from fairseq_rope_cli import average, checkpoint
for update in (1, 2):
    torch.save({{"model": {{"w": torch.full((2,), float(update))}}, "cfg": {{"model": None}}, "extra_state":
                {{"train_iterator": {{"epoch": 1, "iterations_in_epoch": update}}}},
                "optimizer_history": [{{"num_updates": update}}]}}, "{tmp_path}/checkpoint_1_%d.pt" % update)
torch.save(torch.load("{tmp_path}/checkpoint_1_2.pt"), "{tmp_path}/checkpoint_last.pt")
checkpoint.main(["resume", "{tmp_path}"])
checkpoint.main(["final-name", "{tmp_path}/checkpoint_last.pt", "--max-update", "2"])
average.main(["--inputs", "{tmp_path}/checkpoint_1_1.pt", "{tmp_path}/checkpoint_1_2.pt", "--output", "{tmp_path}/avg.pt"])
print(sorted(name for name in sys.modules if name.split(".")[0] in ("fairseq", "fairseq_cli", "fairseq_rope")))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ['{"updates": 2, "restored": null}', '{"name": "checkpoint_1_2.pt"}', "[]"]


# RoPE's modules before they moved into their package (fairseq_rope/rope/): each keeps its old path for
# code and users that import from it, and only re-exports
ROPE_OLD_PATHS = ("options", "rotary", "attention", "linear_attention", "model")


@pytest.mark.parametrize("name", ROPE_OLD_PATHS)
def test_ropes_old_modules_only_re_export_its_package(name):
    """RoPE's code lives once, in fairseq_rope/rope/: fairseq_rope/<name>.py is a docstring and imports
    from fairseq_rope.rope.<name>, each name the very object of the package (nothing defined, nothing
    copied), and fairseq_rope's own names (fairseq_rope.RotaryEmbedding, .apply_rotary, ...) too."""
    import importlib

    import fairseq_rope

    path = os.path.join(ROOT, "fairseq_rope", f"{name}.py")
    tree = ast.parse(open(path).read(), path)
    docstring, *statements = tree.body
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
    assert statements and all(isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == f"rope.{name}"
                              for node in statements), f"fairseq_rope/{name}.py does more than re-export"
    old, new = importlib.import_module(f"fairseq_rope.{name}"), importlib.import_module(f"fairseq_rope.rope.{name}")
    exported = [alias.name for node in statements for alias in node.names]
    assert all(getattr(old, exported_name) is getattr(new, exported_name) for exported_name in exported)
    for public in ("RopeOptions", "RotaryEmbedding", "apply_rotary", "RotaryMultiheadAttention", "RotaryLinearAttention",
                   "RoPETransformerModel"):
        assert getattr(fairseq_rope, public) is getattr(fairseq_rope.rope, public)


def plugin_modules():
    """The plugin's model side: the scaffold, every packaged encoding (its module or package), the task
    and the package itself."""
    from fairseq_rope.encodings import ENCODINGS

    homes = {".".join(encoding.__module__.split(".")[:2]) for encoding in ENCODINGS.values()
             if encoding.__module__.startswith("fairseq_rope.")}
    wanted = homes | {"fairseq_rope", "fairseq_rope.encodings", "fairseq_rope.self_attention", "fairseq_rope.task"}
    return {dotted: path for dotted, path in project_modules().items()
            if dotted in wanted or any(dotted.startswith(home + ".") for home in homes)}


def test_the_plugin_logs_and_never_prints():
    """The commands print; the library logs: no module of the plugin's model side calls print or writes
    to sys.stderr or sys.stdout (what it has to say goes through logging, which the commands configure)."""
    modules = plugin_modules()
    assert {"fairseq_rope.rope.rotary", "fairseq_rope.alibi", "fairseq_rope.encodings"} <= set(modules)
    found = []
    for dotted, path in modules.items():
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{dotted}:{node.lineno} print")
            elif isinstance(node, ast.Attribute) and node.attr in ("stderr", "stdout") \
                    and isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{dotted}:{node.lineno} sys.{node.attr}")
    assert not found, found


# --------------------------------------------------------------------------- the translation wing
WING = "fairseq_rope_translation"
# the plugin's documented paths of the wing's API, which only re-export it (never imported by the plugin)
WING_PATHS = ("fairseq_rope.hub", "fairseq_rope.ct2", "fairseq_rope.translator")


def reached(graph, start):
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_what_the_user_dir_imports_never_imports_the_translation_wing():
    """``--user-dir fairseq_rope`` imports the package fairseq_rope: nothing it imports, lazily or not, is a
    module of the translation wing or one of the plugin's paths that re-export it."""
    graph = import_graph()
    plugin = reached(graph, "fairseq_rope")
    assert {"fairseq_rope.encodings", "fairseq_rope.recorded_bpe", "fairseq_rope.task"} <= plugin
    wrong = sorted(m for m in plugin if m.split(".")[0] == WING or m in WING_PATHS)
    assert not wrong, wrong


def test_fairseqs_user_dir_loads_none_of_the_translation_wing():
    """The same in a new interpreter, as fairseq-train loads the plugin (fairseq's import_user_module):
    the plugin registered (--bpe recorded among it), no module of the wing imported."""
    import subprocess
    import sys

    script = f"""
import sys
from argparse import Namespace
from fairseq import utils
from fairseq.data.encoders import BPE_REGISTRY
utils.import_user_module(Namespace(user_dir={os.path.join(ROOT, "fairseq_rope")!r}))
print("recorded" in BPE_REGISTRY, sorted(m for m in sys.modules if m.startswith("{WING}") or m in {WING_PATHS!r}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == "True []", done.stdout


def test_the_wings_old_paths_only_re_export_it():
    """fairseq_rope.hub, .ct2 and .translator (the documented paths) define nothing: each name they hold is
    the wing's own object."""
    import importlib

    for dotted in WING_PATHS:
        path = os.path.join(ROOT, *dotted.split(".")) + ".py"
        docstring, *statements = ast.parse(open(path).read(), path).body
        assert isinstance(docstring, ast.Expr) and statements, dotted
        assert all(isinstance(node, ast.ImportFrom) and node.module.split(".")[0] == WING for node in statements), \
            f"{dotted} does more than re-export the wing"
        module = importlib.import_module(dotted)
        for node in statements:
            home = importlib.import_module(node.module)
            assert all(getattr(module, alias.name) is getattr(home, alias.name) for alias in node.names), dotted


def test_no_two_modules_share_a_name_unless_one_re_exports_the_other():
    """A module's name says where it lives: two modules of one name in different packages only where one
    imports the other (a path kept for its users that re-exports the new one)."""
    import collections

    graph, by_name = import_graph(), collections.defaultdict(list)
    for dotted, path in project_modules().items():
        if not path.endswith("__init__.py"):
            by_name[dotted.rsplit(".", 1)[1]].append(dotted)
    shared = {name: found for name, found in by_name.items() if len(found) > 1}
    wrong = {name: found for name, found in shared.items()
             if not all(any(other in graph[one] or one in graph[other] for other in found if other != one)
                        for one in found)}
    assert not wrong, wrong


def test_the_translation_wing_logs_and_never_prints():
    """The commands print; the library logs: no module of the wing, nor the plugin's --bpe recorded, calls
    print or writes to sys.stderr or sys.stdout (fairseq_rope_translation's own logger shows its lines)."""
    modules = {dotted: path for dotted, path in project_modules().items()
               if dotted.split(".")[0] == WING or dotted == "fairseq_rope.recorded_bpe"}
    assert {f"{WING}.loader", f"{WING}.ct2_engine", "fairseq_rope.recorded_bpe"} <= set(modules)
    found = []
    for dotted, path in modules.items():
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{dotted}:{node.lineno} print")
            elif isinstance(node, ast.Attribute) and node.attr in ("stderr", "stdout") and \
                    isinstance(node.value, ast.Name) and node.value.id == "sys" and dotted != WING:
                found.append(f"{dotted}:{node.lineno} sys.{node.attr}")  # (the wing's handler: stderr when it writes)
    assert not found, found
