"""A run whose lease was lost never looks finished: Agent.run and Agent.resume raise.

The stores' lease clock is moved by hand: a model that "takes" 100 seconds
outlives a 30-second lease.
"""

from __future__ import annotations

import pytest

from juno_bind_trio import RunContext
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import LeaseLostError, RunStore

from .durable_world import call
from .store_helpers import FakeClock

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hi"}]


async def test_a_run_whose_final_save_was_refused_is_not_reported_completed(
    store: RunStore, clock: FakeClock
) -> None:
    async def slow_model(turn: ModelTurn) -> ModelTurnResult:
        clock.advance(100)  # the answer came after the 30-second lease ran out
        return ModelTurnResult(content="done")

    agent = Agent(slow_model, store=store, lease_ttl=30)
    with pytest.raises(
        LeaseLostError, match=r"run 'r1': this worker .* lost the run's lease"
    ) as info:
        await agent.run("hi", run_id="r1")
    assert info.value.run_id == "r1"
    assert "agent.resume('r1')" in str(info.value)  # what to do next
    record = await store.get_run("r1")
    assert (record.status, record.iteration) == ("running", 0)  # the answer was never saved

    # What the caller does next: resume it, here or on any worker.
    async def model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="done")

    result = await Agent(model, store=store, lease_ttl=30).resume("r1")
    assert (result.reason, result.output) == ("completed", "done")
    record = await store.get_run("r1")
    assert (record.status, record.iteration) == ("completed", 1)


async def test_a_resume_whose_final_save_was_refused_says_so_too(
    store: RunStore, clock: FakeClock
) -> None:
    await store.create_run("r1", messages=USER)

    async def slow_model(turn: ModelTurn) -> ModelTurnResult:
        clock.advance(100)
        return ModelTurnResult(content="done")

    with pytest.raises(LeaseLostError, match="r1"):
        await Agent(slow_model, store=store, lease_ttl=30).resume("r1")
    record = await store.get_run("r1")
    assert (record.status, record.iteration) == ("running", 0)  # claimed, never saved


async def test_a_run_whose_lease_was_taken_mid_batch_raises_instead_of_stopping(
    store: RunStore, clock: FakeClock
) -> None:
    ran: list[str] = []

    @tool
    async def look(ctx: RunContext[None], page: int) -> str:
        """Look a page up; meanwhile this worker stalls and another takes the run."""
        ran.append(ctx.tool_call_id)
        clock.advance(31)
        await store.claim_run("r1", owner="w2", ttl=30)
        return f"page {page}"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if len(turn.messages) == 1:
            return ModelTurnResult(tool_calls=(call("c1", "look", page=1),))
        return ModelTurnResult(content="never asked")

    agent = Agent(model, tools=[look], store=store, store_owner="w1", lease_ttl=30)
    with pytest.raises(LeaseLostError, match="'w1'"):
        await agent.run("go", run_id="r1")
    assert ran == ["c1"]
    assert (await store.get_run("r1")).lease_owner == "w2"
