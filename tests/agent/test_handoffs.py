"""Handoffs in memory: the same run goes on under the target agent (#32)."""

from __future__ import annotations

import types
from typing import Any, Generic

import anyio
import pydantic
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio import Handoff, UsageError, UsageLimitExceeded
from juno_bind_trio.agent import (
    Agent,
    HandoffEvent,
    RunContext,
    ToolCallEndedEvent,
    TurnEndedEvent,
    UsageLimits,
    tool,
)

pytestmark = pytest.mark.anyio


def names(tools: Any) -> list[str]:
    return [entry["function"]["name"] for entry in tools]


def build(
    triage_turns: list[Say], billing_turns: list[Say], **billing_extra: Any
) -> tuple[Agent[None, Any], ScriptedModel, ScriptedModel, list[str]]:
    effects: list[str] = []

    @tool
    async def lookup(order: str) -> str:
        """Look an order up."""
        effects.append(f"lookup {order}")
        return f"order {order}: paid"

    @tool
    async def refund(order: str) -> str:
        """Refund an order."""
        effects.append(f"refund {order}")
        return f"refunded {order}"

    triage_model = ScriptedModel(triage_turns)
    billing_model = ScriptedModel(billing_turns)
    billing = Agent(
        billing_model,
        name="billing",
        instructions="You are billing.",
        tools=[refund],
        **billing_extra,
    )
    triage = Agent(
        triage_model,
        name="triage",
        instructions="You are triage.",
        tools=[lookup],
        handoffs=[billing],
    )
    return triage, triage_model, billing_model, effects


async def test_a_handoff_continues_the_same_run_under_the_target() -> None:
    triage, triage_model, billing_model, effects = build(
        [Say(None, [call("c1", "lookup", order="17"), call("c2", "transfer_to_billing")])],
        [Say(None, [call("c3", "refund", order="17")]), Say("Refunded order 17.")],
    )
    result = await triage.run("I want my money back for order 17")
    assert result.output == "Refunded order 17."
    assert result.reason == "completed"
    assert result.agent_name == "billing"
    assert result.handoffs == (HandoffEvent("triage", "billing", "c2"),)
    # The other call of the handoff's batch ran; then billing's own tool.
    assert effects == ["lookup 17", "refund 17"]
    # Triage was offered its tool and the handoff; billing only its own tool.
    assert names(triage_model.tools_seen[0]) == ["lookup", "transfer_to_billing"]
    assert [names(t) for t in billing_model.tools_seen] == [["refund"], ["refund"]]
    # Billing reads its own instructions first, and the whole history after them.
    first = billing_model.seen[0]
    assert first[0] == {"role": "system", "content": "You are billing."}
    assert [m["role"] for m in first] == ["system", "user", "assistant", "tool", "tool"]
    answers = tool_answers(result.messages)
    assert answers["c1"] == "order 17: paid"
    assert answers["c2"] == {
        "transferred_to": "billing",
        "transferred_from": "triage",
        "in_charge": True,
    }
    # One run: one count of iterations, the run's own.
    assert result.iterations == 3
    assert result.stats.model_calls == 3
    # new_messages still starts at the prompt.
    assert result.new_messages()[0] == {
        "role": "user",
        "content": "I want my money back for order 17",
    }


async def test_events_say_when_the_run_changes_hands() -> None:
    triage, _, _, _ = build(
        [Say("Let me pass you on.", [call("h", "transfer_to_billing")])],
        [Say("Billing here.")],
    )
    seen: list[Any] = []
    async with triage.open_run("hello") as run:
        async for event in run:
            if isinstance(event, TurnEndedEvent | HandoffEvent | ToolCallEndedEvent):
                seen.append(event)
    kinds = [type(e).__name__ for e in seen]
    assert kinds == ["TurnEndedEvent", "ToolCallEndedEvent", "HandoffEvent", "TurnEndedEvent"]
    handoff = seen[2]
    assert handoff == HandoffEvent("triage", "billing", "h")
    assert handoff.to_wire() == {
        "kind": "handoff",
        "fromAgent": "triage",
        "toAgent": "billing",
        "toolCallId": "h",
    }
    assert run.result is not None
    assert run.result.agent_name == "billing"


async def test_two_handoffs_in_one_batch_the_first_in_call_order_wins() -> None:
    @tool
    async def nothing() -> str:
        """Do nothing."""
        return "ok"

    first_model = ScriptedModel([Say("first here")])
    second_model = ScriptedModel([Say("second here")])
    first = Agent(first_model, name="first")
    second = Agent(second_model, name="second")

    root = Agent(
        ScriptedModel(
            [
                Say(
                    None,
                    [
                        call("a", "transfer_to_second"),
                        call("b", "transfer_to_first"),
                        call("c", "nothing"),
                    ],
                )
            ]
        ),
        name="root",
        tools=[nothing],
        handoffs=[first, second],
    )
    result = await root.run("go")
    assert result.output == "second here"
    assert result.agent_name == "second"
    assert first_model.seen == []
    answers = tool_answers(result.messages)
    assert answers["a"]["transferred_to"] == "second"
    assert answers["b"]["success"] is False
    assert answers["b"]["kind"] == "not_run"
    assert "one handoff per turn" in answers["b"]["error"]
    assert answers["c"] == "ok"


