"""Where a turn's text goes: the sink protocol and the two sinks that ship.

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
from typing import Protocol, final, runtime_checkable

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

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
    """What a :class:`~juno_bind_trio.completion.TurnTextStream` writes to.

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
    """Collects every event in :attr:`events`. For tests, benchmarks and relays.

    ``emit`` is the list's own ``append``, so this sink adds nothing to the
    cost of a delta.
    """

    __slots__ = ("emit", "events", "retractable")

    def __init__(self, *, retractable: bool = True) -> None:
        if not isinstance(retractable, bool):
            raise TypeError(f"ListSink: retractable must be a bool, got {retractable!r}")
        self.retractable: bool = retractable
        self.events: list[TurnStreamEvent] = []
        self.emit = self.events.append

    def __repr__(self) -> str:
        return f"ListSink(retractable={self.retractable}, events={len(self.events)})"


DEFAULT_SINK_BUFFER_SIZE = 1024
"""Default buffer of :func:`open_memory_sink`: a long answer's worth of deltas.

Big enough that a consumer that keeps up with a screen never fills it; small
enough that a consumer that died holds at most this many events before the
stream starts counting sink errors.
"""


@final
@attrs.define(eq=False)
class MemoryStreamSink:
    """A sink over an anyio memory object stream.

    ``emit`` is ``send_nowait``: the turn never waits for a slow reader. When
    the buffer is full (``anyio.WouldBlock``) or the reader is gone
    (``anyio.BrokenResourceError``, ``anyio.ClosedResourceError``) ``emit``
    raises, and the stream counts a sink error, exactly as the contract says
    for a closed socket. What that means for the reader: a lost *text* event
    leaves a gap in ``seq`` that a :class:`TurnTextView` holds across until
    its hold buffer overflows and it asks for a resync; a lost *reset* latches
    ``produced_output`` so routing stops replaying onto a surface that never
    cleared. Size the buffer so that this happens only when the reader has
    really stopped reading.
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

    def emit(self, event: TurnStreamEvent, /) -> None:
        self.send_stream.send_nowait(event)


def open_memory_sink(
    max_buffer_size: float = DEFAULT_SINK_BUFFER_SIZE, *, retractable: bool = True
) -> tuple[MemoryStreamSink, MemoryObjectReceiveStream[TurnStreamEvent]]:
    """Create a memory stream and a sink over its sending end.

    Returns ``(sink, receive_stream)``. Close the receive stream (``async
    with``) when the reader is done; later events then count as sink errors
    rather than piling up. ``max_buffer_size`` may be ``math.inf`` when the
    reader is known to outlive the turn.
    """
    if max_buffer_size != math.inf and (
        isinstance(max_buffer_size, bool) or not isinstance(max_buffer_size, int)
    ):
        raise TypeError(
            "open_memory_sink: max_buffer_size must be a non-negative integer or math.inf, "
            f"got {max_buffer_size!r}"
        )
    if max_buffer_size < 0:
        raise ValueError(
            "open_memory_sink: max_buffer_size must be a non-negative integer or math.inf, "
            f"got {max_buffer_size!r}"
        )
    if not isinstance(retractable, bool):
        # Checked before the streams exist: refused later, they would leak unclosed.
        raise TypeError(f"open_memory_sink: retractable must be a bool, got {retractable!r}")
    send, receive = anyio.create_memory_object_stream[TurnStreamEvent](max_buffer_size)
    return MemoryStreamSink(send, retractable=retractable), receive
