"""Pages whose samples print: what they print is what the page says they print.

Each page's ```` ```python ```` blocks run as in ``test_docs_samples.py`` (one
program, both backends, a virtual clock), with standard output captured; the
page's ```` ```text ```` blocks, joined in order, must be exactly that output.
``test_docs_samples.py`` checks the same of every how-to page run as a
script, on the real clock; this checks it on both backends.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from conftest import run_on
from test_docs_samples import DOCS, TEXT, pages, run_page, shown_output

PAGES = [page for page in pages() if TEXT.search((DOCS / page).read_text(encoding="utf-8"))]


def test_the_pages_that_print_are_checked() -> None:
    assert {"how-to/reask-within-a-turn.md", "how-to/request-options.md"} <= set(PAGES)
    assert len(PAGES) >= 8


@pytest.mark.parametrize("page", PAGES)
def test_the_page_prints_what_it_says(page: str, backend: str) -> None:
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        run_on(backend, run_page, page)
    assert captured.getvalue() == shown_output(page)
