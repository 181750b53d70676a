"""examples/mcp_agent.py runs: an agent with a stdio MCP server's tools and a local tool.

The server is a real subprocess, so this runs on the real clock, bounded,
and is marked ``mcp_process``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from module_files import load_file

pytestmark = [pytest.mark.anyio, pytest.mark.mcp_process, pytest.mark.one_backend_by_default]

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "mcp_agent.py"


example = load_file("example_mcp_agent", EXAMPLE)


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return (request.param, {})


async def test_the_example_run_uses_the_mcp_tools_and_the_local_tool(tmp_path: Path) -> None:
    with (tmp_path / "server.err").open("w") as errlog, anyio.fail_after(60):
        result = await example.offline("Remember to buy oat milk.", errlog)
    answers = {
        m["tool_call_id"]: json.loads(m["content"])
        for m in result.messages
        if m.get("role") == "tool"
    }
    assert answers == {
        "call_add": {"result": 1},
        "call_count": 3,
        "call_list": {"result": ["buy oat milk"]},
    }
    assert result.output == "Noted “buy oat milk” (3 words); it is your only note."


def test_the_how_to_runs_the_examples_run() -> None:
    """docs/how-to/use-mcp-servers.md is the same run as this example, in a program of its own.

    The page runs as a script (tests/test_docs_samples.py runs it so); it names
    this example, and gives the server and the agent the same tools and options.
    """
    root = EXAMPLE.parent.parent
    page = (root / "docs" / "how-to" / "use-mcp-servers.md").read_text(encoding="utf-8")
    source = EXAMPLE.read_text(encoding="utf-8")
    server = (root / "examples" / "mcp_notes_server.py").read_text(encoding="utf-8")
    assert "examples/mcp_agent.py" in page
    for shared in ('prefix="notes"', 'non_repeatable=["add_note"]', "def word_count"):
        assert shared in page, shared
        assert shared in source, shared
    for tool in ("async def add_note(text: str) -> int:", "async def list_notes() -> list[str]:"):
        assert tool in page, tool
        assert tool in server, tool
