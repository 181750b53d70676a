"""A small MCP server written with the official SDK, for the tests of juno_bind_trio.mcp.

Run as ``python mcp_test_server.py stdio`` or ``python mcp_test_server.py http PORT``
(streamable HTTP on 127.0.0.1). Tests that need no real process import
:func:`build_server` and connect to it in-process.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# Calls of the `slow` tool whose handler was cancelled while it waited, by tag.
CANCELLED: list[str] = []
STARTED: list[str] = []


class Sum(BaseModel):
    total: int
    terms: list[int]


def build_server(name: str = "juno-test") -> MCPServer:
    server = MCPServer(name)

    # Every tool is async: the SDK runs a sync tool in a worker thread, which a
    # virtual clock cannot see (it would jump past pending deadlines meanwhile).
    @server.tool(description="Repeat the text back.", structured_output=False)
    async def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers.")
    async def add(a: int, b: int) -> Sum:
        return Sum(total=a + b, terms=[a, b])

    @server.tool(description="Pad the text with dots to the width.", structured_output=False)
    async def pad(text: str, width: int = 10) -> str:
        return text.ljust(width, ".")

    @server.tool(description="Always fails with the given reason.")
    async def fail(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    @server.tool(description="The server's process id.")
    async def pid() -> int:
        return os.getpid()

    @server.tool(description="Exit the server process in the middle of the call.")
    async def crash() -> str:
        await anyio.lowlevel.checkpoint()
        os._exit(3)

    @server.tool(description="Wait for a very long time, recording a cancellation.")
    async def slow(tag: str) -> str:
        STARTED.append(tag)
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            CANCELLED.append(tag)
            raise
        return tag

    @server.tool(description="Tags of slow calls started and cancelled so far.")
    async def record() -> dict[str, Any]:
        return {"started": list(STARTED), "cancelled": list(CANCELLED)}

    return server


def main(argv: list[str]) -> None:
    server = build_server()
    if argv[1:2] == ["stdio"]:
        server.run("stdio")
    elif argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[2]))
    else:
        raise SystemExit(f"usage: {argv[0]} stdio | http PORT")


if __name__ == "__main__":
    main(sys.argv)
