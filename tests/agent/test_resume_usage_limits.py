"""`Agent.resume(..., usage_limits=...)`: a resumed run's budget, counted from zero."""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio import UsageLimitExceeded
from juno_bind_trio.agent import Agent, UsageLimits, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.testing import check_tool_call_history

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
async def look(page: int) -> str:
    """Look a page up."""
    ran.append(f"page {page}")
    return f"page {page} says hi"


class Script:
    """A model that asks for one call per turn forever, 10 input and 5 output tokens each."""

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.requests += 1
        n = self.requests
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "look", "arguments": json.dumps({"page": n})},
        }
        return ModelTurnResult(tool_calls=(call,), input_tokens=10, output_tokens=5)


async def test_a_resumed_run_spends_a_budget_of_its_own(tmp_path: Any) -> None:
    ran.clear()
    model = Script()
    limits = UsageLimits(total_tokens_limit=20)
    agent = Agent(model, tools=[look], store=str(tmp_path / "runs.db"), usage_limits=limits)
    # 15 tokens after the first response (c1 runs), 30 after the second: stopped
    # there, c2 not run, and the run is stored "stopped", resumable.
    with pytest.raises(UsageLimitExceeded) as first:
        await agent.run("go", run_id="r1")
    assert (first.value.used, first.value.result.reason) == (30, "stopped")
    assert (model.requests, ran) == (2, ["page 1"])

    # Counted from the 30 already spent, the resume could make no request at
    # all; from zero it makes two, as the first run did.
    with pytest.raises(UsageLimitExceeded) as resumed:
        await agent.resume("r1")
    error = resumed.value
    assert (error.limit, error.value, error.used) == ("total_tokens_limit", 20, 30)
    assert model.requests == 4
    assert (error.usage.input_tokens, error.usage.output_tokens) == (20, 10)
    assert error.result.reason == "stopped"
    check_tool_call_history(error.result.messages)


async def test_resume_takes_limits_for_that_run_instead_of_the_agents(tmp_path: Any) -> None:
    ran.clear()
    path = tmp_path / "runs.db"
    async with SqliteRunStore(path) as store:
        await store.create_run("r2", messages=[{"role": "user", "content": "go"}])
        await store.create_run("r3", messages=[{"role": "user", "content": "go"}])
    model = Script()
    agent = Agent(model, tools=[look], store=str(path), usage_limits=UsageLimits(request_limit=3))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.resume("r2", usage_limits=UsageLimits(request_limit=1))
    assert (caught.value.limit, caught.value.value, caught.value.used) == ("request_limit", 1, 1)
    assert model.requests == 1
    assert caught.value.result.reason == "should_stop"
    check_tool_call_history(caught.value.result.messages)
    # Without usage_limits, the agent's.
    with pytest.raises(UsageLimitExceeded) as agents:
        await agent.resume("r3")
    assert (agents.value.value, model.requests) == (3, 4)


async def test_a_resumes_calls_of_the_stopped_turn_are_not_counted(tmp_path: Any) -> None:
    ran.clear()
    model = Script()
    path = str(tmp_path / "runs.db")
    agent = Agent(model, tools=[look], store=path, usage_limits=UsageLimits(tool_calls_limit=1))
    # c1 runs; c2 would take the run past one call: not run, the run stops.
    with pytest.raises(UsageLimitExceeded):
        await agent.run("go", run_id="r4")
    assert ran == ["page 1"]
    # The resume answers c2 by running it (it never started), then its own
    # first response's call is its first counted call; the second is past it.
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.resume("r4")
    assert (caught.value.limit, caught.value.used) == ("tool_calls_limit", 2)
    assert ran == ["page 1", "page 2", "page 3"]
    check_tool_call_history(caught.value.result.messages)


async def test_a_bad_usage_limits_is_refused_before_the_store_is_read(tmp_path: Any) -> None:
    agent = Agent(Script(), store=str(tmp_path / "runs.db"))
    with pytest.raises(
        TypeError, match=r"^Agent\.resume: usage_limits must be a UsageLimits or None, got 3$"
    ):
        await agent.resume("nobody", usage_limits=3)  # type: ignore[arg-type]
