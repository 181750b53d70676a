"""``extra_tools=``: one run's own tools next to the agent's; a history whose last turn is
answered goes on with no prompt."""

from __future__ import annotations

from typing import Any

import pytest

from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent, ExternalTool, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


PICK = ExternalTool(
    "pick", {"type": "object", "properties": {"day": {"type": "string"}}}, description="Pick"
)


def offered(turn: ModelTurn) -> list[str]:
    return [t["function"]["name"] for t in turn.tools]


async def test_extra_tools_are_offered_to_that_run_only() -> None:
    seen: list[list[str]] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(offered(turn))
        if turn.messages[-1]["role"] == "user" and "pick" in offered(turn):
            call = {"id": "p1", "type": "function", "function": {"name": "pick", "arguments": "{}"}}
            return ModelTurnResult(tool_calls=(call,))
        return ModelTurnResult(content="ok")

    agent = Agent(model, tools=[add])
    held = await agent.run("when?", extra_tools=[PICK])
    assert held.reason == "suspended"
    assert [(p.id, p.kind) for p in held.pending] == [("p1", "external")]
    plain = await agent.run("again")
    assert plain.output == "ok"
    assert seen == [["add", "pick"], ["add"]]
    # The host answers it; the run goes on with the same tools.
    done = await agent.run(
        message_history=held.messages, results={"p1": "Monday"}, extra_tools=[PICK]
    )
    assert done.output == "ok"
    assert done.messages[-2] == {"role": "tool", "tool_call_id": "p1", "content": "Monday"}


async def test_a_history_ending_in_answers_goes_on_without_a_prompt() -> None:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content=f"after {turn.messages[-1]['content']}")

    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "pick", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Tuesday"},
    ]
    agent = Agent(model)
    result = await agent.run(message_history=history, extra_tools=[PICK])
    assert result.output == "after Tuesday"
    async with agent.open_run(message_history=history) as run:
        async for _ in run:
            pass
    assert run.result is not None
    assert run.result.output == "after Tuesday"
    with pytest.raises(UsageError, match="a prompt is needed"):
        await agent.run(message_history=history[:1])


async def test_extra_tools_are_checked_as_the_agents_are() -> None:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="x")

    agent = Agent(model, tools=[add])
    with pytest.raises(ValueError, match="a tool named 'add' is already one of the agent's"):
        await agent.run("hi", extra_tools=[add])
    with pytest.raises(TypeError, match="extra_tools"):
        await agent.run("hi", extra_tools=[42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="extra_tools"):
        agent.open_run("hi", extra_tools="add")  # type: ignore[arg-type]