async def test_a_handoff_input_is_validated_like_a_tools_arguments() -> None:
    class Escalation(pydantic.BaseModel):
        reason: str
        priority: int

    billing_model = ScriptedModel([Say("on it")])
    billing = Agent(billing_model, name="billing")
    triage_model = ScriptedModel(
        [
            Say(None, [call("bad", "escalate", priority="high")]),
            Say(None, [call("good", "escalate", reason="refund", priority=2)]),
        ]
    )
    triage = Agent(
        triage_model,
        name="triage",
        handoffs=[
            Handoff(
                billing,
                name="escalate",
                description="Escalate to billing.",
                input_type=Escalation,
            )
        ],
    )
    result = await triage.run("help")
    tools = triage_model.tools_seen[0]
    assert tools[0]["function"]["name"] == "escalate"
    assert tools[0]["function"]["description"] == "Escalate to billing."
    assert set(tools[0]["function"]["parameters"]["properties"]) == {"reason", "priority"}
    answers = tool_answers(result.messages)
    assert answers["bad"]["kind"] == "validation"
    assert "reason" in answers["bad"]["error"]
    assert answers["good"]["transferred_to"] == "billing"
    assert result.output == "on it"
    assert result.handoffs == (HandoffEvent("triage", "billing", "good"),)


async def test_input_filter_rewrites_the_history_but_keeps_the_handoff_turn() -> None:
    seen_by_filter: list[list[dict[str, Any]]] = []

    def only_user_messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen_by_filter.append(history)
        return [m for m in history if m["role"] == "user"]

    @tool
    async def lookup(order: str) -> str:
        """Look an order up."""
        return "paid"

    billing_model = ScriptedModel([Say("done")])
    billing = Agent(billing_model, name="billing", instructions="Billing.")
    triage = Agent(
        ScriptedModel(
            [
                Say(None, [call("l", "lookup", order="1")]),
                Say("passing on", [call("h", "transfer_to_billing")]),
            ]
        ),
        name="triage",
        instructions="Triage.",
        tools=[lookup],
        handoffs=[Handoff(billing, input_filter=only_user_messages)],
    )
    result = await triage.run("refund order 1")
    # The filter saw the history before the handoff turn, without the system message.
    assert [m["role"] for m in seen_by_filter[0]] == ["user", "assistant", "tool"]
    seen = billing_model.seen[0]
    assert [m["role"] for m in seen] == ["system", "user", "assistant", "tool"]
    assert seen[0]["content"] == "Billing."
    assert seen[2]["tool_calls"][0]["id"] == "h"
    assert result.messages == [*seen, {"role": "assistant", "content": "done"}]
    assert result.new_messages()[0]["role"] == "user"


async def test_the_target_answers_in_its_own_output_type() -> None:
    class Refund(pydantic.BaseModel):
        order: str
        amount: int

    billing = Agent(
        ScriptedModel([Say('{"order": "17", "amount": 30}')]),
        name="billing",
        output_type=Refund,
    )
    triage: Agent[None, Any] = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        handoffs=[billing],
    )
    result = await triage.run("refund")
    assert result.output == Refund(order="17", amount=30)


async def test_max_iterations_count_across_agents() -> None:
    billing = Agent(
        ScriptedModel([Say(None, [call(f"x{i}", "nothing")]) for i in range(5)]),
        name="billing",
        tools=[tool(lambda: "ok", name="nothing")],
    )
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        handoffs=[billing],
        max_iterations=3,
    )
    result = await triage.run("go")
    assert result.reason == "max_iterations"
    assert result.iterations == 3
    assert result.agent_name == "billing"


async def test_usage_limits_count_across_agents() -> None:
    billing_model = ScriptedModel([Say(None, [call(f"x{i}", "nothing")]) for i in range(5)])
    billing = Agent(
        billing_model,
        name="billing",
        tools=[tool(lambda: "ok", name="nothing")],
        # The target's own limits are not the run's: the first agent's count.
        usage_limits=UsageLimits(request_limit=100),
    )
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        handoffs=[billing],
        usage_limits=UsageLimits(request_limit=2, tool_calls_limit=10),
    )
    with pytest.raises(UsageLimitExceeded) as caught:
        await triage.run("go")
    result = caught.value.result
    assert result is not None
    assert result.stats.model_calls == 2  # one request of triage's, one of billing's
    assert len(billing_model.seen) == 1
    assert result.agent_name == "billing"


