"""Where a turn's text goes: the sink protocol and the sinks that ship.

``retractable`` is the whole decision, and it belongs to the *surface*, not to
the transport that writes to it. A view that re-renders from the events it is
sent is retractable. A chat message already posted through a third-party API,
an email, a webhook delivery, an append-only transcript row are not. Wire only
retractable surfaces to a stream when you can: a host that must also deliver
somewhere permanent should do that from the *completed* turn. If one sink
fans out to a mix, declare it ``retractable=False``: the conservative answer
costs a fallback, the optimistic one costs the user's trust (they get the
turn twice).

A sink that buffers (coalescing deltas before releasing them) may drop a
reset whose epoch never left its buffer, along with the text that reset
would have wiped: nothing was rendered, so nothing needs retracting. Only the
sink knows what it has released, so only the sink can make that saving.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, final, runtime_checkable

import attrs
from anyio.streams.memory import MemoryObjectSendStream

from ._coalescing import DEFAULT_HANDOFF_INTERVAL, CoalescingSink, MemorySinkPair, check_interval
from ._events import TurnStreamEvent

__all__ = [
    "DEFAULT_SINK_BUFFER_SIZE",
    "ListSink",
    "MemoryStreamSink",
    "TurnStreamSink",
    "open_memory_sink",
]


@runtime_checkable
class TurnStreamSink(Protocol):
    """What a [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream] writes to.

    ``retractable`` is read **once**, when the stream is created. Re-reading
    it would let ``produced_output`` go from true back to false: a sink that
    flipped after the first byte could un-clamp routing after the executor had
    been told the turn was replayable, and a permanent surface would get the
    turn twice.

    ``emit`` delivers one event, synchronously. It may raise: a closed socket
    is ordinary, not exceptional. The stream counts the failure in
    ``sink_errors`` and goes on; it never lets it end the model turn.
    """

    @property
    def retractable(self) -> bool: ...

    def emit(self, event: TurnStreamEvent, /) -> None: ...


@final
class ListSink:
    """Collects every event in [`events`][juno_bind_trio.completion.ListSink]. For tests, benchmarks
    and relays.

    ``emit`` is the list's own ``append``, so this sink adds nothing to the
    cost of a delta.
    """

    __slots__ = ("emit", "events", "retractable")

    def __init__(self, *, retractable: bool = True) -> None:
        if not isinstance(retractable, bool):
            raise TypeError(f"ListSink: retractable must be a bool, got {retractable!r}")
        self.retractable: bool = retractable
        self.events: list[TurnStreamEvent] = []
        self.emit: Callable[[TurnStreamEvent], None] = self.events.append

    def __repr__(self) -> str:
        return f"ListSink(retractable={self.retractable}, events={len(self.events)})"


DEFAULT_SINK_BUFFER_SIZE = 1024
"""A sensible buffer for a [MemoryStreamSink][juno_bind_trio.completion.MemoryStreamSink].

Big enough to ride out a relay's brief pause; small enough that a consumer
that died holds at most this many events before the stream starts counting
sink errors. A reader in the same process should not use a bounded buffer at
all: [open_memory_sink][juno_bind_trio.completion.open_memory_sink] merges
instead.
"""


@final
@attrs.define(eq=False, repr=False)
class MemoryStreamSink:
    """A sink over an anyio memory object stream: one item per event, never merged.

    For a *relay*: a task that forwards each event to another process (a
    WebSocket, a queue) and wants them one by one, with the stream's own
    ``seq``. A reader in the same process that renders the text wants
    [open_memory_sink][juno_bind_trio.completion.open_memory_sink] instead:
    this sink cannot keep up with a fast provider (see below).

    ``emit`` is ``send_nowait``: the turn never waits for a slow reader. When
    the buffer is full (``anyio.WouldBlock``) or the reader is gone
    (``anyio.BrokenResourceError``, ``anyio.ClosedResourceError``) ``emit``
    raises, and the stream counts a sink error, exactly as the contract says
    for a closed socket. A task in the same process is scheduled only at the
    turn's checkpoints, which a fast stream reaches a few times per thousand
    deltas, so a bounded buffer *does* fill under a burst however quick the
    reader is. What a lost event means for the reader: a lost *text* event
    leaves a gap in ``seq`` that a [TurnTextView][juno_bind_trio.completion.TurnTextView]
    holds across until its hold buffer overflows and it asks for a resync; a
    lost *reset* latches ``produced_output`` so routing stops replaying onto a
    surface that never cleared.
    """

    send_stream: MemoryObjectSendStream[TurnStreamEvent]
    retractable: bool = attrs.field(default=True, kw_only=True)

    def __attrs_post_init__(self) -> None:
        # Checked here, not left to emit: there every failure is counted as a
        # sink error and the turn goes on, so a wrong object would silently
        # deliver nothing for the whole turn.
        if not isinstance(self.send_stream, MemoryObjectSendStream):
            raise TypeError(
                "MemoryStreamSink: send_stream must be a MemoryObjectSendStream, "
                f"got {self.send_stream!r}"
            )
        if not isinstance(self.retractable, bool):
            raise TypeError(
                f"MemoryStreamSink: retractable must be a bool, got {self.retractable!r}"
            )

    def __repr__(self) -> str:
        stats = self.send_stream.statistics()
        size = stats.max_buffer_size
        shown = "unbounded" if size == math.inf else str(int(size))
        if stats.open_send_streams == 0:
            state = "closed"
        elif stats.open_receive_streams == 0:
            state = "reader closed"
        else:
            state = "open"
        return (
            f"<MemoryStreamSink {state} retractable={self.retractable} "
            f"buffered={stats.current_buffer_used}/{shown}>"
        )

    def emit(self, event: TurnStreamEvent, /) -> None:
        self.send_stream.send_nowait(event)


def open_memory_sink(
    *, retractable: bool = True, interval: float = DEFAULT_HANDOFF_INTERVAL
) -> MemorySinkPair[TurnStreamEvent]:
    """A sink and the events it sends, for a reader task in the same process.

    Returns ``(sink, events)``: a [CoalescingSink][juno_bind_trio.completion.CoalescingSink]
    and its [CoalescingReceiver][juno_bind_trio.completion.CoalescingReceiver].
    The reader never loses text, however fast the provider and however slow
    the reader: text events still waiting for it merge, so it always renders
    a state the turn really passed through and, once it has taken everything,
    exactly the turn's text. The producer never waits for it, and text is
    handed over at most once per *interval* seconds (a screen's frame by
    default), which keeps a reader's cost per turn to a few dozen hand-offs a
    second however fast the provider streams.

    Use the pair as an async context manager so that the reader ends when
    the producer does:

        async with anyio.create_task_group() as tg:
            async with open_memory_sink() as (sink, events):
                tg.start_soon(render, events)   # async for event in events: ...
                await loop.run()
            # leaving the block closed the sink: render() takes the rest and returns

    Or unpack it and call ``sink.close()`` yourself when the turn or run is
    over. A reader that stops early closes ``events``; later events then
    count as sink errors.
    """
    if not isinstance(retractable, bool):
        raise TypeError(f"open_memory_sink: retractable must be a bool, got {retractable!r}")
    check_interval("open_memory_sink", interval)
    sink: CoalescingSink[TurnStreamEvent] = CoalescingSink(
        retractable=retractable, interval=interval
    )
    return MemorySinkPair(sink, sink.receiver)
