"""A small MCP server written with the official SDK: notes, over stdio.

    python examples/mcp_notes_server.py

``examples/mcp_agent.py`` starts it as a subprocess and gives its tools to an
agent. The notes live as long as the connection.

Needs the ``mcp`` extra (the MCP SDK): ``pip install -e '.[mcp]'`` in the
checkout.
"""

from __future__ import annotations

try:
    from mcp.server.mcpserver import MCPServer
except ImportError as missing:
    raise SystemExit(
        f"examples/mcp_notes_server.py needs the mcp extra ({missing}): pip install -e '.[mcp]'"
    ) from None

server = MCPServer("notes")
notes: list[str] = []


@server.tool(description="Add a note; returns how many notes there are now.")
async def add_note(text: str) -> int:
    notes.append(text)
    return len(notes)


@server.tool(description="Every note so far, oldest first.")
async def list_notes() -> list[str]:
    return list(notes)


if __name__ == "__main__":
    server.run("stdio")
