"""Structured-output re-asks are requests: counted, limited, and never made after a stop."""

from __future__ import annotations

import anyio
import pydantic
import pytest

from juno_bind_trio import UsageLimitExceeded
from juno_bind_trio.agent import Agent, UsageLimits
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


class Out(pydantic.BaseModel):
    n: int


def answers(*contents: str, tokens: tuple[int, int] = (0, 0)) -> tuple[list[int], object]:
    asked: list[int] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        asked.append(len(turn.messages))
        await anyio.sleep(1)
        return ModelTurnResult(
            content=contents[len(asked) - 1], input_tokens=tokens[0], output_tokens=tokens[1]
        )

    return asked, model


async def test_a_soft_stop_during_a_turn_makes_no_reask() -> None:
    stop = anyio.CancelScope()
    asked: list[int] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        asked.append(1)
        if len(asked) == 1:
            await anyio.sleep(1)
            stop.cancel()
            return ModelTurnResult(content='{"n": "bad"}')
        return ModelTurnResult(content='{"n": 1}')

    result = await Agent(model, output_type=Out).run("go", stop=stop)
    assert (result.reason, len(asked)) == ("stopped", 1)
    output: object = result.output  # no answer: the run did not complete
    assert output is None
    assert result.stats.model_calls == 1
    # The transcript says what happened and what was owed: the answer that did
    # not match, then the re-ask that was not sent.
    assistant, reask = result.messages[-2:]
    assert assistant == {"role": "assistant", "content": '{"n": "bad"}'}
    assert reask["role"] == "user"
    assert reask["content"].startswith("Your answer does not match the required output: n:")


async def test_a_stopped_reask_is_asked_when_the_transcript_goes_on() -> None:
    stop = anyio.CancelScope()
    seen: list[list[dict[str, object]]] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(list(turn.messages))
        if len(seen) == 1:
            stop.cancel()
            return ModelTurnResult(content='{"n": "bad"}')
        return ModelTurnResult(content='{"n": 7}')

    agent = Agent(model, output_type=Out)
    stopped = await agent.run("go", stop=stop)
    result = await agent.run("go on", message_history=stopped.messages)
    assert result.output == Out(n=7)
    assert [m["role"] for m in seen[1]] == ["user", "assistant", "user", "user"]


async def test_model_calls_counts_every_request_reasks_included() -> None:
    asked, model = answers('{"n": "bad"}', "not json", '{"n": 3}', tokens=(10, 2))
    result = await Agent(model, output_type=Out).run("go")  # type: ignore[arg-type]
    assert result.output == Out(n=3)
    assert len(asked) == 3
    assert result.stats.model_calls == 3
    assert result.iterations == 1
    # Every answer's tokens, the two the model was asked to replace included.
    assert (result.stats.input_tokens, result.stats.output_tokens) == (30, 6)


async def test_the_request_limit_counts_reasks_and_makes_none_past_it() -> None:
    asked, model = answers('{"n": "bad"}', '{"n": "still bad"}', '{"n": 3}')
    agent = Agent(model, output_type=Out, usage_limits=UsageLimits(request_limit=2))  # type: ignore[arg-type]
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    assert len(asked) == 2
    error = caught.value
    assert (error.limit, error.value, error.used) == ("request_limit", 2, 2)
    assert error.result is not None
    assert error.result.stats.model_calls == 2
    assert error.result.messages[-1]["role"] == "user"  # the re-ask it could not send


async def test_a_token_limit_spent_by_a_rejected_answer_stops_the_reask() -> None:
    asked, model = answers('{"n": "bad"}', '{"n": 3}', tokens=(60, 50))
    agent = Agent(model, output_type=Out, usage_limits=UsageLimits(total_tokens_limit=100))  # type: ignore[arg-type]
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    assert len(asked) == 1
    assert (caught.value.limit, caught.value.used) == ("total_tokens_limit", 110)
    assert caught.value.usage.input_tokens == 60
