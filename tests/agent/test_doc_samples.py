"""Every code sample of the agent's pages runs, and prints what the page says it prints.

A page's Python blocks run in order in one namespace (a page is one program
read in pieces); each ``text`` block that follows is what the code before it
printed. The samples talk to the fake server through ``fake_openai_env``, on
the real clock, with no key and no network beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
# Kept in step with the exemptions in tests/test_docs_samples.py.
PAGES = [
    "tutorial/agent.md",
    "how-to/agent-tools.md",
    "how-to/agent-context-and-deps.md",
    "how-to/agent-streaming.md",
    "how-to/agent-structured-output.md",
    "how-to/agent-conversation.md",
    "how-to/agent-cancel.md",
    "how-to/agent-usage-limits.md",
    "how-to/agent-testing.md",
    "how-to/agent-output-modes.md",
    "how-to/tools-per-step.md",
    "how-to/history-processors.md",
]
BLOCK = re.compile(r"```(python|text)\n(.*?)```", flags=re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_and_prints_what_it_shows(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    # A module of its own, as a script would have (dataclasses look themselves up there).
    module = types.ModuleType(f"doc_{Path(page).stem.replace('-', '_')}")
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    printed = io.StringIO()
    expected: list[str] = []
    ran = 0
    for kind, body in BLOCK.findall(text):
        if kind == "python":
            with contextlib.redirect_stdout(printed):
                exec(compile(body, f"{page} (block {ran})", "exec"), namespace)
            ran += 1
        else:
            expected.append(body)
    del sys.modules[module.__name__]
    assert ran > 0
    assert printed.getvalue() == "".join(expected)


def test_these_are_the_pages_the_general_sample_runner_leaves_to_this_test() -> None:
    from test_docs_samples import _AGENT_SCRIPTS, NOT_RUN

    assert sorted(PAGES) == sorted(p for p, why in NOT_RUN.items() if why is _AGENT_SCRIPTS)
