"""retry_structured_output end to end: a scripted model, a small routing loop, a live surface.

The routing loop here is the smallest stand-in for the route executor that
keeps the one property that matters to the composition: its attempt function
opens every attempt on the turn's stream with a plain ``begin_attempt()``,
and a failed attempt moves on to the next one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import attrs
import pytest

from juno_bind_trio import StructuredOutputError
from juno_bind_trio.completion import (
    ListSink,
    TurnOutcome,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
    retry_structured_output,
)

JSON = {"type": "json_object"}


@attrs.frozen
class Outputs:
    content: str | None
    tool_calls: tuple[Any, ...] = ()


@attrs.frozen
class Attempt:
    """One scripted attempt: deltas one second apart, then success or a failure."""

    deltas: Sequence[str]
    fails: bool = False
    tool_calls: tuple[Any, ...] = ()


class ProviderError(Exception):
    pass


@attrs.define
class ScriptedModel:
    """Plays one list of attempts per routed turn; records what each turn was asked."""

    turns: list[list[Attempt]]
    stream: TurnTextStream | None
    asked_with: list[Outputs | None] = attrs.field(factory=list)
    attempt_epochs: list[int] = attrs.field(factory=list)

    async def routed_turn(self, rejected: Outputs | None) -> Outputs:
        self.asked_with.append(rejected)
        attempts = self.turns.pop(0)
        for attempt in attempts:
            try:
                return await self._attempt(attempt)
            except ProviderError:
                continue
        raise ProviderError("every attempt failed")

    async def _attempt(self, attempt: Attempt) -> Outputs:
        if self.stream is not None:
            self.stream.begin_attempt()  # what every attempt function does, first thing
            self.attempt_epochs.append(self.stream.epoch)
        text: list[str] = []
        for piece in attempt.deltas:
            await anyio.sleep(1)
            text.append(piece)
            if self.stream is not None:
                self.stream.observe(piece)
        if attempt.fails:
            await anyio.sleep(1)
            raise ProviderError("connection reset mid-stream")
        return Outputs("".join(text) or None, attempt.tool_calls)


def wire(events: list[TurnStreamEvent]) -> list[tuple[Any, ...]]:
    return [(e.kind, e.epoch, e.text if e.kind == "text" else e.reason) for e in events]


def rendered(events: list[TurnStreamEvent]) -> str:
    view = TurnTextView("t1")
    for event in events:
        view.apply(event)
    return view.text


pytestmark = pytest.mark.anyio


async def test_malformed_json_is_re_asked_and_the_reset_says_why() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    model = ScriptedModel([[Attempt(['{"a": ', "oops"])], [Attempt(['{"a": ', "1}"])]], stream)
    start = anyio.current_time()
    outcome: TurnOutcome = "failed"
    try:
        result = await retry_structured_output(
            model.routed_turn, response_format=JSON, stream=stream
        )
        outcome = "succeeded"
    finally:
        stream.finish(outcome)
    assert anyio.current_time() - start == 4
    assert result == Outputs('{"a": 1}')
    # The re-ask was told what it replaced.
    assert model.asked_with == [None, Outputs('{"a": oops')]
    # Epoch 1 is the retry loop's own begin_attempt; the attempt function opened 2.
    assert model.attempt_epochs == [0, 2]
    assert wire(sink.events) == [
        ("text", 0, '{"a": '),
        ("text", 0, "oops"),
        ("reset", 2, "structured_output_retry"),
        ("text", 2, '{"a": '),
        ("text", 2, "1}"),
    ]
    assert rendered(sink.events) == '{"a": 1}'
    assert not stream.produced_output


async def test_a_routing_failure_inside_a_re_ask_gets_its_own_reason() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    model = ScriptedModel(
        [
            [Attempt(["not json"])],
            [Attempt(["{", '"b"'], fails=True), Attempt(["{}"])],
        ],
        stream,
    )
    start = anyio.current_time()
    result = await retry_structured_output(model.routed_turn, response_format=JSON, stream=stream)
    stream.finish("succeeded")
    assert anyio.current_time() - start == 1 + 3 + 1
    assert result == Outputs("{}")
    assert model.attempt_epochs == [0, 2, 3]
    assert wire(sink.events) == [
        ("text", 0, "not json"),
        ("reset", 2, "structured_output_retry"),
        ("text", 2, "{"),
        ("text", 2, '"b"'),
        ("reset", 3, "attempt_failed"),
        ("text", 3, "{}"),
    ]
    assert rendered(sink.events) == "{}"


async def test_the_retry_reason_survives_an_attempt_that_died_before_its_first_byte() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    model = ScriptedModel(
        [[Attempt(["[]"])], [Attempt([], fails=True), Attempt(['{"ok": true}'])]], stream
    )
    result = await retry_structured_output(model.routed_turn, response_format=JSON, stream=stream)
    stream.finish("succeeded")
    assert result == Outputs('{"ok": true}')
    # Two defaulted begin_attempt() calls came after the explicit one; it stuck.
    assert wire(sink.events) == [
        ("text", 0, "[]"),
        ("reset", 3, "structured_output_retry"),
        ("text", 3, '{"ok": true}'),
    ]


async def test_exhausted_budget_raises_with_the_last_content() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    model = ScriptedModel([[Attempt([f"bad {i}"])] for i in range(3)], stream)
    start = anyio.current_time()
    with pytest.raises(StructuredOutputError) as info:
        await retry_structured_output(model.routed_turn, response_format=JSON, stream=stream)
    stream.finish("failed")
    assert anyio.current_time() - start == 3
    assert info.value.kind == "structured_output"
    assert info.value.attempts == 3
    assert info.value.content == "bad 2"
    assert str(info.value) == (
        "completion defect (structured_output): no output parsed as the requested JSON "
        "in 3 attempts; the last was 'bad 2'"
    )
    assert len(model.asked_with) == 3
    assert [e.reason for e in sink.events if e.kind == "reset"] == [
        "structured_output_retry",
        "structured_output_retry",
    ]
    # finish("failed") leaves the best text the reader got on screen.
    assert rendered(sink.events) == "bad 2"


async def test_max_retries_zero_asks_once() -> None:
    model = ScriptedModel([[Attempt(["nope"])]], None)
    with pytest.raises(StructuredOutputError) as info:
        await retry_structured_output(
            model.routed_turn, response_format=JSON, stream=None, max_retries=0
        )
    assert info.value.attempts == 1
    assert model.asked_with == [None]


async def test_long_rejected_content_is_shortened_in_the_message() -> None:
    model = ScriptedModel([[Attempt(["x" * 500])]], None)
    with pytest.raises(StructuredOutputError, match=r"\.\.\. \(500 characters\)$") as info:
        await retry_structured_output(model.routed_turn, response_format=JSON, max_retries=0)
    assert info.value.content == "x" * 500


async def test_a_format_that_does_not_ask_for_json_runs_one_turn_as_is() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    model = ScriptedModel([[Attempt(["plain prose"])]], stream)
    result = await retry_structured_output(
        model.routed_turn, response_format={"type": "text"}, stream=stream
    )
    assert result == Outputs("plain prose")
    assert model.attempt_epochs == [0]


async def test_a_tool_calling_turn_is_not_re_asked() -> None:
    model = ScriptedModel([[Attempt([], tool_calls=({"id": "c"},))]], None)
    result = await retry_structured_output(model.routed_turn, response_format=JSON)
    assert result.tool_calls == ({"id": "c"},)
    assert model.asked_with == [None]


async def test_a_failed_turn_propagates_and_ends_the_loop() -> None:
    model = ScriptedModel([[Attempt(["{"], fails=True)], [Attempt(["{}"])]], None)
    with pytest.raises(ProviderError, match="every attempt failed"):
        await retry_structured_output(model.routed_turn, response_format=JSON)
    assert len(model.turns) == 1


async def test_cancel_during_a_re_ask_passes_through_and_asks_nothing_more() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    model = ScriptedModel(
        [[Attempt(["no"])], [Attempt(["{", '"a"', ": 1}"])], [Attempt(["{}"])]], stream
    )
    start = anyio.current_time()
    with anyio.move_on_after(2.5) as scope:
        await retry_structured_output(model.routed_turn, response_format=JSON, stream=stream)
    assert scope.cancelled_caught
    assert anyio.current_time() - start == 2.5
    assert len(model.asked_with) == 2
    assert len(model.turns) == 1
    # The re-ask's first byte (at 2 s) had already replaced the rejected text.
    assert wire(sink.events) == [
        ("text", 0, "no"),
        ("reset", 2, "structured_output_retry"),
        ("text", 2, "{"),
    ]
    # finish() is the turn owner's, whatever ended the loop.
    assert not stream.finished


# -- validation ----------------------------------------------------------------------


async def never(_: Outputs | None) -> Outputs:
    raise AssertionError("produce must not be called")  # pragma: no cover


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_retries": -1}, ValueError, r"max_retries must be a non-negative integer, got -1"),
        ({"max_retries": 1.0}, TypeError, r"max_retries must be a non-negative integer, got 1\.0"),
        ({"max_retries": True}, TypeError, r"max_retries must be a non-negative integer, got True"),
        ({"max_retries": "2"}, TypeError, r"max_retries must be a non-negative integer, got '2'"),
        ({"stream": ListSink()}, TypeError, r"stream must be a TurnTextStream or None"),
        ({"response_format": "json"}, TypeError, r"response_format must be a mapping"),
    ],
)
async def test_bad_arguments_fail_before_any_model_call(
    kwargs: dict[str, Any], error: type, message: str
) -> None:
    arguments: dict[str, Any] = {"response_format": JSON, **kwargs}
    with pytest.raises(error, match=r"retry_structured_output: |expects_json_output: ") as info:
        await retry_structured_output(never, **arguments)
    assert info.match(message)


async def test_produce_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"retry_structured_output: produce must be callable"):
        await retry_structured_output(None, response_format=JSON)  # type: ignore[arg-type]
