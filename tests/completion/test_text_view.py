"""TurnTextView: the client rules, and convergence under any reorder or duplication."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juno_bind_trio.completion import (
    ListSink,
    ResetEvent,
    TextEvent,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
)


def t(epoch: int, seq: int, value: str, turn: str = "t1") -> TextEvent:
    return TextEvent(turn_id=turn, epoch=epoch, seq=seq, text=value)


def r(epoch: int, seq: int, turn: str = "t1") -> ResetEvent:
    return ResetEvent(turn_id=turn, epoch=epoch, seq=seq, reason="attempt_failed")


def test_in_order_events_render_and_reset_clears() -> None:
    view = TurnTextView("t1")
    in_order: list[TurnStreamEvent] = [t(0, 0, "Hel"), t(0, 1, "lo"), r(1, 2), t(1, 3, "Hi")]
    for event in in_order:
        assert view.apply(event) is True
    assert view.text == "Hi"
    assert (view.epoch, view.last_seq, view.held) == (1, 3, 0)


def test_first_delta_of_a_turn_is_not_dropped() -> None:
    """last_seq starts at -1: seeding it with 0 would drop seq 0."""
    view = TurnTextView("t1")
    view.apply(t(0, 0, "first"))
    assert view.text == "first"


def test_duplicates_and_replays_are_dropped() -> None:
    view = TurnTextView("t1")
    view.apply(t(0, 0, "a"))
    assert view.apply(t(0, 0, "a")) is False
    view.apply(t(0, 1, "b"))
    assert view.apply(t(0, 0, "a")) is False
    assert view.text == "ab"


def test_early_event_is_held_until_the_gap_fills() -> None:
    view = TurnTextView("t1")
    assert view.apply(t(0, 1, "b")) is False
    assert (view.text, view.held) == ("", 1)
    assert view.apply(t(0, 0, "a")) is True
    assert (view.text, view.held) == ("ab", 0)


def test_stale_epoch_tail_after_reset_is_dropped() -> None:
    """Attempt 0's last delta delivered after attempt 1's reset: in seq order it came
    before the reset, so it is applied and then cleared; a *later-seq* stale epoch
    (impossible from one stream, possible from a buggy relay) is dropped outright."""
    view = TurnTextView("t1")
    late_tail: list[TurnStreamEvent] = [t(0, 0, "old"), r(1, 2), t(1, 3, "new"), t(0, 1, "tail")]
    for event in late_tail:
        view.apply(event)
    assert view.text == "new"
    view2 = TurnTextView("t1")
    stale: list[TurnStreamEvent] = [r(1, 0), t(1, 1, "new"), t(0, 2, "stale")]
    for event in stale:
        view2.apply(event)
    assert view2.text == "new"


def test_same_epoch_reorder_never_leaves_it_blank() -> None:
    """The retry's text arriving before its own reset: held, not applied then wiped."""
    view = TurnTextView("t1")
    view.apply(t(0, 0, "old"))
    view.apply(t(1, 2, "new"))  # arrives before the reset at seq 1
    assert view.text == "old"
    view.apply(r(1, 1))
    assert view.text == "new"


def test_other_turns_are_ignored() -> None:
    view = TurnTextView("t1")
    view.apply(t(0, 0, "mine"))
    assert view.apply(r(5, 1, turn="t2")) is False
    assert view.apply(t(5, 1, "theirs", turn="t2")) is False
    assert view.text == "mine"


def test_hold_buffer_overflow_asks_for_resync_instead_of_freezing() -> None:
    view = TurnTextView("t1", max_held=3)
    view.apply(t(0, 0, "partial of a retracted attempt"))
    # seq 1 (a reset) was lost in a reconnect: the gap never fills.
    for seq in range(2, 6):
        view.apply(t(1, seq, "x"))
    assert view.resync_needed is True
    assert view.held == 0  # the buffer does not grow one entry per token
    assert view.apply(t(1, 6, "y")) is False  # nothing applies until the resync
    view.resync("the persisted answer")
    assert (view.text, view.resync_needed, view.final) == ("the persisted answer", False, True)


def test_finalize_drops_state_and_ignores_later_events() -> None:
    view = TurnTextView("t1")
    view.apply(t(0, 0, "a"))
    view.apply(t(0, 2, "c"))
    view.finalize()
    assert (view.text, view.held, view.final) == ("a", 0, True)
    assert view.apply(t(0, 1, "b")) is False
    view2 = TurnTextView("t1")
    view2.apply(t(0, 0, "streamed"))
    view2.finalize("authoritative")
    assert view2.text == "authoritative"


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_turn_id(bad: object) -> None:
    with pytest.raises(
        ValueError if isinstance(bad, str) else TypeError,
        match=r"turn_id must be a non-empty string",
    ):
        TurnTextView(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bad", "error"),
    [(0, ValueError), (-1, ValueError), (True, TypeError), (1.5, TypeError), ("3", TypeError)],
)
def test_bad_max_held(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"max_held must be a positive integer, got " + repr(bad)):
        TurnTextView("t1", max_held=bad)  # type: ignore[arg-type]


def test_apply_rejects_non_events() -> None:
    view = TurnTextView("t1")
    with pytest.raises(TypeError, match=r"expected a TextEvent or ResetEvent"):
        view.apply({"kind": "text"})  # type: ignore[arg-type]


# -- the property ---------------------------------------------------------------------------

attempt_strategy = st.tuples(
    st.lists(st.text(max_size=3), max_size=4),  # deltas ("" included: a no-op)
    st.sampled_from([None, "attempt_failed", "structured_output_retry"]),
)


def drive(
    attempts: list[tuple[list[str], str | None]], outcome: str
) -> tuple[list[TurnStreamEvent], str]:
    """Run a turn through TurnTextStream; return its events and what the reader must end with."""
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    for deltas, reason in attempts:
        stream.begin_attempt(reason)  # type: ignore[arg-type]
        for delta in deltas:
            stream.observe(delta)
    stream.finish(outcome)  # type: ignore[arg-type]
    rendering = [i for i, (deltas, _) in enumerate(attempts) if "".join(deltas)]
    if not rendering:
        expected = ""
    elif outcome == "succeeded" and rendering[-1] < len(attempts) - 1:
        # A later attempt succeeded silently (tool calls only): the flush wiped.
        expected = ""
    else:
        expected = "".join(attempts[rendering[-1]][0])
    return sink.events, expected


def in_order_text(events: list[TurnStreamEvent], upto_seq: int) -> str:
    view = TurnTextView("t1")
    for event in sorted(events, key=lambda e: e.seq):
        if event.seq <= upto_seq:
            view.apply(event)
    return view.text


@settings(max_examples=300, deadline=None)
@given(
    attempts=st.lists(attempt_strategy, min_size=1, max_size=5),
    outcome=st.sampled_from(["succeeded", "failed"]),
    data=st.data(),
)
def test_view_converges_to_the_last_rendered_attempt_under_any_delivery(
    attempts: list[tuple[list[str], str | None]], outcome: str, data: st.DataObject
) -> None:
    events, expected = drive(attempts, outcome)
    # Any reordering, with any events duplicated any number of times.
    duplicates = data.draw(st.lists(st.sampled_from(events), max_size=6)) if events else []
    delivery = data.draw(st.permutations(events + duplicates))
    view = TurnTextView("t1", max_held=len(delivery) + 1)
    for event in delivery:
        view.apply(event)
        # Never an inconsistent state: always exactly the in-order prefix.
        assert view.text == in_order_text(events, view.last_seq)
    assert view.held == 0
    assert view.text == expected
    assert view.last_seq == len(events) - 1
