"""AgentRun.partial_output: the output type read from the streamed text so far.

The property: whatever the answer and wherever its JSON is cut into deltas,
every value a reader sees after a text event is ``None`` or consistent with
the final output (fields already received equal the final's, the one being
received is a prefix of it, the ones still to come show their default), and
after the last event it is the run's output.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import hypothesis
import pydantic
import pytest
from agent_scripts import Say, ScriptedModel
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import StructuredOutputError
from juno_bind_trio.agent import Agent, AgentRun, RunEndedEvent, TurnEndedEvent
from juno_bind_trio.completion import ResetEvent, TextEvent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    FakeResponse,
    Pause,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio


class Line(pydantic.BaseModel):
    sku: str
    qty: int
    tags: list[str]


class Order(pydantic.BaseModel):
    customer: str
    rush: bool = False
    lines: list[Line]
    note: str | None = None
    priority: int = 0


class Trip(pydantic.BaseModel):
    city: str
    nights: int
    note: str | None = None


# --- the property ------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
_int = st.integers(min_value=-(10**6), max_value=10**6)
_orders = st.builds(
    Order,
    customer=_text,
    rush=st.booleans(),
    lines=st.lists(
        st.builds(Line, sku=_text, qty=_int, tags=st.lists(_text, max_size=3)), max_size=3
    ),
    note=st.none() | _text,
    priority=_int,
)


def _consistent(partial: Any, final: Any) -> bool:
    """*partial* is what a prefix of *final*'s JSON (fields in declaration order) can give."""
    if partial == final:
        return True
    if isinstance(final, pydantic.BaseModel):
        if type(partial) is not type(final):
            return False
        fields = type(final).model_fields
        names = list(fields)
        # The first field that differs is the one being received, or still to come;
        # every later one has not begun, so it shows its default (a required one cannot).
        first = next(i for i, n in enumerate(names) if getattr(partial, n) != getattr(final, n))
        frontier = names[first]
        here = getattr(partial, frontier)
        if not (
            _consistent(here, getattr(final, frontier))
            or (not fields[frontier].is_required() and here == fields[frontier].default)
        ):
            return False
        return all(
            not fields[n].is_required() and getattr(partial, n) == fields[n].default
            for n in names[first + 1 :]
        )
    if isinstance(final, list):
        if not isinstance(partial, list) or len(partial) > len(final):
            return False
        if not partial:
            return True  # the list has begun, no item yet
        last = len(partial) - 1
        return partial[:last] == final[:last] and _consistent(partial[last], final[last])
    if isinstance(final, str):
        return isinstance(partial, str) and final.startswith(partial)
    if isinstance(final, int) and not isinstance(final, bool):
        # Digits at the very end count as far as they go: 1 of 12.
        return type(partial) is int and str(final).startswith(str(partial))
    return False


@st.composite
def _answers(draw: st.DrawFn) -> tuple[Order, str, list[str]]:
    order = draw(_orders)
    text = order.model_dump_json(exclude_defaults=draw(st.booleans()))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=12))))
    bounds = [0, *cuts, len(text)]
    return order, text, [text[a:b] for a, b in itertools.pairwise(bounds)]


async def _stream_answer(order: Order, text: str, chunks: list[str]) -> None:
    model = ScriptedModel([Say(text=text, chunks=chunks)])
    seen: list[tuple[str, Order | None]] = []
    async with Agent(model, output_type=Order).open_run("Take the order") as run:
        before = run.partial_output
        async for event in run:
            if isinstance(event, TextEvent):
                seen.append((run.text, run.partial_output))
    assert before is None  # nothing read yet
    assert run.result is not None
    assert run.result.output == order
    assert run.partial_output == order
    assert seen, "the answer streamed"
    for shown, partial in seen:
        assert text.startswith(shown)
        if partial is not None:
            assert _consistent(partial, order), (shown, partial)
        if '"lines"' not in shown or '"customer"' not in shown:
            # A required field has not begun: nothing can validate yet.
            assert partial is None, (shown, partial)
    # The whole JSON, before the turn even ended, reads as the final output.
    assert seen[-1] == (text, order)


@settings(max_examples=60, deadline=None)
@given(answer=_answers())
def test_partial_output_is_consistent_with_the_final_wherever_the_json_is_cut(
    backend: str, answer: tuple[Order, str, list[str]]
) -> None:
    run_on(backend, _stream_answer, *answer)


