"""Real headless Chromium (Debian's package) driven by Playwright, for the live view's tests.

Playwright's own browser download cannot work on these machines; the tests
drive ``/usr/bin/chromium`` through ``executable_path``. Without it (or
without Playwright) a browser test is skipped on a developer's machine and
fails in CI (``CI=true``), where ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "artifacts"
CHROMIUM = os.environ.get("JUNO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def need_browser() -> Any:
    """Playwright's sync API, or a skip (a failure in CI) naming what is missing."""
    missing = None
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        missing = f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    try:
        from playwright import sync_api
    except ImportError:
        missing = "Playwright is not installed (pip install -e '.[test]')"
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}: CI must run the browser tests")
        pytest.skip(missing)
    return sync_api


@contextmanager
def launched() -> Iterator[Any]:
    """A fresh headless Chromium; yields a page."""
    sync_api = need_browser()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            yield page
        finally:
            browser.close()


def example_server(*args: str) -> Any:
    """``python examples/live_view.py --port 0 ARGS``; yields its URL and the process."""
    return script_server(ROOT / "examples" / "live_view.py", "--port", "0", *args)


@contextmanager
def script_server(script: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``python SCRIPT ARGS``, which prints its URL first; yields the URL and the process."""
    process = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if match is None:
            process.kill()
            raise AssertionError(f"the example printed no URL: {line!r} {process.stderr.read()!r}")  # type: ignore[union-attr]
        yield match.group(0), process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
