"""[`OpenAIResponsesAdapter`][juno_bind_trio.providers.openai.OpenAIResponsesAdapter]: the OpenAI
Responses API, streamed, on the provider seam.

One attempt is one ``responses.create(stream=True)`` read event by event, as
the chat adapter reads chunks: inside a
[`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] entered before the request is
sent; ``response.output_text.delta`` to the turn's text stream as it arrives;
each ``function_call`` item and its ``response.function_call_arguments.delta``
pieces folded by a [`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator]
(keyed by the item's output index); reasoning summary and reasoning text
deltas to the stream's reasoning (liveness for the watchdog, never the
answer's first token), each finished ``reasoning`` item kept whole (its
``encrypted_content`` included) for the next request.

What the SDK does not do and a turn needs:

* **Failures in the stream.** An ``error`` event and ``response.failed``
  arrive as ordinary typed events; each is raised here as an
  ``openai.APIError`` with the API's error object as its body, for
  [`classify_responses_error()`][juno_bind_trio.providers.openai.classify_responses_error].
* **Truncation.** A body that ends without ``response.completed`` (or
  ``response.incomplete``) raises nothing; it is a turn without a finish
  reason, a [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], retried.
* **An endpoint that is not the API.** A 200 that is not an event stream is
  refused as the endpoint's fault.
* **Cost per event.** By default (``stream_path="lean"``) the SDK sends the
  request (client options, auth, headers, base URL, timeouts, status errors)
  and the event stream is read by the chat path's reader (``_sse.py``,
  ``read_lean_events`` in ``_stream.py``), which follows the SDK's rules, each
  event a plain ``dict``: the SDK's own reader builds a pydantic event per
  event, most of the client's cost. ``stream_path="sdk"`` keeps the SDK's
  models. Both hand ``dict`` events to one reader (``_responses_events.py``);
  a differential test runs every fault of the fake through both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, final

import anyio

from juno_bind_trio.completion import StreamWatchdog
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._reader import feed_events, not_an_event_stream
from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

from ._body import past_the_transform
from ._responses_convert import RESPONSES_NAME, convert_input, convert_tools, request_arguments
from ._responses_errors import classify_responses_error
from ._responses_events import ResponsesEventReader
from ._stream import StreamPath, check_client, check_stream_path, read_lean_events

if TYPE_CHECKING:
    import httpx2
    import openai

    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["OpenAIResponsesAdapter"]


@final
class OpenAIResponsesAdapter:
    """An ``AsyncOpenAI`` client speaking the Responses API, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``OpenAIResponsesAdapter(client, classify=classify_responses_error, stream_path="lean")``:
    *client* created with ``max_retries=0`` (routing decides what to retry;
    [`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client] makes one),
    not owned (close it where you opened it); *classify* the error classifier;
    *stream_path* how each stream is read: ``"lean"`` (the default) splits the
    event stream here and hands the turn each event as the plain ``dict`` its
    JSON made, ``"sdk"`` lets the SDK build a pydantic event per event first,
    about four times the lean path's CPU per delta. Both raise the same exceptions
    for the same stream.
    Its name, and the ``"provider"`` of the state it writes, is
    ``"openai-responses"``.

    Request options are read as the chat-completions names a plan shares
    (``max_tokens``, ``temperature``, ``top_p``, ``tool_choice``,
    ``parallel_tool_calls``, ``response_format`` as the native ``text.format``,
    ``reasoning_effort``) or as the Responses API's own (``reasoning``,
    ``text``, ``include``, ``store``, ``instructions``, ``truncation``, ...).
    Each request is sent with ``store: false`` unless the options say
    otherwise (the transcript keeps the conversation) and
    ``include: ["reasoning.encrypted_content"]``, so reasoning items come
    back sealed and go back on the next turn as they came. Options only the
    chat wire has (``seed``, ``stop``, ``stream_options``, ...) and those of
    other providers' wires (``top_k``, ``thinking``) are not sent; any other
    goes in the request body as it is.
    """

    __slots__ = ("_classify", "_client", "_stream_path")

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        classify: Classifier = classify_responses_error,
        stream_path: StreamPath = "lean",
    ) -> None:
        self._client = check_client("OpenAIResponsesAdapter", client)
        if not callable(classify):
            raise TypeError(f"OpenAIResponsesAdapter: classify must be callable, got {classify!r}")
        self._classify = classify
        self._stream_path = check_stream_path("OpenAIResponsesAdapter", stream_path)

    def __repr__(self) -> str:
        return f"<OpenAIResponsesAdapter {self._client.base_url}>"

    @property
    def name(self) -> str:
        """``"openai-responses"``."""
        return RESPONSES_NAME

    @property
    def stream_path(self) -> StreamPath:
        """How each stream is read: ``"lean"`` or ``"sdk"``."""
        return self._stream_path

    @property
    def client(self) -> openai.AsyncOpenAI:
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
        """One streamed ``responses.create``, as a turn."""
        arguments = request_arguments(request.options)
        tools = convert_tools(request.tools)
        if tools:
            arguments["tools"] = tools
        return await _stream(
            self._client, request, convert_input(request.messages), arguments, self._stream_path
        )


async def _stream(
    client: openai.AsyncOpenAI,
    request: ProviderRequest,
    items: list[dict[str, Any]],
    arguments: dict[str, Any],
    path: StreamPath,
) -> ModelTurnResult:
    started = anyio.current_time()
    read = _read_lean if path == "lean" else _read_sdk
    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
        reader = await read(client, request, items, arguments, watchdog)
    return reader.result(started)


async def _read_sdk(
    client: openai.AsyncOpenAI,
    request: ProviderRequest,
    items: list[dict[str, Any]],
    arguments: dict[str, Any],
    watchdog: StreamWatchdog,
) -> ResponsesEventReader:
    import openai

    # **arguments defeats the SDK's overloads; stream=True always returns a stream.
    stream = cast(
        "openai.AsyncStream[Any]",
        await client.responses.create(
            model=request.model,
            input=items,  # type: ignore[arg-type]
            stream=True,
            **arguments,
        ),
    )
    async with stream:
        response = stream.response
        _refuse_a_body_that_is_not_a_stream(response)
        reader = ResponsesEventReader(watchdog, request.text_stream, response)
        await feed_events(stream, reader.feed, openai.BaseModel)
    return reader


async def _read_lean(
    client: openai.AsyncOpenAI,
    request: ProviderRequest,
    items: list[dict[str, Any]],
    arguments: dict[str, Any],
    watchdog: StreamWatchdog,
) -> ResponsesEventReader:
    # with_streaming_response: the SDK's request (and its status errors) with
    # the body left unread; the event stream read by the chat path's reader,
    # which follows the SDK's rules (the Responses API streams in the same mode).
    # The input items and tools this package built go past the SDK's
    # parameter walk (see _body.py).
    built: dict[str, Any] = {"input": items}
    if "tools" in arguments:
        built["tools"] = arguments["tools"]
    opened = client.responses.with_streaming_response.create(
        model=request.model,
        stream=True,
        **past_the_transform(arguments, built),
    )
    async with opened as raw:
        response = raw.http_response
        _refuse_a_body_that_is_not_a_stream(response)
        reader = ResponsesEventReader(watchdog, request.text_stream, response)
        await read_lean_events(response, reader.feed)
    return reader


def _refuse_a_body_that_is_not_a_stream(response: httpx2.Response) -> None:
    message = not_an_event_stream(response, "the OpenAI Responses API")
    if message is not None:
        import openai

        raise openai.APIResponseValidationError(response=response, body=None, message=message)
