"""The loop's two channels: events out to observers, interrupts in from the user.

An observer can never change how a run goes. An event is sent with
``send_nowait``: a full, closed or broken channel drops it and counts it, and
the run goes on (an observer that cannot keep up must not slow the run, and
one that went away must not end it; the count is how a host notices either).
Interrupts are drained with ``receive_nowait`` before every model call, into
the transcript as user messages, so the turn about to start sees what the
user just said; a channel the host closed is simply not asked again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import trio

from ._events import Interrupt, InterruptReceivedEvent

if TYPE_CHECKING:
    from ._counters import Counters
    from ._events import LoopEvent

__all__ = ["Observers"]

# An interrupts channel is empty (or done) when receive_nowait raises one of these.
# Both libraries' classes: a trio host may hand the loop a trio channel.
_EMPTY: Final = (anyio.WouldBlock, trio.WouldBlock)
_DONE: Final = (
    anyio.EndOfStream,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    trio.EndOfChannel,
    trio.ClosedResourceError,
    trio.BrokenResourceError,
)


@final
class Observers:
    """The events channel's ``send_nowait`` and the interrupts channel's ``receive_nowait``.

    ``send`` is ``None`` when nobody observes: the loop then builds no event.
    """

    __slots__ = ("_counters", "_receive", "send")

    def __init__(
        self,
        send: Callable[[LoopEvent], None] | None,
        receive: Callable[[], Any] | None,
        counters: Counters,
    ) -> None:
        self.send = send
        self._receive = receive
        self._counters = counters

    def emit(self, event: LoopEvent) -> None:
        """Send *event*; dropped and counted, never raised, if the channel refuses it."""
        send = self.send
        if send is None:
            return
        try:
            send(event)
        except Exception:
            self._counters.events_dropped += 1
        else:
            self._counters.events_sent += 1

    def drain_interrupts(self, iteration: int, messages: list[dict[str, Any]]) -> None:
        """Append every interrupt waiting now to *messages*, as a user message each."""
        receive = self._receive
        if receive is None:
            return
        while True:
            try:
                item = receive()
            except _EMPTY:
                return
            except _DONE:
                # The host closed its end: nothing more will come, stop asking.
                self._receive = None
                return
            if not isinstance(item, Interrupt):
                raise TypeError(f"ToolLoop: interrupts must carry Interrupt items, got {item!r}")
            messages.append({"role": "user", "content": item.content})
            self._counters.interrupts_received += 1
            if self.send is not None:
                self.emit(InterruptReceivedEvent(iteration, item))