async def test_a_handoff_back_and_on_lineage_in_the_chain() -> None:
    chains: list[Any] = []

    @tool
    async def where(ctx: RunContext[None]) -> str:
        """Who am I."""
        chains.append(ctx.chain.agent)
        return "here"

    third = Agent(
        ScriptedModel([Say(None, [call("w2", "where")]), Say("third done")]),
        name="third",
        tools=[where],
    )
    second = Agent(
        ScriptedModel([Say(None, [call("w1", "where"), call("h2", "transfer_to_third")])]),
        name="second",
        tools=[where],
        handoffs=[third],
    )
    first = Agent(
        ScriptedModel([Say(None, [call("h1", "transfer_to_second")])]),
        name="first",
        handoffs=[second],
    )
    result = await first.run("go")
    assert result.output == "third done"
    assert chains == ["second", "third"]
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [
        ("first", "second"),
        ("second", "third"),
    ]


async def test_a_stop_right_after_the_handoff_leaves_the_target_in_charge() -> None:
    stop = anyio.CancelScope()

    @tool
    async def halt() -> str:
        """Stop."""
        await anyio.sleep(1)  # the handoff's call is answered first
        stop.cancel()
        return "halting"

    billing_model = ScriptedModel([])
    billing = Agent(billing_model, name="billing", instructions="Billing.")
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing"), call("s", "halt")])]),
        name="triage",
        instructions="Triage.",
        tools=[halt],
        handoffs=[billing],
    )
    result = await triage.run("go", stop=stop)
    assert result.reason == "stopped"
    assert result.agent_name == "billing"
    assert billing_model.seen == []
    assert result.messages[0] == {"role": "system", "content": "Billing."}
    # Continuing the conversation with the agent in charge.
    billing_model.turns.append(Say("billing goes on"))
    again = await billing.run("still there?", message_history=result.messages)
    assert again.output == "billing goes on"
    assert billing_model.seen[0][0] == {"role": "system", "content": "Billing."}
    assert sum(m["role"] == "system" for m in billing_model.seen[0]) == 1


def test_handoffs_are_checked_when_the_agent_is_built() -> None:
    model = ScriptedModel([])
    unnamed = Agent(model)
    with pytest.raises(ValueError, match="has no name"):
        Agent(model, name="a", handoffs=[unnamed])
    with pytest.raises(ValueError, match="needs a name"):
        Agent(model, handoffs=[Agent(model, name="b")])
    with pytest.raises(TypeError, match=r"handoffs\[0\] must be an Agent or a Handoff"):
        Agent(model, name="a", handoffs=["billing"])  # type: ignore[list-item]
    b = Agent(model, name="b")
    with pytest.raises(ValueError, match="two handoffs are named 'transfer_to_b'"):
        Agent(model, name="a", handoffs=[b, b])
    with pytest.raises(ValueError, match="as a tool of the agent is"):
        Agent(model, name="a", tools=[tool(lambda: "", name="transfer_to_b")], handoffs=[b])
    other_b = Agent(model, name="b")
    with pytest.raises(ValueError, match="two different agents in the handoff graph"):
        Agent(model, name="a", handoffs=[b, Handoff(other_b, name="to_other_b")])
    with pytest.raises(TypeError, match="input_type must describe a JSON object"):
        Agent(model, name="a", handoffs=[Handoff(b, input_type=int)])
    with pytest.raises(TypeError, match="input_filter must be a function"):
        Handoff(b, input_filter="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="agent must be an Agent"):
        Handoff("billing")
    a = Agent(model, name="a", handoffs=[b])
    assert [h.agent for h in a.handoffs] == [b]


def test_a_handoff_target_is_an_agent_not_something_shaped_like_one() -> None:
    # _handoff.py sits below Agent and checks against the class Agent registers with: an
    # object with an agent's name and settings is still no target, and Agent has no new base.
    b = Agent(ScriptedModel([]), name="b")
    lookalike = types.SimpleNamespace(
        name="b", _settings=b._settings, _settings_now=b._settings_now
    )
    with pytest.raises(TypeError, match="agent must be an Agent"):
        Handoff(lookalike)
    with pytest.raises(TypeError, match=r"handoffs\[0\] must be an Agent or a Handoff"):
        Agent(ScriptedModel([]), name="a", handoffs=[lookalike])  # type: ignore[list-item]
    assert Handoff(b).agent is b
    assert Agent.__mro__ == (Agent, Generic, object)


async def test_an_input_filter_that_returns_no_messages_is_a_usage_error() -> None:
    billing = Agent(ScriptedModel([Say("x")]), name="billing")
    triage = Agent(
        ScriptedModel([Say(None, [call("h", "transfer_to_billing")])]),
        name="triage",
        handoffs=[Handoff(billing, input_filter=lambda history: "nope")],  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(UsageError, match="input_filter must return a list of messages"):
        await triage.run("go")
