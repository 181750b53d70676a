"""A same-process reader that never falls behind: pending text merges while it is busy.

Why not a memory object stream
------------------------------

A reader task in the same process as the model turn runs only when the turn
lets it: at the turn's checkpoints. The ``openai`` SDK reads a fast stream in
big socket reads and yields to other tasks perhaps a hundred times across
twenty thousand chunks, so a reader fed one event per delta falls behind by
hundreds of events at each of those points. A bounded buffer then fills and
drops text (the reader's view is silently wrong); an unbounded one grows with
the number of deltas, and every delta still costs a hand-off between tasks.

What a reader needs is not every delta but the text. So the hand-off here is
per *reader wake-up*, not per event: a text event that arrives while the
previous one still waits for the reader is appended to it. However far the
turn runs ahead, the reader finds one text item per run of text, and what it
renders next is the text as the turn had it at that moment, a state the turn
really passed through.

The rules
---------

* **Adjacent text of one turn and one epoch merges.** Nothing else does: a
  new epoch (a permanent surface's next attempt), another turn, or any other
  item in between starts a new item, so the order the reader sees is the
  order things happened.
* **A reset drops what it wipes.** Text of the same turn and an older epoch
  still waiting has never been shown, and the reset is about to clear it, so
  it goes. So does a waiting reset of the same turn (the newer one clears
  everything the older one would). If the reader has been handed nothing of
  the turn yet, the reset itself goes too: there is nothing on its screen to
  clear.
* **Sequence numbers are the reader's own.** Merging and dropping would leave
  gaps in the stream's ``seq``, which a [`TurnTextView`][juno_bind_trio.completion.TurnTextView]
  (or the TypeScript client) reads as loss. So each text and reset event is
  stamped when the reader takes it, ``0, 1, 2, ...`` per turn: what comes out
  is a plain, gap-free event sequence in the TypeScript package's wire shape,
  fit to forward to a browser as it is.
* **The producer never waits.** ``emit`` is synchronous and never blocks;
  memory is bounded by the text still waiting (one item per run of text),
  not by the number of deltas.
* **Either end may close.** Closing the sink ends the reader once it has
  taken what is still waiting; closing the reader makes every later
  ``emit`` raise ``anyio.BrokenResourceError``, which a
  [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream] counts as a sink error.

Other items
-----------

The same ordered channel carries anything else the producer wants the reader
to see, in order with the text: ``send_nowait(item)``. The agent layer sends
its tool-call, turn and run events this way, so a reader has one loop over
one stream. Such items are never merged, dropped or restamped.

Streamed tool-call arguments
----------------------------

A sink made with ``tool_call_deltas=True`` also takes each
[ToolCallDeltaEvent][juno_bind_trio.completion.ToolCallDeltaEvent] (its
[`emit_tool_call_delta`][juno_bind_trio.completion.CoalescingSink.emit_tool_call_delta]
is then the method a [TurnTextStream][juno_bind_trio.completion.TurnTextStream]
sends fragments to; by default it is ``None``, and the reader is sent none,
as before). They follow the text's rules: a fragment of the same turn and
call that arrives while the previous one still waits is appended to it (an
id or name it brings is kept), and a reset drops the fragments of its turn
still waiting. A fragment the reader took counts as something on its screen,
so a later reset of that turn is delivered.

A sink made with ``reasoning=True`` takes each
[ReasoningEvent][juno_bind_trio.completion.ReasoningEvent] the same way (its
[`emit_reasoning`][juno_bind_trio.completion.CoalescingSink.emit_reasoning]):
consecutive pieces of one attempt's reasoning are merged, a reset drops those
of its turn still waiting, and one the reader took makes a later reset of the
turn reach it.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Generic, NamedTuple, TypeVar, cast, final

import anyio
import anyio.lowlevel
import attrs

from juno_bind_trio._cancel import raise_task_cancellation, task_cancellation

from ._events import ResetEvent, TextEvent, TurnStreamEvent
from ._reasoning import ReasoningEvent
from ._tool_call_delta import ToolCallDeltaEvent

# The turn's events that are queued one by one (text is queued as runs).
_SINGLE_EVENTS: Final = (ResetEvent, ToolCallDeltaEvent, ReasoningEvent)

__all__ = [
    "DEFAULT_HANDOFF_INTERVAL",
    "CoalescingReceiver",
    "CoalescingSink",
    "CoalescingSinkStatistics",
    "MemorySinkPair",
]

ItemT = TypeVar("ItemT")


class _TextRun:
    """Text of one turn and epoch waiting for the reader: its pieces, joined on delivery."""

    __slots__ = ("epoch", "parts", "turn_id")

    def __init__(self, turn_id: str, epoch: int, text: str) -> None:
        self.turn_id = turn_id
        self.epoch = epoch
        self.parts = [text]


@attrs.frozen
class CoalescingSinkStatistics:
    """A snapshot of a [CoalescingSink][juno_bind_trio.completion.CoalescingSink].

    * ``items_pending``: items waiting for the reader (a run of text is one).
    * ``text_pending``: characters of text waiting for the reader.
    * ``events_emitted``: text and reset events handed to ``emit``.
    * ``events_merged``: text events folded into one that was still waiting.
    * ``events_dropped``: text and reset events a later reset made moot
      before the reader took them (never shown, so nothing was lost).
    * ``items_delivered``: items the reader has taken.
    * ``sink_closed`` / ``reader_closed``: which end was closed.
    """

    items_pending: int
    text_pending: int
    events_emitted: int
    events_merged: int
    events_dropped: int
    items_delivered: int
    sink_closed: bool
    reader_closed: bool


DEFAULT_HANDOFF_INTERVAL: Final = 1 / 60
"""How often, at most, a [CoalescingReceiver][juno_bind_trio.completion.CoalescingReceiver]
is handed text: a screen's frame.

