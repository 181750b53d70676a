"""Software written by others, from npm, that the tests drive: where it is, or a skip.

``tests/node/package.json`` pins the packages (the MCP reference servers, the
Vercel AI SDK's ``ai``, the AG-UI client) and ``tests/node/package-lock.json``
their whole tree; ``.ci/run`` installs them with ``npm ci --prefix tests/node``.
On a developer's machine without them a test that needs one is skipped, saying
the line that installs them; under ``CI=true`` it fails instead, because a CI
run that skipped the peers tested nothing of theirs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
NODE_MODULES = NODE_DIR / "node_modules"
INSTALL_LINE = "npm ci --prefix tests/node"


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what}: CI must run the tests against the npm packages ({INSTALL_LINE})")
    pytest.skip(f"{what} ({INSTALL_LINE})")


def node_executable() -> str:
    """The ``node`` binary, or a skip (a failure in CI)."""
    found = shutil.which("node")
    if found is None:
        _missing("node is not installed")
    assert found is not None
    return found


def npm_package(name: str) -> Path:
    """The installed directory of npm package *name* (``"ai"``, ``"@ag-ui/client"``)."""
    node_executable()
    path = NODE_MODULES / name
    if not (path / "package.json").is_file():
        _missing(f"the npm package {name} is not installed in tests/node")
    return path


def npm_bin(package: str, relative: str) -> Path:
    """A file inside an installed npm package (a server's entry point, say)."""
    path = npm_package(package) / relative
    if not path.is_file():
        _missing(f"{relative} is missing from the npm package {package}")
    return path
