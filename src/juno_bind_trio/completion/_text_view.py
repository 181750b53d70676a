"""The client side of the turn text protocol: what a reader renders.

On any real transport (a WebSocket through a relay, an SSE fan-out to several
tabs, a queue with redelivery) a delta from attempt 1 can be *delivered after*
attempt 2's reset. A reader that renders every text event it receives then
shows the wiped attempt's tail glued onto the retry.
[`TurnTextView`][juno_bind_trio.completion.TurnTextView] applies the three rules that make that
survivable:

1. **Scope to the turn.** ``epoch`` and ``seq`` restart every turn; carrying
   "newest epoch" across turns would drop every event after the first turn
   that retried, and a later turn's reset would wipe an earlier, committed
   message. A view belongs to one ``turn_id`` and ignores all others.
2. **Apply in ``seq`` order.** Drop what is at or below the last ``seq``
   applied (a duplicate or a replay); hold what arrives ahead of it until the
   gap fills.
3. **Then by ``epoch``.** Drop an event older than the newest epoch seen;
   clear on a reset.

Rule 2 is what makes rule 3 sound: ordering by epoch alone loses a same-epoch
reorder, where a retry's text arrives before its own reset, is accepted, and
is then cleared by the reset that follows, leaving the surface blank.

The hold buffer is bounded. After a reconnect the gap may never fill (the
events that would have closed it were dropped), and a view that held forever
would freeze on the text of a retracted attempt while its buffer grew by one
entry per token. On overflow the view stops applying events and sets
[`TurnTextView.resync_needed`][juno_bind_trio.completion.TurnTextView.resync_needed]: the host then
re-renders from the persisted message with
[`TurnTextView.resync()`][juno_bind_trio.completion.TurnTextView.resync]. Nothing on this wire says
a turn is over, so the host also tells the view (``finalize``) when the completed assistant message
lands.
"""

from __future__ import annotations

from typing import Any, final

import attrs

from juno_bind_trio._validate import count, error_kind

from ._events import ResetEvent, TextEvent, TurnStreamEvent

__all__ = ["DEFAULT_MAX_HELD", "TurnTextView"]

DEFAULT_MAX_HELD = 256
"""How many early events a [`TurnTextView`][juno_bind_trio.completion.TurnTextView] holds before it
asks for a resync."""


def _check_max_held(_self: object, _attr: object, value: Any) -> None:
    count(minimum=1).check("TurnTextView: max_held", value)


def _check_turn_id(_self: object, _attr: object, value: Any) -> None:
    if not isinstance(value, str) or value == "":
        raise error_kind(value, str)(
            f"TurnTextView: turn_id must be a non-empty string, got {value!r}"
        )


# How much of the visible text a repr shows before it elides the rest.
_REPR_TEXT = 60


