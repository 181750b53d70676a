"""TurnTextStream: every rule of the TypeScript createTurnTextStream, one test each."""

from __future__ import annotations

import math
from typing import Any

import pytest

from juno_bind_trio import TurnStreamUsageError
from juno_bind_trio.completion import (
    ListSink,
    ResetEvent,
    TextEvent,
    TurnStreamEvent,
    TurnTextStream,
)


def latched(stream: TurnTextStream) -> bool:
    """Read produced_output through a call, so the type checker does not pin its value."""
    return stream.produced_output


def wire(sink: ListSink) -> list[dict[str, Any]]:
    return [e.to_wire() for e in sink.events]


def text(epoch: int, seq: int, value: str, turn: str = "t1") -> dict[str, Any]:
    return {"kind": "text", "turnId": turn, "epoch": epoch, "seq": seq, "text": value}


def reset(epoch: int, seq: int, reason: str = "attempt_failed", turn: str = "t1") -> dict[str, Any]:
    return {"kind": "reset", "turnId": turn, "epoch": epoch, "seq": seq, "reason": reason}


class FlakySink:
    """A sink whose emit raises for the events a predicate picks."""

    def __init__(self, *, retractable: bool = True, fail: Any = lambda e: False) -> None:
        self.retractable = retractable
        self.fail = fail
        self.events: list[TurnStreamEvent] = []
        self.attempted: list[TurnStreamEvent] = []

    def emit(self, event: TurnStreamEvent) -> None:
        self.attempted.append(event)
        if self.fail(event):
            raise ConnectionResetError("socket closed")
        self.events.append(event)


# -- construction ------------------------------------------------------------------


@pytest.mark.parametrize("bad", [True, False, 1.5, math.nan, math.inf, -1, "2", 2.0])
def test_max_resets_rejects_non_non_negative_integers(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match=r"max_resets must be a non-negative integer"):
        TurnTextStream(sink=ListSink(), turn_id="t", max_resets=bad)  # type: ignore[arg-type]


def test_max_resets_error_names_the_value() -> None:
    with pytest.raises(TypeError, match=r"got nan$"):
        TurnTextStream(sink=ListSink(), turn_id="t", max_resets=math.nan)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"got -1$"):
        TurnTextStream(sink=ListSink(), turn_id="t", max_resets=-1)
    with pytest.raises(TypeError, match=r"got True$"):
        TurnTextStream(sink=ListSink(), turn_id="t", max_resets=True)


def test_max_resets_zero_and_positive_are_accepted() -> None:
    assert TurnTextStream(sink=ListSink(), turn_id="t", max_resets=0).max_resets == 0
    assert TurnTextStream(sink=ListSink(), turn_id="t", max_resets=3).max_resets == 3
    assert TurnTextStream(sink=ListSink(), turn_id="t").max_resets is None


@pytest.mark.parametrize("bad", ["", None, 7, b"id"])
def test_turn_id_must_be_a_non_empty_string(bad: object) -> None:
    error = ValueError if isinstance(bad, str) else TypeError
    with pytest.raises(error, match=r"turn_id must be a non-empty string, got " + repr(bad)):
        TurnTextStream(sink=ListSink(), turn_id=bad)  # type: ignore[arg-type]


def test_sink_must_look_like_a_sink() -> None:
    with pytest.raises(TypeError, match=r"sink must have"):
        TurnTextStream(sink=object(), turn_id="t")  # type: ignore[arg-type]

    class NoFlag:
        def emit(self, event: TurnStreamEvent) -> None:
            pass

    with pytest.raises(TypeError, match=r"sink must have"):
        TurnTextStream(sink=NoFlag(), turn_id="t")  # type: ignore[arg-type]

    class NotBool:
        retractable = "yes"

        def emit(self, event: TurnStreamEvent) -> None:
            pass

    with pytest.raises(TypeError, match=r"retractable must be a bool, got 'yes'"):
        TurnTextStream(sink=NotBool(), turn_id="t")  # type: ignore[arg-type]


def test_initial_state() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t")
    assert (s.epoch, s.reset_count, s.sink_errors, s.produced_output) == (-1, 0, 0, False)


# -- the single-attempt path ---------------------------------------------------------


def test_single_attempt_streams_text_in_seq_order() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    for piece in ["Hel", "lo", "!"]:
        s.observe(piece)
    s.finish("succeeded")
    assert wire(sink) == [text(0, 0, "Hel"), text(0, 1, "lo"), text(0, 2, "!")]
    assert s.produced_output is False  # retractable: routing may still replay


