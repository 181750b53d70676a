"""Pins what must stay byte-for-byte the TypeScript package's (@juno-ai/bind 9.0.0).

The literals below are copied from the TypeScript source, not from this
package, so a change on either side shows here.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from juno_bind_trio import ABORTED_TOOL_CALL_MESSAGE, AbortedToolCallError
from juno_bind_trio.loop import (
    LoopEvent,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    ToolCallOutcome,
    ToolLoop,
)
from juno_bind_trio.run import ToolCallLike, run_tool_calls_pooled_by_tool, tool_call_id

pytestmark = pytest.mark.anyio

# package/run/tool-batch.js, 9.0.0: `export const ABORTED_TOOL_CALL_MESSAGE = "..." + "...";`
SEED_ABORTED_TOOL_CALL_MESSAGE = (
    "This call was never started, so nothing happened and nothing changed. "
    "The run is ending — do not retry it and do not report it as a failure."
)

# What JSON.stringify({success: false, kind: "not_run", error: aborted.message})
# writes for a refused call (package/loop/tool-loop.js): compact, non-ASCII kept.
SEED_NOT_RUN_CONTENT = (
    '{"success":false,"kind":"not_run","error":"This call was never started, so nothing '
    "happened and nothing changed. The run is ending — do not retry it and do not report "
    'it as a failure."}'
)


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_the_refusal_sentence_is_the_seeds() -> None:
    assert ABORTED_TOOL_CALL_MESSAGE == SEED_ABORTED_TOOL_CALL_MESSAGE
    assert str(AbortedToolCallError("call_1")) == SEED_ABORTED_TOOL_CALL_MESSAGE


async def test_a_refused_call_is_answered_with_the_seeds_bytes() -> None:
    stop = anyio.CancelScope()

    async def model(turn: ModelTurn) -> ModelTurnResult:
        stop.cancel()  # the stop fires while the model is answering
        return ModelTurnResult(tool_calls=[call("call_1"), call("call_2")])

    async def run_tool(c: ToolCallLike) -> ToolCallOutcome:
        raise AssertionError("a refused call never runs")

    state = LoopState([{"role": "user", "content": "go"}])
    result = await ToolLoop(
        state=state, max_iterations=3, call_model=model, run_tool_call=run_tool, stop=stop
    ).run()
    assert result.reason == "stopped"
    answers = [m for m in state.messages if m["role"] == "tool"]
    assert [m["content"] for m in answers] == [SEED_NOT_RUN_CONTENT] * 2
    assert json.loads(SEED_NOT_RUN_CONTENT)["error"] == ABORTED_TOOL_CALL_MESSAGE


async def scripted_run(**options: Any) -> tuple[list[dict[str, Any]], list[str], str]:
    """Two turns, three tools of which one fails; everything observable, returned."""

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration == 1:
            return ModelTurnResult(
                content="checking",
                tool_calls=[call("a"), call("b", "fail"), call("c", "slow")],
                input_tokens=10,
            )
        return ModelTurnResult(content="done", input_tokens=20)

    ran: list[str] = []

    async def run_tool(c: ToolCallLike) -> ToolCallOutcome:
        ran.append(tool_call_id(c))
        if tool_call_id(c) == "b":
            raise KeyError("city")
        if tool_call_id(c) == "c":
            await anyio.sleep(5)
        return ToolCallOutcome.from_content(tool_call_id(c), "ok")

    send, receive = anyio.create_memory_object_stream[LoopEvent](100)
    state = LoopState([{"role": "user", "content": "go"}])
    with send, receive:
        result = await ToolLoop(
            state=state,
            max_iterations=5,
            call_model=model,
            run_tool_call=run_tool,
            events=send,
            run_id="r",
            **options,
        ).run()
        events = [type(e).__name__ for e in _drain(receive)]
    return state.messages, sorted(ran), f"{result.reason}:{events}"


def _drain(receive: Any) -> list[LoopEvent]:
    out = []
    while True:
        try:
            out.append(receive.receive_nowait())
        except anyio.WouldBlock:
            return out


async def test_passing_no_stop_leaves_the_run_unchanged() -> None:
    """The additive contract: a caller that passes no stop gets 8.0.0's behaviour."""
    without = await scripted_run()
    with_none = await scripted_run(stop=None)
    never_fired = await scripted_run(stop=anyio.CancelScope())
    assert without == with_none == never_fired
    messages, ran, summary = without
    assert ran == ["a", "b", "c"]  # every call ran, the slow one to the end
    assert summary.startswith("completed:")
    assert not any("not_run" in str(m.get("content")) for m in messages)


async def test_the_pool_without_a_stop_runs_every_call() -> None:
    ran: list[str] = []

    async def run(c: ToolCallLike) -> str:
        ran.append(tool_call_id(c))
        await anyio.sleep(1)
        return tool_call_id(c)

    calls = [call(f"call_{i}", "same_tool") for i in range(12)]
    results = await run_tool_calls_pooled_by_tool(calls, run)
    assert [r.unwrap() for r in results] == [f"call_{i}" for i in range(12)]
    assert sorted(ran) == sorted(f"call_{i}" for i in range(12))
