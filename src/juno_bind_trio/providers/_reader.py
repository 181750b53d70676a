"""The wiring every provider's stream reader shares, and the loop that feeds it events.

Each wire has a reader of its own (``openai/_chunks.py``, ``openai/_responses_events.py``,
``anthropic/_events.py``, ``google/_turn.py``): what an event means differs, but what a
reader tells the rest of the turn as it reads does not. It tells the watchdog whether a
piece was answer, reasoning or only a sign of life; it hands text and reasoning to the
turn's text stream; it folds tool-call pieces in a
[`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator], which shows each
fragment to the text stream too; at the end it refuses a completion with a defect.
``StreamReader`` wires those once, the same way for every wire, and binds each callback
a reader calls per event to an attribute of its own: a reader runs per delta, a long
answer has thousands, and a bound method looked up once is the cheapest call there is.

``feed_events()`` is the loop of the paths that read a stream the SDK split: each event
to the reader's ``feed`` as the plain ``dict`` the reader takes (an SDK model's
``to_dict()``), with a checkpoint every ``EVENTS_PER_CHECKPOINT`` events.
``wrong_shape()`` and ``not_an_event_stream()`` word the two refusals each wire raises
as its own SDK's ``APIResponseValidationError``: an event of the wrong shape, and a
body that is no event stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any, Final

import anyio.lowlevel

from juno_bind_trio.completion import (
    AssembledCompletion,
    StreamedToolCall,
    StreamWatchdog,
    ToolCallAccumulator,
    TurnTextStream,
    detect_completion_defect,
)

__all__ = [
    "EVENTS_PER_CHECKPOINT",
    "StreamReader",
    "feed_events",
    "not_an_event_stream",
    "refuse_a_defect",
    "wrong_shape",
]

EVENTS_PER_CHECKPOINT: Final = 16
"""Events read between two checkpoints. A read that finds many events waiting (a client
behind its server, many streams at once) hands them over without one: the HTTP stack
parses them out of its buffer, and a 200-event answer could be read in one task step,
holding the event loop for tens of milliseconds. One every so many bounds the step; when
every event comes from a read of its own (the usual case) it costs a fraction of a
microsecond per event."""


class StreamReader:
    """The callbacks a reader calls per event, bound once: for a subclass, never alone.

    ``_answer()``, ``_alive()``, ``_thinking()``: the watchdog's ``answer``, ``chunk``
    and ``reasoning``. ``_observe(text)``, ``_reason(text)``: the text stream's
    ``observe`` and ``reasoning``, or ``None`` without a text stream.
    ``_accumulator`` and its ``add`` as ``_add_call(piece)``: the turn's tool calls,
    each fragment also shown to the text stream (a no-op for a sink that does not
    show arguments as they arrive).
    """

    __slots__ = (
        "_accumulator",
        "_add_call",
        "_alive",
        "_answer",
        "_observe",
        "_reason",
        "_thinking",
        "_watchdog",
    )

    def __init__(self, watchdog: StreamWatchdog, text_stream: TurnTextStream | None) -> None:
        self._watchdog = watchdog
        self._answer, self._alive, self._thinking = (
            watchdog.answer,
            watchdog.chunk,
            watchdog.reasoning,
        )
        self._observe: Callable[[str], None] | None
        self._reason: Callable[[str], None] | None
        if text_stream is None:
            self._observe = self._reason = None
            self._accumulator = ToolCallAccumulator(on_delta=None)
        else:
            self._observe, self._reason = text_stream.observe, text_stream.reasoning
            self._accumulator = ToolCallAccumulator(on_delta=text_stream.tool_call_delta)
        self._add_call = self._accumulator.add

    def _time_to_first_token(self, started: float) -> float | None:
        """Seconds from *started* to the first answer, or ``None`` where none came."""
        first_answer_at = self._watchdog.statistics().first_answer_at
        return None if first_answer_at is None else first_answer_at - started


def refuse_a_defect(
    content: str | None,
    tool_calls: Sequence[StreamedToolCall],
    finish_reason: str | None,
    refusal: str | None,
) -> None:
    """Raise the [`CompletionDefectError`][juno_bind_trio.CompletionDefectError] of a completion
    that cannot be used (cut off, empty, filtered, a call that does not parse); else nothing."""
    defect = detect_completion_defect(
        AssembledCompletion(
            content=content, tool_calls=tool_calls, finish_reason=finish_reason, refusal=refusal
        )
    )
    if defect is not None:
        raise defect.as_error()


def not_an_event_stream(response: Any, api: str) -> str | None:
    """Why *response* is refused, where its ``Content-Type`` says it is no event stream (a
    proxy's login page answers 200 with HTML); ``None`` where it is one, or says nothing.
    *api* names what the base URL should point at (``"the Anthropic API"``)."""
    content_type: str = response.headers.get("content-type", "")
    if content_type and "event-stream" not in content_type.lower():
        return (
            f"the endpoint answered {response.status_code} with Content-Type "
            f"{content_type.split(';')[0].strip()!r}, not an event stream: is the base URL "
            f"{api}?"
        )
    return None


def wrong_shape(event: object, error: Exception) -> str:
    """The message of the error that refuses *event*, which raised *error* in a reader: the
    event as JSON with its keys sorted (the SDK path's event has them in its model's order),
    cut at 200 characters."""
    shown = json.dumps(event, sort_keys=True, default=repr)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return f"a stream event of the wrong shape ({type(error).__name__}: {error}): {shown}"


async def feed_events(
    events: AsyncIterable[Any],
    feed: Callable[[Any], object],
    model_type: type[Any] | None = None,
) -> None:
    """Hand each of *events* to *feed*, with a checkpoint every ``EVENTS_PER_CHECKPOINT``.

    With *model_type* (the SDK's pydantic base model), an event of that type goes as its
    ``to_dict(warnings=False)``: the fields the server sent, those the SDK does not model
    included; a value that is not a model the SDK left as it was, and so does this.
    """
    checkpoint, unyielded = anyio.lowlevel.checkpoint, 0
    async for event in events:
        if model_type is not None and isinstance(event, model_type):
            event = event.to_dict(warnings=False)
        feed(event)
        unyielded += 1
        if unyielded == EVENTS_PER_CHECKPOINT:
            unyielded = 0
            await checkpoint()
