"""examples/mcp_agent.py runs: an agent with a stdio MCP server's tools and a local tool.

The server is a real subprocess, so this runs on the real clock, bounded,
and is marked ``mcp_process``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from module_files import load_file

pytestmark = [pytest.mark.anyio, pytest.mark.mcp_process]

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


def test_the_how_to_quotes_the_example_as_it_is() -> None:
    """docs/how-to/use-mcp-servers.md shows an excerpt of the example this file runs."""
    root = EXAMPLE.parent.parent
    page = (root / "docs" / "how-to" / "use-mcp-servers.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert blocks
    source = EXAMPLE.read_text(encoding="utf-8")
    for block in blocks:
        assert block in source
