"""MCP toolsets against servers written by others: the npm reference servers.

``@modelcontextprotocol/server-everything`` over stdio and streamable HTTP,
and ``@modelcontextprotocol/server-filesystem`` over stdio (the only transport
it offers), as real node processes. What the client sent is read from a tap
in front of the server (``stdio_tap.py``, or a TCP proxy for HTTP), so "the
server was told" means the bytes went to it. Real clock, both backends (the default run
takes each case on one, `--backend` on the one named), each
test bounded by ``anyio.fail_after``; marked ``mcp_process``.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from reference_servers import (
    everything_http,
    everything_stdio,
    filesystem_stdio,
    tapped,
    tcp_tap,
)

from juno_bind_trio import ToolFailureError
from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.mcp import DEFAULT_MAX_RESULT_CHARS, MCPToolset, open_mcp_http, open_mcp_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.mcp_process, pytest.mark.one_backend_by_default]

LIMIT = 60
LONG = "trigger-long-running-operation"
CANCELLED = b"notifications/cancelled"


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """The backend under test on its real clock: a server process does not jump."""
    return (request.param, {})


@pytest.fixture
def errlog(tmp_path: Path) -> Any:
    with (tmp_path / "server.err").open("w") as file:
        yield file


class Script:
    """A model that plays its turns in order and keeps what it was offered and shown."""

    def __init__(self, *turns: ModelTurnResult) -> None:
        self.turns = list(turns)
        self.offered: list[Sequence[Any]] = []
        self.shown: list[list[dict[str, Any]]] = []

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.offered.append(turn.tools)
        self.shown.append([dict(message) for message in turn.messages])
        return self.turns.pop(0)


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def answers(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool":
            try:
                out[message["tool_call_id"]] = json.loads(message["content"])
            except ValueError:
                out[message["tool_call_id"]] = message["content"]
    return out


@asynccontextmanager
async def everything(
    transport: str, errlog: TextIO, tmp_path: Path, **options: Any
) -> AsyncIterator[tuple[MCPToolset, Any]]:
    """server-everything over *transport*, behind a tap; yields the toolset and what was sent."""
    if transport == "stdio":
        log = tmp_path / "sent.log"
        command, args = tapped(log, *everything_stdio())
        async with open_mcp_stdio(command, args, errlog=errlog, **options) as toolset:
            yield toolset, log.read_bytes
    else:
        async with everything_http(errlog) as (port, _process):
            with tcp_tap(port) as tap:
                async with open_mcp_http(tap.url, **options) as toolset:
                    yield toolset, lambda: tap.sent


def messages(sent: bytes) -> list[dict[str, Any]]:
    """Every JSON-RPC message in what a client sent (stdio lines, or HTTP bodies among headers)."""
    text = sent.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    found = []
    start = text.find('{"jsonrpc"')
    while start != -1:
        message, end = decoder.raw_decode(text, start)
        found.append(message)
        start = text.find('{"jsonrpc"', end)
    return found


async def until(predicate: Any, what: str, limit: float = 10) -> None:
    """Poll *predicate* (a tap's record, another process's doing) until it holds."""
    with anyio.fail_after(limit):
        while True:
            if predicate():
                return
            await anyio.sleep(0.02)


# --- both servers through an Agent -------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_agent_lists_and_calls_server_everythings_tools(
    transport: str, errlog: TextIO, tmp_path: Path
) -> None:
    model = Script(
        ModelTurnResult(
            tool_calls=[
                call("c1", "echo", message="over " + transport),
                call("c2", "get-sum", a=2, b=40),
                call("c3", "get-structured-content", location="Chicago"),
                call("c4", "get-sum", a="two"),
            ]
        ),
        ModelTurnResult(content="done"),
    )
    with anyio.fail_after(LIMIT):
        async with everything(transport, errlog, tmp_path) as (toolset, _sent):
            result = await Agent(model, tools=[toolset]).run("Use the tools.")
    assert result.output == "done"
    offered = {entry["function"]["name"] for entry in model.offered[0]}
    assert {"echo", "get-sum", LONG, "get-structured-content"} <= offered
    got = answers(result.messages)
    assert got["c1"] == f"Echo: over {transport}"
    assert got["c2"] == "The sum of 2 and 40 is 42."
    assert set(got["c3"]) >= {"temperature", "conditions", "humidity"}  # structured content
    assert got["c4"]["kind"] == "validation"  # checked against the server's schema, never sent
    assert "'b' is a required property" in got["c4"]["error"]


async def test_an_agent_lists_and_calls_server_filesystems_tools(
    errlog: TextIO, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("oat milk\neggs\n")
    model = Script(
        ModelTurnResult(
            tool_calls=[
                call("c1", "list_directory", path=str(root)),
                call("c2", "read_text_file", path=str(root / "notes.txt")),
                call("c3", "read_text_file", path="/etc/passwd"),
            ]
        ),
        ModelTurnResult(
            tool_calls=[call("c4", "write_file", path=str(root / "new.txt"), content="hi")]
        ),
        ModelTurnResult(content="done"),
    )
    command, args = filesystem_stdio(root)
    with anyio.fail_after(LIMIT):
        async with open_mcp_stdio(command, args, errlog=errlog) as files:
            result = await Agent(model, tools=[files]).run("Read my notes.")
    got = answers(result.messages)
    assert "[FILE] notes.txt" in json.dumps(got["c1"])
    assert got["c2"] == {"content": "oat milk\neggs\n"}
    assert got["c3"]["success"] is False  # outside the allowed directory: the server's isError
    assert "denied" in got["c3"]["error"].lower()
    assert (root / "new.txt").read_text() == "hi"


# --- strict mode and null for an optional argument ---------------------------------------


async def test_strict_mode_nulls_for_optional_arguments_mean_not_given_filesystem(
    errlog: TextIO, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "lines.txt").write_text("one\ntwo\nthree\n")
    path = str(root / "lines.txt")
    model = Script(
        ModelTurnResult(
            tool_calls=[
                # What a model in strict mode writes for arguments it leaves out.
                call("c1", "read_text_file", path=path, head=None, tail=None),
                call("c2", "read_text_file", path=path, head=2, tail=None),
                call("c3", "read_text_file", path=path, head="two", tail=None),
            ]
        ),
        ModelTurnResult(content="done"),
    )
    command, args = filesystem_stdio(root)
    with anyio.fail_after(LIMIT):
        async with open_mcp_stdio(command, args, errlog=errlog) as files:
            result = await Agent(model, tools=[files], strict=True).run("Read it.")
    (offered,) = [e for e in model.offered[0] if e["function"]["name"] == "read_text_file"]
    # The premise: strict mode offers the optional arguments as required and nullable.
    assert offered["function"]["strict"] is True
    assert set(offered["function"]["parameters"]["required"]) == {"path", "head", "tail"}
    got = answers(result.messages)
    assert got["c1"] == {"content": "one\ntwo\nthree\n"}
    assert got["c2"] == {"content": "one\ntwo"}
    assert got["c3"]["kind"] == "validation"  # a wrong value is still refused, and named
    assert got["c3"]["error"].startswith("head: 'two' is not of type 'number'")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_strict_mode_nulls_for_optional_arguments_mean_not_given_everything(
    transport: str, errlog: TextIO, tmp_path: Path
) -> None:
    model = Script(
        ModelTurnResult(tool_calls=[call("c1", LONG, duration=0.2, steps=None)]),
        ModelTurnResult(content="done"),
    )
    with anyio.fail_after(LIMIT):
        async with everything(transport, errlog, tmp_path) as (toolset, sent):
            result = await Agent(model, tools=[toolset], strict=True).run("Go.")
            # The server got the call without the null: its default applied.
            assert b'"steps":null' not in sent().replace(b" ", b"")
    assert answers(result.messages)["c1"] == (
        "Long running operation completed. Duration: 0.2 seconds, Steps: 5."
    )


# --- a cancel around the block ---------------------------------------------------


async def cancel_once_called(scope: anyio.CancelScope, sent: Any) -> None:
    """Cancel *scope* once the long call is on the wire, and the server is working on it."""
    await until(lambda: b"tools/call" in sent(), "the call")
    await anyio.sleep(0.2)
    scope.cancel()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cancel_around_the_block_tells_the_server_and_ends_the_session(
    transport: str, errlog: TextIO, tmp_path: Path
) -> None:
    """As ``with move_on_after(t): async with open_mcp_http(url) as ts: await ts.call(...)``,
    with the scope cancelled once the call is on the wire (not at a guessed time)."""
    with anyio.fail_after(LIMIT):
        if transport == "http":
            async with everything_http(errlog) as (port, _process):
                with tcp_tap(port) as tap:
                    async with anyio.create_task_group() as watch:
                        with anyio.CancelScope() as scope:
                            watch.start_soon(cancel_once_called, scope, lambda: tap.sent)
                            async with open_mcp_http(tap.url) as toolset:
                                await toolset.call(LONG, {"duration": 30})
                    assert scope.cancelled_caught
                    # Sent before the block was left: nothing to wait for.
                    assert b"DELETE /mcp" in tap.sent
                    sent = tap.sent
        else:
            log = tmp_path / "sent.log"
            command, args = tapped(log, *everything_stdio())
            async with anyio.create_task_group() as watch:
                with anyio.CancelScope() as scope:
                    watch.start_soon(cancel_once_called, scope, log.read_bytes)
                    async with open_mcp_stdio(command, args, errlog=errlog) as toolset:
                        await toolset.call(LONG, {"duration": 30})
            assert scope.cancelled_caught
            sent = log.read_bytes()
    # One cancellation, naming the request it cancels.
    (request,) = [m for m in messages(sent) if m.get("method") == "tools/call"]
    (cancel,) = [m for m in messages(sent) if m.get("method") == "notifications/cancelled"]
    assert cancel["params"]["requestId"] == request["id"]


# --- the host's exception group ------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_exception_group_from_the_host_leaves_the_block_as_itself(
    transport: str, errlog: TextIO, tmp_path: Path
) -> None:
    group = ExceptionGroup("the host's own", [ValueError("a"), KeyError("b")])

    async def use_then_raise() -> None:
        async with everything(transport, errlog, tmp_path) as (toolset, _sent):
            assert await toolset.call("echo", {"message": "hi"}) == "Echo: hi"
            raise group

    with anyio.fail_after(LIMIT), pytest.raises(ExceptionGroup) as raised:
        await use_then_raise()
    assert raised.value is group
    assert raised.value.__cause__ is None


# --- a server that stops answering -------------------------------------------------


@asynccontextmanager
async def stopped(pid: int) -> AsyncIterator[None]:
    """The process *pid* frozen (SIGSTOP) for the block: it answers nothing, it does not die."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_that_stops_answering_fails_the_call_external_after_the_timeout(
    transport: str, errlog: TextIO, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        if transport == "http":
            async with everything_http(errlog) as (port, process):
                with tcp_tap(port) as tap:
                    async with open_mcp_http(tap.url, call_timeout=1.0) as toolset:
                        await frozen_call(toolset, process.pid, lambda: tap.sent)
        else:
            log = tmp_path / "sent.log"
            command, args = tapped(log, *everything_stdio())
            async with open_mcp_stdio(command, args, errlog=errlog, call_timeout=1.0) as toolset:
                pid = int(await anyio.Path(f"{log}.pid").read_text())
                await frozen_call(toolset, pid, log.read_bytes)


