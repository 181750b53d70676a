"""A conversation whose run handed off goes on under the agent in charge (SQLite, PostgreSQL).

``agent.run(prompt, conversation=...)`` with the starting agent: the
conversation's history records the handoff, and the next run is the target's
(its instructions head the transcript, its model answers); the conversation
keeps one system message.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from juno_bind_trio.agent import Agent, RunContext
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import RunStore
from juno_bind_trio.testing import check_tool_call_history

pytestmark = pytest.mark.anyio


async def triage_model(turn: ModelTurn) -> ModelTurnResult:
    if any(m["role"] == "tool" for m in turn.messages):
        raise AssertionError("triage is asked only before its handoff")
    function = {"name": "transfer_to_billing", "arguments": json.dumps({})}
    return ModelTurnResult(tool_calls=[{"id": "h1", "type": "function", "function": function}])


async def billing_model(turn: ModelTurn) -> ModelTurnResult:
    users = [m["content"] for m in turn.messages if m["role"] == "user"]
    return ModelTurnResult(content=f"billing read: {' | '.join(users)}")


async def test_the_next_run_of_the_conversation_is_the_targets(store: RunStore) -> None:
    billing = Agent(billing_model, name="billing", instructions="You are billing.")
    triage = Agent(
        triage_model,
        name="triage",
        instructions="You are triage.",
        store=store,
        handoffs=[billing],
    )
    first = await triage.run("refund", conversation="thread-7")
    assert (first.agent_name, first.output) == ("billing", "billing read: refund")
    second = await triage.run("order 18", conversation="thread-7")
    assert second.agent_name == "billing"
    assert second.output == "billing read: refund | order 18"
    kept = await store.conversation_messages("thread-7")
    assert [m for m in kept if m["role"] == "system"] == [
        {"role": "system", "content": "You are billing."}
    ]
    assert kept[-1] == {"role": "assistant", "content": "billing read: refund | order 18"}
    check_tool_call_history(kept)


async def test_the_next_run_computes_only_the_targets_instructions(store: RunStore) -> None:
    computed: list[str] = []

    def instructions_of(name: str) -> Callable[[RunContext[None]], Awaitable[str]]:
        async def instructions(ctx: RunContext[None]) -> str:
            computed.append(name)
            return f"You are {name}."

        return instructions

    billing = Agent(billing_model, name="billing", instructions=instructions_of("billing"))
    triage = Agent(
        triage_model,
        name="triage",
        instructions=instructions_of("triage"),
        store=store,
        handoffs=[billing],
    )
    await triage.run("refund", conversation="thread-8")
    assert computed == ["triage", "billing"]
    second = await triage.run("order 18", conversation="thread-8", run_id="r2")
    assert computed == ["triage", "billing", "billing"]  # triage's: not for this run
    # The run was stored under billing's instructions from its first write.
    stored = await store.load("r2")
    assert stored.messages[0] == {"role": "system", "content": "You are billing."}
    assert [m for m in second.messages if m["role"] == "system"] == [stored.messages[0]]
