"""A run continued from a history that records a handoff goes on under the agent in charge.

``agent.run(prompt, message_history=result.messages)`` with the *starting*
agent: the history's last handoff names the agent in charge, found by name in
the starting agent's handoff graph (as a resume finds it); its instructions
head the transcript (the starting agent's do not come back), its tools,
guards and model answer, and its input guardrails run beside the first
request. A history naming an agent the graph does not reach is refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_scripts import Say, ScriptedModel, call

from juno_bind_trio import GuardrailTripped, UsageError
from juno_bind_trio.agent import (
    Agent,
    GuardrailResult,
    HandoffEvent,
    RunContext,
    agent_in_charge,
    tool,
)

pytestmark = pytest.mark.anyio


@tool
async def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
async def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid"


def _agents(
    triage_turns: list[Say], billing_turns: list[Say], **billing_extra: Any
) -> tuple[Agent[None, str], ScriptedModel, ScriptedModel]:
    billing_model = ScriptedModel(billing_turns)
    billing = Agent(
        billing_model,
        name="billing",
        instructions="You are billing.",
        tools=[refund],
        **billing_extra,
    )
    triage_model = ScriptedModel(triage_turns)
    triage = Agent(
        triage_model,
        name="triage",
        instructions="You are triage.",
        tools=[lookup],
        handoffs=[billing],
    )
    return triage, triage_model, billing_model


async def test_a_continued_history_goes_on_under_the_agent_in_charge() -> None:
    triage, triage_model, billing_model = _agents(
        [Say(None, [call("h", "transfer_to_billing")])],
        [
            Say("Which order?"),
            Say(None, [call("b1", "refund", order="18")]),
            Say("Refunded 18."),
        ],
    )
    first = await triage.run("I want a refund")
    assert (first.agent_name, first.output) == ("billing", "Which order?")
    second = await triage.run("Order 18", message_history=first.messages)
    assert second.output == "Refunded 18."
    assert second.agent_name == "billing"
    assert len(triage_model.seen) == 1  # triage was not asked again
    # One system message, billing's; the history, then this run's part.
    systems = [m for m in second.messages if m["role"] == "system"]
    assert systems == [{"role": "system", "content": "You are billing."}]
    assert second.messages[: len(first.messages)] == first.messages
    assert second.new_messages()[0] == {"role": "user", "content": "Order 18"}
    # Billing's tools were offered, and billing's model saw the whole history.
    assert [t["function"]["name"] for t in billing_model.tools_seen[1]] == ["refund"]
    assert billing_model.seen[1][: len(first.messages)] == first.messages
    # The record: the handoff the history holds.
    assert second.handoffs == (HandoffEvent("triage", "billing", "h"),)


async def test_the_agent_in_charges_input_guardrails_check_the_continued_run() -> None:
    checked: list[str] = []

    def no_threats(ctx: RunContext[None], messages: Any) -> GuardrailResult:
        checked.append(messages[-1]["content"])
        return GuardrailResult(tripwire="or else" in messages[-1]["content"])

    triage, _, _ = _agents(
        [Say(None, [call("h", "transfer_to_billing")])],
        [Say("Which order?"), Say("never read")],
        input_guardrails=[no_threats],
    )
    first = await triage.run("I want a refund")
    assert checked == []  # billing took over mid-run: the starting agent's input was checked
    with pytest.raises(GuardrailTripped) as caught:
        await triage.run("Refund 18, or else", message_history=first.messages)
    assert checked == ["Refund 18, or else"]
    assert caught.value.guardrail == "no_threats"
    assert caught.value.result is not None
    assert caught.value.result.agent_name == "billing"


async def test_a_history_handed_to_an_agent_the_graph_does_not_reach_is_refused() -> None:
    triage, _, _ = _agents([Say(None, [call("h", "transfer_to_billing")])], [Say("Hello.")])
    first = await triage.run("hi")
    stranger = Agent(
        ScriptedModel([Say("never")]),
        name="triage",
        handoffs=[Agent(ScriptedModel([]), name="support")],
    )
    with pytest.raises(UsageError, match="'billing'"):
        await stranger.run("again", message_history=first.messages)


async def test_the_agent_in_charge_itself_continues_the_history_as_is() -> None:
    """The other way a host can go on: the agent named by ``result.agent_name``."""
    billing_model = ScriptedModel([Say("Which order?"), Say("Order 18, then.")])
    billing = Agent(billing_model, name="billing", instructions="You are billing.")
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        instructions="You are triage.",
        handoffs=[billing],
    )
    first = await triage.run("refund")
    assert first.agent_name == "billing"
    second = await billing.run("18", message_history=first.messages)
    assert second.output == "Order 18, then."
    assert [m for m in second.messages if m["role"] == "system"] == [
        {"role": "system", "content": "You are billing."}
    ]


def _marker(to: str, frm: str | None, *, switched: bool) -> str:
    data: dict[str, Any] = {"transferred_to": to, "transferred_from": frm}
    if switched:
        data["in_charge"] = True
    return json.dumps(data, separators=(",", ":"))


def test_agent_in_charge_reads_the_last_handoff_of_a_transcript() -> None:
    turn: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("h", "transfer_to_b")],
    }
    user: dict[str, Any] = {"role": "user", "content": "hi"}
    assert agent_in_charge([user]) is None
    switched: list[dict[str, Any]] = [
        user,
        turn,
        {"role": "tool", "tool_call_id": "h", "content": _marker("b", "a", switched=True)},
    ]
    assert agent_in_charge(switched) == "b"
    # Cut off inside the handoff's batch: the agent that handed off still speaks.
    open_batch: list[dict[str, Any]] = [
        user,
        turn,
        {"role": "tool", "tool_call_id": "h", "content": _marker("b", "a", switched=False)},
    ]
    assert agent_in_charge(open_batch) == "a"
    # A tool answer that merely looks like a marker, for a call no turn made, is not one.
    stray = [
        user,
        {"role": "tool", "tool_call_id": "zz", "content": _marker("c", "a", switched=True)},
    ]
    assert agent_in_charge(stray) is None
    with pytest.raises(TypeError, match="agent_in_charge"):
        agent_in_charge("not a transcript")  # type: ignore[arg-type]


async def test_agent_in_charge_agrees_with_the_result() -> None:
    triage, _, _ = _agents([Say(None, [call("h", "transfer_to_billing")])], [Say("Hello.")])
    result = await triage.run("hi")
    assert agent_in_charge(result.messages) == result.agent_name == "billing"
