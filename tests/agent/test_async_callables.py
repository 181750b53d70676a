"""One check decides whether the package awaits a callable: ``functools.partial`` of an
async function or of an object with an async ``__call__``, a bound async method, and such
an object itself are awaited, never run in a worker thread."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from juno_bind_trio._validate import is_async_callable
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Adder:
    async def __call__(self, a: int, b: int) -> int:
        return a + b

    async def method(self, a: int, b: int) -> int:
        return a + b


def sync_add(a: int, b: int) -> int:
    return a + b


ASYNC_SHAPES: list[Any] = [
    add,
    functools.partial(add, b=2),
    Adder(),
    functools.partial(Adder(), b=2),
    functools.partial(functools.partial(Adder(), b=2)),
    Adder().method,
    functools.partial(Adder().method, b=2),
]


@pytest.mark.parametrize("fn", ASYNC_SHAPES)
def test_every_async_shape_is_async(fn: Any) -> None:
    assert is_async_callable(fn)


@pytest.mark.parametrize(
    "fn", [sync_add, functools.partial(sync_add, b=2), lambda: None, 3, None, "add"]
)
def test_sync_callables_and_non_callables_are_not(fn: Any) -> None:
    assert not is_async_callable(fn)


async def test_a_partial_of_an_async_callable_object_is_awaited_as_a_tool() -> None:
    # Before the one check, a partial of an object with an async __call__ was taken for a
    # sync function: run in a worker thread, it failed (trio) or returned a coroutine.
    tools = [
        tool(functools.partial(add, b=2), name="by_function", description="Add two."),
        tool(functools.partial(Adder(), b=2), name="by_object", description="Add two."),
        tool(functools.partial(Adder().method, b=2), name="by_method", description="Add two."),
    ]
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": t.name, "arguments": '{"a": 1}'}}
        for i, t in enumerate(tools)
    ]
    turns = iter([ModelTurnResult(tool_calls=calls), ModelTurnResult(content="done")])

    async def model(turn: ModelTurn) -> ModelTurnResult:
        return next(turns)

    result = await Agent(model, tools=tools).run("go")
    answers = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert answers == ["3", "3", "3"]