A reader woken per delta costs a task switch per delta, which under a fast
stream is most of the cost of the turn; one woken per frame costs a few dozen
a second, and shows exactly what a screen could have shown. Text that arrives
after a pause longer than this is handed over at once, so a provider that
streams at reading speed sees no added latency.
"""


def check_interval(where: str, value: object) -> None:
    """Refuse a hand-off interval that is not a finite non-negative number, naming *where*."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        wrong_type = isinstance(value, bool) or not isinstance(value, (int, float))
        raise (TypeError if wrong_type else ValueError)(
            f"{where}: interval must be a finite non-negative number of seconds, got {value!r}"
        )


def _check_interval(_self: object, _attr: object, value: object) -> None:
    check_interval("CoalescingSink", value)


def _check_deltas(_self: object, _attr: object, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"CoalescingSink: tool_call_deltas must be a bool, got {value!r}")


def _check_reasoning(_self: object, _attr: object, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"CoalescingSink: reasoning must be a bool, got {value!r}")


def _check_retractable(_self: object, _attr: object, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"CoalescingSink: retractable must be a bool, got {value!r}")


@final
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class CoalescingSink(Generic[ItemT]):
    """The sending end of a same-process reader channel, and a turn stream sink.

    ``CoalescingSink(retractable=True, interval=1/60)``; the reading end is
    [receiver][juno_bind_trio.completion.CoalescingSink.receiver]. Usually
    made by [open_memory_sink][juno_bind_trio.completion.open_memory_sink].
    *ItemT* is what the reader receives: the text and reset events, plus
    whatever else is sent with [send_nowait][juno_bind_trio.completion.CoalescingSink.send_nowait].

    Text events still waiting for the reader merge (see the module notes), so
    the reader never falls behind by more than one item per run of text and
    the producer never waits. *interval* paces the hand-off of text: at most
    one batch per *interval* seconds
    ([DEFAULT_HANDOFF_INTERVAL][juno_bind_trio.completion.DEFAULT_HANDOFF_INTERVAL],
    a screen's frame; ``0`` hands text over whenever the reader runs).

    Close it (``close()``, or ``with``/``async with``) when the producer is
    done: the reader then takes what is still waiting and its ``async for``
    ends.

    Not thread-safe: both ends belong to one event loop.
    """

    retractable: bool = attrs.field(default=True, kw_only=True, validator=_check_retractable)
    _tool_call_deltas: bool = attrs.field(
        default=False, kw_only=True, alias="tool_call_deltas", validator=_check_deltas
    )
    _reasoning: bool = attrs.field(
        default=False, kw_only=True, alias="reasoning", validator=_check_reasoning
    )
    _interval: float = attrs.field(
        default=DEFAULT_HANDOFF_INTERVAL, kw_only=True, alias="interval", validator=_check_interval
    )
    # The reader takes no text before this (its clock): see CoalescingReceiver.receive.
    _not_before: float = attrs.field(default=-math.inf, init=False)
    _pending: deque[Any] = attrs.field(factory=deque, init=False)
    # Next reader-side seq per turn. A turn is in here once the reader has been
    # handed anything of it; a reset for a turn that is not has nothing to clear.
    _next_seq: dict[str, int] = attrs.field(factory=dict, init=False)
    _waiter: anyio.Event | None = attrs.field(default=None, init=False)
    # Set while the reader waits out the interval: woken by anything but text.
    _pacer: anyio.Event | None = attrs.field(default=None, init=False)
    # None while both ends are open; otherwise the error emit raises. One
    # attribute so that the hot path checks both ends with one read.
    _refusal: type[Exception] | None = attrs.field(default=None, init=False)
    _sink_closed: bool = attrs.field(default=False, init=False)
    _reader_closed: bool = attrs.field(default=False, init=False)
    _delivered: int = attrs.field(default=0, init=False)
    _delivered_events: int = attrs.field(default=0, init=False)
    _merged: int = attrs.field(default=0, init=False)
    _dropped: int = attrs.field(default=0, init=False)
    _receiver: CoalescingReceiver[ItemT] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._receiver = CoalescingReceiver(self)

    def __repr__(self) -> str:
        stats = self.statistics()
        state = (
            "closed" if stats.sink_closed else "reader closed" if stats.reader_closed else "open"
        )
        return (
            f"<CoalescingSink {state} retractable={self.retractable} "
            f"pending={stats.items_pending} items ({stats.text_pending} chars) "
            f"delivered={stats.items_delivered} merged={stats.events_merged} "
            f"dropped={stats.events_dropped}>"
        )

    @property
    def receiver(self) -> CoalescingReceiver[ItemT]:
        """The reading end (there is exactly one)."""
        return self._receiver

    # -- the producer side -------------------------------------------------------------

    def emit(self, event: TurnStreamEvent, /) -> None:
        """Queue a text or reset event for the reader, merging text that is still waiting.

        Synchronous and never blocks. Raises ``anyio.ClosedResourceError``
        after [close][juno_bind_trio.completion.CoalescingSink.close] and
        ``anyio.BrokenResourceError`` once the reader is closed; a
        [TurnTextStream][juno_bind_trio.completion.TurnTextStream] counts
        either as a sink error.
        """
        if event.__class__ is TextEvent:
            self._emit_text(event.turn_id, event.epoch, event.text)
        elif event.__class__ is ResetEvent:
            refusal = self._refusal
            if refusal is not None:
                raise refusal
            if self._queue_reset(event):
                self._wake()
        else:
            raise TypeError(
                f"CoalescingSink.emit: expected a TextEvent or ResetEvent, got {event!r}"
            )

    def _emit_text(self, turn_id: str, epoch: int, text: str) -> None:
        # emit() of a TextEvent, without the event: a TurnTextStream writing to
        # this sink calls it directly, since the event's seq is restamped on
        # delivery anyway and this runs once per text delta of every turn.
        refusal = self._refusal
        if refusal is not None:
            raise refusal
        pending = self._pending
        if pending:
            last = pending[-1]
            if last.__class__ is _TextRun and last.epoch == epoch and last.turn_id == turn_id:
                last.parts.append(text)
                return
        pending.append(_TextRun(turn_id, epoch, text))
        # Wakes an idle reader only, never one pacing itself (see _receive):
        # text waits out the interval. Inline for the same reason.
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    @property
    def emit_tool_call_delta(self) -> Callable[[ToolCallDeltaEvent], None] | None:
        """The method that queues a streamed tool-call fragment, or ``None`` (the default).

        ``None`` unless the sink was made with ``tool_call_deltas=True``: a
        [TurnTextStream][juno_bind_trio.completion.TurnTextStream] then sends
        this sink no fragments. The method merges a fragment into one of the
        same call still waiting; it is synchronous, never blocks, and raises
        as [emit][juno_bind_trio.completion.CoalescingSink.emit] does when
        either end is closed.
        """
        return self._queue_tool_call_delta if self._tool_call_deltas else None

    @property
    def emit_reasoning(self) -> Callable[[ReasoningEvent], None] | None:
        """The method that queues a reasoning delta, or ``None`` (the default).

        ``None`` unless the sink was made with ``reasoning=True``: a
        [TurnTextStream][juno_bind_trio.completion.TurnTextStream] then sends this sink no
        reasoning. The method merges a delta into one of the same turn and attempt still
        waiting; synchronous, never blocks, and raises as
        [emit][juno_bind_trio.completion.CoalescingSink.emit] does when either end is closed.
        """
        return self._queue_reasoning if self._reasoning else None

    def _queue_reasoning(self, event: ReasoningEvent, /) -> None:
        if event.__class__ is not ReasoningEvent:
            raise TypeError(
                f"CoalescingSink.emit_reasoning: expected a ReasoningEvent, got {event!r}"
            )
        refusal = self._refusal
        if refusal is not None:
            raise refusal
        pending = self._pending
        if pending:
            last = pending[-1]
            if (
                last.__class__ is ReasoningEvent
                and last.turn_id == event.turn_id
                and last.epoch == event.epoch
            ):
                self._merged += 1
                pending[-1] = ReasoningEvent(
                    turn_id=event.turn_id, epoch=event.epoch, text=last.text + event.text
                )
                return
        pending.append(event)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def _queue_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
        if event.__class__ is not ToolCallDeltaEvent:
            raise TypeError(
                f"CoalescingSink.emit_tool_call_delta: expected a ToolCallDeltaEvent, got {event!r}"
            )
        refusal = self._refusal
        if refusal is not None:
            raise refusal
        pending = self._pending
        if pending:
            last = pending[-1]
            if (
                last.__class__ is ToolCallDeltaEvent
                and last.turn_id == event.turn_id
                and last.index == event.index
            ):
                self._merged += 1
                pending[-1] = ToolCallDeltaEvent(
                    turn_id=event.turn_id,
                    index=event.index,
                    tool_call_id=last.tool_call_id or event.tool_call_id,
                    name=last.name or event.name,
                    delta=last.delta + event.delta,
                )
                return
        pending.append(event)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def send_nowait(self, item: ItemT, /) -> None:
        """Queue any other item for the reader, in order with the text. Never merged or dropped.

        A [TextEvent][juno_bind_trio.completion.TextEvent] or
        [ResetEvent][juno_bind_trio.completion.ResetEvent] goes through
        [emit][juno_bind_trio.completion.CoalescingSink.emit]. Raises as
        ``emit`` does when either end is closed.
        """
        if item.__class__ is TextEvent or item.__class__ is ResetEvent:
            self.emit(cast("TurnStreamEvent", item))
            return
        refusal = self._refusal
        if refusal is not None:
            raise refusal
        self._pending.append(item)
        self._wake()

    def close(self) -> None:
        """No more items: the reader takes what is waiting, then its iteration ends. Idempotent."""
        if self._sink_closed:
            return
        self._sink_closed = True
        if self._refusal is None:
            self._refusal = anyio.ClosedResourceError
        self._wake()

    async def aclose(self) -> None:
        """[close][juno_bind_trio.completion.CoalescingSink.close], then a checkpoint."""
        self.close()
        await anyio.lowlevel.checkpoint()

    def __enter__(self) -> CoalescingSink[ItemT]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> CoalescingSink[ItemT]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # No checkpoint: closing must happen even on the way out of a cancel.
        self.close()

    def statistics(self) -> CoalescingSinkStatistics:
        """What is waiting, what was merged or dropped, and which end is closed."""
        items_pending = len(self._pending)
        text_pending = events_pending = 0
        for item in self._pending:
            if item.__class__ is _TextRun:
                events_pending += len(item.parts)
                text_pending += sum(map(len, item.parts))
            elif item.__class__ in _SINGLE_EVENTS:
                events_pending += 1
        merged = self._merged + sum(
            len(item.parts) - 1 for item in self._pending if item.__class__ is _TextRun
        )
        return CoalescingSinkStatistics(
            items_pending=items_pending,
            text_pending=text_pending,
            events_emitted=self._delivered_events + self._merged + self._dropped + events_pending,
            events_merged=merged,
            events_dropped=self._dropped,
            items_delivered=self._delivered,
            sink_closed=self._sink_closed,
            reader_closed=self._reader_closed,
        )

    # -- internals ------------------------------------------------------------------------

    def _queue_reset(self, event: ResetEvent) -> bool:
        """Drop what the reset makes moot; queue it if the reader has something to clear."""
        turn_id = event.turn_id
        pending = self._pending
        kept: deque[Any] | None = None
        for index, item in enumerate(pending):
            cls = item.__class__
            if (cls is _TextRun or cls in _SINGLE_EVENTS) and item.turn_id == turn_id:
                if kept is None:
                    kept = deque(itertools.islice(pending, index))
                self._dropped += len(item.parts) if cls is _TextRun else 1
            elif kept is not None:
                kept.append(item)
        if kept is not None:
            # In place: the reader holds on to the deque across its waits.
            pending.clear()
            pending.extend(kept)
        if turn_id not in self._next_seq:
            # Nothing of this turn reached the reader: nothing on screen to clear.
            self._dropped += 1
            return False
        self._pending.append(event)
        return True

    def _wake(self) -> None:
        """Wake the reader, whether idle or pacing: something that must not wait arrived."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()
        pacer = self._pacer
        if pacer is not None:
            self._pacer = None
            pacer.set()

    def _holds_more_than_text(self) -> bool:
        """Whether anything but text waits: the text ahead of it is not paced then."""
        return any(item.__class__ is not _TextRun for item in self._pending)

    def _take(self) -> ItemT:
        """Hand the next waiting item to the reader; raise WouldBlock / EndOfStream if none."""
        if self._reader_closed:
            raise anyio.ClosedResourceError
        pending = self._pending
        if not pending:
            if self._sink_closed:
                raise anyio.EndOfStream
            raise anyio.WouldBlock
        item = pending.popleft()
        self._delivered += 1
        cls = item.__class__
        if cls is _TextRun:
            parts = item.parts
            count = len(parts)
            self._delivered_events += 1
            self._merged += count - 1
            seq = self._stamp(item.turn_id)
            text = parts[0] if count == 1 else "".join(parts)
            return cast(
                "ItemT", TextEvent(turn_id=item.turn_id, epoch=item.epoch, seq=seq, text=text)
            )
        if cls is ResetEvent:
            self._delivered_events += 1
            seq = self._stamp(item.turn_id)
            return cast(
                "ItemT",
                ResetEvent(turn_id=item.turn_id, epoch=item.epoch, seq=seq, reason=item.reason),
            )
        if cls is ToolCallDeltaEvent or cls is ReasoningEvent:
            # On the reader's screen now: a later reset of the turn must reach it.
            self._delivered_events += 1
            self._next_seq.setdefault(item.turn_id, 0)
        return cast("ItemT", item)

    def _stamp(self, turn_id: str) -> int:
        seq = self._next_seq.get(turn_id, 0)
        self._next_seq[turn_id] = seq + 1
        return seq

    def _close_reader(self) -> None:
        if self._reader_closed:
            return
        self._reader_closed = True
        self._refusal = anyio.BrokenResourceError
        for item in self._pending:
            if item.__class__ is _TextRun:
                self._dropped += len(item.parts)
            elif item.__class__ in _SINGLE_EVENTS:
                self._dropped += 1
        self._pending.clear()
        self._wake()


@final
class CoalescingReceiver(Generic[ItemT]):
    """The reading end of a [CoalescingSink][juno_bind_trio.completion.CoalescingSink].

    ``async for item in receiver`` yields items in the order they were sent,
    text merged as the sink describes, and ends when the sink is closed and
    everything waiting has been taken. ``receive()`` raises
    ``anyio.EndOfStream`` at that point, as an anyio receive stream does.

    Closing it (``close()``, or ``async with``) tells the producer the reader
    is gone: what was waiting is discarded and every later ``emit`` raises.
    """

    __slots__ = ("_receiving", "_sink")

    def __init__(self, sink: CoalescingSink[ItemT]) -> None:
        self._sink = sink
        self._receiving = False

    def __repr__(self) -> str:
        return f"<CoalescingReceiver of {self._sink!r}>"

    @property
    def sink(self) -> CoalescingSink[ItemT]:
        """The sending end."""
        return self._sink

    def receive_nowait(self) -> ItemT:
        """The next item; ``anyio.WouldBlock`` if none waits, ``anyio.EndOfStream`` at the end."""
        return self._sink._take()

    async def receive(self) -> ItemT:
        """The next item, waiting for one. A checkpoint; cancelling it loses nothing.

        Text is handed over at most once per the sink's ``interval``: if the
        last text was taken less than that ago, the reader waits out the rest
        while more text merges into what is waiting. Any other item, a reset,
        and everything after the sink was closed come at once, with the text
        ahead of them, even to a reader already waiting out the interval: the
        reader of a finished turn ends when the sink closes, not a frame later.

        There is one reader: a second task calling ``receive()`` while one
        waits raises ``anyio.BusyResourceError`` (the sink wakes one waiter,
        so the other would wait for ever).
        """
        await anyio.lowlevel.checkpoint()
        if self._receiving:
            raise anyio.BusyResourceError("receiving from")
        self._receiving = True
        try:
            return await self._receive()
        finally:
            self._receiving = False

    async def _receive(self) -> ItemT:
        sink = self._sink
        pending = sink._pending
        while True:
            if pending:
                if pending[0].__class__ is not _TextRun or sink._sink_closed:
                    return sink._take()
                now = anyio.current_time()
                if now < sink._not_before and not sink._holds_more_than_text():
                    # Too soon after the last text: let more merge first.
                    await self._pace(sink._not_before - now)
                    continue
                sink._not_before = now + sink._interval
                return sink._take()
            if sink._sink_closed or sink._reader_closed:
                return sink._take()  # EndOfStream / ClosedResourceError
            now = anyio.current_time()
            if now < sink._not_before:
                # Nothing yet, and no text may be taken before then anyway:
                # one timer wake-up instead of a wake per emit plus a timer.
                await self._pace(sink._not_before - now)
                continue
            waiter = anyio.Event()
            sink._waiter = waiter
            await waiter.wait()

    async def _pace(self, delay: float) -> None:
        # Wait out the interval, but not past a close, a reset or any other
        # item: those come at once, and so does the text ahead of them. A
        # reader that slept through a close kept the turn's end (a task group
        # waiting for the reader) a frame late.
        #
        # A host's bare task.cancel() landing in the step where this scope's
        # deadline fires arrives with the scope's message, and anyio could then
        # let an outer scope swallow it; raised afresh, no scope claims it.
        sink = self._sink
        pacer = sink._pacer = anyio.Event()
        try:
            with anyio.move_on_after(delay):
                await pacer.wait()
        except BaseException as exc:
            fresh = task_cancellation(exc)
            if fresh is not None:
                raise_task_cancellation(fresh)
            raise
        finally:
            sink._pacer = None

    def __aiter__(self) -> CoalescingReceiver[ItemT]:
        return self

    async def __anext__(self) -> ItemT:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """The reader is gone: drop what waits; later ``emit`` raises ``BrokenResourceError``."""
        self._sink._close_reader()

    async def aclose(self) -> None:
        """[close][juno_bind_trio.completion.CoalescingReceiver.close], then a checkpoint."""
        self.close()
        await anyio.lowlevel.checkpoint()

    async def __aenter__(self) -> CoalescingReceiver[ItemT]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __enter__(self) -> CoalescingReceiver[ItemT]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class MemorySinkPair(NamedTuple, Generic[ItemT]):
    """``(sink, events)`` from [open_memory_sink][juno_bind_trio.completion.open_memory_sink].

    Unpack it, or use it as an async context manager, which closes the
    *sink* on the way out (however the block ends), so that a reader looping
    over ``events`` finishes with everything that was sent and then stops:

        async with open_memory_sink() as (sink, events):
            tg.start_soon(render, events)
            await loop.run()
    """

    sink: CoalescingSink[ItemT]
    events: CoalescingReceiver[ItemT]

    async def __aenter__(self) -> MemorySinkPair[ItemT]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # No checkpoint: the reader must be ended even on the way out of a cancel.
        self.sink.close()
