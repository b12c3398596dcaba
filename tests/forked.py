"""Installed commands (fairseq-train, fairseq-generate, fairseq-rope-*) run as new processes without a new
interpreter each: forked from a server process that imported torch, fairseq and the plugin once
(multiprocessing's forkserver), each runs its console script's entry point with its arguments, its own
standard input, output and error, and torch's threads; nothing else of the tests is in it (this module
imports only the standard library). A fresh interpreter would spend seconds importing the same modules
before doing anything. The server starts with the environment of the test process that first asks;
commands that need another environment, a working directory or a process to signal are started with
subprocess as a user starts them (conftest.run_tool does that where asked). For shell scripts that start the
commands themselves (the recipe's steps), on_path() gives a directory of clients to put first on PATH
(below).
"""

import atexit
import importlib.metadata
import json
import multiprocessing
import os
import runpy
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

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
    for fd, path in enumerate(paths):
        if path is not None:
            opened = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            os.dup2(opened, fd)
            os.close(opened)
    if paths[0] is not None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)
    run_entry_point(tool, args, threads)


def run_entry_point(tool, args, threads):
    """``tool``'s console script (or a .py script) with ``sys.argv`` = [tool, *args] and torch's ``threads``:
    raises SystemExit as the console script does."""
    import logging

    import torch

    # the start method a new interpreter has (the fork server's children inherit its forkserver): a command's
    # own processes (fairseq's data loaders) are then forked from the command, as in a user's run
    multiprocessing.set_start_method(None, force=True)
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


# --------------------------------------------------------------------------- installed commands on PATH, forked
#
# For a shell script that runs installed commands itself (the recipe's steps): a directory of executables
# named after them (on_path), each a small client that hands its arguments, environment, working directory
# and standard streams to a command server forked from the preloaded one; the server forks the command with
# them, forwards the signals the client gets (SIGTERM, SIGINT, SIGHUP) and, if the client is killed, kills the
# command; the client ends as the command ended (its exit status, or killed by the same signal). A test that
# kills a process group, or counts a session's processes, runs the commands as installed instead (the command
# is not in the client's process group).

FORKED_COMMANDS = ["fairseq-train", "fairseq-generate", "fairseq-preprocess", "fairseq-interactive", "fairseq-validate",
                   "fairseq-rope-average", "fairseq-rope-checkpoint", "fairseq-rope-translate", "fairseq-rope-ct2",
                   "fairseq-rope-ct2-generate", "fairseq-rope-doc-translate", "fairseq-rope-contrastive"]

CLIENT = '''#!{python} -IS
# {tool}, forked from the tests' command server (tests/forked.py)
import json, os, signal, socket, struct, sys

sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect({socket!r})
streams = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        streams.append(fd)
    except OSError:
        pass
request = json.dumps({{"tool": {tool!r}, "args": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
                      "streams": streams}}).encode()
message = struct.pack("!I", len(request)) + request
sent = socket.send_fds(sock, [message], streams)
sock.sendall(message[sent:])
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, lambda number, frame: sock.sendall(struct.pack("!I", number)))
reply = b""
while len(reply) < 5:
    part = sock.recv(5 - len(reply))
    if not part:
        sys.exit("{tool}: the tests' command server is gone")
    reply += part
how, code = reply[:1], struct.unpack("!I", reply[1:])[0]
if how == b"s":
    signal.signal(code, signal.SIG_DFL)
    os.kill(os.getpid(), code)
sys.exit(code)
'''


def receive_request(conn):
    """(request, its file descriptors) sent by a CLIENT."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        part = conn.recv(1 << 16)
        if not part:
            raise ConnectionError("the client left before its request was complete")
        data += part
    return json.loads(data[4:]), fds


def run_request(request, fds, threads):
    """In the forked process: the request's streams, working directory and environment, then its command;
    never returns (the command's exit status, or killed by the signal that stopped it)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        for target, fd in zip(request["streams"], fds):
            os.dup2(fd, target)
            os.close(fd)
        for missing in {0, 1, 2} - set(request["streams"]):
            os.dup2(os.open(os.devnull, os.O_RDWR), missing)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request["env"].get("PYTHONUNBUFFERED"):
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        if 0 in request["streams"]:
            sys.stdin = open(0, encoding="utf-8", closefd=False)
        run_entry_point(request["tool"], request["args"], int(request["env"].get("OMP_NUM_THREADS") or threads))
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:  # as an interpreter ends on one: the traceback, then killed by SIGINT
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
    finally:  # as an interpreter ends: its daemonic processes (fairseq's data loaders) stopped, the others waited for
        for child in multiprocessing.active_children():
            if child.daemon:
                child.terminate()
            child.join()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve_commands(path, threads):
    """The command server: listens on the Unix socket ``path``; one process (and thread) forks every command."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    clients = {}  # command pid -> its client's connection (None once the client is gone)
    parent = os.getppid()  # the fork server, which ends with the tests' process: so does this one
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=0.02):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    request, fds = receive_request(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other in [conn, *filter(None, clients.values())]:
                        other.close()
                    run_request(request, fds, threads)
                for fd in fds:
                    os.close(fd)
                clients[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            else:  # a signal to forward, or the client gone (killed): its command goes too
                conn, pid = key.fileobj, key.data
                data = conn.recv(4, socket.MSG_WAITALL)
                try:
                    os.kill(pid, struct.unpack("!I", data)[0] if len(data) == 4 else signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if not data:
                    selector.unregister(conn)
                    conn.close()
                    clients[pid] = None
        while clients:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = clients.pop(pid, None)
            if conn is not None:
                reply = (b"s", os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (b"e", os.WEXITSTATUS(status))
                try:
                    conn.sendall(reply[0] + struct.pack("!I", reply[1]))
                except OSError:
                    pass
                selector.unregister(conn)
                conn.close()


_server = None


def on_path():
    """The directory of FORKED_COMMANDS' clients (put it first on PATH), its server started on first use."""
    global _server
    if _server is None:
        import torch

        root = tempfile.mkdtemp(prefix="forked-commands-")
        path = os.path.join(root, "socket")
        # (not a daemon: the commands it forks may start processes of their own, e.g. fairseq's data loaders)
        server = context().Process(target=serve_commands, args=(path, torch.get_num_threads()))
        server.start()
        atexit.register(server.terminate)
        deadline = time.time() + 120
        while not os.path.exists(path):
            if not server.is_alive() or time.time() > deadline:
                raise RuntimeError(f"the command server did not start (exit status {server.exitcode})")
            time.sleep(0.01)
        bindir = os.path.join(root, "bin")
        os.mkdir(bindir)
        for tool in FORKED_COMMANDS:
            client = os.path.join(bindir, tool)
            with open(client, "w", encoding="utf-8") as f:
                f.write(CLIENT.format(python=sys.executable, tool=tool, socket=path))
            os.chmod(client, 0o755)
        atexit.register(shutil.rmtree, root, True)
        _server = server, bindir
    return _server[1]
