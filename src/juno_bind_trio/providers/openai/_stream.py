"""One streamed chat completion over ``openai.AsyncOpenAI``, read the way routing needs it.

What the SDK gives and what a turn needs are different things. The SDK gives
a stream of chunks and raises on some failures; a turn needs an assistant
message it can act on, or an exception that says *which* failure happened,
so that routing can decide between "ask again", "ask someone else" and
"stop". The gaps this function closes:

* **Silence.** The SDK's read timeout is an idle limit per socket read and
  knows nothing about what the bytes mean. The stream is read inside a
  [`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] that is entered *before*
  the request is sent, so its first-token budget covers connecting and
  waiting for headers too, which is where a queued request spends its time.
* **Silent truncation.** A body that ends cleanly without ``[DONE]`` raises
  nothing in the SDK; the only trace is a missing finish reason. Every
  completion goes through
  [`detect_completion_defect()`][juno_bind_trio.completion.detect_completion_defect], so a cut-off,
  empty or filtered completion becomes a
  [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], which routing retries.
* **Tool calls in pieces.** Deltas are folded by a
  [`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator], which refuses
  contradictory pieces instead of gluing two calls together.
* **Live text.** Content deltas go to the turn's
  [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream], if it has one, as they
  arrive; reasoning deltas to its ``reasoning()`` and tool-call fragments to its
  ``tool_call_delta()``, which reach only a sink that shows them (see the
  stream's own notes on both).
* **Cost per chunk.** By default (``stream_path="lean"``) the SDK sends the
  request (its client options, auth, headers, base URL, timeouts and status
  errors) and this package reads the event stream itself, handing each chunk
  to the reader as the ``dict`` ``json.loads`` made: the SDK's own reader
  builds a pydantic model per chunk, about 20 times the cost of the rest.
  The SDK's reading is kept as ``stream_path="sdk"``; both end in one chunk
  reader (``_chunks.py``), the lean one follows the SDK's event-stream rules
  (``_sse.py``) and raises what the SDK raises (``APIError`` for an ``error``
  event, ``json.JSONDecodeError`` for a garbled chunk, ``APIConnectionError``
  and ``APITimeoutError`` for a lost or silent connection), and a differential
  test runs every fault through both.
* **Sockets.** The stream is always used in ``async with``: under Trio the
  SDK's finaliser cannot close an abandoned connection, so one left to the
  garbage collector leaks until then. A cancellation or a stall leaves the
  ``async with`` and closes the connection at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, TypeAlias, cast

import anyio
import anyio.lowlevel

from juno_bind_trio._blocking import check_model_request
from juno_bind_trio._options import RESERVED_REQUEST_OPTIONS
from juno_bind_trio._validate import error_kind
from juno_bind_trio.completion import (
    DEFAULT_INTER_CHUNK_TIMEOUT,
    DEFAULT_TIME_TO_FIRST_TOKEN,
    StreamWatchdog,
    TurnTextStream,
)
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._reader import (
    EVENTS_PER_CHECKPOINT,
    feed_events,
    not_an_event_stream,
)

from ._body import past_the_transform
from ._chunks import REASONING_FIELDS, ChunkReader
from ._sse import SSEDataDecoder, drain_errors, request_errors, timeout_errors

if TYPE_CHECKING:
    import httpx2
    import openai
    from openai.types.chat import ChatCompletionChunk

__all__ = [
    "REASONING_FIELDS",
    "STREAM_PATHS",
    "StreamPath",
    "check_client",
    "check_stream_path",
    "read_lean_events",
    "stream_chat_completion",
]

StreamPath: TypeAlias = Literal["lean", "sdk"]
"""How a streamed chat completion is read: ``"lean"`` (the default; the SDK sends, this
package reads the event stream into plain dicts) or ``"sdk"`` (the SDK's own stream of
``ChatCompletionChunk`` models)."""

STREAM_PATHS: Final = ("lean", "sdk")

# After [DONE] the rest of an HTTP/1.1 body (the chunked encoding's last
# chunk, usually in the same read) is read so the connection can be reused;
# a server that holds the body open past [DONE] is not waited for longer, as
# the SDK does not wait.
_DRAIN_SECONDS: Final = 0.1


def check_client(function: str, client: object) -> openai.AsyncOpenAI:
    """Refuse a client that is not an ``AsyncOpenAI`` with its own retries off."""
    import openai

    if not isinstance(client, openai.AsyncOpenAI):
        raise TypeError(f"{function}: client must be an openai.AsyncOpenAI, got {client!r}")
    if client.max_retries != 0:
        # The SDK retries 429s, 5xx and refused connections itself, honouring
        # retry-after for up to two minutes, before routing hears of them: a
        # dead provider would cost minutes before the fallback is even tried,
        # and the circuit breaker would never see the failures.
        raise ValueError(
            f"{function}: the client must be created with max_retries=0 so that routing, not "
            f"the SDK, decides what to retry; got max_retries={client.max_retries}"
        )
    return client


def check_stream_path(function: str, value: object) -> StreamPath:
    """Refuse a ``stream_path`` other than ``"lean"`` or ``"sdk"``."""
    if not isinstance(value, str):
        raise TypeError(f"{function}: stream_path must be 'lean' or 'sdk', got {value!r}")
    if value not in STREAM_PATHS:
        raise ValueError(f"{function}: stream_path must be 'lean' or 'sdk', got {value!r}")
    return cast("StreamPath", value)


async def stream_chat_completion(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
    text_stream: TurnTextStream | None = None,
    time_to_first_token: float = DEFAULT_TIME_TO_FIRST_TOKEN,
    inter_chunk_timeout: float = DEFAULT_INTER_CHUNK_TIMEOUT,
    request_options: Mapping[str, Any] | None = None,
    stream_path: StreamPath = "lean",
) -> ModelTurnResult:
    """Stream one chat completion and return it as a
    [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult].

    One *attempt*: no routing, no retry. It raises what went wrong, for
    [`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error] to judge:
    the SDK's
    own exceptions (``APIConnectionError``, ``RateLimitError``, a mid-stream
    ``APIError``, ``json.JSONDecodeError`` for a garbled chunk,
    ``APIResponseValidationError`` for a chunk of the wrong shape, …),
    [`StreamStallError`][juno_bind_trio.StreamStallError] when a watchdog budget runs out,
    and [`CompletionDefectError`][juno_bind_trio.CompletionDefectError] (including
    [`ToolCallAssemblyError`][juno_bind_trio.ToolCallAssemblyError]) for a completion that
    arrived but cannot be used. Cancellation propagates untouched, and the
    connection is closed on the way out.

    :param client: an ``AsyncOpenAI`` created with ``max_retries=0`` (see
        [`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client]).
    :param text_stream: the turn's text stream; this function calls
        ``observe()`` for every content delta and nothing else. Opening the
        attempt (``begin_attempt()``) is the caller's job, because only the
        caller knows where an attempt starts.
    :param time_to_first_token: the watchdog's budget from sending the
        request to the first answer chunk, in seconds.
    :param inter_chunk_timeout: the watchdog's budget between chunks.
    :param request_options: more arguments for
        ``client.chat.completions.create`` (``temperature``,
        ``response_format``, ``extra_headers``, …).
    :param stream_path: ``"lean"`` (the default): the SDK sends the request
        and this function reads the event stream into plain dicts, at a
        small fraction of the SDK's cost per chunk; ``"sdk"``: the SDK's own
        ``AsyncStream`` of ``ChatCompletionChunk`` models. Both raise the
        same exceptions for the same stream.

    A refusal with no content is returned as the content: it is the model's
    answer, and the transcript has to carry it.
    """
    check_client("stream_chat_completion", client)
    if not isinstance(model, str) or not model:  # type: ignore[redundant-expr]
        raise error_kind(model, str)(
            f"stream_chat_completion: model must be a non-empty string, got {model!r}"
        )
    if text_stream is not None and not isinstance(text_stream, TurnTextStream):
        raise TypeError(
            f"stream_chat_completion: text_stream must be a TurnTextStream or None, "
            f"got {text_stream!r}"
        )
    path = check_stream_path("stream_chat_completion", stream_path)
    options: dict[str, Any] = {}
    if request_options is not None:
        if not isinstance(request_options, Mapping):
            raise TypeError(
                f"stream_chat_completion: request_options must be a mapping, "
                f"got {request_options!r}"
            )
        clash = sorted(RESERVED_REQUEST_OPTIONS.intersection(request_options))
        if clash:
            raise ValueError(
                f"stream_chat_completion: request_options must not set {clash!r}; "
                "they are this function's own arguments"
            )
        options.update(request_options)
    options.setdefault("stream_options", {"include_usage": True})
    if tools:
        options["tools"] = list(tools)

    check_model_request("openai", model)
    started = anyio.current_time()
    read = _read_lean if path == "lean" else _read_sdk
    with StreamWatchdog(time_to_first_token, inter_chunk_timeout) as watchdog:
        reader = await read(client, model, messages, options, watchdog, text_stream)
    return reader.result(started)


async def _read_sdk(
    client: openai.AsyncOpenAI,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    options: dict[str, Any],
    watchdog: StreamWatchdog,
    text_stream: TurnTextStream | None,
) -> ChunkReader:
    import openai

    # **options defeats the SDK's overloads; stream=True always returns a stream.
    stream = cast(
        "openai.AsyncStream[ChatCompletionChunk]",
        await client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            **options,
        ),
    )
    async with stream:
        response = stream.response
        _refuse_a_body_that_is_not_a_stream(response)
        reader = ChunkReader(watchdog, text_stream, response)
        await feed_events(stream, reader.feed, openai.BaseModel)
    return reader


async def _read_lean(
    client: openai.AsyncOpenAI,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    options: dict[str, Any],
    watchdog: StreamWatchdog,
    text_stream: TurnTextStream | None,
) -> ChunkReader:

    # with_streaming_response: the SDK's request (and its status errors) with
    # the body left unread for this function; the messages and tools this
    # package built go past the SDK's parameter walk (see _body.py).
    built: dict[str, Any] = {"messages": messages}
    if "tools" in options:
        built["tools"] = options["tools"]
    opened = client.chat.completions.with_streaming_response.create(
        model=model,
        stream=True,
        **past_the_transform(options, built),
    )
    async with opened as raw:
        response = raw.http_response
        _refuse_a_body_that_is_not_a_stream(response)
        reader = ChunkReader(watchdog, text_stream, response)
        await read_lean_events(response, reader.feed)
    return reader


async def read_lean_events(response: httpx2.Response, feed: Callable[[Any], object]) -> None:
    """Read the event stream of *response* as the SDK's ``AsyncStream`` reads it, handing each
    event's JSON value to *feed*.

    The SDK's rules (its legacy stream mode, which chat completions and the
    Responses API both use): ``[DONE]`` ends the stream, the rest of an
    HTTP/1.1 body read for keep-alive; an Assistants ``thread.*`` event is
    wrapped as ``{"data": ..., "event": ...}``; any other value with a truthy
    ``error`` is raised as ``APIError``; a read timeout is ``APITimeoutError``,
    a lost connection ``APIConnectionError``; a garbled event's
    ``json.JSONDecodeError`` is raised as it is.
    """
    import openai

    loads = json.loads
    checkpoint, unyielded = anyio.lowlevel.checkpoint, 0
    decoder = SSEDataDecoder()
    pieces = response.aiter_bytes()
    timeouts, lost = timeout_errors(), request_errors()
    try:
        while True:
            try:
                piece = await pieces.__anext__()
            except StopAsyncIteration:
                decoder.finish()
                return
            except timeouts as error:
                raise openai.APITimeoutError(request=response.request) from error
            except lost as error:
                raise openai.APIConnectionError(request=response.request) from error
            for event, data in decoder.feed(piece):
                if data.startswith("[DONE]"):
                    await _drain(response, pieces)
                    return
                chunk = loads(data)
                if event is not None and event.startswith("thread."):
                    # As the SDK reads an Assistants event: wrapped, never an error.
                    chunk = {"data": chunk, "event": event}
                elif chunk.__class__ is dict and chunk.get("error"):
                    _raise_error_event(response, chunk["error"])
                feed(chunk)
                unyielded += 1
                if unyielded == EVENTS_PER_CHECKPOINT:
                    unyielded = 0
                    await checkpoint()
    finally:
        await pieces.aclose()


def _raise_error_event(response: httpx2.Response, error: object) -> NoReturn:
    # `data: {"error": ...}` mid-stream, raised as the SDK raises it.
    import openai

    message = error.get("message") if isinstance(error, Mapping) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    raise openai.APIError(message=message, request=response.request, body=error)


async def _drain(response: httpx2.Response, pieces: Any) -> None:
    if response.http_version != "HTTP/1.1":
        return  # HTTP/2 ends this stream and keeps the connection without it
    try:
        with anyio.move_on_after(_DRAIN_SECONDS):
            async for _ in pieces:
                await anyio.lowlevel.checkpoint()
    except drain_errors():
        pass  # the answer is complete; a fault in what follows it is no error


def _refuse_a_body_that_is_not_a_stream(response: httpx2.Response) -> None:
    # An endpoint that is not an OpenAI-compatible API (a login page, a proxy's
    # error page) can answer 200 with HTML. The SDK would read it as an event
    # stream with no events, and the empty completion would look truncated and
    # be retried as a defect. Say what it is: the endpoint's fault, next candidate.
    message = not_an_event_stream(response, "an OpenAI-compatible API")
    if message is not None:
        import openai

        raise openai.APIResponseValidationError(response=response, body=None, message=message)
