"""What the fake server says: scripted responses, stream events and faults.

A script is data, not code: each response is a frozen value, so a test reads
as the exchange it provokes. A streamed response is a list of *events*, each
becoming one SSE ``data:`` line (or one fault at that point of the stream),
which makes "close after N chunks" simply "put [`Disconnect`][juno_bind_trio.testing.Disconnect]
after N events".

Faults and what the real SDK raises for each (measured with openai 3.57, see
the project's notes on the SDK under Trio):

======================================  ==========================================
script                                  ``openai`` raises
======================================  ==========================================
``FakeOpenAIServer.refused_base_url``   ``APIConnectionError``
[`CloseBeforeResponse`][juno_bind_trio.testing.CloseBeforeResponse]
``APIConnectionError`` [`ErrorResponse`][juno_bind_trio.testing.ErrorResponse] (429, 500, …)
``RateLimitError``, ``InternalServerError``, … [`Disconnect`][juno_bind_trio.testing.Disconnect]
mid-stream          ``APIConnectionError`` from the iteration
[`ErrorEvent`][juno_bind_trio.testing.ErrorEvent] mid-stream          plain ``APIError`` (no
``status_code``) [`MalformedChunk`][juno_bind_trio.testing.MalformedChunk]
``json.JSONDecodeError`` (not an ``OpenAIError``) ``StreamResponse(done=False)``          nothing:
the stream just ends, no finish reason ``first_byte_delay`` /
[`Pause`][juno_bind_trio.testing.Pause]   ``APITimeoutError`` once the client's read
                                        timeout passes
======================================  ==========================================
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs

from juno_bind_trio._validate import error_kind, real_number, shown

__all__ = [
    "CloseBeforeResponse",
    "CompletionResponse",
    "Disconnect",
    "ErrorEvent",
    "ErrorResponse",
    "FakeResponse",
    "Finish",
    "MalformedChunk",
    "Pause",
    "RawEvent",
    "ReasoningDelta",
    "StreamEvent",
    "StreamResponse",
    "TextDelta",
    "ToolCallDelta",
    "Usage",
]


def _check_delay(owner: str, name: str, value: object) -> float:
    # nan compares false with everything, so an unchecked nan delay would be
    # "no delay" on one backend and an error on the other.
    seconds = real_number(value)
    message = f"{owner}: {name} must be a non-negative number of seconds, got {shown(value)}"
    if seconds is None:
        raise TypeError(message)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(message)
    return seconds


def _delay_field(owner: str, name: str) -> Any:
    def convert(value: float) -> float:
        return _check_delay(owner, name, value)

    return attrs.field(default=0.0, converter=convert, kw_only=True)


# --- stream events ------------------------------------------------------------


@attrs.frozen
class TextDelta:
    """One chunk whose ``delta.content`` is *text*."""

    text: str


@attrs.frozen
class ReasoningDelta:
    """One chunk carrying reasoning text in the delta's *field*.

    OpenAI-compatible providers use ``reasoning_content`` (the default) or
    ``reasoning``; the SDK surfaces either in ``delta.model_extra``.
    """

    text: str
    field: str = "reasoning_content"


@attrs.frozen
class ToolCallDelta:
    """One chunk with one ``delta.tool_calls`` entry: a fragment of call *index*.

    The first fragment of a call usually carries *id* and *name*; later ones
    only argument text. ``None`` fields are left out of the JSON, as real
    providers leave them out.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    thought_signature: str | None = attrs.field(default=None, kw_only=True)
    """On the OpenAI-compatible wire, the call's ``extra_content.google.thought_signature``, as
    Gemini's compatible endpoint sends it (the other fakes' wires ignore it)."""


@attrs.frozen
class Finish:
    """One chunk with an empty delta and ``finish_reason`` *reason*."""

    reason: str = "stop"


@attrs.frozen
class Usage:
    """The ``stream_options.include_usage`` chunk: ``choices: []`` plus ``usage``.

    *cached_tokens* (of the prompt) and *reasoning_tokens* (of the completion)
    go in the usage's details, as OpenAI reports them; other fakes speak them
    in their own wire's words.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = attrs.field(default=0, kw_only=True)
    """Of *prompt_tokens*, read from the provider's cache (the wires that report it)."""
    reasoning_tokens: int = attrs.field(default=0, kw_only=True)
    """Of *completion_tokens*, spent reasoning (the wires that report it)."""


def _pause_seconds(value: float) -> float:
    return _check_delay("Pause", "seconds", value)


@attrs.frozen
class Pause:
    """Send nothing for *seconds* (on the event loop's clock) at this point of the stream.

    ``math.inf`` stalls until the client gives up.
    """

    seconds: float = attrs.field(converter=_pause_seconds)


@attrs.frozen
class ErrorEvent:
    """A ``data: {"error": {...}}`` event, as providers send when they fail mid-stream."""

    message: str = "the model crashed mid-stream"
    type: str = "server_error"
    code: str | None = None


