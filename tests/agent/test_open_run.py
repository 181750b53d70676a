"""Agent.open_run: one ordered stream of typed events, run.text, and leaving early."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio.agent import (
    Agent,
    AgentEvent,
    RunEndedEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
    tool,
)
from juno_bind_trio.completion import ResetEvent, TextEvent

pytestmark = pytest.mark.anyio


@tool
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@tool
async def broken() -> str:
    raise ValueError("no luck")


def kinds(events: list[AgentEvent]) -> list[str]:
    return [e.to_wire()["kind"] for e in events]


async def test_events_arrive_in_the_order_things_happened() -> None:
    model = ScriptedModel(
        [
            Say(
                text="Checking.",
                chunks=["Check", "ing."],
                calls=[call("c1", "slow", seconds=1), call("c2", "broken")],
            ),
            Say(text="All done.", chunks=["All ", "done."]),
        ]
    )
    agent = Agent(model, tools=[slow, broken])
    events: list[AgentEvent] = []
    texts: list[str] = []
    async with agent.open_run("go", run_id="r") as run:
        async for event in run:
            events.append(event)
            texts.append(run.text)
    assert run.result is not None
    assert run.result.output == "All done."
    assert kinds(events)[0] == "text"
    wire = [e.to_wire() for e in events if not isinstance(e, TextEvent)]
    started = [w for w in wire if w["kind"] == "tool_call_started"]
    ended = {w["toolCallId"]: w for w in wire if w["kind"] == "tool_call_ended"}
    # Two tools, two workers: they start in either order (trio shuffles its run queue).
    assert sorted(w["toolCallId"] for w in started) == ["c1", "c2"]
    assert ended["c1"]["status"] == "finished"
    assert ended["c1"]["content"] == "slept 1.0"
    assert ended["c2"]["status"] == "failed"
    assert json.loads(ended["c2"]["content"])["error"] == "ValueError: no luck"
    turns = [e for e in events if isinstance(e, TurnEndedEvent)]
    assert [(t.turn_id, t.content, t.tool_calls) for t in turns] == [
        ("r:1", "Checking.", 2),
        ("r:2", "All done.", 0),
    ]
    # The first turn's events all come before the second turn's text.
    first_turn_end = events.index(turns[0])
    assert all(
        not (isinstance(e, TextEvent) and e.turn_id == "r:2") for e in events[:first_turn_end]
    )
    assert isinstance(events[-1], RunEndedEvent)
    assert events[-1].reason == "completed"
    assert texts[-1] == "All done."
    assert run.turn_id == "r:2"
    assert "".join(e.text for e in events if isinstance(e, TextEvent) and e.turn_id == "r:1") == (
        "Checking."
    )


async def test_leaving_the_block_early_cancels_the_run_and_answers_every_call() -> None:
    model = ScriptedModel(
        [
            Say(calls=[call("c1", "slow", seconds=10), call("c2", "slow", seconds=20)]),
            Say(text="never"),
        ]
    )
    agent = Agent(model, tools=[slow], per_tool_limit=1)
    start = anyio.current_time()
    async with agent.open_run("go") as run:
        async for event in run:
            if isinstance(event, ToolCallStartedEvent):
                break
    assert anyio.current_time() - start == 0
    assert run.result is None
    answers = tool_answers(run.messages)
    assert answers["c1"]["kind"] == "interrupted"
    assert answers["c2"]["kind"] == "not_run"
    assert len(model.turns) == 1  # no second model call


async def test_a_soft_stop_lets_calls_in_flight_finish() -> None:
    model = ScriptedModel(
        [
            Say(calls=[call("c1", "slow", seconds=5), call("c2", "slow", seconds=5)]),
            Say(text="never"),
        ]
    )
    agent = Agent(model, tools=[slow], per_tool_limit=1)
    ended: list[ToolCallEndedEvent] = []
    async with agent.open_run("go") as run:
        async for event in run:
            if isinstance(event, ToolCallStartedEvent):
                run.stop()
            if isinstance(event, ToolCallEndedEvent):
                ended.append(event)
    assert run.result is not None
    assert run.result.reason == "stopped"
    assert [(e.tool_call_id, e.status) for e in ended] == [("c1", "finished"), ("c2", "not_run")]


async def test_run_cancel_is_a_hard_stop_and_the_run_ends_cancelled() -> None:
    model = ScriptedModel([Say(calls=[call("c1", "slow", seconds=5)]), Say(text="never")])
    agent = Agent(model, tools=[slow])
    events: list[AgentEvent] = []
    async with agent.open_run("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ToolCallStartedEvent):
                run.cancel()
    assert run.result is None
    assert isinstance(events[-1], RunEndedEvent)
    assert events[-1].reason == "cancelled"
    ended = [e for e in events if isinstance(e, ToolCallEndedEvent)]
    assert [(e.tool_call_id, e.status) for e in ended] == [("c1", "interrupted")]


async def test_an_error_of_the_run_is_raised_when_the_block_exits() -> None:
    async def failing(turn: Any) -> Any:
        raise RuntimeError("provider down")

    events: list[AgentEvent] = []

    async def read_all() -> None:
        async with Agent(failing).open_run("go", run_id="r") as run:
            async for event in run:
                events.append(event)

    with pytest.raises(RuntimeError, match="provider down"):
        await read_all()
    assert [e.to_wire() for e in events] == [
        {"kind": "run_ended", "runId": "r", "reason": "failed"}
    ]


async def test_a_reset_clears_the_text_the_reader_shows() -> None:
    async def retrying(turn: Any) -> Any:
        from juno_bind_trio.loop import ModelTurnResult

        stream = turn.text_stream
        stream.begin_attempt()
        stream.observe("Hello wor")
        await anyio.sleep(1)
        stream.begin_attempt()  # the attempt failed; routing tries again
        stream.observe("Bonjour")
        await anyio.sleep(1)
        return ModelTurnResult(content="Bonjour")

    seen: list[tuple[str, str]] = []
    async with Agent(retrying).open_run("go") as run:
        async for event in run:
            if isinstance(event, (TextEvent, ResetEvent)):
                seen.append((event.to_wire()["kind"], run.text))
    assert seen == [("text", "Hello wor"), ("reset", ""), ("text", "Bonjour")]