async def frozen_call(toolset: MCPToolset, pid: int, sent: Any) -> None:
    assert await toolset.call("echo", {"message": "awake"}) == "Echo: awake"
    async with stopped(pid):
        started = anyio.current_time()
        with pytest.raises(ToolFailureError) as failed:
            await toolset.call("echo", {"message": "anyone?"})
        waited = anyio.current_time() - started
        assert failed.value.kind == "external"
        assert "did not answer within 1 s" in str(failed.value)
        assert 1.0 <= waited < 5.0
        await until(lambda: CANCELLED in sent(), "the timed-out call's cancellation")
        if not toolset.server.startswith("http"):
            # Without the timeout a call waits for as long as the caller lets it.
            # (Over HTTP the cancelled call's notification then waits on the
            # frozen server for the SDK's own bound, 5 s: not worth the wait.)
            no_timeout = MCPToolset(toolset.server, toolset.infos, toolset._client)
            started = anyio.current_time()
            with anyio.move_on_after(1.5) as scope:
                await no_timeout.call("echo", {"message": "still there?"})
            assert scope.cancelled_caught
            assert anyio.current_time() - started >= 1.5
    # Awake again, the server answers the next call.
    assert await toolset.call("echo", {"message": "back"}) == "Echo: back"


# --- the result cap --------------------------------------------------------------------