def test_events_are_frozen() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("x")
    event = sink.events[0]
    assert isinstance(event, TextEvent)
    with pytest.raises(AttributeError):
        event.text = "y"  # type: ignore[misc]
    assert event == TextEvent(turn_id="t1", epoch=0, seq=0, text="x")
    assert hash(event) == hash(TextEvent(turn_id="t1", epoch=0, seq=0, text="x"))


def test_observe_before_begin_attempt_raises_even_for_empty_text() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t")
    with pytest.raises(TurnStreamUsageError, match=r"before begin_attempt"):
        s.observe("")
    with pytest.raises(TurnStreamUsageError):
        s.observe(None)
    with pytest.raises(TurnStreamUsageError):
        s.observe("hi")


def test_none_and_empty_are_no_ops_and_not_output() -> None:
    sink = ListSink(retractable=False)
    s = TurnTextStream(sink=sink, turn_id="t")
    s.begin_attempt()
    s.observe(None)
    s.observe("")
    assert sink.events == []
    assert s.produced_output is False


def test_observe_rejects_non_strings() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t")
    s.begin_attempt()
    with pytest.raises(TypeError, match=r"got b'x'"):
        s.observe(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got 0"):
        s.observe(0)  # type: ignore[arg-type]


def test_begin_attempt_rejects_unknown_reason() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t")
    with pytest.raises(ValueError, match=r"got 'oops'"):
        s.begin_attempt("oops")  # type: ignore[arg-type]


def test_finish_rejects_unknown_outcome() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t")
    with pytest.raises(ValueError, match=r"TurnTextStream.finish: outcome must be .* got 'done'"):
        s.finish("done")  # type: ignore[arg-type]


def test_an_unknown_outcome_finishes_the_stream_as_failed_and_then_raises() -> None:
    """As the TypeScript package does: nothing stays armed, the partial text stays."""
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("partial")
    s.begin_attempt()  # arms a reset
    with pytest.raises(ValueError, match=r"got 'ok'"):
        s.finish("ok")  # type: ignore[arg-type]
    assert s.finished
    s.observe("after")  # a no-op now
    s.finish("succeeded")  # idempotent: the armed reset was dropped, not flushed
    assert wire(sink) == [text(0, 0, "partial")]
    assert s.text == "partial"
    with pytest.raises(ValueError, match=r"got None"):
        s.finish(None)  # type: ignore[arg-type]


def test_text_is_the_attempt_that_owns_the_screen() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t1")
    assert s.text == ""
    s.begin_attempt()
    s.observe("Hel")
    s.observe("lo")
    assert s.text == "Hello"
    s.begin_attempt()  # the retry has said nothing yet: the old text is still shown
    assert s.text == "Hello"
    s.observe("Hi")
    assert s.text == "Hi"
    s.begin_attempt()
    s.finish("succeeded")  # the reset is flushed: the successful attempt had no text
    assert s.text == ""


def test_text_after_a_failed_turn_keeps_the_partial_text() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t1")
    s.begin_attempt()
    s.observe("partial")
    s.begin_attempt()
    s.finish("failed")
    assert s.text == "partial"


def test_text_on_a_permanent_surface_is_every_attempt() -> None:
    sink = ListSink(retractable=False)
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("a")
    s.begin_attempt()
    s.observe("b")
    s.finish("succeeded")
    assert s.text == "ab" == "".join(e.text for e in sink.events if isinstance(e, TextEvent))


def test_text_does_not_depend_on_the_sink() -> None:
    """After a lost reset the surface is stranded; text is what a resync restores."""
    s = TurnTextStream(sink=FlakySink(fail=lambda e: isinstance(e, ResetEvent)), turn_id="t1")
    s.begin_attempt()
    s.observe("old")
    s.begin_attempt()
    s.observe("new")  # the reset fails: nothing more is sent
    s.finish("succeeded")
    assert s.sink_errors == 1
    assert s.text == "new"


# -- the lazy reset ------------------------------------------------------------------------


def test_reset_is_sent_on_the_retrys_first_byte_not_at_begin() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("partial")
    s.begin_attempt()
    assert wire(sink) == [text(0, 0, "partial")]  # nothing yet: lazy
    s.observe("fresh")
    assert wire(sink) == [text(0, 0, "partial"), reset(1, 1), text(1, 2, "fresh")]
    assert s.reset_count == 1
    assert s.produced_output is False


def test_retry_that_dies_silent_leaves_partial_text_and_finish_failed_drops_the_reset() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("partial")
    s.begin_attempt()  # dies before a byte
    s.begin_attempt()  # so does this one
    s.finish("failed")
    assert wire(sink) == [text(0, 0, "partial")]
    assert s.reset_count == 0
    assert s.epoch == 2


def test_finish_succeeded_flushes_an_armed_reset() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("narration of a failed attempt")
    s.begin_attempt()  # succeeds with tool calls and no text
    s.finish("succeeded")
    assert wire(sink) == [text(0, 0, "narration of a failed attempt"), reset(1, 1)]
    assert s.reset_count == 1


def test_a_turn_where_nothing_is_emitted_sends_no_events() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    for _ in range(4):
        s.begin_attempt()
    s.finish("succeeded")
    assert sink.events == []
    assert s.epoch == 3


def test_epoch_advances_on_every_attempt_even_silent_ones() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()  # silent
    s.begin_attempt()  # silent
    s.observe("a")
    assert wire(sink) == [text(1, 0, "a")]  # nothing on screen before: no reset owed


def test_only_one_reset_for_several_silent_attempts() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("a")
    s.begin_attempt()
    s.begin_attempt()
    s.begin_attempt()
    s.observe("b")
    assert wire(sink) == [text(0, 0, "a"), reset(3, 1), text(3, 2, "b")]


def test_explicit_reason_sticks_through_a_later_default() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("{not json")
    s.begin_attempt("structured_output_retry")  # caller's retry loop
    s.begin_attempt()  # the executor's attempt function, default reason
    s.observe("{}")
    assert wire(sink)[1] == reset(2, 1, "structured_output_retry")


def test_a_later_explicit_reason_overrides_an_earlier_default() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("x")
    s.begin_attempt()
    s.begin_attempt("structured_output_retry")
    s.observe("y")
    assert wire(sink)[1] == reset(2, 1, "structured_output_retry")


def test_reason_does_not_stick_past_its_delivery() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("x")
    s.begin_attempt("structured_output_retry")
    s.observe("y")
    s.begin_attempt()
    s.observe("z")
    assert [e.reason for e in sink.events if isinstance(e, ResetEvent)] == [
        "structured_output_retry",
        "attempt_failed",
    ]


# -- permanent surfaces -----------------------------------------------------------------


def test_permanent_surface_latches_on_first_byte_and_never_gets_a_reset() -> None:
    sink = ListSink(retractable=False)
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    assert latched(s) is False
    s.observe("posted")
    assert latched(s) is True
    s.begin_attempt()
    s.observe("more")
    s.finish("succeeded")
    assert all(isinstance(e, TextEvent) for e in sink.events)
    assert s.reset_count == 0


def test_retractable_is_read_once_at_construction() -> None:
    class Flipping:
        def __init__(self) -> None:
            self.reads = 0
            self.events: list[TurnStreamEvent] = []

        @property
        def retractable(self) -> bool:
            self.reads += 1
            return self.reads == 1  # true the first time, false ever after

        def emit(self, event: TurnStreamEvent) -> None:
            self.events.append(event)

    sink = Flipping()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("a")
    s.begin_attempt()
    s.observe("b")
    assert sink.reads == 1
    assert s.retractable is True
    assert s.produced_output is False
    assert [e.kind for e in sink.events] == ["text", "reset", "text"]


# -- the flicker budget -------------------------------------------------------------------


def test_spent_budget_latches_produced_output_and_stops_writing_to_the_stale_surface() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1", max_resets=1)
    s.begin_attempt()
    s.observe("one")
    s.begin_attempt()
    s.observe("two")  # spends the only reset
    assert s.reset_count == 1
    assert s.produced_output is True  # the next failure clamps routing
    s.begin_attempt("structured_output_retry")  # a caller-owned loop goes on anyway
    s.observe("three")
    s.finish("succeeded")
    # "three" would splice onto "two"; it is withheld, and no reset is sent.
    assert wire(sink) == [text(0, 0, "one"), reset(1, 1), text(1, 2, "two")]


def test_budget_reached_still_lets_the_in_flight_attempt_finish_emitting() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1", max_resets=1)
    s.begin_attempt()
    s.observe("one")
    s.begin_attempt()
    s.observe("tw")
    s.observe("o")  # same attempt, after the budget is spent: still emitted
    assert wire(sink)[-1] == text(1, 3, "o")


def test_zero_budget_means_any_retry_after_text_is_stale() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1", max_resets=0)
    s.begin_attempt()
    assert latched(s) is False
    s.observe("a")
    assert latched(s) is True
    s.begin_attempt()
    s.observe("b")
    assert wire(sink) == [text(0, 0, "a")]


# -- sink failures ------------------------------------------------------------------------


def test_failing_text_emit_is_counted_and_emission_goes_on() -> None:
    sink = FlakySink(fail=lambda e: isinstance(e, TextEvent) and e.text == "lost")
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("lost")
    s.observe("kept")
    assert s.sink_errors == 1
    assert [e.to_wire() for e in sink.events] == [text(0, 1, "kept")]
    assert s.produced_output is False  # retractable: a lost text leaves it replayable


def test_failing_text_on_a_permanent_surface_still_counts_as_output() -> None:
    sink = FlakySink(retractable=False, fail=lambda e: True)
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("maybe sent")
    assert s.sink_errors == 1
    assert s.produced_output is True


def test_lost_reset_latches_and_stops_writing_until_a_later_reset_lands() -> None:
    failing = {"on": True}
    sink = FlakySink(fail=lambda e: isinstance(e, ResetEvent) and failing["on"])
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("first")
    s.begin_attempt()
    s.observe("second")  # the reset fails: "second" must not be glued onto "first"
    assert s.sink_errors == 1
    assert s.reset_count == 1
    assert s.produced_output is True
    assert [e.to_wire() for e in sink.events] == [text(0, 0, "first")]
    s.observe("more of second")  # still stale: withheld, no new reset attempted
    assert len(sink.attempted) == 2
    # A later attempt on the stranded surface is withheld too: a reset now would
    # blank text the reader relies on and may be followed by nothing.
    failing["on"] = False
    s.begin_attempt()
    s.observe("third")
    assert len(sink.attempted) == 2
    # The later reset that does land is the finish flush, on success.
    s.finish("succeeded")
    assert [e.to_wire() for e in sink.events] == [text(0, 0, "first"), reset(2, 2)]
    assert s.produced_output is True  # monotonic
    assert s.reset_count == 2


def test_lost_reset_at_finish_counts() -> None:
    sink = FlakySink(fail=lambda e: isinstance(e, ResetEvent))
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("x")
    s.begin_attempt()
    s.finish("succeeded")
    assert (s.reset_count, s.sink_errors) == (1, 1)


def test_sink_raising_base_exception_is_not_swallowed() -> None:
    class Interrupting:
        retractable = True

        def emit(self, event: TurnStreamEvent) -> None:
            raise KeyboardInterrupt

    s = TurnTextStream(sink=Interrupting(), turn_id="t1")
    s.begin_attempt()
    with pytest.raises(KeyboardInterrupt):
        s.observe("x")


# -- re-entrancy -----------------------------------------------------------------------------


def test_reentrant_sink_cannot_back_date_a_delta() -> None:
    events: list[TurnStreamEvent] = []
    holder: dict[str, TurnTextStream] = {}

    class Reentrant:
        retractable = True

        def emit(self, event: TurnStreamEvent) -> None:
            events.append(event)
            if isinstance(event, TextEvent) and event.text == "trigger":
                holder["s"].begin_attempt()
                holder["s"].observe("nested")

    s = TurnTextStream(sink=Reentrant(), turn_id="t1")
    holder["s"] = s
    s.begin_attempt()
    s.observe("trigger")
    assert [e.to_wire() for e in events] == [
        text(0, 0, "trigger"),
        reset(1, 1),
        text(1, 2, "nested"),
    ]


# -- after finish, and mark_produced_output -------------------------------------------------


def test_after_finish_every_method_is_a_no_op() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("a")
    s.finish("succeeded")
    before = (list(sink.events), s.epoch, s.reset_count, s.produced_output)
    s.begin_attempt()
    s.observe("b")
    s.mark_produced_output()
    s.finish("failed")
    assert (list(sink.events), s.epoch, s.reset_count, s.produced_output) == before
    assert s.finished


def test_finish_is_idempotent_and_the_first_outcome_wins() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.observe("a")
    s.begin_attempt()
    s.finish("failed")
    s.finish("succeeded")
    assert wire(sink) == [text(0, 0, "a")]


def test_mark_produced_output_latches_without_stopping_emission() -> None:
    sink = ListSink()
    s = TurnTextStream(sink=sink, turn_id="t1")
    s.begin_attempt()
    s.mark_produced_output()
    assert s.produced_output is True
    s.observe("still shown")
    assert wire(sink) == [text(0, 0, "still shown")]


def test_mark_produced_output_after_finish_is_a_no_op() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="t1")
    s.begin_attempt()
    s.finish("succeeded")
    s.mark_produced_output()
    assert s.produced_output is False


def test_tool_call_only_attempt_is_not_output() -> None:
    """A host that never calls observe() for tool-call bytes keeps its fallback."""
    s = TurnTextStream(sink=ListSink(retractable=False), turn_id="t1")
    s.begin_attempt()
    # ... tool-call deltas go to an accumulator, not to observe() ...
    assert s.produced_output is False


def test_repr_is_informative() -> None:
    s = TurnTextStream(sink=ListSink(), turn_id="m-1")
    assert "m-1" in repr(s)
    assert "epoch=-1" in repr(s)
