"""A synchronous tool under a cancel: the truth about a function in a worker thread.

A thread cannot be interrupted, so a cancel waits for the function to
return, and a function that returned has a real result: that is its answer,
on both backends, whether the calls run pooled or serially. A function a
cancel caught before its thread took it never started: ``not_run``, never
``interrupted``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio.agent import (
    Agent,
    AgentEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    tool,
)

pytestmark = pytest.mark.anyio

# Every wait on a thread here is bounded, so a bug fails the test, never hangs it.
WAIT = 10.0


class Gates:
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.ran: list[str] = []

    async def wait_entered(self) -> None:
        # A limiter of its own: the default one may be the thing held full.
        assert await anyio.to_thread.run_sync(
            self.entered.wait, WAIT, limiter=anyio.CapacityLimiter(1)
        )


def agent_with(gates: Gates, *, serial: bool, calls: int) -> Agent[None, str]:
    @tool(serial=serial)
    def export(name: str) -> str:
        gates.ran.append(name)
        gates.entered.set()
        assert gates.release.wait(WAIT)
        return f"exported {name}"

    model = ScriptedModel(
        [Say(calls=[call(f"c{i}", "export", name=f"f{i}") for i in range(calls)]), Say("never")]
    )
    return Agent(model, tools=[export], per_tool_limit=1)


async def read_and_cancel(agent: Agent[None, str], gates: Gates, *, wait_entered: bool) -> Any:
    events: list[AgentEvent] = []
    async with agent.open_run("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ToolCallStartedEvent) and event.tool_call_id == "c0":
                if wait_entered:
                    await gates.wait_entered()
                run.cancel()
                gates.release.set()
    assert run.result is None
    return run, {e.tool_call_id: e for e in events if isinstance(e, ToolCallEndedEvent)}


@pytest.mark.parametrize("serial", [False, True], ids=["pooled", "serial"])
async def test_a_function_that_returned_under_a_cancel_is_answered_with_its_result(
    serial: bool,
) -> None:
    gates = Gates()
    run, ended = await read_and_cancel(
        agent_with(gates, serial=serial, calls=2), gates, wait_entered=True
    )
    answers = tool_answers(run.messages)
    assert gates.ran == ["f0"]
    assert answers["c0"] == "exported f0"
    assert ended["c0"].status == "finished"
    assert answers["c1"]["kind"] == "not_run"
    assert ended["c1"].status == "not_run"


@pytest.mark.parametrize("serial", [False, True], ids=["pooled", "serial"])
async def test_a_function_cancelled_before_its_thread_began_is_not_run(serial: bool) -> None:
    gates = Gates()
    # Every worker thread is taken, so the tool waits for one when the cancel comes.
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: anyio.to_thread.run_sync(gates.release.wait, WAIT))
        while limiter.borrowed_tokens < 1:
            await anyio.lowlevel.checkpoint()
        run, ended = await read_and_cancel(
            agent_with(gates, serial=serial, calls=1), gates, wait_entered=False
        )
    assert gates.ran == []
    assert tool_answers(run.messages)["c0"]["kind"] == "not_run"
    assert ended["c0"].status == "not_run"


async def test_a_deadline_that_fires_while_the_function_runs_keeps_its_result() -> None:
    gates = Gates()

    @tool
    def slow_export() -> str:
        # Runs until the deadline has fired around it (the thread can see that,
        # and cannot be stopped by it), then returns all the same.
        gates.entered.set()
        for _ in range(int(WAIT / 0.01)):
            try:
                anyio.from_thread.check_cancelled()
            except BaseException:
                gates.ran.append("cancelled around me")
                return "exported anyway"
            time.sleep(0.01)
        return "never saw the deadline"

    model = ScriptedModel([Say(calls=[call("c0", "slow_export")]), Say("never")])
    # No deadline until the function runs: on the autojump clock a pending one
    # would be jumped to while the reader waits on a thread, and could fire
    # before the worker thread took the function (then it rightly never runs).
    with anyio.CancelScope() as scope:
        async with Agent(model, tools=[slow_export]).open_run("go") as run:
            async for event in run:
                if isinstance(event, ToolCallStartedEvent):
                    await gates.wait_entered()
                    scope.deadline = anyio.current_time()  # due now, while it runs
    assert scope.cancelled_caught
    assert gates.ran == ["cancelled around me"]
    assert tool_answers(run.messages)["c0"] == "exported anyway"
    assert len(model.turns) == 1  # no model call after the cancel