async def test_a_file_bigger_than_the_cap_reaches_the_model_cut_and_saying_so(
    errlog: TextIO, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    big = root / "big.txt"
    big.write_text("0123456789abcdef" * (2 * 1024 * 1024 // 16))  # 2 MiB
    model = Script(
        ModelTurnResult(tool_calls=[call("c1", "read_text_file", path=str(big))]),
        ModelTurnResult(content="done"),
    )
    command, args = filesystem_stdio(root)
    with anyio.fail_after(LIMIT):
        async with open_mcp_stdio(command, args, errlog=errlog) as files:
            result = await Agent(model, tools=[files]).run("Read it.")
    (message,) = [m for m in result.messages if m.get("role") == "tool"]
    content = message["content"]
    cap = DEFAULT_MAX_RESULT_CHARS
    assert content.startswith('{"content":"0123456789abcdef')
    head, _, note = content.partition("\n[the result was cut here")
    assert len(head) == cap
    assert "it had 2,097,166 characters, of which only the first 100,000 are shown]" in note
    # The next request carries the cut result, not the file.
    (shown,) = [m for m in model.shown[1] if m.get("role") == "tool"]
    assert shown["content"] == content


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_long_echo_is_cut_to_the_toolsets_cap(
    transport: str, errlog: TextIO, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        async with everything(transport, errlog, tmp_path, max_result_chars=50) as (toolset, _):
            short = await toolset.call("echo", {"message": "x" * 44})
            long = await toolset.call("echo", {"message": "x" * 200_000})
    assert short == "Echo: " + "x" * 44  # 50 characters: at the cap, not cut
    assert isinstance(long, str)
    assert long == "Echo: " + "x" * 44 + (
        "\n[the result was cut here: it had 200,006 characters, of which only the first 50 "
        "are shown]"
    )
