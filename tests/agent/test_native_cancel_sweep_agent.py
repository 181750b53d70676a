"""An agent run cancelled at every step it takes: it always ends cancelled, every call answered.

The sweep of ``tests/native_cancel.py`` (a bare ``task.cancel()`` of the task
running the run on asyncio, the run's scope on trio, once before each step)
over ``Agent.run`` and over ``Agent.open_run`` with a reader, with pooled
tools, a serial tool that fans out in a task group of its own, and a
streamed answer.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
import pytest
from agent_scripts import Say, ScriptedModel, call

from juno_bind_trio.agent import Agent, AgentRun, tool
from juno_bind_trio.transcript import heal_transcript
from native_cancel import Run, assert_always_cancelled, sweep


@attrs.define(eq=False)
class AgentScenario:
    """Two turns of tool calls, then a streamed answer."""

    reader: bool
    log: list[tuple[str, str]] = attrs.field(factory=list)
    run: AgentRun[Any] | None = None

    def agent(self) -> Agent[Any, str]:
        log = self.log

        @tool
        async def work(n: int) -> str:
            """Work for n seconds."""
            log.append(("start", f"work {n}"))
            await anyio.sleep(n)
            log.append(("end", f"work {n}"))
            return f"did {n}"

        @tool(serial=True)
        async def fan_out(parts: int) -> str:
            """Work in parts, each with a deadline of its own."""
            log.append(("start", f"fan_out {parts}"))

            async def part(seconds: float) -> None:
                with anyio.move_on_after(seconds):
                    await anyio.sleep(seconds * 2)

            async with anyio.create_task_group() as tg:
                for i in range(parts):
                    tg.start_soon(part, 0.5 * (i + 1))
            log.append(("end", f"fan_out {parts}"))
            return f"fanned {parts}"

        model = ScriptedModel(
            [
                Say(
                    text="working",
                    calls=[call("w1", "work", n=1), call("w2", "work", n=2)],
                    delay=0.5,
                ),
                Say(calls=[call("f1", "fan_out", parts=2), call("w3", "work", n=3)], delay=0.5),
                Say(text="all done", chunks=["all ", "done"]),
            ]
        )
        return Agent(model, tools=[work, fan_out], per_tool_limit=2)

    async def __call__(self) -> None:
        self.log = []
        self.run = None
        agent = self.agent()
        if not self.reader:
            await agent.run("go")
            return
        async with agent.open_run("go") as run:
            self.run = run
            async for _ in run:
                pass

    def check(self, run: Run) -> None:
        if self.run is None:
            return
        messages = list(self.run.messages)
        assert heal_transcript(messages).changed is False
        started = {name for kind, name in self.log if kind == "start"}
        ended = {name for kind, name in self.log if kind == "end"}
        answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        for content in answers.values():
            if content.startswith(("did ", "fanned ")):
                continue
            assert json.loads(content)["kind"] in ("not_run", "interrupted"), content
        interrupted = sum('"interrupted"' in c for c in answers.values())
        assert interrupted == len(started - ended)


@pytest.mark.parametrize("reader", [False, True], ids=["run", "open_run"])
def test_an_agent_run_cancelled_at_every_step_always_ends_cancelled(
    backend: str, reader: bool
) -> None:
    scenario = AgentScenario(reader=reader)
    runs = sweep(backend, scenario, scenario.check)
    assert_always_cancelled(runs)
