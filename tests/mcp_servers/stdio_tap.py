"""A stdio MCP server behind a tap: ``python stdio_tap.py LOG COMMAND ARGS...``.

Runs COMMAND as its child and copies this process's stdin to the child's
stdin and to LOG, so LOG holds every byte the client sent the server; the
child's stdout comes back on this process's stdout. The child's pid is
written to ``LOG.pid``. When the client closes stdin, the child's stdin is
closed, and a child still running a second later is killed (the reference
servers keep running on a closed stdin; the SDK would otherwise wait out its
grace period at every close). This process exits with the child's status.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

EXIT_GRACE = 0.3


def main(argv: list[str]) -> int:
    log_path, command = Path(argv[1]), argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None
    assert server.stdout is not None
    Path(f"{log_path}.pid").write_text(str(server.pid))
    to_server, from_server = server.stdin, server.stdout

    def client_to_server() -> None:
        with log_path.open("ab", buffering=0) as log:
            try:
                while chunk := os.read(0, 65536):
                    log.write(chunk)  # logged first: what was sent counts, read or not
                    to_server.write(chunk)
                    to_server.flush()
            except (BrokenPipeError, ValueError):
                pass
        with contextlib.suppress(BrokenPipeError):
            to_server.close()
        try:
            server.wait(timeout=EXIT_GRACE)
        except subprocess.TimeoutExpired:
            server.kill()

    def server_to_client() -> None:
        try:
            while chunk := os.read(from_server.fileno(), 65536):
                while chunk:
                    chunk = chunk[os.write(1, chunk) :]
        except BrokenPipeError:
            pass

    pumps = [threading.Thread(target=f, daemon=True) for f in (client_to_server, server_to_client)]
    for pump in pumps:
        pump.start()
    status = server.wait()
    pumps[1].join(timeout=5)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
