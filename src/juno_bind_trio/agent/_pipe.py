"""The ordered event stream between a run and its reader, and what writes to it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, final

import anyio

from juno_bind_trio.completion import (
    CoalescingSink,
    ReasoningEvent,
    ToolCallDeltaEvent,
    TurnStreamEvent,
    TurnStreamSink,
)
from juno_bind_trio.loop import StatusEvent, ToolCallRejectedEvent
from juno_bind_trio.plugins import tool_failure_content

from ._events import AgentEvent, RunStatusEvent, ToolCallEndedEvent

if TYPE_CHECKING:
    from collections.abc import Callable

    from juno_bind_trio.loop import LoopEvent

__all__ = ["EventPipe", "FanOutSink", "LoopEvents"]


@final
class EventPipe:
    """The ordered stream between a run and its reader: synchronous in, awaited out.

    A [CoalescingSink][juno_bind_trio.completion.CoalescingSink]: the turn
    text stream writes to it as its sink, and the run's own events go on the
    same channel with ``send_nowait``, so the reader sees one order. Text
    still waiting for a busy reader merges, so memory is bounded by the text,
    not by the number of deltas, and the run never waits for the reader.

    ``put`` never raises: a reader that went away must not end the run.
    """

    __slots__ = ("_receiver", "sink")

    def __init__(self) -> None:
        self.sink: CoalescingSink[AgentEvent] = CoalescingSink(
            retractable=True, tool_call_deltas=True, reasoning=True
        )
        self._receiver = self.sink.receiver

    def put(self, event: AgentEvent) -> None:
        # The reader left: the run goes on, or is being cancelled.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.sink.send_nowait(event)

    def close(self) -> None:
        self.sink.close()

    def close_reader(self) -> None:
        self._receiver.close()

    async def get(self) -> AgentEvent:
        """The next event; ``StopAsyncIteration`` after the last."""
        try:
            return await self._receiver.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


@final
class FanOutSink:
    """Two sinks as one: retractable only if both are (the conservative answer)."""

    __slots__ = ("_first", "_second", "emit_reasoning", "retractable")

    def __init__(self, first: TurnStreamSink, second: TurnStreamSink) -> None:
        self._first = first
        self._second = second
        self.retractable: bool = bool(first.retractable) and bool(second.retractable)
        # Only a sink that shows reasoning makes the pair one that does: the
        # stream counts reasoning as output on a permanent sink that takes it.
        shown = [
            emit
            for emit in (
                getattr(first, "emit_reasoning", None),
                getattr(second, "emit_reasoning", None),
            )
            if callable(emit)
        ]
        self.emit_reasoning: Callable[[ReasoningEvent], None] | None = None
        if shown:

            def emit_reasoning(event: ReasoningEvent, /) -> None:
                try:
                    shown[0](event)
                finally:
                    if len(shown) > 1:
                        shown[1](event)

            self.emit_reasoning = emit_reasoning

    def emit(self, event: TurnStreamEvent, /) -> None:
        try:
            self._first.emit(event)
        finally:
            self._second.emit(event)

    def emit_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
        # Each sink that shows streamed arguments gets them; the others never do.
        first = getattr(self._first, "emit_tool_call_delta", None)
        second = getattr(self._second, "emit_tool_call_delta", None)
        try:
            if first is not None:
                first(event)
        finally:
            if second is not None and self._second.retractable:
                second(event)


@final
class LoopEvents:
    """What the loop's ``events`` port writes to: rejections become ended events."""

    __slots__ = ("_emit",)

    def __init__(self, emit: Callable[[AgentEvent], None]) -> None:
        self._emit = emit

    def send_nowait(self, event: LoopEvent) -> None:
        emit = self._emit
        if type(event) is StatusEvent:
            if event.status == "compacting":  # the one status a reader could not infer
                emit(RunStatusEvent(event.iteration, "compacting"))
            return
        if type(event) is not ToolCallRejectedEvent:
            return
        # Ordinary failures were reported by the dispatcher; the loop alone
        # knows which calls were refused or cut off.
        if event.kind == "not_run" or event.kind == "interrupted":
            emit(
                ToolCallEndedEvent(
                    iteration=event.iteration,
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    status=event.kind,
                    kind=event.kind,
                    content=tool_failure_content(event.message, event.kind),
                    error=event.error,
                )
            )
