"""An Agent run that mixes an MCP server's tools with local tools.

The server is the SDK's own, connected in-process, and the model is a script,
so these run on both backends on the virtual clocks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import mcp
import mcp_test_server
import pytest
from mcp.server.mcpserver import Context, MCPServer

from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent, Tool, Toolset, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.mcp import IDEMPOTENCY_KEY_META, open_mcp_client

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fresh_records() -> None:
    mcp_test_server.STARTED.clear()
    mcp_test_server.CANCELLED.clear()


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


class Script:
    """A model that plays its turns in order and keeps what it was offered and shown."""

    def __init__(self, *turns: ModelTurnResult) -> None:
        self.turns = list(turns)
        self.offered: list[Sequence[Any]] = []
        self.shown: list[list[dict[str, Any]]] = []

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.offered.append(turn.tools)
        self.shown.append([dict(message) for message in turn.messages])
        await anyio.lowlevel.checkpoint()
        return self.turns.pop(0)


def answers(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool":
            try:
                out[message["tool_call_id"]] = json.loads(message["content"])
            except ValueError:
                out[message["tool_call_id"]] = message["content"]
    return out


@tool
async def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


async def test_an_agent_run_mixes_mcp_tools_and_local_tools() -> None:
    model = Script(
        ModelTurnResult(
            tool_calls=[
                call("c1", "calc_add", a=2, b=40),
                call("c2", "shout", text="hi"),
                call("c3", "calc_fail", reason="no"),
                call("c4", "calc_add", a="two"),
            ]
        ),
        ModelTurnResult(content="42, HI."),
    )
    async with open_mcp_client(mcp.Client(mcp_test_server.build_server()), prefix="calc") as calc:
        assert isinstance(calc, Toolset)
        agent = Agent(model, tools=[calc, shout])
        result = await agent.run("Add and shout.")
    assert result.output == "42, HI."
    got = answers(result.messages)
    assert got["c1"] == {"total": 42, "terms": [2, 40]}
    assert got["c2"] == "HI"
    # isError: a failed call with the server's text and no kind.
    assert got["c3"]["success"] is False
    assert "kind" not in got["c3"]
    assert "refused: no" in got["c3"]["error"]
    # Arguments that break the schema never reach the server.
    assert got["c4"]["kind"] == "validation"
    assert "'b' is a required property" in got["c4"]["error"]
    offered = {entry["function"]["name"]: entry["function"] for entry in model.offered[0]}
    assert {"calc_add", "calc_echo", "calc_slow", "shout"} <= set(offered)
    assert offered["calc_add"]["description"] == "Add two integers."
    assert offered["calc_add"]["parameters"]["required"] == ["a", "b"]


async def test_the_toolsets_tools_carry_the_per_tool_options() -> None:
    async with open_mcp_client(
        mcp.Client(mcp_test_server.build_server()),
        non_repeatable=["add"],
        uses_idempotency_key=["echo"],
        serial=["pid"],
    ) as toolset:
        tools = {t.name: t for t in toolset.tools}
        assert all(isinstance(t, Tool) for t in tools.values())
        assert toolset.tools is toolset.tools or list(toolset.tools) == list(toolset.tools)
        assert (tools["add"].repeatable, tools["add"].uses_idempotency_key) == (False, False)
        assert tools["echo"].uses_idempotency_key
        assert tools["pid"].serial
        assert tools["slow"].repeatable
        assert tools["add"].parameters == toolset.info("add").parameters
    with pytest.raises(UsageError, match="has been left"):
        _ = toolset.tools


async def test_a_tool_marked_uses_idempotency_key_sends_the_runs_key_in_meta() -> None:
    server = MCPServer("keys")
    seen: dict[str, object] = {}

    @server.tool()
    async def pay(amount: int, ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        seen["pay"] = dict(meta).get(IDEMPOTENCY_KEY_META)
        return "paid"

    @server.tool()
    async def look(ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        seen["look"] = dict(meta).get(IDEMPOTENCY_KEY_META)
        return "looked"

    model = Script(
        ModelTurnResult(tool_calls=[call("p1", "pay", amount=5), call("l1", "look")]),
        ModelTurnResult(content="done"),
    )
    async with open_mcp_client(mcp.Client(server), uses_idempotency_key=["pay"]) as toolset:
        await Agent(model, tools=[toolset]).run("Pay.", run_id="run-1")
    assert isinstance(seen["pay"], str)
    assert seen["pay"]
    assert seen["look"] is None


async def test_a_name_clash_with_a_local_tool_is_refused_and_a_prefix_resolves_it() -> None:
    @tool
    async def echo(text: str) -> str:
        """A local echo."""
        return text

    model = Script(ModelTurnResult(content="unused"))
    async with open_mcp_client(mcp.Client(mcp_test_server.build_server())) as toolset:
        with pytest.raises(UsageError, match="two tools are named 'echo'"):
            await Agent(model, tools=[toolset, echo]).run("Echo.")
    async with open_mcp_client(
        mcp.Client(mcp_test_server.build_server()), prefix="remote"
    ) as toolset:
        result = await Agent(model, tools=[toolset, echo]).run("Echo.")
    assert result.output == "unused"


async def test_a_hard_cancel_of_the_run_interrupts_mcp_calls_and_refuses_queued_ones() -> None:
    model = Script(
        ModelTurnResult(tool_calls=[call("s1", "slow", tag="s1"), call("s2", "slow", tag="s2")]),
        ModelTurnResult(content="unreached"),
    )
    async with open_mcp_client(
        mcp.Client(mcp_test_server.build_server()), serial=["slow"]
    ) as toolset:
        agent = Agent(model, tools=[toolset])
        async with agent.open_run("Wait.") as run:
            async for event in run:
                if getattr(event, "tool_name", None) == "slow":
                    await anyio.sleep(1)
                    run.cancel()
        messages = list(run.messages)
        record = await toolset.call("record", {})
    got = answers(messages)
    assert got["s1"]["kind"] == "interrupted"
    assert got["s2"]["kind"] == "not_run"
    # The server saw the first call start and be cancelled; the second never reached it.
    assert record == {"started": ["s1"], "cancelled": ["s1"]}
