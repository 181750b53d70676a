"""Where a serial tool call runs: in a pool worker of its own, one call at a time, on both backends.

A serial call runs through the same pool as every other call, in a batch of
its own, so how it ends under a cancel or a stop is the pool's one rule; and
it never runs in the loop's own task, where on asyncio anyio can miscount
``Task.cancelling()`` and a host's ``task.cancel()`` would read as a tool's
stray ``CancelledError`` (docs/explanation/cancellation.md).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import tool_call_name

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


async def test_serial_calls_run_in_pool_workers_one_at_a_time_before_the_rest() -> None:
    tasks: dict[str, int] = {}
    spans: dict[str, tuple[float, float]] = {}

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        tasks["model"] = anyio.get_current_task().id
        if turn.iteration == 1:
            return ModelTurnResult(
                content=None,
                tool_calls=(call("s1", "serial"), call("p", "pooled"), call("s2", "serial")),
            )
        return ModelTurnResult(content="done")

    async def run_tool(each: Any) -> ToolCallOutcome:
        tasks[each["id"]] = anyio.get_current_task().id
        began = anyio.current_time()
        await anyio.sleep(1)
        spans[each["id"]] = (began, anyio.current_time())
        return ToolCallOutcome.from_content(each["id"], "ok")

    state = LoopState(messages=[{"role": "user", "content": "go"}])
    loop = ToolLoop(
        state=state,
        max_iterations=5,
        call_model=call_model,
        run_tool_call=run_tool,
        runs_serially=lambda each: tool_call_name(each) == "serial",
    )
    runner = anyio.get_current_task().id
    start = anyio.current_time()
    result = await loop.run()

    assert result.reason == "completed"
    assert [m.get("tool_call_id") for m in state.messages if m["role"] == "tool"] == [
        "s1",
        "p",
        "s2",
    ]
    assert tasks["model"] == runner
    # Every call in a worker, none in the loop's task; the serial ones each alone,
    # in order, before the pooled one starts.
    assert runner not in {tasks["s1"], tasks["s2"], tasks["p"]}
    relative = {k: (a - start, b - start) for k, (a, b) in spans.items()}
    assert relative == {"s1": (0.0, 1.0), "s2": (1.0, 2.0), "p": (2.0, 3.0)}
