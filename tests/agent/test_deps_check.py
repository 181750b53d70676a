"""A tool's ``RunContext[X]`` is checked against the agent's ``deps_type`` when it is built.

A tool reading ``ctx.deps.db`` on an agent with no deps would fail at its
first call with an ``AttributeError`` the model reads; it is refused at
construction instead, naming the tool and the fix.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent, RunContext, Tool, tool

pytestmark = pytest.mark.anyio


@attrs.define
class Deps:
    db: str = "main"


class SpecialDeps(Deps):
    pass


class Other:
    pass


class HasDb(Protocol):
    db: str


@tool
async def lookup(ctx: RunContext[Deps], key: str) -> str:
    return f"{ctx.deps.db}:{key}"


async def model(turn: Any) -> Any:
    raise AssertionError("never called")


def test_a_tool_wanting_deps_on_an_agent_without_deps_type_is_refused() -> None:
    with pytest.raises(
        TypeError,
        match=r"^Agent: tool 'lookup' takes RunContext\[Deps\], but the agent has no deps_type; "
        r"build it with Agent\(\.\.\., deps_type=Deps\) and pass deps=Deps\(\.\.\.\)",
    ):
        Agent(model, tools=[lookup])


def test_a_tool_wanting_other_deps_than_the_agents_is_refused() -> None:
    with pytest.raises(
        TypeError, match=r"takes RunContext\[Deps\], but the agent's deps_type is Other"
    ):
        Agent(model, tools=[lookup], deps_type=Other)


@pytest.mark.parametrize("deps_type", [Deps, SpecialDeps])
def test_the_same_class_or_a_subclass_is_accepted(deps_type: type) -> None:
    Agent(model, tools=[lookup], deps_type=deps_type)


def test_contexts_that_say_nothing_checkable_are_accepted() -> None:
    @tool
    async def bare(ctx: RunContext, key: str) -> str:
        return key

    @tool
    async def anything(ctx: RunContext[Any], key: str) -> str:
        return key

    @tool
    async def nothing(ctx: RunContext[None], key: str) -> str:
        return key

    @tool
    async def either(ctx: RunContext[Deps | None], key: str) -> str:
        return key

    @tool
    async def structural(ctx: RunContext[HasDb], key: str) -> str:
        return key

    Agent(model, tools=[bare, anything, nothing, either])
    Agent(model, tools=[structural], deps_type=Deps)


async def test_the_checked_tool_reads_its_deps() -> None:
    scripted = ScriptedModel([Say(calls=[call("c1", "lookup", key="k")]), Say(text="ok")])
    agent = Agent(scripted, tools=[lookup], deps_type=Deps)
    result = await agent.run("go", deps=Deps(db="replica"))
    assert tool_answers(result.messages)["c1"] == "replica:k"


async def test_a_toolsets_tool_is_checked_against_the_runs_deps() -> None:
    @attrs.define
    class Toolset:
        tools: list[Tool]

    scripted = ScriptedModel([Say(text="never")])
    agent = Agent(scripted, tools=[Toolset([lookup])])
    with pytest.raises(
        UsageError, match=r"tool 'lookup' takes RunContext\[Deps\], but the run's deps is None"
    ):
        await agent.run("go")
    assert scripted.seen == []