def test_the_consistency_check_refuses_what_a_prefix_cannot_give() -> None:
    # The checker itself: a wrong partial value must fail it, or the property proves nothing.
    final = Order(customer="ACME", lines=[Line(sku="a1", qty=12, tags=["x", "y"])], priority=3)
    assert _consistent(Order(customer="ACME", lines=[]), final)
    assert (
        _consistent(Order(customer="ACME", lines=[Line(sku="a", qty=0, tags=[])]), final) is False
    )
    assert _consistent(Order(customer="ACME", lines=[Line(sku="a1", qty=12, tags=["x"])]), final)
    assert not _consistent(
        Order(customer="AC", lines=[]), final
    )  # lines began before customer ended
    assert _consistent(Order(customer="ACME", lines=[Line(sku="a1", qty=12, tags=[])]), final)
    assert not _consistent(Order(customer="ACX", lines=[]), final)  # not a prefix
    assert not _consistent(Order(customer="AC", lines=[], priority=3), final)  # ahead of the cut
    assert not _consistent(Order(customer="ACME", lines=[Line(sku="a1", qty=2, tags=[])]), final)
    assert not _consistent(
        Order(customer="ACME", lines=[Line(sku="a", qty=12, tags=["x", "y"])], priority=3), final
    )
    assert not _consistent(
        Order(customer="ACME", lines=[Line(sku="a1", qty=12, tags=["y"])]), final
    )


# --- resets ------------------------------------------------------------------------------


class Paced(ScriptedModel):
    """A ScriptedModel whose chunks are further apart than the reader's hand-off interval,
    so the reader sees every chunk on its own."""

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.seen.append([dict(m) for m in turn.messages])
        say = self.turns.pop(0)
        stream = turn.text_stream
        assert stream is not None
        stream.begin_attempt()
        for chunk in say.chunks or ([say.text] if say.text else []):
            stream.observe(chunk)
            await anyio.sleep(0.5)
        return ModelTurnResult(content=say.text, tool_calls=list(say.calls))


async def _shown(run: AgentRun[Any]) -> list[tuple[str, Any]]:
    """(event kind, partial_output after it) for every text, reset and turn-ended event."""
    shown: list[tuple[str, Any]] = []
    async for event in run:
        if isinstance(event, (TextEvent, ResetEvent, TurnEndedEvent)):
            shown.append((event.to_wire()["kind"], run.partial_output))
    return shown


async def test_a_re_ask_starts_the_partial_output_again() -> None:
    model = Paced(
        [
            # Validates partially, then turns out wrong (note must be a string).
            Say(
                text='{"city": "Rome", "nights": 2, "note": 5}',
                chunks=['{"city": "Ro', 'me", "nights": 2', ', "note": 5}'],
            ),
            Say(
                text='{"city": "Oslo", "nights": 3, "note": null}',
                chunks=['{"city": "Os', 'lo", "nights": 3, "note": null}'],
            ),
        ]
    )
    async with Agent(model, output_type=Trip).open_run("Plan a trip") as run:
        shown = await _shown(run)
    assert run.result is not None
    rome, oslo = Trip(city="Rome", nights=2), Trip(city="Oslo", nights=3)
    assert shown == [
        ("text", None),  # {"city": "Ro: nights has not begun
        ("text", rome),
        ("text", rome),  # "note": 5 does not validate: the last value stays
        ("reset", None),  # the re-ask clears it
        ("text", None),  # {"city": "Os: never the wrong answer's fields
        ("text", oslo),
        ("turn_ended", oslo),
    ]
    assert run.partial_output == run.result.output == Trip(city="Oslo", nights=3)


class Forecast(pydantic.BaseModel):
    city: str
    sky: str


async def test_a_fallback_mid_stream_starts_the_partial_output_again() -> None:
    # The real SDK against the loopback server: the first stage dies mid-answer.
    dies = StreamResponse(
        [
            TextDelta('{"city": "Oslo", '),
            Pause(0.5),
            TextDelta('"sky": "cl'),
            Pause(0.5),
            Disconnect(),
        ]
    )
    script: dict[str, list[FakeResponse]] = {
        "big": [dies],
        "small": [
            StreamResponse.of_text('{"city": "Bergen", ', '"sky": "ra', 'in"}', chunk_delay=0.5)
        ],
    }
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan(
            [RouteStage("big", [Candidate("fake")]), RouteStage("small", [Candidate("fake")])],
            max_retries=0,
        )
        agent = Agent(OpenAIChatModel(plan=plan, clients={"fake": client}), output_type=Forecast)
        async with agent.open_run("Forecast?") as run:
            shown = await _shown(run)
    assert run.result is not None
    assert [kind for kind, _ in shown if kind == "reset"] == ["reset"]
    bergen = Forecast(city="Bergen", sky="rain")
    assert shown == [
        ("text", None),  # {"city": "Oslo", : sky has not begun
        ("text", Forecast(city="Oslo", sky="cl")),  # an unfinished string counts
        ("reset", None),  # the stream died: the fallback's answer replaces it
        ("text", None),
        ("text", Forecast(city="Bergen", sky="ra")),
        ("text", bergen),
        ("turn_ended", bergen),
    ]
    assert run.partial_output == run.result.output == bergen


