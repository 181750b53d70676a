"""[`AnthropicAdapter`][juno_bind_trio.providers.anthropic.AnthropicAdapter]: the Messages API,
streamed, on the provider seam.

One attempt is one ``messages.create(stream=True)`` read event by event, the
way the OpenAI adapter reads chunks: inside a
[`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] entered before the request is
sent; text deltas to the turn's text stream as they arrive; each ``tool_use``
block and its ``input_json_delta`` pieces folded by a
[`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator]; thinking deltas to the
stream's reasoning (liveness for the watchdog, never the answer's first token), each thinking
block kept whole with its signature for the next request. The raw events are read, not the SDK's
``messages.stream()`` helper, which rebuilds the whole message after every event.

* **Cost per event.** By default (``stream_path="lean"``) the SDK sends the
  request (client options, auth, headers, base URL, timeouts, status errors)
  and reads the event stream as its own ``AsyncStream`` of plain objects:
  its decoder, its rules for ``ping`` and ``event: error`` and its connection
  and timeout errors, unchanged, but no pydantic event per event, which is
  a quarter of the raw SDK's CPU time per delta. ``stream_path="sdk"`` keeps
  the SDK's models. Both hand ``dict`` events to one reader (``_events.py``),
  so the two paths cannot drift apart; a differential test runs every fault
  of the fake through both.

What the SDK does not check and a turn needs:

* **Truncation.** A body that ends without ``message_stop`` raises nothing;
  it is a turn without a finish reason, a
  [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], retried.
* **An endpoint that is not the API.** A 200 that is not an event stream (a
  login page) is refused as the endpoint's fault, not read as an empty turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio

from juno_bind_trio.completion import StreamWatchdog
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._reader import feed_events, not_an_event_stream
from juno_bind_trio.providers.openai._stream import StreamPath, check_stream_path
from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

from ._convert import (
    NAME,
    convert_messages,
    convert_tools,
    request_arguments,
)
from ._errors import classify_anthropic_error
from ._events import EventReader

if TYPE_CHECKING:
    import anthropic

    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicAdapter", "check_anthropic_client"]

DEFAULT_MAX_TOKENS: Final = 4096
"""``max_tokens`` of a request whose options set none (the Messages API requires one)."""


def check_anthropic_client(owner: str, client: object) -> anthropic.AsyncAnthropic:
    """Refuse a client that is not an ``AsyncAnthropic`` with its own retries off."""
    import anthropic

    if not isinstance(client, anthropic.AsyncAnthropic):
        raise TypeError(f"{owner}: client must be an anthropic.AsyncAnthropic, got {client!r}")
    if client.max_retries != 0:
        # As for the openai SDK: its retries (429, 529, 5xx, with retry-after)
        # would spend minutes on a dead provider before routing hears of it.
        raise ValueError(
            f"{owner}: the client must be created with max_retries=0 so that routing, not the "
            f"SDK, decides what to retry; got max_retries={client.max_retries}"
        )
    return client


@final
class AnthropicAdapter:
    """An ``AsyncAnthropic`` client speaking the Messages API, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``AnthropicAdapter(client, max_tokens=4096, classify=classify_anthropic_error,
    stream_path="lean")``: *client* created with ``max_retries=0``, not owned
    (close it where you opened it); *max_tokens* for a request whose options
    set none; *classify* the error classifier; *stream_path* how each stream
    is read: ``"lean"`` (the default) hands the turn each event as the plain
    ``dict`` its JSON made, ``"sdk"`` lets the SDK build a pydantic event per
    event first, about 1.6 times the lean path's CPU per delta. Both raise the same
    exceptions for the same stream.

    Request options are read as the chat-completions names a plan shares
    (``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``tool_choice``,
    ``parallel_tool_calls``, ``response_format``) or as the Messages API's own
    (``top_k``, ``thinking``, ``metadata``, ``stop_sequences``, ``extra_headers``,
    ...). A ``response_format`` JSON schema becomes a tool the model is made to
    call (offered, with thinking on), and its input the turn's content.
    Options only the OpenAI wire has (``seed``, ``stream_options``, ...) are not
    sent; any other goes in the request body as it is.
    """

    __slots__ = ("_classify", "_client", "_max_tokens", "_stream_path")

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        classify: Classifier = classify_anthropic_error,
        stream_path: StreamPath = "lean",
    ) -> None:
        self._client = check_anthropic_client("AnthropicAdapter", client)
        given: object = max_tokens
        if isinstance(given, bool) or not isinstance(given, int):
            raise TypeError(f"AnthropicAdapter: max_tokens must be an int, got {max_tokens!r}")
        if max_tokens < 1:
            raise ValueError(f"AnthropicAdapter: max_tokens must be positive, got {max_tokens!r}")
        if not callable(classify):
            raise TypeError(f"AnthropicAdapter: classify must be callable, got {classify!r}")
        self._max_tokens = max_tokens
        self._classify = classify
        self._stream_path = check_stream_path("AnthropicAdapter", stream_path)

    def __repr__(self) -> str:
        return f"<AnthropicAdapter {self._client.base_url}>"

    @property
    def name(self) -> str:
        """``"anthropic"``."""
        return NAME

    @property
    def stream_path(self) -> StreamPath:
        """How each stream is read: ``"lean"`` or ``"sdk"``."""
        return self._stream_path

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The client it sends through."""
        return self._client

    @property
    def server(self) -> tuple[str, int] | None:
        """The host and port the client sends to."""
        url = self._client.base_url
        if not url.host:
            return None
        port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
        return url.host, port

    def classify(
        self, error: Exception, candidate: Candidate, cursor: RouteCursor
    ) -> ClassifiedError:
        """The classifier's verdict on *error*."""
        return self._classify(error, candidate, cursor)

    async def stream_turn(self, request: ProviderRequest) -> ModelTurnResult:
        """One streamed ``messages.create``, as a turn."""
        system, messages = convert_messages(request.messages)
        tools = convert_tools(request.tools)
        arguments, structured = request_arguments(request.options, tools, self._max_tokens)
        if system:
            arguments["system"] = system
        if tools:
            arguments["tools"] = tools
        return await _stream(
            self._client, request, messages, arguments, structured, self._stream_path
        )


