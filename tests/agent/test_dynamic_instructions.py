"""`Agent(instructions=fn)`: the system message computed from each run's deps."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


@attrs.frozen
class User:
    name: str


async def test_each_run_gets_the_instructions_of_its_own_deps() -> None:
    seen: list[list[dict[str, Any]]] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(list(turn.messages))
        return ModelTurnResult(content="hi")

    calls: list[User] = []

    def instructions(deps: User) -> str:
        calls.append(deps)
        return f"The user is {deps.name}."

    agent = Agent(model, deps_type=User, instructions=instructions)
    first = await agent.run("Hello", deps=User("Ana"))
    await agent.run("Hello", deps=User("Rui"))
    assert calls == [User("Ana"), User("Rui")]
    assert [m[0] for m in seen] == [
        {"role": "system", "content": "The user is Ana."},
        {"role": "system", "content": "The user is Rui."},
    ]
    # Continuing Ana's conversation: her system message is not added twice.
    await agent.run("Again", deps=User("Ana"), message_history=first.messages)
    assert [m["role"] for m in seen[-1]] == ["system", "user", "assistant", "user"]


async def _model(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="x")


@pytest.mark.parametrize("given", [42, b"hi"])
def test_instructions_that_are_neither_text_nor_a_function_are_refused(given: Any) -> None:
    with pytest.raises(TypeError, match=r"^Agent: instructions must be a str, a synchronous"):
        Agent(_model, instructions=given)


async def test_a_function_that_returns_no_text_is_refused_at_the_run() -> None:
    agent = Agent(_model, instructions=lambda deps: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"instructions\(deps\) must return a str, got None"):
        await agent.run("Hello")
