"""A tool batch cancelled at every step it takes: the cancellation gets out, every call settled.

The sweep of ``tests/native_cancel.py`` (a bare ``task.cancel()`` of the task
running the batch on asyncio, its scope on trio, once before each step) over
a batch of two tools, one of which fans out in a task group of its own whose
parts have deadlines of their own.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import outcome

from juno_bind_trio.run import AbortedToolCallError, InterruptedToolCallError, ToolBatch
from native_cancel import Run, assert_always_cancelled, sweep


def call(i: int, tool: str) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}


@attrs.define(eq=False)
class BatchScenario:
    batch: ToolBatch[str] | None = None
    started: set[str] = attrs.field(factory=set)
    ended: set[str] = attrs.field(factory=set)

    async def tool(self, c: Any) -> str:
        call_id: str = c["id"]
        self.started.add(call_id)
        if c["function"]["name"] == "fan":

            async def part(seconds: float) -> None:
                with anyio.move_on_after(seconds):
                    await anyio.sleep(seconds * 2)

            async with anyio.create_task_group() as tg:
                tg.start_soon(part, 0.5)
                tg.start_soon(part, 1.0)
        else:
            await anyio.sleep(1)
        self.ended.add(call_id)
        return call_id

    async def __call__(self) -> None:
        self.started, self.ended = set(), set()
        self.batch = ToolBatch([call(0, "fan"), call(1, "plain"), call(2, "fan"), call(3, "plain")])
        await self.batch.run(self.tool, per_tool_limit=1)

    def check(self, run: Run) -> None:
        assert self.batch is not None
        for index, state in enumerate(self.batch.states):
            call_id = f"c{index}"
            result = self.batch.result(index)
            assert result is not None, (call_id, state)
            if call_id in self.ended:
                assert state == "finished", (call_id, state)
                assert result == outcome.Value(call_id)
            elif call_id in self.started:
                assert state == "interrupted", (call_id, state)
                assert isinstance(result, outcome.Error)
                assert isinstance(result.error, InterruptedToolCallError)
            else:
                assert state == "refused", (call_id, state)
                assert isinstance(result, outcome.Error)
                assert isinstance(result.error, AbortedToolCallError)


def test_a_tool_batch_cancelled_at_every_step_always_ends_cancelled(backend: str) -> None:
    scenario = BatchScenario()
    runs = sweep(backend, scenario, scenario.check)
    assert_always_cancelled(runs)
    # Cancelled before a call was claimed, while each kind ran, and after the last ended.
    assert len(runs) > 15
