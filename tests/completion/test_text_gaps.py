"""Edges of TurnTextView and TurnTextStream that mutation testing showed were unpinned.

Each test here kills a mutant that survived the rest of the suite: the exact
hold-buffer boundary, the type checks of ``finalize`` / ``resync`` and of a
falsy non-string delta, and a sink error count past one.
"""

from __future__ import annotations

from typing import Any

import pytest

from juno_bind_trio.completion import (
    ListSink,
    TextEvent,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
)


def t(epoch: int, seq: int, text: str, turn: str = "t1") -> TextEvent:
    return TextEvent(turn_id=turn, epoch=epoch, seq=seq, text=text)


# --- TurnTextView: the hold buffer's exact bound -------------------------------------


def test_holding_exactly_max_held_events_is_still_fine() -> None:
    view = TurnTextView("t1", max_held=3)
    view.apply(t(0, 0, "a"))
    for seq in (2, 3, 4):  # seq 1 is late: three events held, the limit
        assert view.apply(t(0, seq, str(seq))) is False
    assert (view.held, view.resync_needed) == (3, False)
    # A duplicate of a held event does not grow the buffer past the limit.
    view.apply(t(0, 4, "4"))
    assert (view.held, view.resync_needed) == (3, False)
    # The gap fills: everything held applies, in order.
    assert view.apply(t(0, 1, "1")) is True
    assert (view.text, view.held, view.last_seq) == ("a1234", 0, 4)


def test_one_more_than_max_held_asks_for_a_resync() -> None:
    view = TurnTextView("t1", max_held=3)
    view.apply(t(0, 0, "a"))
    for seq in (2, 3, 4, 5):
        view.apply(t(0, seq, "x"))
    assert (view.held, view.resync_needed) == (0, True)


# --- TurnTextView: finalize / resync refuse a non-string -----------------------------


@pytest.mark.parametrize("bad", [123, b"bytes", ["a"]])
def test_finalize_refuses_a_non_string_and_changes_nothing(bad: Any) -> None:
    view = TurnTextView("t1")
    view.apply(t(0, 0, "shown"))
    with pytest.raises(TypeError, match=r"TurnTextView.finalize: text must be a str or None, got "):
        view.finalize(bad)
    assert (view.text, view.final) == ("shown", False)


@pytest.mark.parametrize("bad", [123, None, b"bytes"])
def test_resync_refuses_a_non_string_and_changes_nothing(bad: Any) -> None:
    view = TurnTextView("t1", max_held=1)
    view.apply(t(0, 0, "shown"))
    view.apply(t(0, 2, "x"))
    view.apply(t(0, 3, "y"))
    assert view.resync_needed
    with pytest.raises(TypeError, match=r"TurnTextView.resync: text must be a str, got "):
        view.resync(bad)
    assert (view.resync_needed, view.final) == (True, False)


# --- TurnTextStream: falsy non-strings, and sink errors counted every time -----------


@pytest.mark.parametrize("bad", [0, b"", False, 0.0, [], {}])
def test_a_falsy_delta_that_is_not_a_string_is_refused(bad: Any) -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    with pytest.raises(TypeError, match=r"TurnTextStream.observe: text must be a str or None"):
        stream.observe(bad)
    assert sink.events == []
    assert stream.produced_output is False


class BrokenSink:
    retractable = True

    def __init__(self) -> None:
        self.attempts: list[TurnStreamEvent] = []

    def emit(self, event: TurnStreamEvent) -> None:
        self.attempts.append(event)
        raise ConnectionResetError("gone")


def test_every_failed_emit_is_counted() -> None:
    sink = BrokenSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    stream.begin_attempt()
    for delta in ("a", "b", "c"):
        stream.observe(delta)
    assert stream.sink_errors == 3
    assert len(sink.attempts) == 3
    stream.finish("succeeded")
    assert stream.text == "abc"


def test_the_default_hold_limit_is_256() -> None:
    view = TurnTextView("t1")
    view.apply(t(0, 0, "a"))
    for seq in range(2, 258):  # 256 early events: the default limit, still held
        view.apply(t(0, seq, "x"))
    assert (view.held, view.resync_needed) == (256, False)
    view.apply(t(0, 258, "x"))
    assert view.resync_needed


def test_finalize_replaces_text_that_was_already_read() -> None:
    view = TurnTextView("t1")
    view.apply(t(0, 0, "streamed"))
    assert view.text == "streamed"  # read once: the joined text is cached
    view.finalize("the persisted answer")
    assert view.text == "the persisted answer"
