"""A run that goes on under a handoff's target computes only the target's instructions.

A run continuing a history (``message_history=``) whose agent in charge is a
handoff target, or resuming a stored run in the target's hands, never calls
the starting agent's instructions function: neither an async
``instructions(ctx)`` nor a sync ``instructions(deps)``. Each agent's
function is counted; the one in charge is called once per run that starts
under it (a resume reads the stored system message and calls neither).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_scripts import Say, ScriptedModel, call

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.store import SqliteRunStore

pytestmark = pytest.mark.anyio


def _async_instructions(calls: Counter[str], name: str) -> Any:
    async def instructions(ctx: RunContext[None]) -> str:
        calls[name] += 1
        await anyio.sleep(1)  # a read the instructions need, on the virtual clock
        return f"You are {name}."

    return instructions


def _sync_instructions(calls: Counter[str], name: str) -> Any:
    def instructions(deps: None) -> str:
        calls[name] += 1
        return f"You are {name}."

    return instructions


def _pair(
    make: Any, calls: Counter[str], billing_turns: list[Say], **billing_extra: Any
) -> tuple[Agent[None, str], ScriptedModel]:
    store = billing_extra.pop("store", None)
    billing_model = ScriptedModel(billing_turns)
    billing = Agent(
        billing_model, name="billing", instructions=make(calls, "billing"), **billing_extra
    )
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        instructions=make(calls, "triage"),
        handoffs=[billing],
        store=store,
    )
    return triage, billing_model


@pytest.mark.parametrize("make", [_async_instructions, _sync_instructions], ids=["async", "sync"])
async def test_a_continued_history_computes_only_the_agent_in_charges_instructions(
    make: Any,
) -> None:
    calls: Counter[str] = Counter()
    triage, billing_model = _pair(make, calls, [Say("Which order?"), Say("Refunded 18.")])
    first = await triage.run("I want a refund")
    assert first.agent_name == "billing"
    assert calls == {"triage": 1, "billing": 1}  # the start, then the handoff's switch
    calls.clear()
    second = await triage.run("Order 18", message_history=first.messages)
    assert second.output == "Refunded 18."
    assert calls == {"billing": 1}  # triage's are never computed: billing speaks
    # The transcript heads with billing's, once; billing's model read them.
    assert [m for m in second.messages if m["role"] == "system"] == [
        {"role": "system", "content": "You are billing."}
    ]
    assert billing_model.seen[-1][0] == {"role": "system", "content": "You are billing."}
    assert second.new_messages()[0] == {"role": "user", "content": "Order 18"}


@pytest.mark.parametrize("make", [_async_instructions, _sync_instructions], ids=["async", "sync"])
async def test_a_history_that_stays_with_the_starting_agent_computes_its_own_once(
    make: Any,
) -> None:
    calls: Counter[str] = Counter()
    billing = Agent(ScriptedModel([]), name="billing", instructions=make(calls, "billing"))
    triage_model = ScriptedModel([Say("Hello."), Say("Hello again.")])
    triage = Agent(
        triage_model, name="triage", instructions=make(calls, "triage"), handoffs=[billing]
    )
    first = await triage.run("hi")
    second = await triage.run("hi again", message_history=first.messages)
    assert second.output == "Hello again."
    assert calls == {"triage": 2}  # once a run; billing never took over
    assert [m["role"] for m in second.messages].count("system") == 1


@tool(requires_approval=True)
async def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@pytest.mark.parametrize("make", [_async_instructions, _sync_instructions], ids=["async", "sync"])
async def test_a_resume_in_the_targets_hands_computes_no_instructions(
    make: Any, tmp_path: Path
) -> None:
    calls: Counter[str] = Counter()
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        triage, _ = _pair(
            make,
            calls,
            [Say(None, [call("b1", "refund", order="18")]), Say("Refunded 18.")],
            tools=[refund],
            store=store,
        )
        first = await triage.run("refund 18", run_id="r1")
        assert (first.reason, first.agent_name) == ("suspended", "billing")
        calls.clear()
        resumed = await triage.resume("r1", approvals={"b1": True})
    assert (resumed.output, resumed.agent_name) == ("Refunded 18.", "billing")
    assert calls == {}  # the stored transcript holds billing's instructions already
    assert [m for m in resumed.messages if m["role"] == "system"] == [
        {"role": "system", "content": "You are billing."}
    ]


async def test_a_targets_tool_that_needs_approval_waits_for_it() -> None:
    """The starting agent has no tool that waits; the target's still does (no call of it
    runs before a decision), though the run's loop was built before the handoff."""
    ran: list[str] = []

    @tool(requires_approval=True)
    async def wire(amount: int) -> str:
        """Wire money."""
        ran.append("wire")
        return f"wired {amount}"

    billing = Agent(
        ScriptedModel([Say(None, [call("w1", "wire", amount=5)]), Say("Wired.")]),
        name="billing",
        tools=[wire],
    )
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        handoffs=[billing],
    )
    first = await triage.run("wire 5")
    assert (first.reason, ran) == ("suspended", [])
    assert [p.id for p in first.pending] == ["w1"]
    second = await triage.run(message_history=first.messages, approvals={"w1": True})
    assert (second.output, ran) == ("Wired.", ["wire"])
