"""Agent(compaction=...): old turns summarized through a model call, on the loop's arm."""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio.agent import Agent, AgentEvent, Compaction, RunStatusEvent, tool
from juno_bind_trio.agent._compaction import SUMMARY_PREFIX
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import FunctionModel, check_tool_call_history

pytestmark = pytest.mark.anyio


@tool
def read(page: int) -> str:
    return f"page {page}"


def _reader(steps: int, sent: list[list[dict[str, Any]]]) -> FunctionModel:
    def model(turn: ModelTurn) -> ModelTurnResult:
        sent.append(list(turn.messages))
        if turn.iteration > steps:
            return ModelTurnResult(content="done")
        call = {
            "id": f"c{turn.iteration}",
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"page": turn.iteration})},
        }
        return ModelTurnResult(tool_calls=[call])

    return FunctionModel(model)


def _summarizer(asked: list[list[dict[str, Any]]], text: str = "read pages") -> FunctionModel:
    def model(turn: ModelTurn) -> ModelTurnResult:
        asked.append(list(turn.messages))
        return ModelTurnResult(content=text, input_tokens=7, output_tokens=2)

    return FunctionModel(model)


async def test_old_turns_are_summarized_and_shown_as_compacting() -> None:
    sent: list[list[dict[str, Any]]] = []
    asked: list[list[dict[str, Any]]] = []
    agent = Agent(
        _reader(4, sent),
        tools=[read],
        instructions="Read the report.",
        compaction=Compaction(max_turns=2, keep_turns=1, model=_summarizer(asked)),
    )
    events: list[AgentEvent] = []
    async with agent.open_run("Summarize the report") as run:
        async for event in run:
            events.append(event)
    result = run.result
    assert result is not None
    assert result.output == "done"
    compacting = [e for e in events if isinstance(e, RunStatusEvent)]
    assert compacting
    assert all(e.status == "compacting" for e in compacting)
    assert result.stats.compactions == len(compacting)
    # The transcript: instructions, the summary, the prompt, the kept turns; pairs whole.
    messages = result.messages
    assert messages[0] == {"role": "system", "content": "Read the report."}
    assert messages[1] == {"role": "system", "content": SUMMARY_PREFIX + "read pages"}
    assert messages[2] == {"role": "user", "content": "Summarize the report"}
    assert (
        sum(m["content"].startswith(SUMMARY_PREFIX) for m in messages if m["role"] == "system") == 1
    )
    check_tool_call_history(messages)
    for request in sent:
        check_tool_call_history(request)
    # The summarizing request: the old part (pairs whole), then the instructions.
    first = asked[0]
    assert first[-1]["role"] == "user"
    check_tool_call_history(first)
    assert result.stats.model_calls == len(sent) + len(asked)
    assert result.stats.input_tokens == 7 * len(asked)
    assert result.new_messages()[0]["role"] in ("system", "user")


async def test_no_trigger_no_compaction_and_a_failed_summary_keeps_the_transcript() -> None:
    def failing(turn: ModelTurn) -> ModelTurnResult:
        raise RuntimeError("summary model down")

    sent: list[list[dict[str, Any]]] = []
    agent = Agent(
        _reader(3, sent),
        tools=[read],
        compaction=Compaction(max_turns=1, model=FunctionModel(failing)),
    )
    result = await agent.run("go")
    assert result.output == "done"
    assert len(result.messages) == 1 + 3 * 2 + 1
    quiet = Agent(_reader(3, []), tools=[read], compaction=Compaction(max_context_tokens=10**9))
    assert len((await quiet.run("go")).messages) == 1 + 3 * 2 + 1


def test_compaction_is_checked_when_built() -> None:
    with pytest.raises(ValueError, match="max_context_tokens or max_turns"):
        Compaction()
    with pytest.raises(ValueError, match="keep_turns"):
        Compaction(max_turns=3, keep_turns=0)
    with pytest.raises(TypeError, match="max_turns"):
        Compaction(max_turns="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model must be an async function"):
        Compaction(max_turns=3, model=lambda turn: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="compaction must be a Compaction"):
        Agent(FunctionModel(lambda turn: ModelTurnResult(content="x")), compaction=3)  # type: ignore[arg-type]
