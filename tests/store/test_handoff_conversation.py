"""A conversation whose run handed off goes on under the agent in charge (SQLite, PostgreSQL).

``agent.run(prompt, conversation=...)`` with the starting agent: the
conversation's history records the handoff, and the next run is the target's
(its instructions head the transcript, its model answers); the conversation
keeps one system message.
"""

from __future__ import annotations

import json

import pytest

from juno_bind_trio.agent import Agent
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
