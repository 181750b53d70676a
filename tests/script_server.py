"""A fork server for the tests that run a Python file as a script (``python page.py``).

Most of such a script's CPU is spent before its first line does anything:
a fresh interpreter importing the package, the openai SDK, pydantic, anyio
and trio, some 0.6 s a script. This process imports them once; for each
script it is sent, it forks a child that becomes that script's process:
the child takes the caller's stdin, stdout and stderr as its file
descriptors 0, 1 and 2, the caller's working directory, environment and
``sys.argv``, the script's folder (with ``-m``, the working directory) as
``sys.path[0]``, Python's own SIGINT
handler, and runs the file with :func:`runpy.run_path` as ``__main__``, at
the top level of this interpreter, which then exits as any interpreter does
(an uncaught exception prints its traceback and exits 1; ``sys.exit`` is the
exit status; the finalizers, ``atexit`` and the ResourceWarnings of
interpreter shutdown all run). What the script imports is already imported,
which is the point; the children of one server share one hash seed, and the
objects alive at the fork are frozen (:func:`gc.freeze`), never collected.

Started by ``script_runner.py`` with the environment of the scripts it will
run (``PYTHONWARNINGS`` and the like are read at start-up), with one end of a
``SOCK_SEQPACKET`` socket pair as ``argv[1]``, the modules to import as the rest
of its arguments, and a pipe as its stdin: it
ends when that pipe closes, so it never outlives the test process. A request
is one JSON message ``{"argv": [...], "cwd": ..., "env": {...}, "module": false}``
(``"module": true`` runs ``python -m argv[0]``) carrying
four descriptors: stdin, stdout, stderr, and a socket for the replies,
``{"pid": N}`` once forked and ``{"status": S}`` (a ``waitpid`` status) when
the child has ended; each child is watched through a pidfd, so one server
serves any number of children at a time, with no thread in the process that
forks.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

# The modules the scripts spend their start-up importing, unless the caller names
# others (argv[2:]). A missing one is skipped: the script that needs it imports it
# (or fails) as it would anyway.
#
# Top-level packages only, and only what `import <package>` itself loads: a
# submodule imported here would be an attribute of its package in every child,
# so a docs page that uses `juno_bind_trio.testing.x` after a bare
# `import juno_bind_trio` would pass here and fail as written
# (tests/test_script_runner.py checks the list).
PREIMPORT = (
    "anyio",
    "trio",
    "httpx",
    "pydantic",
    "openai",
    "juno_bind_trio",
)

MAX_REQUEST = 1 << 20


class Job:
    """What a forked child runs: a script, as its process."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.argv: list[str] = [str(a) for a in request["argv"]]
        self.module = bool(request.get("module", False))  # `python -m argv[0]`
        self.cwd = str(request["cwd"])
        self.env = {str(k): str(v) for k, v in request["env"].items()}

    def become(self, fds: list[int]) -> None:
        """Take the caller's descriptors, folder, environment and argv."""
        # A process group of its own: a timed-out script is killed with what it started.
        os.setsid()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(self.cwd)
        # The LC_* variables are part of this server's start-up environment, the same
        # for every request: one this interpreter has and the request lacks was set by
        # its start-up (PEP 538's LC_CTYPE=C.UTF-8), as the script's would have been.
        coerced = {k: v for k, v in os.environ.items() if k.startswith("LC_")}
        os.environ.clear()
        os.environ.update({k: v for k, v in coerced.items() if k not in self.env})
        os.environ.update(self.env)
        sys.argv = list(self.argv)
        first = os.getcwd() if self.module else os.path.dirname(os.path.abspath(self.argv[0]))
        sys.path.insert(0, first)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def run(self) -> None:
        import runpy

        if self.module:
            runpy.run_module(self.argv[0], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(self.argv[0], run_name="__main__")


def preimport(names: Sequence[str]) -> str:
    """Import *names*; what keeps this process from forking safely, or ``""``."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    if threading.active_count() != 1:
        return f"{threading.active_count()} threads after the imports"
    return ""


def reply(sock: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the caller is gone: the news is for no one
        sock.send(json.dumps(message).encode())


def serve(control: socket.socket) -> Job | None:
    """Answer requests until stdin closes; in a forked child, return its job."""
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "request")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    watched: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, reply socket)
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    return None
            elif key.data == "request":
                data, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, 4)
                if not data:
                    return None
                if len(fds) != 4:
                    for fd in fds:
                        os.close(fd)
                    continue
                answer = socket.socket(fileno=fds[3])
                try:
                    job = Job(json.loads(data))
                except (ValueError, KeyError, TypeError) as error:
                    reply(answer, {"error": f"a request this server cannot read: {error}"})
                    answer.close()
                    for fd in fds[:3]:
                        os.close(fd)
                    continue
                # Whatever exists now, the child never has the collector walk (and so
                # copy) it: an interpreter's exit costs 0.05 s of CPU instead of 0.25.
                gc.freeze()
                pid = os.fork()
                if pid == 0:
                    answer.detach()
                    for pidfd, (_, other) in watched.items():
                        os.close(pidfd)
                        other.close()
                    watched.clear()
                    selector.close()
                    control.close()
                    job.become(fds)
                    return job
                for fd in fds[:3]:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                watched[pidfd] = (pid, answer)
                selector.register(pidfd, selectors.EVENT_READ, pidfd)
                reply(answer, {"pid": pid})
            else:
                pidfd = key.data
                pid, answer = watched.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                reply(answer, {"status": status})
                answer.close()


def main() -> None:
    # Nothing of the tests' folder is importable from the scripts: a script's
    # own folder goes first in its child, as with `python script.py`.
    del sys.path[0]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is the caller's
    control = socket.socket(fileno=int(sys.argv[1]))
    problem = preimport(sys.argv[2:] or PREIMPORT)
    reply(control, {"ready": not problem, "problem": problem})
    if problem:
        control.close()
        return
    job = serve(control)
    if job is None:
        control.close()
        return
    job.run()


if __name__ == "__main__":
    main()
