"""A resume runs the open turn's never-started calls as the run's own loop would have.

The first worker dies once the model's answer (its tool calls) is recorded,
before any call starts; the resumed process dispatches them all through
``finish_open_turn``. With ``per_tool_limit=1`` no two calls of a tool run
at once, and a ``serial`` tool's calls run one at a time, in order, before
the rest, as they do in a batch of the loop.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from juno_bind_trio import RunContext
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult, ToolCallOutcome
from juno_bind_trio.store import RunStore, open_durable_run
from juno_bind_trio.testing import CrashingStore, run_until_crash

from .durable_world import call, check_history

pytestmark = pytest.mark.anyio


class Desk:
    """Tools that write down when each call starts and ends, and how many overlap."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.running = 0
        self.most = 0

    async def work(self, call_id: str) -> str:
        self.events.append(("start", call_id))
        self.running += 1
        self.most = max(self.most, self.running)
        await anyio.sleep(1)
        self.running -= 1
        self.events.append(("end", call_id))
        return f"done {call_id}"


def scripted(*calls: dict[str, Any]) -> Any:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        if sum(1 for m in turn.messages if m["role"] == "assistant") == 0:
            return ModelTurnResult(tool_calls=calls)
        return ModelTurnResult(content="all done")

    return model


async def crash_then_resume(store: RunStore, tools: list[Any], model: Any, **options: Any) -> Any:
    crashing = CrashingStore(store, "after_model_answer", 1)
    first = Agent(model, tools=tools, store=crashing, store_owner="w1", **options)
    assert await run_until_crash(lambda: first.run("go", run_id="r1"))
    again = Agent(model, tools=tools, store=store, store_owner="w1", **options)
    return await again.resume("r1")


async def test_a_resume_keeps_the_runs_per_tool_limit(store: RunStore) -> None:
    desk = Desk()

    @tool(repeatable=False)
    async def charge(ctx: RunContext[None], eur: int) -> str:
        """Charge a card."""
        return await desk.work(ctx.tool_call_id)

    model = scripted(*(call(f"c{i}", "charge", eur=i) for i in range(3)))
    result = await crash_then_resume(store, [charge], model, per_tool_limit=1)
    assert result.output == "all done"
    check_history(result.messages)
    assert desk.most == 1  # one charge at a time, as the run's loop would run them
    assert [e for e in desk.events if e[0] == "start"] == [
        ("start", "c0"),
        ("start", "c1"),
        ("start", "c2"),
    ]


async def test_a_resume_runs_serial_calls_alone_and_first(store: RunStore) -> None:
    desk = Desk()

    @tool(serial=True)
    async def migrate(ctx: RunContext[None], step: int) -> str:
        """A schema step: one at a time, before anything else."""
        return await desk.work(ctx.tool_call_id)

    @tool
    async def look(ctx: RunContext[None], page: int) -> str:
        """A lookup; any number at once."""
        return await desk.work(ctx.tool_call_id)

    model = scripted(
        call("l1", "look", page=1),
        call("m1", "migrate", step=1),
        call("l2", "look", page=2),
        call("m2", "migrate", step=2),
    )
    result = await crash_then_resume(store, [migrate, look], model)
    assert result.output == "all done"
    check_history(result.messages)
    events = desk.events
    # The serial calls alone and in call order, then the rest together.
    assert events[:4] == [("start", "m1"), ("end", "m1"), ("start", "m2"), ("end", "m2")]
    assert sorted(events[4:6]) == [("start", "l1"), ("start", "l2")]
    assert desk.most == 2
    # Answered in call order, whatever order they ran in.
    answers = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert answers == ["l1", "m1", "l2", "m2"]


async def test_finish_open_turn_refuses_a_bad_concurrency(store: RunStore) -> None:
    await store.create_run("r1", messages=[{"role": "user", "content": "x"}])

    async def run_tool_call(tool_call: Any) -> ToolCallOutcome:
        raise AssertionError("nothing runs")

    async with open_durable_run(store, "r1", owner="w1") as run:
        with pytest.raises(TypeError, match="finish_open_turn: per_tool_limit"):
            await run.finish_open_turn(run_tool_call, per_tool_limit=1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="finish_open_turn: per_tool_limit"):
            await run.finish_open_turn(run_tool_call, per_tool_limit=0)
        with pytest.raises(TypeError, match="finish_open_turn: runs_serially"):
            await run.finish_open_turn(run_tool_call, runs_serially=3)  # type: ignore[arg-type]
        await run.finish("stopped")
