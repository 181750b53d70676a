"""The frontends' own npm clients against the Python server, in node's test runner.

``ai``'s ``DefaultChatTransport`` + ``readUIMessageStream`` and
``@ag-ui/client``'s ``HttpAgent`` (tests/node/ui_protocols.test.mjs) talk to
tests/web/ui_protocol_server.py over loopback. Real time, each step bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ui_stream_fixture import every_chunk

from node_peers import NODE_DIR, node_executable, npm_package

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).resolve().parent / "ui_protocol_server.py"
NODE_TEST = NODE_DIR / "ui_protocols.test.mjs"


def test_the_npm_clients_read_both_protocols(tmp_path: Path) -> None:
    node = node_executable()
    npm_package("ai")
    npm_package("@ag-ui/client")
    fixture = tmp_path / "chunks.json"
    fixture.write_text(json.dumps(every_chunk()))
    server = subprocess.Popen(
        [sys.executable, str(SERVER)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        done = subprocess.run(
            [node, "--test", "--test-timeout=60000", str(NODE_TEST)],
            cwd=NODE_DIR,
            env={**os.environ, "SERVER_URL": url, "FIXTURE": str(fixture)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.kill()
        server.communicate(timeout=10)  # and close its pipes
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
    assert "# pass 6" in done.stdout


def test_the_example_says_how_to_use_it() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ui_protocols.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--port" in done.stdout
    assert "POST /api/chat" in done.stdout
    assert "POST /agui" in done.stdout