@attrs.frozen
class MalformedChunk:
    """A ``data:`` line that is not JSON. *raw* is sent verbatim."""

    raw: str = '{"choices": [{"delta": {"content": "tru'


@attrs.frozen
class RawEvent:
    """A ``data:`` line with *data* verbatim, for shapes the other events cannot say."""

    data: str


@attrs.frozen
class Disconnect:
    """Drop the TCP connection here, mid-body: the chunked body never completes."""


StreamEvent: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | Finish
    | Usage
    | Pause
    | ErrorEvent
    | MalformedChunk
    | RawEvent
    | Disconnect
)
"""One step of a [`StreamResponse`][juno_bind_trio.testing.StreamResponse]."""

_STREAM_EVENT_TYPES: Final = (
    TextDelta,
    ReasoningDelta,
    ToolCallDelta,
    Finish,
    Usage,
    Pause,
    ErrorEvent,
    MalformedChunk,
    RawEvent,
    Disconnect,
)


def _check_events(given: Sequence[StreamEvent]) -> tuple[StreamEvent, ...]:
    value: object = given  # checked at run time, whatever the type says
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f"StreamResponse: events must be a sequence of stream events, got {value!r}"
        )
    events = tuple(value)
    for event in events:
        if not isinstance(event, _STREAM_EVENT_TYPES):
            raise TypeError(f"StreamResponse: not a stream event: {event!r}")
    return events


