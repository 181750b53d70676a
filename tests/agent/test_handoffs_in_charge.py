"""After a handoff, the agent in charge's own configuration applies; the run's limits stay.

The rules (docs/how-to/handoffs.md, "Whose configuration applies"): from the
handoff on, the target's tool guards (agent-level and per tool), output
guardrails, history processors, prepare_tools, compaction and
max_output_retries apply, and the first agent's no longer do. Input
guardrails are the starting agent's, run beside the run's first request only.
The request / tool-call limits, max_iterations, per_tool_limit, the store and
the text sink are the run's: the starting agent's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio import GuardrailTripped, UsageLimitExceeded
from juno_bind_trio.agent import (
    Agent,
    AgentRun,
    Compaction,
    GuardrailResult,
    HandoffEvent,
    ResetEvent,
    RunContext,
    TextEvent,
    ToolCallEndedEvent,
    ToolDefinition,
    ToolGuard,
    TurnEndedEvent,
    UsageLimits,
    input_guardrail,
    tool,
)
from juno_bind_trio.agent._compaction import DEFAULT_COMPACTION_INSTRUCTIONS, SUMMARY_PREFIX
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.testing import CrashingStore, check_tool_call_history, run_until_crash

pytestmark = pytest.mark.anyio


def _refuse(name: str, tag: str) -> ToolGuard:
    """A guard refusing every call but a handoff's (an agent's guards see those too)."""

    def refuse(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
        return GuardrailResult(
            tripwire=not ctx.tool_name.startswith("transfer_to_"),
            message=f"{tag} refused {ctx.tool_name}",
        )

    return ToolGuard(before=refuse, name=name)


def _tools(effects: list[str]) -> tuple[Any, Any]:
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

    return lookup, refund


def _pair(
    triage_turns: list[Say],
    billing_turns: list[Say],
    *,
    triage: dict[str, Any] | None = None,
    billing: dict[str, Any] | None = None,
    billing_tools: list[Any] | None = None,
) -> tuple[Agent[None, Any], ScriptedModel, ScriptedModel, list[str]]:
    effects: list[str] = []
    lookup, refund = _tools(effects)
    billing_model = ScriptedModel(billing_turns)
    target = Agent(
        billing_model,
        name="billing",
        instructions="You are billing.",
        tools=billing_tools if billing_tools is not None else [refund],
        **(billing or {}),
    )
    triage_model = ScriptedModel(triage_turns)
    entry = Agent(
        triage_model,
        name="triage",
        instructions="You are triage.",
        tools=[lookup, refund],
        handoffs=[target],
        **(triage or {}),
    )
    return entry, triage_model, billing_model, effects


_HAND_OFF = Say(None, [call("h", "transfer_to_billing")])


# --- tool guards -------------------------------------------------------------------------


async def test_the_targets_agent_guard_refuses_its_calls_and_the_first_agents_no_longer_does() -> (
    None
):
    agent, _, billing_model, effects = _pair(
        [Say(None, [call("t1", "lookup", order="1"), call("h", "transfer_to_billing")])],
        [Say(None, [call("b1", "refund", order="1")]), Say("sorry")],
        triage={"tool_guards": [_refuse("triage_guard", "triage")]},
        billing={"tool_guards": [_refuse("billing_guard", "billing")]},
    )
    events: list[object] = []
    async with agent.open_run("refund order 1") as run:
        async for event in run:
            events.append(event)
    result = run.result
    assert result is not None
    answers = tool_answers(result.messages)
    # Triage's own call met triage's guard; billing's call met billing's, not triage's.
    assert answers["t1"]["kind"] == "authz"
    assert "triage refused lookup" in answers["t1"]["error"]
    assert answers["b1"]["kind"] == "authz"
    assert "billing refused refund" in answers["b1"]["error"]
    assert effects == []  # neither tool started
    ended = {e.tool_call_id: e for e in events if isinstance(e, ToolCallEndedEvent)}
    assert ended["b1"].kind == "authz"
    assert billing_model.seen[-1][-1]["tool_call_id"] == "b1"  # billing read its refusal


async def test_a_per_tool_guard_of_the_target_refuses_with_no_receipt(tmp_path: Path) -> None:
    """The target's tools may carry guards when the first agent's carry none: the
    guard-wrapping shortcut does not skip them. The refused call leaves no receipt."""
    effects: list[str] = []

    async def refund_fn(order: str) -> str:
        """Refund an order."""
        effects.append(f"refund {order}")
        return f"refunded {order}"

    guarded_refund = tool(refund_fn, name="refund", guards=[_refuse("no_refunds", "policy")])
    path = tmp_path / "runs.db"
    agent, _, _, triage_effects = _pair(
        [Say(None, [call("t1", "lookup", order="1"), call("h", "transfer_to_billing")])],
        [Say(None, [call("b1", "refund", order="1")]), Say("cannot refund")],
        triage={"store": path},
        billing_tools=[guarded_refund],
    )
    result = await agent.run("refund order 1", run_id="guarded")
    assert result.output == "cannot refund"
    assert result.agent_name == "billing"
    assert tool_answers(result.messages)["b1"]["kind"] == "authz"
    assert effects == []
    assert triage_effects == ["lookup 1"]
    async with SqliteRunStore(path) as store:
        receipts = await store.receipts("guarded")
    # The lookup and the handoff have receipts; the refused refund has none.
    assert sorted(r.tool_call_id for r in receipts) == ["h", "t1"]


async def test_the_targets_after_guard_replaces_what_its_model_reads() -> None:
    def redact(ctx: RunContext[Any], value: object) -> object:
        return "[redacted]"

    agent, _, _, _ = _pair(
        [Say(None, [call("t1", "lookup", order="1"), call("h", "transfer_to_billing")])],
        [Say(None, [call("b1", "refund", order="1")]), Say("done")],
        billing={"tool_guards": [ToolGuard(after=redact)]},
    )
    result = await agent.run("refund order 1")
    answers = tool_answers(result.messages)
    assert answers["t1"] == "order 1: paid"  # before the handoff: triage's rules, no guard
    assert answers["b1"] == "[redacted]"


# --- output guardrails -------------------------------------------------------------------


def _no_refund_promise(ctx: RunContext[Any], output: object) -> GuardrailResult:
    return GuardrailResult(tripwire="promise" in str(output), info=str(output))


async def test_the_targets_output_guardrail_withdraws_its_streamed_answer() -> None:
    agent, _, _, _ = _pair(
        [_HAND_OFF],
        [Say("I promise a refund", chunks=["I ", "promise ", "a refund"])],
        billing={"output_guardrails": [_no_refund_promise]},
    )
    events: list[object] = []
    runs: list[AgentRun[Any]] = []

    async def read() -> None:
        async with agent.open_run("refund please") as run:
            runs.append(run)
            async for event in run:
                events.append(event)

    with pytest.raises(GuardrailTripped) as caught:
        await read()
    error = caught.value
    assert type(error) is GuardrailTripped  # bare, never in a group
    assert (error.guardrail, error.kind) == ("_no_refund_promise", "output")
    shown = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert shown.startswith("I promise")  # the reader saw the answer stream (text not yet
    # read when the reset came may be dropped by the pipe: superseded)
    assert [e.reason for e in events if isinstance(e, ResetEvent)] == ["guardrail"]
    assert runs[0].text == ""  # the reader's final view: the answer withdrawn
    assert error.result is not None
    assert error.result.agent_name == "billing"
    assert [h.to_agent for h in error.result.handoffs] == ["billing"]
    check_tool_call_history(error.result.messages)


async def test_the_first_agents_output_guardrail_no_longer_checks_the_targets_answer() -> None:
    agent, _, _, _ = _pair(
        [_HAND_OFF],
        [Say("I promise a refund")],
        triage={"output_guardrails": [_no_refund_promise]},
    )
    result = await agent.run("refund please")
    assert result.output == "I promise a refund"


# --- input guardrails: the starting agent's, beside the first request -------------------


async def test_the_targets_input_guardrails_do_not_run() -> None:
    ran: list[str] = []

    def watch(tag: str) -> Any:
        def check(ctx: RunContext[Any], messages: object) -> GuardrailResult:
            ran.append(tag)
            return GuardrailResult(tripwire=tag == "billing")

        return input_guardrail(check, name=tag)

    agent, _, _, _ = _pair(
        [_HAND_OFF],
        [Say("done")],
        triage={"input_guardrails": [watch("triage")]},
        billing={"input_guardrails": [watch("billing")]},
    )
    result = await agent.run("refund please")
    assert result.output == "done"
    assert ran == ["triage"]


# --- what each request is sent: the target's prepare_tools and history processors -------


async def test_the_targets_history_processors_and_prepare_tools_shape_its_requests() -> None:
    def only_last_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in messages if m["role"] in ("system", "user")][-2:]

    def triage_sees_all(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages

    async def hide_refund(ctx: RunContext[Any], defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return [d for d in defs if d.name != "refund"]

    effects: list[str] = []
    lookup, refund = _tools(effects)
    agent, triage_model, billing_model, _ = _pair(
        [Say(None, [call("t1", "lookup", order="1"), call("h", "transfer_to_billing")])],
        [Say("done")],
        triage={"history_processors": [triage_sees_all]},
        billing={"history_processors": [only_last_user], "prepare_tools": hide_refund},
        billing_tools=[lookup, refund],
    )
    result = await agent.run("refund order 1")
    assert result.output == "done"
    # Triage: its whole history, its tools (no prepare of its own).
    assert [t["function"]["name"] for t in triage_model.tools_seen[0]] == [
        "lookup",
        "refund",
        "transfer_to_billing",
    ]
    # Billing: its processor's view, its prepare's choice of its tools.
    assert billing_model.seen[0] == [
        {"role": "system", "content": "You are billing."},
        {"role": "user", "content": "refund order 1"},
    ]
    assert [t["function"]["name"] for t in billing_model.tools_seen[0]] == ["lookup"]
    # The transcript itself is whole: the processors shape what is sent, not what is kept.
    assert [m["role"] for m in result.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


# --- compaction: the target's, with the target's model by default -----------------------


async def test_the_targets_compaction_applies_from_the_handoff_on() -> None:
    effects: list[str] = []
    lookup, _ = _tools(effects)
    # Turns t1, h, b1, b2: four, over max_turns=3 once b2 is answered.
    billing_turns = [Say(None, [call(f"b{n}", "lookup", order=str(n))]) for n in range(1, 3)] + [
        Say("summary of the lookups"),
        Say("done"),
    ]
    agent, triage_model, billing_model, _ = _pair(
        [Say(None, [call("t1", "lookup", order="0")]), _HAND_OFF],
        billing_turns,
        billing={"compaction": Compaction(max_turns=3, keep_turns=1)},
        billing_tools=[lookup],
    )
    result = await agent.run("look everything up")
    assert result.output == "done"
    assert result.stats.compactions == 1
    # The summary request went to billing's model (the agent in charge's), not triage's.
    assert len(triage_model.seen) == 2
    summarizing = billing_model.seen[2]
    assert summarizing[-1] == {"role": "user", "content": DEFAULT_COMPACTION_INSTRUCTIONS}
    summaries = [
        m
        for m in result.messages
        if m["role"] == "system" and m["content"].startswith(SUMMARY_PREFIX)
    ]
    assert summaries == [{"role": "system", "content": SUMMARY_PREFIX + "summary of the lookups"}]
    check_tool_call_history(result.messages)


async def test_the_first_agents_compaction_stops_at_the_handoff() -> None:
    effects: list[str] = []
    lookup, _ = _tools(effects)
    agent, _, _, _ = _pair(
        [_HAND_OFF],
        [Say(None, [call(f"b{n}", "lookup", order=str(n))]) for n in range(1, 4)] + [Say("done")],
        triage={"compaction": Compaction(max_turns=2, keep_turns=1)},
        billing_tools=[lookup],
    )
    result = await agent.run("look everything up")
    assert result.output == "done"  # no summary request was made of billing's script
    assert result.stats.compactions == 0


# --- what stays the run's: the starting agent's limits ---------------------------------


async def test_the_request_limit_is_the_runs_across_the_handoff() -> None:
    effects: list[str] = []
    lookup, _ = _tools(effects)
    agent, _, _, _ = _pair(
        [_HAND_OFF],
        [Say(None, [call(f"b{n}", "lookup", order=str(n))]) for n in range(1, 5)] + [Say("done")],
        triage={"usage_limits": UsageLimits(request_limit=3)},
        billing={"usage_limits": UsageLimits(request_limit=100)},
        billing_tools=[lookup],
    )
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("look everything up")
    assert caught.value.result is not None
    assert caught.value.result.stats.model_calls == 3  # 1 triage + 2 billing
    assert caught.value.result.agent_name == "billing"


async def test_max_iterations_is_the_runs_across_the_handoff() -> None:
    effects: list[str] = []
    lookup, _ = _tools(effects)
    agent, _, _, _ = _pair(
        [_HAND_OFF],
        [Say(None, [call(f"b{n}", "lookup", order=str(n))]) for n in range(1, 9)] + [Say("done")],
        triage={"max_iterations": 3},
        billing={"max_iterations": 50},
        billing_tools=[lookup],
    )
    result = await agent.run("look everything up")
    assert result.reason == "max_iterations"
    assert result.iterations == 3


# --- who is speaking, as a reader sees it ------------------------------------------------


async def test_each_turn_ended_event_and_the_handle_name_the_agent_speaking() -> None:
    agent, _, _, _ = _pair(
        [Say(None, [call("t1", "lookup", order="1"), call("h", "transfer_to_billing")])],
        [Say(None, [call("b1", "refund", order="1")]), Say("done")],
    )
    seen: list[tuple[str, str | None]] = []
    async with agent.open_run("refund order 1") as run:
        assert run.agent_name == "triage"
        async for event in run:
            if isinstance(event, TurnEndedEvent):
                seen.append(("turn", event.agent))
                assert event.to_wire()["agent"] == event.agent
            elif isinstance(event, HandoffEvent):
                seen.append(("handoff", run.agent_name))
    assert seen == [
        ("turn", "triage"),
        ("handoff", "billing"),
        ("turn", "billing"),
        ("turn", "billing"),
    ]
    assert run.agent_name == "billing"


async def test_an_unnamed_agents_turns_carry_no_agent_on_the_wire() -> None:
    plain = Agent(ScriptedModel([Say("hi")]))
    async with plain.open_run("hello") as run:
        ended = [e async for e in run if isinstance(e, TurnEndedEvent)]
    assert [e.agent for e in ended] == [None]
    assert "agent" not in ended[0].to_wire()
    assert run.agent_name is None


async def test_a_resumed_run_checks_the_targets_open_turn_with_the_targets_guards(
    tmp_path: Path,
) -> None:
    """A crash after billing's answer (the run's second) leaves billing's calls unstarted:
    the resume, under billing, runs them through billing's guard, not triage's."""
    effects: list[str] = []
    lookup, refund = _tools(effects)
    billing_guard = _refuse("billing_guard", "billing")

    def build(store: Any, billing_turns: list[Say]) -> Agent[None, Any]:
        billing = Agent(
            ScriptedModel(billing_turns),
            name="billing",
            tools=[refund],
            tool_guards=[billing_guard],
        )
        return Agent(
            ScriptedModel([_HAND_OFF]),
            name="triage",
            tools=[lookup],
            handoffs=[billing],
            store=store,
            store_owner="w1",
        )

    async with SqliteRunStore(tmp_path / "runs.db") as store:
        crashing = CrashingStore(store, "after_model_answer", 2)
        first = build(crashing, [Say(None, [call("b1", "refund", order="1")])])
        assert await run_until_crash(lambda: first.run("refund 1", run_id="r1"))
        assert effects == []
        # The resumed billing is asked once more, after its open turn's call is answered.
        result = await build(store, [Say("sorry")]).resume("r1")
        receipts = await store.receipts("r1")
    assert result.agent_name == "billing"
    assert tool_answers(result.messages)["b1"]["kind"] == "authz"
    assert effects == []
    # Never started: no receipt, or (a resumed open turn's refusal, recorded as its
    # answer) a failed one; never one that says the refund ran.
    assert {r.tool_call_id: r.state for r in receipts}.get("b1") in (None, "failed")
