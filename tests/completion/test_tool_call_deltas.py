"""Streamed tool-call arguments: the stream's seam, the accumulator's hook, the sink's merge."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juno_bind_trio import TurnStreamUsageError
from juno_bind_trio.completion import (
    CoalescingSink,
    ListSink,
    ResetEvent,
    TextEvent,
    ToolCallAccumulator,
    ToolCallDeltaEvent,
    TurnTextStream,
)


class DeltaSink:
    """A retractable sink that also takes tool-call fragments, in one list."""

    def __init__(self, *, retractable: bool = True) -> None:
        self.retractable = retractable
        self.events: list[Any] = []

    def emit(self, event: Any, /) -> None:
        self.events.append(event)

    def emit_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
        self.events.append(event)


def kinds(events: list[Any]) -> list[str]:
    return [event.kind for event in events]


def test_fragments_reach_a_sink_that_asks_for_them() -> None:
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.tool_call_delta(0, "call_1", "lookup", '{"q": ')
    stream.tool_call_delta(0, None, None, '"x"}')
    stream.tool_call_delta(0, "", "", "")  # carries nothing: not sent
    assert sink.events == [
        ToolCallDeltaEvent("t1", 0, "call_1", "lookup", '{"q": '),
        ToolCallDeltaEvent("t1", 0, None, None, '"x"}'),
    ]
    assert sink.events[0].to_wire() == {
        "kind": "tool_call_delta",
        "turnId": "t1",
        "index": 0,
        "toolCallId": "call_1",
        "toolName": "lookup",
        "delta": '{"q": ',
    }
    assert not stream.produced_output


def test_a_sink_without_the_method_or_a_permanent_one_is_sent_none() -> None:
    plain = ListSink()
    permanent = DeltaSink(retractable=False)
    for sink in (plain, permanent):
        stream = TurnTextStream(sink=sink, turn_id="t1")
        stream.begin_attempt()
        stream.tool_call_delta(0, "call_1", "lookup", "{}")
        stream.begin_attempt()
        stream.observe("hi")
        stream.finish("succeeded")
        # No reset either: the fragments never reached the surface.
        assert kinds(sink.events) == ["text"]


def test_a_retry_withdraws_an_attempt_that_streamed_only_fragments() -> None:
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.tool_call_delta(0, "call_a", "lookup", '{"q": "a')
    stream.begin_attempt()  # A died mid-call; B answers with text
    assert kinds(sink.events) == ["tool_call_delta"]  # the reset is lazy
    stream.observe("Plain answer.")
    assert kinds(sink.events) == ["tool_call_delta", "reset", "text"]
    stream.finish("succeeded")
    assert not stream.produced_output


def test_the_retrys_first_fragment_sends_the_armed_reset_first() -> None:
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.observe("Let me look")
    stream.begin_attempt()
    stream.tool_call_delta(0, "call_b", "lookup", "{}")
    assert kinds(sink.events) == ["text", "reset", "tool_call_delta"]
    reset = sink.events[1]
    assert isinstance(reset, ResetEvent)
    assert reset.epoch == 1


def test_a_stranded_surface_is_sent_no_fragments() -> None:
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1", max_resets=0)
    stream.begin_attempt()
    stream.observe("A")
    stream.begin_attempt()  # no wipe left: the surface is stale
    stream.tool_call_delta(0, "call_b", "lookup", "{}")
    assert kinds(sink.events) == ["text"]


def test_after_finish_it_is_a_no_op_and_before_an_attempt_a_usage_error() -> None:
    sink = DeltaSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    with pytest.raises(TurnStreamUsageError, match="before begin_attempt"):
        stream.tool_call_delta(0, "c", "n", "{}")
    stream.begin_attempt()
    stream.finish("succeeded")
    stream.tool_call_delta(0, "c", "n", "{}")
    assert sink.events == []


@pytest.mark.parametrize(
    ("args", "error", "names"),
    [
        (("0", "c", "n", "{}"), TypeError, "index"),
        ((True, "c", "n", "{}"), TypeError, "index"),
        ((-1, "c", "n", "{}"), ValueError, "index"),
        ((0, 7, "n", "{}"), TypeError, "tool_call_id"),
        ((0, "c", b"n", "{}"), TypeError, "name"),
        ((0, "c", "n", None), TypeError, "delta"),
    ],
)
def test_bad_values_are_named(args: tuple[Any, ...], error: type[Exception], names: str) -> None:
    stream = TurnTextStream(sink=DeltaSink(), turn_id="t1")
    stream.begin_attempt()
    with pytest.raises(error, match=names):
        stream.tool_call_delta(*args)


def test_a_sink_that_raises_is_counted_not_raised() -> None:
    class Broken(DeltaSink):
        def emit_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
            raise OSError("socket closed")

    stream = TurnTextStream(sink=Broken(), turn_id="t1")
    stream.begin_attempt()
    stream.tool_call_delta(0, "c", "n", "{}")
    assert stream.sink_errors == 1


def test_the_accumulator_reports_each_delta_with_its_resolved_index() -> None:
    seen: list[tuple[int, str | None, str | None, str]] = []
    acc = ToolCallAccumulator(on_delta=lambda *a: seen.append(a))
    acc.add({"index": 1, "id": "c2", "function": {"name": "b", "arguments": "{"}})
    acc.add({"id": "", "function": {"arguments": "}"}})  # no index: continues call 1
    acc.add({"index": 0, "id": "c1", "type": "function", "function": {"name": "a"}})
    assert seen == [(1, "c2", "b", "{"), (1, None, None, "}"), (0, "c1", "a", "")]
    with pytest.raises(TypeError, match="on_delta"):
        ToolCallAccumulator(on_delta="print")  # type: ignore[arg-type]


def test_the_coalescing_sink_merges_fragments_of_one_call_and_a_reset_drops_them() -> None:
    sink: CoalescingSink[Any] = CoalescingSink(interval=0, tool_call_deltas=True)
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.tool_call_delta(0, "c1", "lookup", '{"q"')
    stream.tool_call_delta(0, None, None, ': "x"}')
    stream.tool_call_delta(1, "c2", "other", "{}")
    receiver = sink.receiver
    first = receiver.receive_nowait()
    assert first == ToolCallDeltaEvent("t1", 0, "c1", "lookup", '{"q": "x"}')
    # The second call's fragment waits; a retry's reset drops it, and, since the
    # reader was shown the first, the reset itself is delivered.
    stream.begin_attempt()
    stream.observe("B")
    taken = [receiver.receive_nowait(), receiver.receive_nowait()]
    assert [type(e) for e in taken] == [ResetEvent, TextEvent]
    stats = sink.statistics()
    assert stats.events_merged == 1
    assert stats.events_dropped == 1


def test_a_reset_after_fragments_nobody_took_is_dropped_with_them() -> None:
    sink: CoalescingSink[Any] = CoalescingSink(interval=0, tool_call_deltas=True)
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    stream.tool_call_delta(0, "c1", "lookup", "{")
    stream.begin_attempt()
    stream.observe("B")
    assert sink.receiver.receive_nowait() == TextEvent("t1", 1, 0, "B")


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.text(max_size=12), min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=30),
    takes=st.lists(st.booleans(), min_size=1, max_size=30),
)
def test_what_the_reader_gets_adds_up_to_the_calls(
    calls: list[str], cuts: list[int], takes: list[bool]
) -> None:
    """However the arguments are cut and whenever the reader takes, each call's
    delivered fragments join to its arguments, and its id and name arrive."""
    sink: CoalescingSink[Any] = CoalescingSink(interval=0, tool_call_deltas=True)
    stream = TurnTextStream(sink=sink, turn_id="t1")
    acc = ToolCallAccumulator(on_delta=stream.tool_call_delta)
    stream.begin_attempt()
    got: list[ToolCallDeltaEvent] = []
    step = 0

    def maybe_take() -> None:
        nonlocal step
        if takes[step % len(takes)]:
            while sink.statistics().items_pending:
                got.append(sink.receiver.receive_nowait())
        step += 1

    for index, arguments in enumerate(calls):
        acc.add({"index": index, "id": f"c{index}", "function": {"name": "f", "arguments": ""}})
        maybe_take()
        at = 0
        for n, cut in enumerate(cuts):
            if at >= len(arguments):
                break
            piece = arguments[at : at + cut]
            at += cut
            acc.add({"index": index, "function": {"arguments": piece}})
            if n % 2:
                maybe_take()
        if at < len(arguments):
            acc.add({"index": index, "function": {"arguments": arguments[at:]}})
    while sink.statistics().items_pending:
        got.append(sink.receiver.receive_nowait())
    for index, arguments in enumerate(calls):
        mine = [e for e in got if e.index == index]
        assert mine[0].tool_call_id == f"c{index}"
        assert mine[0].name == "f"
        assert "".join(e.delta for e in mine) == arguments


def test_a_coalescing_sink_takes_fragments_only_when_asked() -> None:
    plain: CoalescingSink[Any] = CoalescingSink(interval=0)
    assert plain.emit_tool_call_delta is None
    stream = TurnTextStream(sink=plain, turn_id="t1")
    stream.begin_attempt()
    stream.tool_call_delta(0, "c1", "lookup", "{}")
    assert plain.statistics().items_pending == 0
    with pytest.raises(TypeError, match="tool_call_deltas"):
        CoalescingSink(tool_call_deltas="yes")  # type: ignore[arg-type]
