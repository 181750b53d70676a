"""Approvals and external tools in memory: the run suspends, and continues with the decisions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio import Approve, Deny, ExternalTool, PendingToolCall, UsageError
from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.run import ToolCall
from juno_bind_trio.testing import FunctionModel

pytestmark = pytest.mark.anyio


def calling(*calls: ToolCall) -> FunctionModel:
    """First turn: the calls; then an answer quoting every tool message it saw."""

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if not any(m.get("role") == "tool" for m in turn.messages):
            return ModelTurnResult(content=None, tool_calls=list(calls))
        seen = [m["content"] for m in turn.messages if m.get("role") == "tool"]
        return ModelTurnResult(content=json.dumps(seen))

    return FunctionModel(model)


def make_agent(effects: list[Any], **extra: Any) -> Agent[None, str]:
    @tool(requires_approval=True)
    async def refund(amount: int) -> str:
        """Refund money."""
        effects.append(("refund", amount))
        return f"refunded {amount}"

    @tool
    async def lookup(order: str) -> str:
        """Look an order up."""
        effects.append(("lookup", order))
        return f"order {order}"

    return Agent(
        calling(
            ToolCall("c1", "refund", '{"amount": "500"}'),
            ToolCall("c2", "lookup", '{"order": "17"}'),
            ToolCall("c3", "pick", '{"day": "mon"}'),
        ),
        tools=[refund, lookup, ExternalTool("pick", {"type": "object"}), *extra.get("tools", [])],
    )


def answers(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


async def test_suspends_runs_the_rest_and_lists_pending_calls_with_validated_arguments() -> None:
    effects: list[Any] = []
    agent = make_agent(effects)
    result = await agent.run("refund order 17")
    assert result.reason == "suspended"
    assert effects == [("lookup", "17")]
    assert result.pending == (
        PendingToolCall("c1", "refund", {"amount": 500}, "approval", None),
        PendingToolCall("c3", "pick", {"day": "mon"}, "external", None),
    )
    assert agent.tools[0].repeatable is False  # type: ignore[union-attr]


async def test_approve_deny_and_external_result_continue_without_a_prompt() -> None:
    effects: list[Any] = []
    agent = make_agent(effects)
    first = await agent.run("refund order 17")
    done = await agent.run(
        message_history=first.messages,
        approvals={"c1": True},
        results={"c3": {"day": "2026-12-07"}},
    )
    assert done.reason == "completed"
    assert effects == [("lookup", "17"), ("refund", 500)]
    got = answers(done.messages)
    assert got["c1"] == "refunded 500"
    assert json.loads(got["c3"]) == {"day": "2026-12-07"}
    assert len([m for m in done.messages if m.get("role") == "tool"]) == 3


async def test_denied_call_is_an_authz_failure_with_the_reason_and_never_runs() -> None:
    effects: list[Any] = []
    agent = make_agent(effects)
    first = await agent.run("refund")
    done = await agent.run(
        message_history=first.messages,
        approvals={"c1": Deny("over the limit")},
        errors={"c3": "the user closed the dialog"},
    )
    body = json.loads(answers(done.messages)["c1"])
    assert body["kind"] == "authz"
    assert "over the limit" in body["error"]
    assert json.loads(answers(done.messages)["c3"])["kind"] == "external"
    assert ("refund", 500) not in effects


async def test_undecided_call_stays_pending_and_corrected_arguments_run() -> None:
    effects: list[Any] = []
    agent = make_agent(effects)
    first = await agent.run("refund")
    second = await agent.run(
        message_history=first.messages, approvals={"c1": Approve(arguments={"amount": 100})}
    )
    assert second.reason == "suspended"
    assert [p.id for p in second.pending] == ["c3"]
    assert effects[-1] == ("refund", 100)
    assert json.loads(answers(second.messages)["c1"])["arguments_corrected_to"] == {"amount": 100}
    with pytest.raises(UsageError, match="'c1'"):
        await agent.run(message_history=second.messages, approvals={"c1": True})
    with pytest.raises(ValueError, match="c1"):
        await agent.run(message_history=first.messages, approvals={"c1": Approve({"amount": "x"})})
    assert effects.count(("refund", 100)) == 1


async def test_unknown_id_and_prompt_rules_are_usage_errors() -> None:
    agent = make_agent([])
    first = await agent.run("refund")
    with pytest.raises(UsageError, match="'nope'"):
        await agent.run(message_history=first.messages, approvals={"nope": True})
    with pytest.raises(UsageError, match="prompt"):
        await agent.run(message_history=[{"role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match="prompt"):
        await agent.run()


async def test_predicate_sees_context_and_validated_arguments() -> None:
    seen: list[Any] = []

    async def over_100(ctx: RunContext[Any], arguments: dict[str, Any]) -> bool:
        seen.append((ctx.tool_call_id, arguments))
        return bool(arguments["amount"] > 100)

    @tool(requires_approval=over_100)
    async def refund(amount: int) -> str:
        """Refund."""
        return "ok"

    agent = Agent(
        calling(
            ToolCall("a", "refund", '{"amount": 50}'), ToolCall("b", "refund", '{"amount": "500"}')
        ),
        tools=[refund],
    )
    result = await agent.run("go")
    assert [p.id for p in result.pending] == ["b"]
    assert sorted(seen) == [("a", {"amount": 50}), ("b", {"amount": 500})]
    assert refund.repeatable is False


async def test_expired_call_is_answered_as_timed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from juno_bind_trio.agent import _approvals

    clock = [1000.0]
    monkeypatch.setattr(_approvals, "_now", lambda: clock[0])

    @tool(requires_approval=True, approval_timeout=60)
    async def refund(amount: int) -> str:
        """Refund."""
        raise AssertionError("never runs")

    agent = Agent(calling(ToolCall("c1", "refund", '{"amount": 5}')), tools=[refund])
    first = await agent.run("go")
    assert first.pending[0].expires_at == 1060.0
    clock[0] = 1060.0
    done = await agent.run(message_history=first.messages)
    body = json.loads(answers(done.messages)["c1"])
    assert body["kind"] == "authz"
    assert "deadline" in body["error"]


def test_bad_options_are_refused_at_construction() -> None:
    async def f(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="requires_approval"):
        tool(f, requires_approval="yes")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="approval_timeout"):
        tool(f, requires_approval=True, approval_timeout=-1)
    with pytest.raises(ValueError, match="external"):
        tool(f, requires_approval=True, external=True)
    assert tool(f, requires_approval=True, repeatable=True).repeatable is True
    assert tool(f).repeatable is True


async def test_a_later_call_reusing_an_id_does_not_inherit_its_approval() -> None:
    # Some models number their calls per turn: turn 2's "c1" is a new call.
    ran: list[int] = []

    @tool(requires_approval=True)
    async def refund(amount: int) -> str:
        """Refund."""
        ran.append(amount)
        return "ok"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        asked = sum(1 for m in turn.messages if m.get("role") == "assistant")
        if asked < 2:
            amount = 5 if asked == 0 else 9000
            return ModelTurnResult(tool_calls=[ToolCall("c1", "refund", f'{{"amount": {amount}}}')])
        return ModelTurnResult(content="done")

    agent = Agent(FunctionModel(model), tools=[refund])
    first = await agent.run("go")
    second = await agent.run(message_history=first.messages, approvals={"c1": True})
    assert second.reason == "suspended"
    assert ran == [5]
    assert second.pending == (PendingToolCall("c1", "refund", {"amount": 9000}, "approval"),)


async def test_decisions_with_a_new_prompt_answer_the_calls_before_the_prompt() -> None:
    """In memory, a prompt may come with the decisions of every waiting call: the calls
    are answered first (the approved one runs), and the model reads the prompt after
    them. (The decisions used to be dropped: the calls stayed "not run".)"""
    effects: list[Any] = []
    agent = make_agent(effects)
    first = await agent.run("refund order 17")
    done = await agent.run(
        "and now the receipt, please",
        message_history=first.messages,
        approvals={"c1": True},
        results={"c3": "tue"},
    )
    assert done.reason == "completed"
    assert effects == [("lookup", "17"), ("refund", 500)]
    assert answers(done.messages) == {"c1": "refunded 500", "c2": "order 17", "c3": "tue"}
    roles = [m["role"] for m in done.messages]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "user", "assistant"]
    assert done.messages[5]["content"] == "and now the receipt, please"
    assert done.new_messages() == done.messages[5:]


def test_the_approval_names_are_the_same_objects_in_both_places() -> None:
    """Pinned: Deny, Approve and PendingToolCall import from juno_bind_trio.agent and
    from juno_bind_trio, as one object each."""
    import juno_bind_trio
    import juno_bind_trio.agent

    for name in ("Deny", "Approve", "PendingToolCall"):
        assert getattr(juno_bind_trio, name) is getattr(juno_bind_trio.agent, name)
        assert name in juno_bind_trio.__all__
        assert name in juno_bind_trio.agent.__all__
