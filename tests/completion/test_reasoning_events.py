"""Reasoning streamed as its own events: withdrawn by a reset like text, never the answer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio import TurnStreamUsageError, WireFormatError
from juno_bind_trio.completion import (
    CoalescingSink,
    ListSink,
    ReasoningEvent,
    ResetEvent,
    TextEvent,
    TurnTextStream,
)

pytestmark = pytest.mark.anyio


class ReasoningSink:
    """A list sink that also shows reasoning."""

    def __init__(self, *, retractable: bool = True) -> None:
        self.retractable = retractable
        self.events: list[Any] = []
        self.emit = self.events.append
        self.emit_reasoning = self.events.append


def kinds(events: list[Any]) -> list[str]:
    return [e.kind for e in events]


def test_a_reset_withdraws_reasoning_and_the_retry_sends_it_first() -> None:
    sink = ReasoningSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    stream.reasoning("Let me think")
    stream.begin_attempt()  # the attempt failed having shown only reasoning
    assert not stream.produced_output
    stream.reasoning("Again")
    stream.observe("Answer")
    stream.finish("succeeded")
    assert kinds(sink.events) == ["reasoning", "reset", "reasoning", "text"]
    assert sink.events[2] == ReasoningEvent(turn_id="t", epoch=1, text="Again")
    assert stream.text == "Answer"  # reasoning is not the turn's text


def test_reasoning_on_a_permanent_sink_is_output() -> None:
    sink = ReasoningSink(retractable=False)
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    stream.reasoning("shown for good")
    assert stream.produced_output


def test_a_sink_without_emit_reasoning_is_sent_none_and_nothing_latches() -> None:
    sink = ListSink(retractable=False)
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    stream.reasoning("unseen")
    assert sink.events == []
    assert not stream.produced_output


def test_reasoning_before_an_attempt_is_a_usage_error() -> None:
    stream = TurnTextStream(sink=ReasoningSink(), turn_id="t")
    with pytest.raises(TurnStreamUsageError):
        stream.reasoning("x")
    stream.begin_attempt()
    with pytest.raises(TypeError, match="reasoning"):
        stream.reasoning(3)  # type: ignore[arg-type]
    stream.reasoning("")  # nothing
    stream.reasoning(None)
    assert stream.produced_output is False


@given(st.text(min_size=1, max_size=20), st.integers(0, 5))
def test_the_wire_form_round_trips(text: str, epoch: int) -> None:
    event = ReasoningEvent(turn_id="t", epoch=epoch, text=text)
    assert ReasoningEvent.from_wire(event.to_wire()) == event


@pytest.mark.parametrize(
    "wire",
    [
        {"kind": "text", "turnId": "t", "epoch": 0, "text": "x"},
        {"kind": "reasoning", "turnId": "", "epoch": 0, "text": "x"},
        {"kind": "reasoning", "turnId": "t", "epoch": -1, "text": "x"},
        {"kind": "reasoning", "turnId": "t", "epoch": 0, "text": 1},
        {"kind": "reasoning", "turnId": "t", "epoch": 0, "text": "x", "seq": 1},
        "not a mapping",
    ],
)
def test_a_malformed_wire_form_is_refused(wire: Any) -> None:
    with pytest.raises(WireFormatError):
        ReasoningEvent.from_wire(wire)


async def test_a_coalescing_sink_merges_reasoning_and_a_reset_drops_what_waits() -> None:
    sink: CoalescingSink[Any] = CoalescingSink(reasoning=True)
    assert sink.emit_reasoning is not None
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    stream.reasoning("a")
    stream.reasoning("b")
    stream.observe("x")  # the reader has taken nothing yet
    stream.begin_attempt()
    stream.reasoning("c")
    sink.close()
    got = [event async for event in sink.receiver]
    # The first attempt's reasoning and text were dropped by the reset before
    # the reader took them; what it reads is the second attempt alone.
    assert [e for e in got if not isinstance(e, ResetEvent)] == [
        ReasoningEvent(turn_id="t", epoch=1, text="c")
    ]


async def test_a_coalescing_sink_without_the_option_takes_no_reasoning() -> None:
    sink: CoalescingSink[Any] = CoalescingSink()
    assert sink.emit_reasoning is None
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    stream.reasoning("a")
    stream.observe("x")
    sink.close()
    got = [event async for event in sink.receiver]
    assert [type(e) for e in got] == [TextEvent]
