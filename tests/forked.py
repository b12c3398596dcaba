"""Installed commands (fairseq-train, fairseq-generate, fairseq-rope-*) run as new processes without a new
interpreter each: forked from a server process that imported torch, fairseq and the plugin once
(multiprocessing's forkserver), each runs its console script's entry point with its arguments, its own
standard input, output and error, and torch's threads; nothing else of the tests is in it (this module
imports only the standard library). A fresh interpreter would spend seconds importing the same modules
before doing anything. The server starts with the environment of the test process that first asks;
commands that need another environment, a working directory or a process to signal are started with
subprocess as a user starts them (conftest.run_tool does that where asked).
"""

import importlib.metadata
import multiprocessing
import os
import runpy
import shutil
import subprocess
import sys
import tempfile

PRELOAD = ["fairseq_rope", "torch._dynamo"]  # (torch and fairseq with it; torch._dynamo: torch imports it at a first optimizer)
# Importing fairseq configures Python's root logger (standard error, every level): a command whose module
# imports fairseq first logs there. fairseq-train configures it before it imports fairseq (its log lines
# on standard output): for it the root logger is made as a new interpreter has it.
CONFIGURES_LOGGING_FIRST = {"fairseq-train"}


def context():
    forkserver = multiprocessing.get_context("forkserver")
    forkserver.set_forkserver_preload(["forked", *PRELOAD])
    return forkserver


def command_main(tool, args, paths, threads):
    """The process: ``tool``'s entry point (or, for a path ending in .py, that script) with ``sys.argv`` =
    [tool, *args], its standard streams the files ``paths`` (stdin, stdout, stderr; stdin None: empty), as the
    console script (or the interpreter) runs it."""
    import logging

    import torch

    for fd, path in enumerate(paths):
        if path is not None:
            opened = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            os.dup2(opened, fd)
            os.close(opened)
    if paths[0] is not None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)
    if tool in CONFIGURES_LOGGING_FIRST:  # as in a new interpreter, where its logging.basicConfig comes first
        logging.root.handlers.clear()
        logging.root.setLevel(logging.WARNING)
    torch.set_num_threads(threads)
    sys.argv = [tool, *args]
    if tool.endswith(".py"):  # a developer's script (scripts/, which imports only installed modules)
        runpy.run_path(tool, run_name="__main__")
        sys.exit(0)
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name=tool)
    sys.exit(entry.load()())


class Command:
    """``tool`` started with ``args`` (and ``input`` on its standard input); ``wait()`` its CompletedProcess."""

    def __init__(self, tool, args, input=None, threads=None):
        import torch

        self.args = [tool, *map(str, args)]
        self.dir = tempfile.mkdtemp(prefix="forked-")
        paths = [os.path.join(self.dir, name) for name in ("stdin", "stdout", "stderr")]
        for path, text in zip(paths, (input or "", "", "")):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        paths[0] = paths[0] if input is not None else None
        self.paths = paths
        self.process = context().Process(target=command_main, args=(tool, self.args[1:], paths,
                                                                     threads or torch.get_num_threads()))
        self.process.start()

    def wait(self, timeout=600):
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
            raise subprocess.TimeoutExpired(self.args, timeout)
        out = []
        for path in self.paths[1:]:
            with open(path, encoding="utf-8", errors="replace") as f:
                out.append(f.read())
        shutil.rmtree(self.dir)
        return subprocess.CompletedProcess(self.args, self.process.exitcode, *out)


def run(tool, args, input=None, threads=None, timeout=600):
    """``tool`` run to its end: its CompletedProcess (returncode, stdout, stderr as text)."""
    return Command(tool, args, input, threads).wait(timeout)
