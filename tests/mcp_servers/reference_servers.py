"""The MCP reference servers from npm, for tests against software written by others.

``@modelcontextprotocol/server-everything`` (stdio, and streamable HTTP on
``PORT``) and ``@modelcontextprotocol/server-filesystem`` (stdio, serving the
directories named on its command line), installed in ``tests/node`` (see
``tests/node_peers.py``: a skip on a machine without them, a failure in CI).
Either can run behind a tap that records what the client sent it:
``stdio_tap.py`` for stdio, :class:`TcpTap` for HTTP.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

import anyio

from node_peers import node_executable, npm_bin

HERE = Path(__file__).resolve().parent
STDIO_TAP = HERE / "stdio_tap.py"
EVERYTHING = "@modelcontextprotocol/server-everything"
FILESYSTEM = "@modelcontextprotocol/server-filesystem"


def everything_stdio() -> tuple[str, list[str]]:
    """The command and arguments that start server-everything over stdio."""
    return node_executable(), [str(npm_bin(EVERYTHING, "dist/index.js")), "stdio"]


def filesystem_stdio(*roots: Path) -> tuple[str, list[str]]:
    """The command and arguments that start server-filesystem on *roots* (stdio only)."""
    return node_executable(), [str(npm_bin(FILESYSTEM, "dist/index.js")), *map(str, roots)]


def tapped(log: Path, command: str, args: list[str]) -> tuple[str, list[str]]:
    """*command* *args* behind ``stdio_tap.py``, which records what the client sent in *log*."""
    log.write_bytes(b"")
    return sys.executable, [str(STDIO_TAP), str(log), command, *args]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def everything_http(errlog: TextIO) -> AsyncIterator[tuple[int, Any]]:
    """server-everything in streamable-HTTP mode on a free port; yields the port and the process."""
    command, args = everything_stdio()
    port = free_port()
    process = await anyio.open_process(
        [command, args[0], "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=errlog,
        stderr=errlog,
    )
    try:
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                if process.returncode is not None:
                    raise AssertionError("server-everything exited before listening") from None
                await anyio.sleep(0.05)
            else:
                await stream.aclose()
                break
        yield port, process
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            await process.aclose()


class TcpTap:
    """A loopback TCP proxy in threads: forwards both ways and keeps what the client sent.

    Threads, not tasks: the tap must not depend on the event loop of the code
    under test (which it watches being cancelled and interrupted).
    """

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sent = bytearray()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sent(self) -> bytes:
        """Every byte any client sent through the tap so far."""
        with self._lock:
            return bytes(self._sent)

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        try:
            while data := source.recv(65536):
                if record:
                    with self._lock:
                        self._sent += data
                sink.sendall(data)
        except OSError:
            pass
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(("127.0.0.1", self._target))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for args in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            with suppress(OSError):
                sock.close()


@contextmanager
def tcp_tap(target_port: int) -> Iterator[TcpTap]:
    tap = TcpTap(target_port)
    tap.start()
    try:
        yield tap
    finally:
        tap.close()
