"""An output type's own validators are part of the check: what they reject is re-asked.

This is how a pydantic-ai user's ``output_validator`` raising ``ModelRetry``
is written here: a pydantic ``field_validator`` / ``model_validator`` raising
``ValueError`` on the output type, whose message the model reads in the re-ask.
"""

from __future__ import annotations

import pydantic
import pytest

from juno_bind_trio import StructuredOutputError
from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


class Booking(pydantic.BaseModel):
    city: str
    nights: int

    @pydantic.field_validator("city")
    @classmethod
    def known_city(cls, value: str) -> str:
        if value not in {"Lisbon", "Porto"}:
            raise ValueError(f"we only book Lisbon or Porto, not {value}")
        return value

    @pydantic.model_validator(mode="after")
    def short_stay(self) -> Booking:
        if self.nights > 14:
            raise ValueError("at most 14 nights")
        return self


async def test_a_validator_rejection_is_reasked_with_its_message() -> None:
    answers = iter(
        [
            '{"city": "Madrid", "nights": 2}',
            '{"city": "Porto", "nights": 30}',
            '{"city": "Porto", "nights": 3}',
        ]
    )
    seen: list[list[dict[str, object]]] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(list(turn.messages))
        return ModelTurnResult(content=next(answers))

    result = await Agent(model, output_type=Booking).run("Book me somewhere")
    assert result.output == Booking(city="Porto", nights=3)
    first_reask = str(seen[1][-1]["content"])
    second_reask = str(seen[2][-1]["content"])
    assert "we only book Lisbon or Porto, not Madrid" in first_reask
    assert "at most 14 nights" in second_reask
    # Only the accepted answer is in the transcript.
    assistant = [m for m in result.messages if m["role"] == "assistant"]
    assert [m["content"] for m in assistant] == ['{"city": "Porto", "nights": 3}']


async def test_a_validator_that_never_passes_ends_in_structured_output_error() -> None:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content='{"city": "Paris", "nights": 1}')

    agent = Agent(model, output_type=Booking, max_output_retries=1)
    with pytest.raises(StructuredOutputError, match="not Paris") as caught:
        await agent.run("Book")
    assert caught.value.attempts == 2
