"""Pages whose samples print: what they print is what the page says they print.

Each page's ```` ```python ```` blocks run as in ``test_docs_samples.py`` (one
program, both backends, a virtual clock), with standard output captured; the
page's ```` ```text ```` blocks, joined in order, must be exactly that output.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from conftest import run_on
from test_docs_samples import DOCS, run_page

TEXT = re.compile(r"^```text\n(?P<text>.*?)^```", re.S | re.M)

PAGES = ["how-to/reask-within-a-turn.md", "how-to/request-options.md"]


@pytest.mark.parametrize("page", PAGES)
def test_the_page_prints_what_it_says(page: str, backend: str) -> None:
    expected = "".join(m["text"] for m in TEXT.finditer((DOCS / page).read_text("utf-8")))
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        run_on(backend, run_page, page)
    assert captured.getvalue() == expected