# --- within one attempt --------------------------------------------------------------------


class Item(pydantic.BaseModel):
    name: str
    qty: int


class Basket(pydantic.BaseModel):
    owner: str
    items: list[Item]


async def test_a_longer_text_that_does_not_validate_keeps_the_last_value() -> None:
    # pydantic refuses a list item whose required fields have not all begun;
    # the reader keeps what it showed instead of flickering back to None.
    chunks = [
        '{"owner": "Ana", "items": [{"name": "pear", "qty": 2}',
        ', {"name": "fig"',
        ', "qty": 5}]}',
    ]
    model = Paced([Say(text="".join(chunks), chunks=chunks)])
    async with Agent(model, output_type=Basket).open_run("basket") as run:
        shown = await _shown(run)
    one = Basket(owner="Ana", items=[Item(name="pear", qty=2)])
    both = Basket(owner="Ana", items=[Item(name="pear", qty=2), Item(name="fig", qty=5)])
    assert shown == [("text", one), ("text", one), ("text", both), ("turn_ended", both)]


async def test_a_new_turn_starts_from_none() -> None:
    from agent_scripts import call

    from juno_bind_trio.agent import tool

    @tool
    async def look() -> str:
        """Look."""
        return "seen"

    model = Paced(
        [
            Say(text='{"city": "Rome", "nights": 1}', calls=[call("c1", "look")]),
            Say(text='{"city": "Oslo", "nights": 2}', chunks=['{"city": "Oslo"', ', "nights": 2}']),
        ]
    )
    async with Agent(model, tools=[look], output_type=Trip).open_run("q") as run:
        values: list[Any] = []
        turns: list[str | None] = []
        async for event in run:
            if isinstance(event, (TextEvent, TurnEndedEvent)):
                values.append(run.partial_output)
                turns.append(run.turn_id)
    first_turn = turns[0]
    second = [v for v, t in zip(values, turns, strict=True) if t != first_turn]
    assert values[0] == Trip(city="Rome", nights=1)  # a tool-calling turn's JSON text
    assert second[0] is None
    assert second[-1] == Trip(city="Oslo", nights=2)


# --- cancellation ----------------------------------------------------------------------------


async def test_a_cancel_mid_stream_leaves_what_was_shown() -> None:
    model = Paced(
        [
            Say(
                text='{"city": "Rome", "nights": 2, "note": "by train"}',
                chunks=['{"city": "Rome", "nights": 2', ', "note": "by', ' train"}'],
                delay=1.0,
            )
        ]
    )
    async with Agent(model, output_type=Trip).open_run("trip") as run:
        shown: Trip | None = None
        async for event in run:
            if isinstance(event, TextEvent) and run.partial_output is not None:
                shown = run.partial_output
                run.cancel()
            elif isinstance(event, RunEndedEvent):
                assert event.reason == "cancelled"
    assert shown == Trip(city="Rome", nights=2)
    assert run.result is None
    assert run.text == '{"city": "Rome", "nights": 2'
    assert run.partial_output == shown


async def test_leaving_the_block_mid_stream_leaves_what_was_shown() -> None:
    model = Paced(
        [Say(text='{"city": "Rome", "nights": 2}', chunks=['{"city": "Rome", "nights', '": 2}'])]
    )
    with anyio.CancelScope() as outer:
        async with Agent(model, output_type=Trip).open_run("trip") as run:
            async for event in run:
                if isinstance(event, TextEvent):
                    outer.cancel()  # the host's own scope, around the whole run
                    break
    assert outer.cancelled_caught
    assert run.result is None
    assert run.text == '{"city": "Rome", "nights'
    assert run.partial_output is None  # nights had not begun; nothing was shown


# --- the other output types, and what a prefix may do to a validator -------------------------


async def test_a_str_output_is_the_text() -> None:
    model = Paced([Say(text="Hello there", chunks=["Hello", " there"])])
    async with Agent(model).open_run("hi") as run:
        assert run.partial_output is None
        seen = [(run.text, run.partial_output) async for _ in run]
    assert all(text == partial for text, partial in seen)
    assert run.result is not None
    assert run.partial_output == run.result.output == "Hello there"


