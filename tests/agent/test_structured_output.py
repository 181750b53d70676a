"""output_type: requested through response_format, validated, re-asked with a visible reset."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import pydantic
import pytest
from agent_scripts import Say, ScriptedModel, call
from typing_extensions import TypedDict

from juno_bind_trio import SchemaError, StructuredOutputError
from juno_bind_trio.agent import Agent, TurnEndedEvent, tool
from juno_bind_trio.completion import ResetEvent, TextEvent

pytestmark = pytest.mark.anyio


class Trip(pydantic.BaseModel):
    city: str
    nights: int
    note: str | None = None


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


async def test_a_bad_answer_is_re_asked_and_the_reader_sees_the_reset() -> None:
    model = ScriptedModel(
        [
            Say(
                text='{"city": "Rome", "nights": "two"}',
                chunks=['{"city": "Rome", ', '"nights": "two"}'],
            ),
            Say(text='{"city": "Rome", "nights": 2, "note": null}'),
        ]
    )
    agent = Agent(model, output_type=Trip)
    seen: list[tuple[str, str]] = []
    async with agent.open_run("Plan a trip", run_id="r") as run:
        async for event in run:
            if isinstance(event, (TextEvent, ResetEvent)):
                seen.append((event.to_wire()["kind"], run.text))
            if isinstance(event, TurnEndedEvent):
                seen.append(("turn_ended", run.text))
    assert run.result is not None
    assert run.result.output == Trip(city="Rome", nights=2)
    kinds = [kind for kind, _ in seen]
    # The bad output was shown, then withdrawn, then the good one replaced it.
    assert kinds[0] == "text"
    reset_at = kinds.index("reset")
    assert seen[reset_at] == ("reset", "")
    assert seen[reset_at - 1][1] == '{"city": "Rome", "nights": "two"}'
    assert seen[-1] == ("turn_ended", '{"city": "Rome", "nights": 2, "note": null}')
    # The re-ask told the model what was wrong; the transcript holds only the good answer.
    reask = model.seen[1]
    assert reask[-2] == {"role": "assistant", "content": '{"city": "Rome", "nights": "two"}'}
    assert reask[-1]["role"] == "user"
    assert "nights: Input should be a valid integer" in reask[-1]["content"]
    assistant = [m for m in run.result.messages if m["role"] == "assistant"]
    assert [m["content"] for m in assistant] == ['{"city": "Rome", "nights": 2, "note": null}']


async def test_the_reset_says_why() -> None:
    model = ScriptedModel([Say(text="not json"), Say(text='{"x": 1, "y": 2}')])
    resets: list[Any] = []
    async with Agent(model, output_type=Point).open_run("p") as run:
        async for event in run:
            if isinstance(event, ResetEvent):
                resets.append(event.reason)
    assert resets == ["structured_output_retry"]
    assert run.result is not None
    assert run.result.output == Point(1, 2)


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (int, '{"result": 7}', 7),
        (list[str], '{"result": ["a", "b"]}', ["a", "b"]),
        (Literal["yes", "no"], '{"result": "no"}', "no"),
        (Pair, '{"left": "l", "right": "r"}', {"left": "l", "right": "r"}),
    ],
)
async def test_non_object_outputs_are_wrapped_and_unwrapped(
    output_type: Any, answer: str, expected: Any
) -> None:
    model = ScriptedModel([Say(text=answer)])
    result = await Agent(model, output_type=output_type).run("q")
    assert result.output == expected


async def test_tools_run_first_and_the_final_answer_is_structured() -> None:
    @tool
    async def nights_for(city: str) -> int:
        return 3

    model = ScriptedModel(
        [
            Say(calls=[call("c1", "nights_for", city="Oslo")]),
            Say(text='{"city": "Oslo", "nights": 3}'),
        ]
    )
    result = await Agent(model, tools=[nights_for], output_type=Trip).run("q")
    assert result.output == Trip(city="Oslo", nights=3)


async def test_giving_up_after_the_re_asks_names_the_problem() -> None:
    model = ScriptedModel([Say(text='{"city": 1}') for _ in range(3)])
    with pytest.raises(StructuredOutputError, match="in 3 attempts") as caught:
        await Agent(model, output_type=Trip).run("q")
    assert "nights: required, but missing" in str(caught.value)
    assert caught.value.content == '{"city": 1}'
    assert len(model.seen) == 3


async def test_max_output_retries_bounds_the_re_asks() -> None:
    model = ScriptedModel([Say(text="nope")])
    with pytest.raises(StructuredOutputError, match="in 1 attempts"):
        await Agent(model, output_type=Trip, max_output_retries=0).run("q")


def test_the_response_format_is_strict_when_it_can_be() -> None:
    agent = Agent(ScriptedModel([]), output_type=Trip)
    fmt = agent._settings.output.response_format
    assert fmt is not None
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Trip"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["city", "nights", "note"]
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False


class Tags(pydantic.BaseModel):
    tags: dict[str, str]


def test_an_output_strict_mode_cannot_express_is_sent_non_strict_or_refused() -> None:
    fmt = Agent(ScriptedModel([]), output_type=Tags)._settings.output.response_format
    assert fmt is not None
    assert fmt["json_schema"]["strict"] is False
    with pytest.raises(SchemaError, match="cannot be expressed in OpenAI strict mode") as caught:
        Agent(ScriptedModel([]), output_type=Tags, strict=True)
    assert caught.value.pointer == "/properties/tags"


def test_an_output_type_pydantic_cannot_express_is_refused() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match=r"output_type .* cannot be expressed as JSON Schema"):
        Agent(ScriptedModel([]), output_type=Opaque)


async def test_a_run_that_does_not_complete_has_no_structured_output() -> None:
    @tool
    async def again() -> str:
        return "x"

    model = ScriptedModel([Say(calls=[call("c1", "again")])])
    result = await Agent(model, tools=[again], output_type=Trip, max_iterations=1).run("q")
    assert result.reason == "max_iterations"
    assert result.output is None
