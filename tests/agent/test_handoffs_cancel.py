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
from juno_bind_trio.agent import Agent, AgentRun, tool
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
