"""MCP toolsets against real server processes: stdio, and streamable HTTP on 127.0.0.1.

A subprocess lives on the real clock, so these tests do too (the module's
``anyio_backend`` fixture gives each backend its ordinary clock) and each is
bounded by ``anyio.fail_after``. They are few, and marked ``mcp_process``:
``pytest -m mcp_process`` selects them, ``-m "not mcp_process"`` leaves them out.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

from juno_bind_trio import MCPConnectionError, MCPToolError, ToolFailureError
from juno_bind_trio.mcp import MCPToolset, open_mcp_http, open_mcp_stdio
from juno_bind_trio.run import ToolBatch, ToolCallLike, tool_call_id

pytestmark = [pytest.mark.anyio, pytest.mark.mcp_process, pytest.mark.one_backend_by_default]

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))
# Generous: the SDK's own shutdown of a server that ignores its closed stdin
# takes up to about six seconds; a test that passes takes one or two.
LIMIT = 60


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """The backend under test on its real clock: a server process does not jump."""
    return (request.param, {})


@pytest.fixture
def errlog(tmp_path: Path) -> Any:
    with (tmp_path / "server.err").open("w") as file:
        yield file


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def server_pid(toolset: MCPToolset) -> int:
    found = await toolset.call("pid", {})
    assert isinstance(found, dict)
    pid = found["result"]
    assert isinstance(pid, int)
    assert not gone(pid)
    return pid


async def record(toolset: MCPToolset, prefix: str) -> dict[str, Any]:
    found = await toolset.call(f"{prefix}record", {})
    assert isinstance(found, dict)
    return found


async def cut_slow_call(toolset: MCPToolset, tag: str, prefix: str = "") -> None:
    """Start `slow`, cancel it once the server has it, and check the server saw the cancel."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(toolset.call, f"{prefix}slow", {"tag": tag})
            while True:
                if tag in (await record(toolset, prefix))["started"]:
                    break
                await anyio.sleep(0.02)
            scope.cancel()
    assert scope.cancelled_caught
    # The connection is still open, so only the protocol's cancellation
    # notification (notifications/cancelled) can have cancelled the handler.
    while True:
        if tag in (await record(toolset, prefix))["cancelled"]:
            break
        await anyio.sleep(0.02)


async def test_stdio_server_lists_calls_fails_and_cancels_then_its_process_is_gone(
    errlog: TextIO,
) -> None:
    with anyio.fail_after(LIMIT):
        async with open_mcp_stdio(sys.executable, [SERVER, "stdio"], errlog=errlog) as toolset:
            pid = await server_pid(toolset)
            assert {info.name for info in toolset.infos} >= {"echo", "add", "slow"}
            assert await toolset.call("add", {"a": 20, "b": 22}) == {"total": 42, "terms": [20, 22]}
            with pytest.raises(MCPToolError, match="refused: stdio"):
                await toolset.call("fail", {"reason": "stdio"})
            await cut_slow_call(toolset, "stdio-cut")
        assert gone(pid)


async def test_a_hard_cancel_around_the_block_interrupts_calls_and_leaves_no_process(
    errlog: TextIO,
) -> None:
    """The run's scope is cancelled while a batch of MCP calls is running: the
    running calls are interrupted, the queued one refused, the process gone."""
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "slow", "arguments": "{}"}}
        for i in range(3)
    ]
    batch: ToolBatch[object] = ToolBatch(calls)
    pids: list[int] = []
    with anyio.fail_after(LIMIT):
        with anyio.CancelScope() as run_scope:
            async with open_mcp_stdio(sys.executable, [SERVER, "stdio"], errlog=errlog) as toolset:
                pids.append(await server_pid(toolset))

                async def dispatch(call: ToolCallLike) -> object:
                    if tool_call_id(call) == "c1":
                        # The second call is on the server: cancel the run.
                        run_scope.cancel()
                    return await toolset.call("slow", {"tag": tool_call_id(call)})

                await batch.run(dispatch, per_tool_limit=2)
        assert run_scope.cancelled_caught
    assert batch.states == ("interrupted", "interrupted", "refused")
    assert gone(pids[0])


async def test_a_stdio_server_that_dies_mid_call_is_an_external_failure(errlog: TextIO) -> None:
    with anyio.fail_after(LIMIT):
        async with open_mcp_stdio(sys.executable, [SERVER, "stdio"], errlog=errlog) as toolset:
            pid = await server_pid(toolset)
            with pytest.raises(ToolFailureError) as crashed:
                await toolset.call("crash", {})
            assert crashed.value.kind == "external"
            # Every later call fails the same way, at once, and the tools are
            # still the agent's to offer: the block is still open.
            with pytest.raises(ToolFailureError) as later:
                await toolset.call("echo", {"text": "anyone?"})
            assert later.value.kind == "external"
            assert len(toolset.tools) == len(toolset.infos) > 0
        assert gone(pid)


async def test_a_command_that_cannot_start_is_a_connection_error(errlog: TextIO) -> None:
    with anyio.fail_after(LIMIT), pytest.raises(MCPConnectionError, match="no-such-mcp-server"):
        async with open_mcp_stdio("no-such-mcp-server-here", errlog=errlog):
            pytest.fail("the block must not be entered")


async def test_an_unreachable_url_is_a_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with anyio.fail_after(LIMIT), pytest.raises(MCPConnectionError, match="ConnectError") as caught:
        async with open_mcp_http(url):
            pytest.fail("the block must not be entered")
    assert caught.value.server == url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def http_server(errlog: TextIO) -> AsyncIterator[str]:
    port = free_port()
    process = await anyio.open_process(
        [sys.executable, SERVER, "http", str(port)], stdout=errlog, stderr=errlog
    )
    try:
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
            else:
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            await process.aclose()


async def test_http_server_lists_calls_cancels_and_survives_its_server_dying(
    errlog: TextIO,
) -> None:
    with anyio.fail_after(LIMIT):
        async with (
            http_server(errlog) as url,
            open_mcp_http(url, prefix="web", headers={"X-Juno-Test": "1"}) as toolset,
        ):
            assert toolset.info("web_add").server_name == "add"
            assert await toolset.call("web_echo", {"text": "over http"}) == "over http"
            with pytest.raises(MCPToolError, match="refused: http"):
                await toolset.call("web_fail", {"reason": "http"})
            await cut_slow_call(toolset, "http-cut", prefix="web_")
            # The server process dies under a call: the call is an external
            # failure, and the block still closes cleanly.
            with pytest.raises(ToolFailureError) as crashed:
                await toolset.call("web_crash", {})
            assert crashed.value.kind == "external"
            # The transport's failure ended the connection: later calls fail
            # as external at once, without reaching for the dead server.
            while True:  # the keeper notices the failed transport on its own time
                if toolset.lost is not None:
                    break
                await anyio.sleep(0.02)
            assert "lost" in repr(toolset)
            with pytest.raises(ToolFailureError, match="connection to it ended") as later:
                await toolset.call("web_echo", {"text": "anyone?"})
            assert later.value.kind == "external"