def _check_headers(
    given: Mapping[str, str] | Sequence[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    value: object = given  # checked at run time, whatever the type says
    items: Any = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = tuple((str(k), str(v)) for k, v in items)
    except (TypeError, ValueError):
        raise TypeError(
            f"ErrorResponse: headers must be a mapping or (name, value) pairs, got {value!r}"
        ) from None
    return pairs


# --- responses ------------------------------------------------------------------


@attrs.frozen
class StreamResponse:
    """A ``text/event-stream`` answer: one SSE event per stream event, then ``[DONE]``.

    * *events*: the stream, in order.
    * *done*: send ``data: [DONE]`` and end the body cleanly. ``False``
        ends the body cleanly *without* it, the silent truncation the SDK does
        not report.
    * *first_byte_delay*: seconds before the status line (``math.inf``: never).
    * *chunk_delay*: seconds before every event after the first.
    * *model*: the ``model`` field of each chunk; ``None`` echoes the request's.
    """

    events: tuple[StreamEvent, ...] = attrs.field(converter=_check_events)
    done: bool = attrs.field(default=True, kw_only=True)
    first_byte_delay: float = _delay_field("StreamResponse", "first_byte_delay")
    chunk_delay: float = _delay_field("StreamResponse", "chunk_delay")
    model: str | None = attrs.field(default=None, kw_only=True)

    @classmethod
    def of_text(
        cls, *pieces: str, finish: str | None = "stop", usage: Usage | None = None, **options: Any
    ) -> StreamResponse:
        """A plain text answer streamed as *pieces*, then *finish* and *usage* if given."""
        events: list[StreamEvent] = [TextDelta(p) for p in pieces]
        if finish is not None:
            events.append(Finish(finish))
        if usage is not None:
            events.append(usage)
        return cls(events, **options)

    @classmethod
    def of_tool_calls(
        cls,
        *calls: tuple[str, str, str],
        fragments: int = 2,
        text: str | None = None,
        **options: Any,
    ) -> StreamResponse:
        """Tool calls ``(id, name, arguments_json)`` streamed in argument *fragments*.

        An optional *text* is streamed first (narration before the calls);
        the stream ends with ``finish_reason: "tool_calls"``.
        """
        if type(fragments) is not int or fragments < 1:
            raise ValueError(
                f"StreamResponse.of_tool_calls: fragments must be a positive int, got {fragments!r}"
            )
        events: list[StreamEvent] = [] if text is None else [TextDelta(text)]
        for index, (call_id, name, arguments) in enumerate(calls):
            size = max(1, -(-len(arguments) // fragments))
            parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
            events.append(ToolCallDelta(index, id=call_id, name=name, arguments=parts[0]))
            events.extend(ToolCallDelta(index, arguments=part) for part in parts[1:])
        events.append(Finish("tool_calls"))
        return cls(events, **options)


def _tool_calls(value: Iterable[object]) -> tuple[tuple[str, str, str], ...]:
    given: object = value
    if isinstance(given, str | bytes) or not isinstance(given, Iterable):
        raise TypeError(
            "CompletionResponse: tool_calls must be an iterable of (id, name, arguments) "
            f"string triples, got {given!r}"
        )
    calls: list[tuple[str, str, str]] = []
    for call in value:
        match call:
            case (str() as call_id, str() as name, str() as arguments):
                calls.append((call_id, name, arguments))
            case _:
                raise TypeError(
                    "CompletionResponse: tool_calls must be (id, name, arguments) string triples, "
                    f"got {call!r}"
                )
    return tuple(calls)


@attrs.frozen
class CompletionResponse:
    """A non-streamed ``chat.completion`` JSON answer.

    * *tool_calls*: ``(id, name, arguments_json)`` triples.
    * *delay*: seconds before the status line (``math.inf``: never).
    """

    content: str | None = None
    tool_calls: tuple[tuple[str, str, str], ...] = attrs.field(default=(), converter=_tool_calls)
    finish_reason: str = "stop"
    reasoning: str | None = attrs.field(default=None, kw_only=True)
    usage: Usage | None = attrs.field(default=None, kw_only=True)
    delay: float = _delay_field("CompletionResponse", "delay")
    model: str | None = attrs.field(default=None, kw_only=True)


_REASON_PHRASES: Final = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


def _check_status(given: int) -> int:
    value: object = given  # checked at run time, whatever the type says
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        raise (TypeError if isinstance(value, bool) else error_kind(value, int))(
            f"ErrorResponse: status must be an int in 400..599, got {value!r}"
        )
    return value


def _check_retry_after(value: float | None) -> float | None:
    return None if value is None else _check_delay("ErrorResponse", "retry_after", value)


@attrs.frozen
class ErrorResponse:
    """An HTTP error with an OpenAI-shaped JSON body ``{"error": {...}}``.

    * *code*: the error's ``code`` (``"context_length_exceeded"``, …).
    * *param*: the error's ``param``, the request field at fault
      (``"messages.[3].role"``); ``null`` when not given, as the API sends it.
    * *retry_after*: sent as the ``retry-after`` header (seconds).
    * *delay*: seconds before the status line.
    """

    status: int = attrs.field(converter=_check_status)
    message: str | None = None
    code: str | None = attrs.field(default=None, kw_only=True)
    param: str | None = attrs.field(default=None, kw_only=True)
    retry_after: float | None = attrs.field(
        default=None, converter=_check_retry_after, kw_only=True
    )
    headers: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_check_headers, kw_only=True
    )
    delay: float = _delay_field("ErrorResponse", "delay")

    @property
    def reason(self) -> bytes:
        return _REASON_PHRASES.get(self.status, "Error").encode()

    def body(self) -> bytes:
        error = {
            "message": self.message or f"fake server: scripted {self.status}",
            "type": _ERROR_TYPES.get(self.status, "server_error"),
            "param": self.param,
            "code": self.code,
        }
        return json.dumps({"error": error}).encode()


@attrs.frozen
class CloseBeforeResponse:
    """Read the request, wait *delay*, then close the connection without a byte of answer."""

    delay: float = _delay_field("CloseBeforeResponse", "delay")


FakeResponse: TypeAlias = StreamResponse | CompletionResponse | ErrorResponse | CloseBeforeResponse
"""Anything the server can be scripted to answer one request with."""

FAKE_RESPONSE_TYPES: Final = (
    StreamResponse,
    CompletionResponse,
    ErrorResponse,
    CloseBeforeResponse,
)


# --- encoding -------------------------------------------------------------------


def _tool_call_json(delta: ToolCallDelta) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": delta.index}
    if delta.id is not None:
        entry["id"] = delta.id
        entry["type"] = "function"
    function: dict[str, str] = {}
    if delta.name is not None:
        function["name"] = delta.name
    if delta.arguments is not None:
        function["arguments"] = delta.arguments
    if function:
        entry["function"] = function
    if delta.thought_signature is not None:
        entry["extra_content"] = {"google": {"thought_signature": delta.thought_signature}}
    return entry


def encode_event(
    event: StreamEvent, *, completion_id: str, model: str, first: bool
) -> bytes | None:
    """The SSE bytes for one data event, or ``None`` for a control event."""
    if isinstance(event, (Pause, Disconnect)):
        return None
    if isinstance(event, MalformedChunk):
        return f"data: {event.raw}\n\n".encode()
    if isinstance(event, RawEvent):
        return f"data: {event.data}\n\n".encode()
    if isinstance(event, ErrorEvent):
        error = {"message": event.message, "type": event.type, "code": event.code}
        return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
    }
    if isinstance(event, Usage):
        chunk["choices"] = []
        chunk["usage"] = _usage_json(event)
    else:
        delta: dict[str, Any] = {"role": "assistant"} if first else {}
        finish_reason: str | None = None
        if isinstance(event, TextDelta):
            delta["content"] = event.text
        elif isinstance(event, ReasoningDelta):
            delta[event.field] = event.text
        elif isinstance(event, ToolCallDelta):
            delta["tool_calls"] = [_tool_call_json(event)]
        else:
            finish_reason = event.reason
        chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _usage_json(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def encode_completion(response: CompletionResponse, *, completion_id: str, model: str) -> bytes:
    """The JSON body of a non-streamed completion."""
    message: dict[str, Any] = {"role": "assistant", "content": response.content}
    if response.reasoning is not None:
        message["reasoning_content"] = response.reasoning
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in response.tool_calls
        ]
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": response.finish_reason}],
    }
    if response.usage is not None:
        body["usage"] = _usage_json(response.usage)
    return json.dumps(body).encode()
