"""The events a reader gets are in the order things happened, and each says something true.

A reset withdrawn by a turn's last attempt reaches the reader before the
turn's end; a tool call starts only once its arguments validated.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from agent_scripts import Say, ScriptedModel, call

from juno_bind_trio.agent import (
    Agent,
    AgentEvent,
    ResetEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
    tool,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


@tool
async def add(n: int) -> str:
    return str(n + 1)


def shape(events: list[AgentEvent]) -> list[str]:
    return [e.to_wire()["kind"] for e in events]


async def test_a_reset_from_the_last_silent_attempt_comes_before_the_turn_ends() -> None:
    turns = 0

    async def model(turn: ModelTurn) -> ModelTurnResult:
        nonlocal turns
        turns += 1
        stream = turn.text_stream
        assert stream is not None
        stream.begin_attempt()
        if turns == 1:
            stream.observe("lost text")
            await anyio.sleep(1)
            stream.begin_attempt()  # the retry answers with a tool call and no text
            return ModelTurnResult(tool_calls=[call("c1", "add", n=1)])
        stream.observe("2")
        return ModelTurnResult(content="2")

    events: list[AgentEvent] = []
    shown_at_turn_end: list[str] = []
    async with Agent(model, tools=[add]).open_run("go", run_id="r") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, TurnEndedEvent):
                shown_at_turn_end.append(run.text)
    assert shape(events) == [
        "text",
        "reset",
        "turn_ended",
        "tool_call_started",
        "tool_call_ended",
        "text",
        "turn_ended",
        "run_ended",
    ]
    reset = events[1]
    assert isinstance(reset, ResetEvent)
    assert reset.turn_id == "r:1"
    # The withdrawn text is gone when the reader learns the turn ended.
    assert shown_at_turn_end == ["", "2"]


async def test_a_tool_call_with_invalid_arguments_ends_without_starting() -> None:
    model = ScriptedModel(
        [Say(calls=[call("bad", "add", '{"n": "x"}'), call("good", "add", n=2)]), Say(text="ok")]
    )
    events: list[AgentEvent] = []
    async with Agent(model, tools=[add]).open_run("go") as run:
        async for event in run:
            events.append(event)
    started = [e.tool_call_id for e in events if isinstance(e, ToolCallStartedEvent)]
    ended = {e.tool_call_id: e for e in events if isinstance(e, ToolCallEndedEvent)}
    assert started == ["good"]
    assert ended["bad"].status == "failed"
    assert ended["bad"].kind == "validation"
    assert ended["good"].status == "finished"
    # The started event of the good call comes before its end.
    kinds = [(type(e).__name__, getattr(e, "tool_call_id", None)) for e in events]
    assert kinds.index(("ToolCallStartedEvent", "good")) < kinds.index(
        ("ToolCallEndedEvent", "good")
    )


async def test_a_call_to_an_unknown_tool_ends_without_starting() -> None:
    model = ScriptedModel([Say(calls=[call("c1", "nope")]), Say(text="ok")])
    events: list[AgentEvent] = []
    async with Agent(model, tools=[add]).open_run("go") as run:
        async for event in run:
            events.append(event)
    assert not [e for e in events if isinstance(e, ToolCallStartedEvent)]
    (ended,) = [e for e in events if isinstance(e, ToolCallEndedEvent)]
    assert (ended.status, ended.kind) == ("failed", "not_found")


async def test_a_schema_tool_starts_only_with_a_json_object() -> None:
    from juno_bind_trio.agent import Tool

    async def handler(ctx: Any, arguments: dict[str, Any]) -> str:
        return json.dumps(arguments)

    echo = Tool.from_schema(
        name="echo", description=None, parameters={"type": "object"}, handler=handler
    )
    model = ScriptedModel(
        [Say(calls=[call("bad", "echo", "[1]"), call("good", "echo", a=1)]), Say(text="ok")]
    )
    events: list[AgentEvent] = []
    async with Agent(model, tools=[echo]).open_run("go") as run:
        async for event in run:
            events.append(event)
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallStartedEvent)] == ["good"]
