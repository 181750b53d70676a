"""What leaves ``async with agent.open_run(...)``: one failure as itself, a cancel as a cancel.

The run goes on in a task of its own while the block reads its events, so
the block runs inside a task group; none of that may show. The reader's own
exception, a tool's ``BaseException`` and a cancellation each leave as
themselves, alone, whatever else happened at the same moment, and the
transcript is whole either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent, AgentRun, ToolCallStartedEvent, tool

pytestmark = pytest.mark.anyio


class Abort(BaseException):
    """A host's own BaseException subclass, raised by a tool."""


@tool
async def slow(n: int) -> str:
    await anyio.sleep(n)
    return "slept"


@tool
async def aborts(n: int) -> str:
    await anyio.sleep(n)
    raise Abort("tool gave up")


@tool
async def aborts_when_cancelled(n: int) -> str:
    try:
        await anyio.sleep(n)
    except anyio.get_cancelled_exc_class():
        raise Abort("cut off") from None
    return "slept"


def agent_calling(name: str, n: int = 5) -> Agent[None, str]:
    model = ScriptedModel([Say(calls=[call("c1", name, n=n)]), Say(text="done")])
    return Agent(model, tools=[slow, aborts, aborts_when_cancelled])


async def read(
    agent: Agent[None, str],
    on_started: Callable[[AgentRun[str]], Awaitable[bool | None]] | None = None,
) -> AgentRun[str]:
    """Read the whole run; at a ToolCallStartedEvent call *on_started*, and break if it says so."""
    async with agent.open_run("go") as run:
        READ.append(run)
        async for event in run:
            if (
                on_started is not None
                and isinstance(event, ToolCallStartedEvent)
                and await on_started(run)
            ):
                break
    return run


READ: list[AgentRun[str]] = []


def last_answer() -> Any:
    return tool_answers(READ[-1].messages)["c1"]["kind"]


async def test_the_readers_exception_leaves_as_itself() -> None:
    raised = KeyError("reader gave up")

    async def give_up(run: AgentRun[str]) -> None:
        raise raised

    with pytest.raises(KeyError) as caught:
        await read(agent_calling("slow"), give_up)
    assert caught.value is raised
    assert last_answer() == "interrupted"


async def test_the_readers_own_group_leaves_unchanged() -> None:
    raised = ExceptionGroup("the reader's", [KeyError("a"), ValueError("b")])

    async def give_up(run: AgentRun[str]) -> None:
        raise raised

    with pytest.raises(ExceptionGroup) as caught:
        await read(agent_calling("slow"), give_up)
    assert caught.value is raised


async def test_a_tools_base_exception_leaves_as_itself() -> None:
    with pytest.raises(Abort, match="tool gave up"):
        await read(agent_calling("aborts", 1))
    assert last_answer() == "interrupted"


@pytest.mark.parametrize("how", ["outer_scope", "run_cancel", "break"])
async def test_a_tools_base_exception_during_a_cancel_leaves_as_itself(how: str) -> None:
    # The cancel cuts the tool off and the tool answers it with its own
    # BaseException: that one leaves, alone, and the scope absorbs nothing.
    async def cancel(run: AgentRun[str]) -> bool:
        await anyio.sleep(1)
        if how == "outer_scope":
            scope.cancel()
        elif how == "run_cancel":
            run.cancel()
        return how == "break"

    with anyio.CancelScope() as scope, pytest.raises(Abort, match="cut off"):
        await read(agent_calling("aborts_when_cancelled"), cancel)
    assert last_answer() == "interrupted"


async def test_a_cancel_around_the_block_leaves_as_a_bare_cancellation() -> None:
    cancelled = anyio.get_cancelled_exc_class()
    seen: list[BaseException] = []

    async def cancel(run: AgentRun[str]) -> None:
        scope.cancel()

    with anyio.CancelScope() as scope:
        try:
            await read(agent_calling("slow"), cancel)
        except BaseException as exc:
            seen.append(exc)
            raise
    assert scope.cancelled_caught
    assert len(seen) == 1
    assert type(seen[0]) is cancelled
    assert last_answer() == "interrupted"


async def test_the_readers_exception_outranks_a_cancel_at_the_same_moment() -> None:
    async def cancel_and_fail(run: AgentRun[str]) -> None:
        scope.cancel()
        raise KeyError("and the reader failed too")

    with anyio.CancelScope() as scope, pytest.raises(KeyError):
        await read(agent_calling("slow"), cancel_and_fail)
    assert not scope.cancelled_caught
    assert last_answer() == "interrupted"


async def test_the_runs_error_still_leaves_when_the_block_ends() -> None:
    async def failing(turn: Any) -> Any:
        raise RuntimeError("provider down")

    with pytest.raises(RuntimeError, match="provider down"):
        await read(Agent(failing))


# --- open_run used without `async with` ---------------------------------------------


async def test_iterating_open_run_without_async_with_says_to_use_it() -> None:
    handle: Any = agent_calling("slow").open_run("go")
    with pytest.raises(TypeError, match=r"async with agent\.open_run\(\.\.\.\) as run"):
        async for _ in handle:
            pass


async def test_awaiting_open_run_says_to_use_async_with() -> None:
    handle: Any = agent_calling("slow").open_run("go")
    with pytest.raises(TypeError, match="async with"):
        await handle


def test_a_plain_with_or_for_on_open_run_says_to_use_async_with() -> None:
    handle: Any = agent_calling("slow").open_run("go")
    with pytest.raises(TypeError, match="async with"), handle:
        pass
    with pytest.raises(TypeError, match="async with"):
        list(handle)


def test_reading_the_run_off_open_run_says_to_use_async_with() -> None:
    handle: Any = agent_calling("slow").open_run("go")
    with pytest.raises(TypeError, match=r"async with.*then read run\.result"):
        _ = handle.result
    with pytest.raises(AttributeError):
        _ = handle.no_such_thing


async def test_open_run_is_entered_once() -> None:
    handle = agent_calling("slow", 0).open_run("go")
    async with handle as run:
        async for _ in run:
            pass
    assert run.result is not None
    with pytest.raises(UsageError, match="entered already"):
        async with handle:
            pass


async def test_the_readers_failure_and_the_runs_own_stay_together() -> None:
    # Two failures at once (the reader's, and the BaseException the tool raised
    # as the reader's failure cancelled it): neither outranks the other.
    raised = KeyError("reader gave up")

    async def give_up(run: AgentRun[str]) -> None:
        raise raised

    with pytest.raises(BaseExceptionGroup) as caught:
        await read(agent_calling("aborts_when_cancelled"), give_up)
    leaves = caught.value.exceptions
    assert len(leaves) == 2
    assert raised in leaves
    assert any(isinstance(leaf, Abort) for leaf in leaves)
