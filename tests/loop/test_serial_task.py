"""Where a serial tool call runs: in the loop's own task on trio, in a task of its own on asyncio.

The task of its own exists only for asyncio, where anyio can miscount
``Task.cancelling()`` and a host's ``task.cancel()`` would otherwise be read as
a tool's stray ``CancelledError`` (docs/explanation/cancellation.md). Trio's
``Cancelled`` only ever comes from a cancelled scope, so there the call runs
inline, with no task spawned for it.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import sniffio

from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import tool_call_name

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


async def test_a_serial_call_runs_in_the_loops_task_on_trio_only() -> None:
    tasks: dict[str, int] = {}

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        tasks["model"] = anyio.get_current_task().id
        if turn.iteration == 1:
            return ModelTurnResult(
                content=None, tool_calls=(call("s", "serial"), call("p", "pooled"))
            )
        return ModelTurnResult(content="done")

    async def run_tool(each: Any) -> ToolCallOutcome:
        tasks[each["function"]["name"]] = anyio.get_current_task().id
        await anyio.sleep(1)
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
    result = await loop.run()

    assert result.reason == "completed"
    assert [m.get("content") for m in state.messages if m["role"] == "tool"] == ["ok", "ok"]
    assert tasks["model"] == runner
    assert tasks["pooled"] != runner  # a pool worker, on both backends
    if sniffio.current_async_library() == "trio":
        assert tasks["serial"] == runner
    else:
        assert tasks["serial"] != runner