async def test_a_wrapped_output_type_is_unwrapped() -> None:
    chunks = ['{"result": ["to', 'mato", "ba', 'sil"]}']
    model = Paced([Say(text="".join(chunks), chunks=chunks)])
    async with Agent(model, output_type=list[str]).open_run("list") as run:
        shown = await _shown(run)
    assert [v for _, v in shown] == [
        ["to"],
        ["tomato", "ba"],
        ["tomato", "basil"],
        ["tomato", "basil"],
    ]
    assert run.result is not None
    assert run.result.output == ["tomato", "basil"]


class Picky(pydantic.BaseModel):
    a: str
    b: int

    @pydantic.model_validator(mode="before")
    @classmethod
    def needs_both(cls, data: Any) -> Any:
        # A KeyError is not a validation error: pydantic lets it through.
        _ = data["a"], data["b"]
        return data


async def test_a_validator_that_raises_on_a_prefix_does_not_reach_the_reader() -> None:
    chunks = ['{"a": "x"', ', "b": 4}']
    model = Paced([Say(text="".join(chunks), chunks=chunks)])
    async with Agent(model, output_type=Picky).open_run("p") as run:
        shown = await _shown(run)
    assert shown == [("text", None), ("text", Picky(a="x", b=4)), ("turn_ended", Picky(a="x", b=4))]


async def test_the_text_is_parsed_again_only_when_it_changed() -> None:
    calls: list[str] = []

    class Counted(pydantic.BaseModel):
        city: str
        nights: int

        @pydantic.field_validator("city")
        @classmethod
        def count(cls, value: str) -> str:
            calls.append(value)
            return value

    chunks = ['{"city": "Ro', 'me", "nights": 1}']
    model = Paced([Say(text="".join(chunks), chunks=chunks)])
    async with Agent(model, output_type=Counted).open_run("c") as run:
        first: list[int] = []
        again: list[int] = []
        async for _ in run:
            before = len(calls)
            _ = run.partial_output
            middle = len(calls)
            for _ in range(4):
                _ = run.partial_output
            first.append(middle - before)
            again.append(len(calls) - middle)
    # Two text events and the turn's end (its whole text, read as the answer) parse;
    # the run's end changes no text and parses nothing; reading again never parses.
    assert [n > 0 for n in first] == [True, True, True, False]
    assert again == [0, 0, 0, 0]


async def test_a_model_function_without_a_stream_still_ends_with_the_output() -> None:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content=json.dumps({"city": "Lima", "nights": 4}), tool_calls=[])

    async with Agent(model, output_type=Trip).open_run("t") as run:
        async for _ in run:
            pass
    assert run.partial_output == Trip(city="Lima", nights=4)


# --- any text at all -----------------------------------------------------------------------

_tokens = st.sampled_from(
    [
        *("{", "}", "[", "]", ",", ":", " ", "\\", "1", "-", "2.", "tru", "null", '"x'),
        *('"owner"', '"items"', '"name"', '"qty"', '{"name": "fig", "qty": 5}', "]}"),
    ]
)
# A good start, as often as not, so that some prefixes validate before the text goes wrong.
_starts = st.sampled_from(["", '{"owner": "An', '{"owner": "Ana", "items": ['])
_texts = st.tuples(
    _starts, st.lists(st.lists(_tokens, min_size=1, max_size=6).map("".join), max_size=8)
).map(lambda drawn: [drawn[0], *drawn[1]] if drawn[0] else drawn[1])


async def _stream_anything(chunks: list[str]) -> None:
    text = "".join(chunks) or "x"
    model = Paced([Say(text=text, chunks=chunks)])
    agent = Agent(model, output_type=Basket, max_output_retries=0)
    values: list[object] = []
    try:
        async with agent.open_run("anything") as run:
            async for _ in run:
                values.append(run.partial_output)  # never raises, whatever the text
    except StructuredOutputError:
        assert run.result is None
    else:
        assert run.result is not None
        assert run.partial_output == run.result.output
    assert all(value is None or isinstance(value, Basket) for value in values)
    hypothesis.event("some value shown" if any(values) else "nothing validated")


@settings(max_examples=60, deadline=None)
@given(chunks=_texts)
def test_partial_output_never_raises_whatever_the_text(backend: str, chunks: list[str]) -> None:
    run_on(backend, _stream_anything, chunks)
