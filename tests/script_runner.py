"""Run a Python file as a script, in a process of its own, for a fraction of the start-up.

``run_script(path, cwd=..., env=..., timeout=...)`` is
``subprocess.run([sys.executable, path], capture_output=True, text=True)``
and ``start_script`` is the ``subprocess.Popen`` of it (stdout and stderr
piped, text), except that where the platform allows, the process is forked
from a server that has already imported the heavy modules
(``script_server.py`` says what the child takes from the caller and what it
shares). The script still runs as written, as ``__main__``, in a fresh
process with its own exit status, stdout and stderr, its interpreter ending
as any does.

The plain ``subprocess`` way runs where there is no ``os.fork`` or
``os.pidfd_open`` (not Linux), when the server could not fork safely, and
whenever ``JUNO_SCRIPT_RUNNER=subprocess`` is set. One server is kept per
start-up environment (the ``PYTHON*`` and locale variables, which an
interpreter reads when it starts) and list of modules to import, for the life of
this process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeAlias

SERVER = Path(__file__).with_name("script_server.py")
# What the store's CLI and its worker processes import (not the SDK, not the web layer).
STORE_PREIMPORT = ("anyio", "trio", "juno_bind_trio.agent", "juno_bind_trio.store", "psycopg")
RUNNER_ENV = "JUNO_SCRIPT_RUNNER"
HELLO_TIMEOUT = 60.0
DRAIN_TIMEOUT = 30.0  # after a kill: what is left on the pipes, or give up on it


def startup_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of *env* an interpreter reads as it starts."""
    return tuple(
        sorted((k, v) for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k == "LANG")
    )


# A child starts with SIGINT as at a terminal: at its default and unblocked, whatever
# this pytest worker inherited or another test left. An ignored or blocked SIGINT is
# inherited across exec, and the script would then never see a Ctrl-C. Not with a
# preexec_fn: that runs Python in the child between fork and exec, which is not safe in
# a process with threads (a pytest worker has some); nor with restore_signals, which
# leaves an ignored SIGINT ignored. The child is first this bare interpreter (-I -S: no
# site, no environment read), which resets SIGINT and execs the real command in place:
# same pid, same descriptors, a few milliseconds of start-up.
_SIGINT_TRAMPOLINE = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def with_sigint_as_at_a_terminal(argv: Sequence[str]) -> list[str]:
    """*argv* (its program's path first: ``[sys.executable, ...]``) started so that its
    process has SIGINT at its default and unblocked: give the result to ``Popen``."""
    return [sys.executable, "-I", "-S", "-c", _SIGINT_TRAMPOLINE, *argv]