@final
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class TurnTextView:
    """Reassembles one turn's text from events delivered in any order, any number of times.

    ``TurnTextView(turn_id, max_held=256)``. Feed it every event that arrives
    with [`apply()`][juno_bind_trio.completion.TurnTextView.apply]; read
    [`text`][juno_bind_trio.completion.TurnTextView.text]. Once every event of the turn has arrived,
    [`text`][juno_bind_trio.completion.TurnTextView.text] is exactly the text of the last attempt
    that rendered, whatever the delivery order and however many duplicates.
    """

    _turn_id: str = attrs.field(validator=_check_turn_id, alias="turn_id")
    _max_held: int = attrs.field(
        default=DEFAULT_MAX_HELD, validator=_check_max_held, alias="max_held", kw_only=True
    )
    # `last_seq` starts at -1: seq starts at 0, so seeding it with 0 would drop
    # the first delta of every turn, on the single-attempt path that is almost
    # all traffic.
    _last_seq: int = attrs.field(default=-1, init=False)
    _newest_epoch: int = attrs.field(default=-1, init=False)
    _parts: list[str] = attrs.field(factory=list, init=False, repr=False)
    _joined: str | None = attrs.field(default="", init=False, repr=False)
    _held: dict[int, TurnStreamEvent] = attrs.field(factory=dict, init=False, repr=False)
    _resync_needed: bool = attrs.field(default=False, init=False)
    _final: bool = attrs.field(default=False, init=False)

    def __repr__(self) -> str:
        text = self.text
        if len(text) > _REPR_TEXT:
            text = text[: _REPR_TEXT - 1] + "…"
        flags = "".join(
            (
                ", resync_needed=True" if self._resync_needed else "",
                ", final=True" if self._final else "",
            )
        )
        return (
            f"TurnTextView(turn_id={self._turn_id!r}, text={text!r}, epoch={self._newest_epoch}, "
            f"last_seq={self._last_seq}, held={len(self._held)}{flags})"
        )

    @property
    def turn_id(self) -> str:
        """The turn this view renders."""
        return self._turn_id

    @property
    def text(self) -> str:
        """What the surface should show now."""
        joined = self._joined
        if joined is None:
            joined = self._joined = "".join(self._parts)
            self._parts = [joined]
        return joined

    @property
    def epoch(self) -> int:
        """The newest epoch applied, ``-1`` before the first event."""
        return self._newest_epoch

    @property
    def last_seq(self) -> int:
        """The last ``seq`` applied in order, ``-1`` before the first event."""
        return self._last_seq

    @property
    def held(self) -> int:
        """How many early events wait for a gap in ``seq`` to fill."""
        return len(self._held)

    @property
    def resync_needed(self) -> bool:
        """The hold buffer overflowed: re-render from the persisted message
        ([`resync()`][juno_bind_trio.completion.TurnTextView.resync])."""
        return self._resync_needed

    @property
    def final(self) -> bool:
        """The host said the turn is over
        ([`finalize()`][juno_bind_trio.completion.TurnTextView.finalize] or
        [`resync()`][juno_bind_trio.completion.TurnTextView.resync])."""
        return self._final

    def apply(self, event: TurnStreamEvent) -> bool:
        """Take one delivered event. Returns whether
        [`text`][juno_bind_trio.completion.TurnTextView.text] may have changed.

        Events for another turn, duplicates, replays and stale epochs are
        dropped; an event that arrives early is held until its gap fills.
        After [`finalize()`][juno_bind_trio.completion.TurnTextView.finalize], or while a resync is
        needed, nothing applies.
        """
        if not isinstance(event, (TextEvent, ResetEvent)):
            raise TypeError(
                f"TurnTextView.apply: expected a TextEvent or ResetEvent, got {event!r}"
            )
        if self._final or self._resync_needed or event.turn_id != self._turn_id:
            return False
        seq = event.seq
        if seq <= self._last_seq:
            return False  # a replay or a duplicate
        if seq > self._last_seq + 1:
            # Arrived early: hold it until the gap closes. A duplicate of a held
            # event overwrites an identical one and does not grow the buffer.
            self._held[seq] = event
            if len(self._held) > self._max_held:
                # The gap will likely never fill (the transport dropped what would
                # have closed it). Holding on would freeze the surface on whatever
                # it showed, possibly a retracted attempt; say so instead.
                self._held.clear()
                self._resync_needed = True
            return False
        self._apply_in_order(event)
        held = self._held
        if held:
            next_seq = self._last_seq + 1
            while next_seq in held:
                self._apply_in_order(held.pop(next_seq))
                next_seq += 1
        return True

    def finalize(self, text: str | None = None) -> None:
        """The turn is over: drop held events and ignore everything that follows.

        Pass the persisted assistant text to make it authoritative (it then
        supersedes whatever the streamed epochs rendered); omit it to keep
        what the view shows.
        """
        if text is not None:
            if not isinstance(text, str):
                raise TypeError(f"TurnTextView.finalize: text must be a str or None, got {text!r}")
            self._parts = [text]
            self._joined = text
        self._held.clear()
        self._final = True

    def resync(self, text: str) -> None:
        """Re-render from the persisted message after
        [`resync_needed`][juno_bind_trio.completion.TurnTextView.resync_needed], and end the
        turn."""
        if not isinstance(text, str):
            raise TypeError(f"TurnTextView.resync: text must be a str, got {text!r}")
        self._resync_needed = False
        self.finalize(text)

    def _apply_in_order(self, event: TurnStreamEvent) -> None:
        self._last_seq = event.seq
        if event.epoch < self._newest_epoch:
            return  # a stale attempt's tail
        self._newest_epoch = event.epoch
        if event.__class__ is ResetEvent:
            self._parts = []
            self._joined = ""
        else:
            self._parts.append(event.text)  # type: ignore[union-attr]
            self._joined = None
