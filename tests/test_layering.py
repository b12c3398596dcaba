"""The packages' layering, read from their source: every import statement (at module level or inside a
function), resolved to the project's modules. fairseq_rope_text (text, standard library) imports none of
the others; fairseq_rope (the library) never imports the server or the command line; fairseq_rope_server
(the web service) never imports the model library or the command line; and no module reaches itself
through the imports of others, lazy ones included."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("fairseq_rope_text", "fairseq_rope_checkpoints", "fairseq_rope", "fairseq_rope_server", "fairseq_rope_cli")


def project_modules():
    """{dotted name: path} of every module of the three packages (a package as its __init__)."""
    modules = {}
    for package in PACKAGES:
        for name in sorted(os.listdir(os.path.join(ROOT, package))):
            if name.endswith(".py"):
                dotted = package if name == "__init__.py" else f"{package}.{name[:-3]}"
                modules[dotted] = os.path.join(ROOT, package, name)
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
    assert len(graph) > 30 and graph["fairseq_rope.options"] >= {"fairseq_rope.attention", "fairseq_rope.encodings"}
    assert cycles(graph) == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles(graph))


@pytest.mark.parametrize("package, forbidden", [("fairseq_rope_text", ("fairseq_rope", "fairseq_rope_server", "fairseq_rope_cli",
                                                                      "fairseq_rope_checkpoints")),
                                                ("fairseq_rope_checkpoints", ("fairseq_rope", "fairseq_rope_server",
                                                                              "fairseq_rope_cli", "fairseq_rope_text")),
                                                ("fairseq_rope", ("fairseq_rope_server", "fairseq_rope_cli")),
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
    hub = imports_of("fairseq_rope.hub", modules["fairseq_rope.hub"], modules)
    assert "fairseq_rope.ct2" in hub  # imported inside CTranslate2's branch of a function
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
