"""A run cancelled at random moments around a handoff: every call answered, the record true.

On the virtual clock, a run whose first agent calls a slow tool beside its
handoff, and whose target calls slow tools of its own, is cancelled (its
scope) at a random virtual time. Whatever the moment, the transcript left
behind is one the API accepts (every call answered exactly once), and it is
consistent about who is in charge: a switched handoff has the target's
instructions first; an unswitched one (cut in its batch) the first agent's.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from agent_scripts import Say, ScriptedModel, call
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import GuardrailTripped
from juno_bind_trio.agent import Agent, AgentRun, GuardrailResult, RunContext, ToolGuard, tool
from juno_bind_trio.testing import check_tool_call_history


def agents() -> Agent[None, str]:
    @tool
    async def slow(n: int) -> str:
        """Work n seconds."""
        await anyio.sleep(n)
        return f"slept {n}"

    billing = Agent(
        ScriptedModel(
            [
                Say("checking", [call("b1", "slow", n=2), call("b2", "slow", n=1)], delay=0.5),
                Say("done", chunks=["do", "ne"], delay=0.5),
            ]
        ),
        name="billing",
        instructions="Billing.",
        tools=[slow],
    )
    return Agent(
        ScriptedModel(
            [Say(None, [call("t1", "slow", n=1), call("h", "transfer_to_billing")], delay=0.5)]
        ),
        name="triage",
        instructions="Triage.",
        tools=[slow],
        handoffs=[billing],
    )


async def cancelled_at(at: float, reader: bool) -> tuple[list[dict[str, Any]], bool]:
    agent = agents()
    handle: list[AgentRun[str]] = []
    with anyio.move_on_after(at) as scope:
        async with agent.open_run("go") as run:
            handle.append(run)
            if reader:
                async for _ in run:
                    pass
            else:  # no reader: the run goes on in the background until its end
                await anyio.sleep(10)
    return list(handle[0].messages) if handle else [], scope.cancelled_caught


@settings(max_examples=40)
@given(at=st.floats(min_value=0.0, max_value=5.0), reader=st.booleans())
def test_a_handoff_cancelled_anywhere_leaves_every_call_answered(
    backend: str, at: float, reader: bool
) -> None:
    messages, cancelled = run_on(backend, cancelled_at, at, reader)
    if not messages:
        return  # cancelled before the run started
    check_tool_call_history(messages)
    markers = [
        json.loads(m["content"])
        for m in messages
        if m.get("tool_call_id") == "h" and m["content"].startswith('{"transferred_to"')
    ]
    switched = bool(markers) and markers[0].get("in_charge") is True
    assert messages[0]["content"] == ("Billing." if switched else "Triage.")
    if not cancelled or at >= 4.6:  # the whole run takes 4.52 virtual seconds
        assert messages[-1] == {"role": "assistant", "content": "done"}


# --- with guardrails running on both sides -----------------------------------------------

_TRIPS = st.sampled_from(["none", "input", "tool", "output"])


def guarded_agents(trip: str, trip_after: float, seen: list[str]) -> Agent[None, str]:
    """Triage (an input guardrail beside its first request) hands off to billing (a
    tool guard before each of its calls, an output guardrail on its answer); *trip*
    says which of them trips, each after *trip_after* virtual seconds of its own."""

    @tool
    async def slow(n: int) -> str:
        """Work n seconds."""
        seen.append(f"start {n}")
        await anyio.sleep(n)
        return f"slept {n}"

    async def watch_input(ctx: RunContext[None], messages: object) -> GuardrailResult:
        await anyio.sleep(trip_after)
        return GuardrailResult(tripwire=trip == "input")

    async def before_call(ctx: RunContext[None], arguments: dict[str, Any]) -> GuardrailResult:
        await anyio.sleep(trip_after)
        return GuardrailResult(tripwire=trip == "tool", message="no")

    async def check_output(ctx: RunContext[None], output: object) -> GuardrailResult:
        await anyio.sleep(trip_after)
        return GuardrailResult(tripwire=trip == "output")

    billing = Agent(
        ScriptedModel(
            [
                Say("checking", [call("b1", "slow", n=2), call("b2", "slow", n=1)], delay=0.5),
                Say("done", chunks=["do", "ne"], delay=0.5),
            ]
        ),
        name="billing",
        instructions="Billing.",
        tools=[slow],
        tool_guards=[ToolGuard(before=before_call)],
        output_guardrails=[check_output],
    )
    return Agent(
        ScriptedModel(
            [Say(None, [call("t1", "slow", n=1), call("h", "transfer_to_billing")], delay=0.5)]
        ),
        name="triage",
        instructions="Triage.",
        tools=[slow],
        handoffs=[billing],
        input_guardrails=[watch_input],
    )


async def guarded_cancelled_at(
    at: float, trip: str, trip_after: float
) -> tuple[list[dict[str, Any]], BaseException | None, list[str]]:
    seen: list[str] = []
    agent = guarded_agents(trip, trip_after, seen)
    handle: list[AgentRun[str]] = []
    left: BaseException | None = None
    grouped: list[bool] = []
    try:
        with anyio.move_on_after(at):
            try:
                async with agent.open_run("go") as run:
                    handle.append(run)
                    async for _ in run:
                        pass
            except BaseException as exc:
                # What leaves the block is one exception, a cancel as itself: a group
                # (even of cancellations alone, which the scope would swallow) fails here.
                grouped.append(isinstance(exc, BaseExceptionGroup))
                raise
    except GuardrailTripped as exc:
        left = exc
    assert True not in grouped
    return list(handle[0].messages) if handle else [], left, seen


@settings(max_examples=60, deadline=None)
@given(
    at=st.floats(min_value=0.0, max_value=8.0),
    trip=_TRIPS,
    trip_after=st.floats(min_value=0.0, max_value=1.0),
)
def test_a_guarded_handoff_cancelled_or_tripped_anywhere_answers_every_call(
    backend: str, at: float, trip: str, trip_after: float
) -> None:
    messages, left, seen = run_on(backend, guarded_cancelled_at, at, trip, trip_after)
    if messages:
        check_tool_call_history(messages)
    if left is not None:
        assert type(left) is GuardrailTripped
        assert trip != "none"
        assert left.result is not None
        check_tool_call_history(left.result.messages)
    if trip == "input" and trip_after < 0.5:
        # Tripped beside the first request (0.5 s): no tool ever started.
        assert seen == []
    if trip == "tool":
        # Billing's guard refuses each of its calls: none of its tools starts.
        assert "start 2" not in seen
    if trip == "output" and left is not None:
        assert left.result is not None
        assert left.result.agent_name == "billing"
        assert messages[-1] != {"role": "assistant", "content": "done"}