async def _stream(
    client: anthropic.AsyncAnthropic,
    request: ProviderRequest,
    messages: list[dict[str, Any]],
    arguments: dict[str, Any],
    structured: str | None,
    path: StreamPath,
) -> ModelTurnResult:
    started = anyio.current_time()
    read = _read_lean if path == "lean" else _read_sdk
    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
        reader = await read(client, request, messages, arguments, watchdog)
    return reader.result(started, structured)


async def _read_sdk(
    client: anthropic.AsyncAnthropic,
    request: ProviderRequest,
    messages: list[dict[str, Any]],
    arguments: dict[str, Any],
    watchdog: StreamWatchdog,
) -> EventReader:
    import anthropic

    # **arguments defeats the SDK's overloads; stream=True always returns a stream.
    stream = cast(
        "anthropic.AsyncStream[Any]",
        await client.messages.create(
            model=request.model,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            **arguments,
        ),
    )
    async with stream:
        response = stream.response
        _refuse_a_body_that_is_not_a_stream(response)
        reader = EventReader(watchdog, request.text_stream, response)
        await feed_events(stream, reader.feed, anthropic.BaseModel)
    return reader


async def _read_lean(
    client: anthropic.AsyncAnthropic,
    request: ProviderRequest,
    messages: list[dict[str, Any]],
    arguments: dict[str, Any],
    watchdog: StreamWatchdog,
) -> EventReader:
    import anthropic

    # with_streaming_response: the SDK's request (and its status errors), the
    # body left unread; parsed as the SDK's own stream of plain objects: its
    # event-stream decoder, its `ping` and `error` rules, its connection and
    # timeout errors, exactly, without a pydantic model per event.
    opened = client.messages.with_streaming_response.create(
        model=request.model,
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        **arguments,
    )
    async with opened as raw:
        response = raw.http_response
        _refuse_a_body_that_is_not_a_stream(response)
        stream = await raw.parse(to=anthropic.AsyncStream[object])
        async with stream:
            reader = EventReader(watchdog, request.text_stream, response)
            await feed_events(stream, reader.feed)
    return reader


def _refuse_a_body_that_is_not_a_stream(response: Any) -> None:
    message = not_an_event_stream(response, "the Anthropic API")
    if message is not None:
        import anthropic

        raise anthropic.APIResponseValidationError(response=response, body=None, message=message)
