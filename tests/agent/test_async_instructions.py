"""`Agent(instructions=async fn)`: the system message awaited from the run's RunContext."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

from juno_bind_trio.agent import Agent, RunContext
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import RunStore, SqliteRunStore

pytestmark = pytest.mark.anyio


@attrs.frozen
class Profiles:
    names: dict[str, str]

    async def name_of(self, user: str) -> str:
        await anyio.sleep(1)  # a database read, on the virtual clock
        return self.names[user]


class Model:
    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.seen.append(list(turn.messages))
        return ModelTurnResult(content="hi")


async def test_the_instructions_are_awaited_with_the_runs_context() -> None:
    contexts: list[RunContext[Profiles]] = []

    async def instructions(ctx: RunContext[Profiles]) -> str:
        contexts.append(ctx)
        return f"The user is {await ctx.deps.name_of('u1')}."

    model = Model()
    agent = Agent(model, deps_type=Profiles, instructions=instructions, name="greeter")
    deps = Profiles({"u1": "Ana"})
    result = await agent.run("Hello", deps=deps, run_id="r1")
    assert model.seen[0][0] == {"role": "system", "content": "The user is Ana."}
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant"]
    (ctx,) = contexts
    assert (ctx.deps, ctx.run_id, ctx.iteration, ctx.tool_call_id, ctx.tool_name) == (
        deps,
        "r1",
        0,
        "",
        "",
    )
    assert [link.agent for link in ctx.chain.links] == ["greeter"]
    # The instructions are not part of the run's own messages.
    assert result.new_messages() == result.messages[1:]


async def test_a_continued_conversation_does_not_get_them_twice() -> None:
    async def instructions(ctx: RunContext[None]) -> str:
        return "Be brief."

    model = Model()
    agent = Agent(model, instructions=instructions)
    first = await agent.run("Hello")
    second = await agent.run("Again", message_history=first.messages)
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert second.new_messages() == second.messages[3:]


async def test_a_cancel_while_they_are_awaited_asks_no_model() -> None:
    started = anyio.Event()

    async def instructions(ctx: RunContext[None]) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    model = Model()
    agent = Agent(model, instructions=instructions)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(agent.run, "Hello")
        await started.wait()
        tasks.cancel_scope.cancel()
    assert model.seen == []


async def test_an_answer_that_is_not_text_is_refused_at_the_run() -> None:
    async def instructions(ctx: RunContext[None]) -> Any:
        return 42

    model = Model()
    with pytest.raises(TypeError, match=r"^Agent: instructions\(ctx\) must return a str, got 42"):
        await Agent(model, instructions=instructions).run("Hello")
    assert model.seen == []


async def test_a_durable_run_stores_them_and_a_resume_does_not_ask_again(tmp_path: Any) -> None:
    calls: list[str] = []

    async def instructions(ctx: RunContext[None]) -> str:
        calls.append(ctx.run_id)
        return "Be brief."

    model = Model()
    path = tmp_path / "runs.db"
    result = await Agent(model, instructions=instructions, store=str(path)).run("Hi", run_id="d1")
    assert result.messages[0] == {"role": "system", "content": "Be brief."}
    async with SqliteRunStore(path) as store:
        assert isinstance(store, RunStore)
        assert (await store.load("d1")).messages == result.messages
        # A resumed run keeps the instructions it was stored with: not awaited again.
        stored = [{"role": "system", "content": "Old."}, {"role": "user", "content": "Hi"}]
        await store.create_run("d2", messages=stored)
        agent = Agent(model, instructions=instructions, store=store, store_owner="w1")
        resumed = await agent.resume("d2")
    assert resumed.messages[:2] == stored
    assert resumed.new_messages() == [{"role": "assistant", "content": "hi"}]
    assert calls == ["d1"]
