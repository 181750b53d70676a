"""The rule that keeps a bare ``task.cancel()`` alive on asyncio: re-raised untagged.

A ``CancelledError`` that reaches a point where no enclosing cancel scope is
cancelled cannot be any scope's: it is the task's own. ``task_cancellation``
gives a fresh one to raise in its place, carrying no scope's message and no
such exception in its context, so that no anyio scope on the way up can take
it for its own; ``None`` everywhere else (trio, a cancelled scope, anything
that is not a ``CancelledError``).
"""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest
import trio

from conftest import run_on
from juno_bind_trio._cancel import (
    TASK_CANCELLATION_MESSAGE,
    raise_task_cancellation,
    task_cancellation,
)

pytestmark = pytest.mark.anyio


def test_a_cancellation_outside_every_cancelled_scope_is_raised_afresh() -> None:
    async def main() -> None:
        # What a scope's own cancellation carries (anyio tags it by its message).
        tagged = asyncio.CancelledError("Cancelled via cancel scope 7f00 by <Task>")
        fresh = task_cancellation(tagged)
        assert isinstance(fresh, asyncio.CancelledError)
        assert fresh.args == (TASK_CANCELLATION_MESSAGE,)
        assert fresh.__cause__ is tagged

        def reraise() -> None:
            try:
                raise tagged
            except asyncio.CancelledError:
                raise_task_cancellation(fresh)

        with pytest.raises(asyncio.CancelledError) as info:
            reraise()
        assert info.value is fresh
        # No implicit context: anyio reads a scope's message through that chain.
        assert info.value.__context__ is None
        assert info.value.__cause__ is tagged
        # Once re-raised, it is left alone by every layer above.
        assert task_cancellation(fresh) is None

    run_on("asyncio", main)


def test_inside_a_cancelled_scope_the_cancellation_is_the_scopes() -> None:
    async def main() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            assert task_cancellation(asyncio.CancelledError()) is None
            await anyio.lowlevel.checkpoint()

    run_on("asyncio", main)


def test_a_shield_hides_the_cancelled_scope_outside_it() -> None:
    # Inside a shield the outer cancel is not in effect: a CancelledError there is
    # not that scope's (it cannot have been delivered through the shield).
    async def main() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            with anyio.CancelScope(shield=True):
                assert task_cancellation(asyncio.CancelledError()) is not None
                await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()

    run_on("asyncio", main)


async def test_nothing_else_is_replaced() -> None:
    assert task_cancellation(ValueError("x")) is None
    assert task_cancellation(KeyboardInterrupt()) is None


def test_on_trio_a_cancellation_is_always_a_scopes() -> None:
    async def main() -> None:
        caught: list[BaseException] = []
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.sleep(1)
            except trio.Cancelled as exc:
                caught.append(exc)
                raise
        # Outside every cancelled scope, and still not replaced.
        assert task_cancellation(caught[0]) is None

    run_on("trio", main)
