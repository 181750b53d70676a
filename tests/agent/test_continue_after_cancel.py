"""Going on after a cancel: ``message_history=`` continues the talk, ``resume`` finishes the run.

A cancelled batch leaves calls that never started answered ``not_run``.
Continuing the conversation from that transcript never runs them (the model
reads that they did not run and were not to be retried); resuming the run
from its store runs them, and repeats a cut-off call only if its tool is
safe to repeat.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio.agent import Agent, ToolCallStartedEvent, tool

pytestmark = pytest.mark.anyio


def reports(ran: list[str]) -> object:
    @tool(repeatable=False)
    async def report(name: str) -> str:
        ran.append(name)
        await anyio.sleep(60 if name == "big" and ran.count("big") == 1 else 1)
        return f"report {name}"

    return report


BATCH = [
    call("c0", "report", name="quick"),
    call("c1", "report", name="big"),
    call("c2", "report", name="small"),
]


async def cancel_at_c1(agent: Agent[None, str], **options: object) -> list[dict[str, object]]:
    with anyio.CancelScope() as scope:
        async with agent.open_run("Build three reports.", **options) as run:  # type: ignore[arg-type]
            async for event in run:
                if isinstance(event, ToolCallStartedEvent) and event.tool_call_id == "c1":
                    scope.cancel()
    return list(run.messages)


async def test_going_on_with_message_history_never_runs_the_calls_that_never_started() -> None:
    ran: list[str] = []
    model = ScriptedModel([Say(calls=BATCH), Say(text="Only the quick one is done.")])
    agent = Agent(model, tools=[reports(ran)], per_tool_limit=1)
    messages = await cancel_at_c1(agent)
    assert ran == ["quick", "big"]
    result = await agent.run("What is done?", message_history=messages)
    assert ran == ["quick", "big"]  # nothing of the cancelled batch ran again
    answers = tool_answers(model.seen[-1])
    assert answers["c1"]["kind"] == "interrupted"
    assert answers["c2"]["kind"] == "not_run"
    assert result.output == "Only the quick one is done."


async def test_resume_runs_the_calls_that_never_started(tmp_path: Path) -> None:
    ran: list[str] = []
    model = ScriptedModel([Say(calls=BATCH), Say(text="Two reports.")])
    agent = Agent(model, tools=[reports(ran)], per_tool_limit=1, store=str(tmp_path / "runs.db"))
    await cancel_at_c1(agent, run_id="reports-1")
    assert ran == ["quick", "big"]
    result = await agent.resume("reports-1")
    assert result.reason == "completed"
    # The never-started call ran; the cut-off call of a tool that must not run
    # twice did not; the finished one was answered from its receipt.
    assert ran == ["quick", "big", "small"]
    answers = tool_answers(result.messages)
    assert answers["c0"] == "report quick"
    assert answers["c1"]["kind"] == "interrupted"
    assert answers["c2"] == "report small"