class _Server:
    def __init__(self, env: Mapping[str, str], preimport: tuple[str, ...]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lock = threading.Lock()
        try:
            self.process = subprocess.Popen(
                with_sigint_as_at_a_terminal(
                    [sys.executable, str(SERVER), str(theirs.fileno()), *preimport]
                ),
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        self.control = ours
        # Its imports take a second or two; a server that never says hello (stopped, a
        # machine out of memory) is no server: the scripts start as plain subprocesses.
        self.control.settimeout(HELLO_TIMEOUT)
        try:
            hello = self.control.recv(1 << 16)
        except TimeoutError:
            self.process.kill()
            self.process.wait()
            hello = b'{"ready": false, "problem": "no hello in time"}'
        self.control.settimeout(None)
        answer = json.loads(hello) if hello else {"ready": False, "problem": "it exited"}
        self.problem: str = "" if answer["ready"] else str(answer["problem"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.control.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def fork(
        self, argv: list[str], cwd: str, env: Mapping[str, str], fds: list[int], *, module: bool
    ) -> _Reply:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            request = json.dumps(
                {"argv": argv, "cwd": cwd, "env": dict(env), "module": module}
            ).encode()
            with self.lock:
                socket.send_fds(self.control, [request], [*fds, theirs.fileno()])
        finally:
            theirs.close()
        return _Reply(ours)


class _Reply:
    """The server's word on one child: its pid, then its wait status."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        first = self.read()
        if "error" in first or "pid" not in first:
            sock.close()
            raise RuntimeError(f"the script server refused the script: {first}")
        self.pid = int(first["pid"])

    def read(self, timeout: float | None = None) -> dict[str, Any]:
        self.sock.settimeout(timeout)
        data = self.sock.recv(1 << 16)
        if not data:
            raise RuntimeError(
                f"the script server ended before it said how the child ended; "
                f"rerun with {RUNNER_ENV}=subprocess to run the scripts without it"
            )
        message: dict[str, Any] = json.loads(data)
        return message


_servers: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], _Server] = {}
_servers_lock = threading.Lock()


def _close_servers() -> None:
    for server in _servers.values():
        server.close()
    _servers.clear()


atexit.register(_close_servers)


def fork_server_for(env: Mapping[str, str], preimport: Sequence[str] = ()) -> _Server | None:
    """The server for *env*'s start-up that imported *preimport* (by default the
    package, the openai SDK and the web layer: ``script_server.PREIMPORT``), started on
    first use; ``None`` if scripts cannot fork here."""
    if os.environ.get(RUNNER_ENV) == "subprocess" or not hasattr(os, "pidfd_open"):
        return None
    key = (startup_key(env), tuple(preimport))
    with _servers_lock:
        server = _servers.get(key)
        if server is not None and server.process.poll() is not None:
            server.close()  # it died (killed, out of memory): a new one, not its corpse
            server = None
        if server is None:
            server = _servers[key] = _Server(env, key[1])
    return None if server.problem else server


class ForkedScript:
    """The part of ``subprocess.Popen`` the tests use, for a child of the fork server."""

    def __init__(
        self, server: _Server, argv: list[str], cwd: str, env: Mapping[str, str], *, module: bool
    ) -> None:
        self.args = argv
        self.returncode: int | None = None
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            self._reply = server.fork(argv, cwd, env, [0, out_write, err_write], module=module)
        except BaseException:
            for fd in (out_read, err_read):
                os.close(fd)
            raise
        finally:
            os.close(out_write)
            os.close(err_write)
        self.pid = self._reply.pid
        # Decoded as subprocess's text mode decodes: the locale's encoding, newlines translated.
        encoding = locale.getpreferredencoding(False)
        self.stdout: IO[str] = open(out_read, encoding=encoding)  # noqa: SIM115  # closed by communicate()
        self.stderr: IO[str] = open(err_read, encoding=encoding)  # noqa: SIM115  # closed by communicate()

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(TimeoutError, BlockingIOError):  # not yet
                self._ended(self._reply.read(timeout=0))
        return self.returncode

    def _ended(self, message: dict[str, Any]) -> None:
        self.returncode = os.waitstatus_to_exitcode(int(message["status"]))
        self._reply.sock.close()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self._ended(self._reply.read(timeout=timeout))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from None
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # Once the server has said the child ended, its pid may be another's.
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        # The script leads a process group of its own (the server's child calls setsid):
        # what it started dies with it, and nothing is left holding its pipes open.
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Everything left on stdout and stderr, read to their end, and the exit status."""
        texts: dict[str, str] = {}
        readers = [
            threading.Thread(
                target=lambda n=name, f=file: texts.__setitem__(n, f.read()), daemon=True
            )
            for name, file in (("out", self.stdout), ("err", self.stderr))
        ]
        for reader in readers:
            reader.start()
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait()
            raise
        finally:
            for reader in readers:
                reader.join(DRAIN_TIMEOUT)
            if all(not reader.is_alive() for reader in readers):
                self.stdout.close()
                self.stderr.close()
        return texts.get("out", ""), texts.get("err", "")


ScriptProcess: TypeAlias = "ForkedScript | subprocess.Popen[str]"


def start_script(
    script: Path | str,
    *args: str,
    cwd: Path | str,
    env: Mapping[str, str],
    module: bool = False,
    preimport: Sequence[str] = (),
) -> ScriptProcess:
    """``python script *args`` (``python -m script *args`` with *module*) started with
    stdout and stderr piped, as text; *preimport* names the modules worth importing
    before the fork, if not the default ones (what the script does not import is only
    start-up time lost)."""
    argv = [str(script), *args]
    server = fork_server_for(env, preimport)
    if server is None:
        return subprocess.Popen(
            with_sigint_as_at_a_terminal([sys.executable, *(["-m"] if module else []), *argv]),
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # as a forked script: a group of its own, killed whole
        )
    return ForkedScript(server, argv, str(cwd), env, module=module)


def run_script(
    script: Path | str,
    *args: str,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout: float,
    module: bool = False,
    preimport: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([sys.executable, script, *args], capture_output=True, text=True)``;
    with *module*, ``[sys.executable, "-m", script, *args]``."""
    process = start_script(script, *args, cwd=cwd, env=env, module=module, preimport=preimport)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        if isinstance(process, subprocess.Popen):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.communicate(timeout=DRAIN_TIMEOUT)
        raise
    assert process.returncode is not None
    return subprocess.CompletedProcess(
        [sys.executable, *(["-m"] if module else []), str(script), *args],
        process.returncode,
        out,
        err,
    )
