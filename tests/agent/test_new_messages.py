"""`AgentResult.new_messages()`: the part of the transcript a run added, from its prompt on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def model(turn: ModelTurn) -> ModelTurnResult:
    last = turn.messages[-1]
    if last["role"] == "user":
        return ModelTurnResult(tool_calls=(_call(f"c{len(turn.messages)}", '{"a":1,"b":2}'),))
    return ModelTurnResult(content=f"sum is {last['content']}")


def _call(call_id: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "add", "arguments": arguments}}


def _roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


async def test_a_first_run_adds_its_prompt_and_what_followed_not_the_instructions() -> None:
    agent = Agent(model, tools=[add], instructions="Be terse.")
    result = await agent.run("What is 1+2?")
    new = result.new_messages()
    assert _roles(result.messages) == ["system", "user", "assistant", "tool", "assistant"]
    assert new == result.messages[1:]
    assert new[0] == {"role": "user", "content": "What is 1+2?"}
    assert new[-1] == {"role": "assistant", "content": "sum is 3"}
    new.clear()  # a new list each time: the result is not touched
    assert len(result.new_messages()) == 4
    json.dumps(result.new_messages())


async def test_a_continued_run_returns_only_the_messages_it_added() -> None:
    agent = Agent(model, tools=[add], instructions="Be terse.")
    first = await agent.run("What is 1+2?")
    second = await agent.run("And again?", message_history=first.messages)
    assert second.messages[: len(first.messages)] == first.messages
    assert second.new_messages() == second.messages[len(first.messages) :]
    assert _roles(second.new_messages()) == ["user", "assistant", "tool", "assistant"]
    assert second.new_messages()[0] == {"role": "user", "content": "And again?"}
    # A host keeping the conversation itself appends each run's part: same transcript.
    kept = first.messages + second.new_messages()
    assert kept == second.messages


async def test_history_without_the_instructions_gets_them_inserted_but_not_as_new() -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    result = await Agent(model, tools=[add], instructions="Be terse.").run(
        "What is 1+2?", message_history=history
    )
    assert _roles(result.messages)[:3] == ["system", "user", "assistant"]
    assert result.new_messages() == result.messages[3:]
    assert result.new_messages()[0]["content"] == "What is 1+2?"


async def test_a_run_stopped_before_its_model_answered_holds_its_prompt() -> None:
    async def stuck(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(tool_calls=(_call("c1", "{}"),))

    result = await Agent(stuck, tools=[add], max_iterations=1).run("go")
    assert result.reason != "completed"
    new = result.new_messages()
    assert new[0] == {"role": "user", "content": "go"}
    assert new == result.messages


async def test_a_history_healed_before_the_run_still_splits_at_the_prompt() -> None:
    # Saved mid-batch: the call is unanswered, so the history is healed (an answer is
    # inserted) before the run, and the prompt moves; its part still starts there.
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c0", '{"a":1,"b":1}')]},
    ]
    result = await Agent(model, tools=[add]).run("What is 1+2?", message_history=history)
    new = result.new_messages()
    assert new[0] == {"role": "user", "content": "What is 1+2?"}
    assert result.messages[-len(new) :] == new
    assert {m.get("tool_call_id") for m in result.messages[: -len(new)]} >= {"c0"}
