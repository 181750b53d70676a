"""Ctrl-C with an MCP call in flight: the server is told, and the program ends by KeyboardInterrupt.

A real SIGINT to a real program (``ctrl_c_client.py``) that calls
server-everything's long operation, over stdio and streamable HTTP, on each
backend, round after round: a call made in the main task and a call made by
an ``Agent`` run in turn, interrupted at a different moment each round. On
Trio the interrupt lands in the main task wherever it waits, which is what
made telling the server hit or miss; so one round proves little, and each
test runs several (``JUNO_CTRL_C_ROUNDS``, default 5; ``nox -s mcp_ctrl_c``
runs 40). Every round, the server must receive ``notifications/cancelled``
for the call, and ``anyio.run`` must raise a bare ``KeyboardInterrupt``; the
last round's ends the program, which must die of SIGINT as Python does (an
uncaught exception group would exit 1). Real time, every wait bounded.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import anyio
import pytest
from reference_servers import everything_http, everything_stdio, tapped, tcp_tap

from script_runner import with_sigint_as_at_a_terminal

pytestmark = [pytest.mark.mcp_process, pytest.mark.one_backend_by_default]

CLIENT = Path(__file__).resolve().with_name("ctrl_c_client.py")
ROUNDS = int(os.environ.get("JUNO_CTRL_C_ROUNDS", "5"))
WAIT = 30.0


class Lines:
    """A process's stdout, line by line, each read bounded by a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        stdout = process.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                self._queue.put(line.rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()

    def next(self, what: str) -> str:
        try:
            return self._queue.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"the program printed no line for {what} in {WAIT} s") from None


def wait_for_count(sent: Callable[[], bytes], needle: bytes, count: int, what: str) -> None:
    """Wait until *needle* occurs *count* times in what the client sent."""
    deadline = time.monotonic() + WAIT
    while sent().count(needle) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def interrupt_every_round(
    backend: str, server: list[str], sent: Callable[[], bytes], env: dict[str, str]
) -> None:
    # The child starts with SIGINT at its default and unblocked, whatever this
    # worker process inherited or another test left: an ignored SIGINT is
    # inherited across exec, and Python then never raises KeyboardInterrupt.
    # Through script_runner's trampoline, not a preexec_fn (unsafe with threads).
    parent_state = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
    process = subprocess.Popen(
        with_sigint_as_at_a_terminal([sys.executable, str(CLIENT), backend, str(ROUNDS), *server]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = Lines(process)
        for round_ in range(ROUNDS):
            assert lines.next(f"round {round_}") == f"CALLING {round_}"
            wait_for_count(sent, b"tools/call", round_ + 1, f"round {round_}'s call")
            # A different moment each round: right away, or while progress arrives.
            time.sleep((0.05, 0.25, 0.6, 0.15, 1.1)[round_ % 5])
            process.send_signal(signal.SIGINT)
            try:
                wait_for_count(
                    sent, b"notifications/cancelled", round_ + 1, f"round {round_}'s cancellation"
                )
            except AssertionError as exc:
                process.kill()
                _, err = process.communicate(timeout=WAIT)
                raise AssertionError(
                    f"{exc}; this process's SIGINT handler and blocked signals: {parent_state}; "
                    f"the program's stderr: {err[-3000:]}"
                ) from None
            if round_ < ROUNDS - 1:
                assert lines.next(f"round {round_}'s end") == f"LEFT {round_} KeyboardInterrupt"
        status = process.wait(timeout=WAIT)
        assert process.stderr is not None
        stderr = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    # Python dies of SIGINT only for an uncaught KeyboardInterrupt (a group exits 1).
    assert status == -signal.SIGINT, stderr[-3000:]
    assert stderr.rstrip().endswith("\nKeyboardInterrupt"), stderr[-3000:]
    assert sent().count(b"notifications/cancelled") == ROUNDS


@contextmanager
def http_server(tmp_path: Path) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """server-everything over HTTP behind a tap, kept by a thread's own event loop."""
    ready: queue.Queue[tuple[str, Callable[[], bytes]]] = queue.Queue()
    done = threading.Event()
    failed: list[BaseException] = []

    async def serve(errlog: TextIO) -> None:
        async with everything_http(errlog) as (port, _process):
            with tcp_tap(port) as tap:
                ready.put((tap.url, lambda: tap.sent))
                # The test's thread says when: poll its flag.
                while True:
                    if done.is_set():
                        break
                    await anyio.sleep(0.05)

    def run() -> None:
        try:
            with (tmp_path / "server.err").open("w") as errlog:
                anyio.run(serve, errlog)
        except BaseException as exc:  # reported to the test below
            failed.append(exc)
            ready.put(("", bytes))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        url, sent = ready.get(timeout=WAIT)
        if failed:
            raise failed[0]
        yield url, sent
    finally:
        done.set()
        thread.join(timeout=WAIT)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_ctrl_c_tells_the_server_every_round_and_ends_by_keyboard_interrupt(
    backend: str, transport: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if transport == "stdio":
        log = tmp_path / "sent.log"
        command, args = tapped(log, *everything_stdio())
        interrupt_every_round(backend, ["stdio", command, *args], log.read_bytes, env)
    else:
        with http_server(tmp_path) as (url, sent):
            interrupt_every_round(backend, ["http", url], sent, env)
