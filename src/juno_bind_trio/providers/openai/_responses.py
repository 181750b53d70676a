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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio

from juno_bind_trio.completion import (
    AssembledCompletion,
    StreamWatchdog,
    ToolCallAccumulator,
    detect_completion_defect,
)
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY
from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

from ._responses_convert import RESPONSES_NAME, convert_input, convert_tools, request_arguments
from ._responses_errors import classify_responses_error
from ._stream import check_client

if TYPE_CHECKING:
    import openai

    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["OpenAIResponsesAdapter"]

_INCOMPLETE: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}
_REASONING_DELTAS: Final = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


@final
class OpenAIResponsesAdapter:
    """An ``AsyncOpenAI`` client speaking the Responses API, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``OpenAIResponsesAdapter(client, classify=classify_responses_error)``:
    *client* created with ``max_retries=0`` (routing decides what to retry;
    [`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client] makes one),
    not owned (close it where you opened it); *classify* the error classifier.
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

    __slots__ = ("_classify", "_client")

    def __init__(
        self, client: openai.AsyncOpenAI, *, classify: Classifier = classify_responses_error
    ) -> None:
        self._client = check_client("OpenAIResponsesAdapter", client)
        if not callable(classify):
            raise TypeError(f"OpenAIResponsesAdapter: classify must be callable, got {classify!r}")
        self._classify = classify

    def __repr__(self) -> str:
        return f"<OpenAIResponsesAdapter {self._client.base_url}>"

    @property
    def name(self) -> str:
        """``"openai-responses"``."""
        return RESPONSES_NAME

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
        return await _stream(self._client, request, convert_input(request.messages), arguments)


def _stream_error(stream: Any, error: Any, fallback: str) -> Exception:
    import openai

    if error is None:
        body: dict[str, Any] = {"code": None, "message": fallback}
    elif isinstance(error, dict):
        body = dict(error)
    else:
        body = {"code": getattr(error, "code", None), "message": getattr(error, "message", None)}
    message = body.get("message")
    if not isinstance(message, str) or not message:
        message = fallback
    return openai.APIError(message, stream.response.request, body=body)


async def _stream(
    client: openai.AsyncOpenAI,
    request: ProviderRequest,
    items: list[dict[str, Any]],
    arguments: dict[str, Any],
) -> ModelTurnResult:
    text_stream = request.text_stream
    observe = text_stream.observe if text_stream is not None else None
    reason = text_stream.reasoning if text_stream is not None else None
    accumulator = ToolCallAccumulator(
        on_delta=text_stream.tool_call_delta if text_stream is not None else None
    )
    content: list[str] = []
    refusal: list[str] = []
    thoughts: list[str] = []
    kept: list[dict[str, Any]] = []
    call_items: dict[str, str] = {}
    finish: str | None = None
    usage: Any = None
    started = anyio.current_time()

    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
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
        answer, alive, thinking = watchdog.answer, watchdog.chunk, watchdog.reasoning
        add_text, add_call = content.append, accumulator.add
        events: Any = stream
        async with stream:
            _refuse_a_body_that_is_not_a_stream(stream)
            async for event in events:
                kind = event.type
                if kind == "response.output_text.delta":
                    text = event.delta
                    add_text(text)
                    if observe is not None:
                        observe(text)
                    answer()
                elif kind == "response.function_call_arguments.delta":
                    add_call({"index": event.output_index, "function": {"arguments": event.delta}})
                    answer()
                elif kind in _REASONING_DELTAS:
                    thought = event.delta
                    thoughts.append(thought)
                    if reason is not None:
                        reason(thought)
                    thinking()
                elif kind == "response.output_item.added":
                    item = event.item
                    if item.type == "function_call":
                        add_call(
                            {
                                "index": event.output_index,
                                "id": item.call_id,
                                "type": "function",
                                "function": {"name": item.name, "arguments": item.arguments or ""},
                            }
                        )
                        if item.id:
                            call_items[item.call_id] = item.id
                        answer()
                    elif item.type == "reasoning":
                        thinking()
                    else:
                        alive()
                elif kind == "response.output_item.done":
                    item = event.item
                    if item.type == "reasoning":
                        # The SDK's own faithful dump: every field the API sent, as it sent it.
                        kept.append(item.to_dict())
                    alive()
                elif kind == "response.refusal.delta":
                    refusal.append(event.delta)
                    answer()
                elif kind == "response.completed":
                    usage = event.response.usage
                    finish = "stop"
                    alive()
                elif kind == "response.incomplete":
                    response = event.response
                    usage = response.usage
                    details = response.incomplete_details
                    cause = details.reason if details is not None else None
                    finish = _INCOMPLETE.get(cause or "", "length")
                    alive()
                elif kind == "response.failed":
                    response = event.response
                    raise _stream_error(stream, response.error, "the response failed")
                elif kind == "error":
                    raise _stream_error(
                        stream,
                        {"code": event.code, "message": event.message, "param": event.param},
                        "error event mid-stream",
                    )
                else:
                    alive()

    first_answer_at = watchdog.statistics().first_answer_at
    text_out = "".join(content) if content else None
    refusal_out = "".join(refusal) if refusal else None
    assembled = accumulator.assembled()
    calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
    if finish == "stop" and assembled:
        finish = "tool_calls"
    completion = AssembledCompletion(
        content=text_out,
        tool_calls=assembled if calls is None else calls,
        finish_reason=finish,
        refusal=refusal_out,
    )
    defect = detect_completion_defect(completion)
    if defect is not None:
        raise defect.as_error()
    extra: dict[str, Any] = {}
    if kept:
        # The call items' ids tie each call to its reasoning item: kept with it.
        state: dict[str, Any] = {"provider": RESPONSES_NAME, "reasoning": kept}
        if call_items:
            state["calls"] = call_items
        extra[PROVIDER_STATE_KEY] = state
    input_tokens, output_tokens, cached, reasoned = _usage(usage)
    return ModelTurnResult(
        content=text_out if text_out is not None else refusal_out,
        tool_calls=accumulator.tool_calls() if calls is None else calls,
        reasoning="".join(thoughts) if thoughts else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached,
        reasoning_tokens=reasoned,
        time_to_first_token=None if first_answer_at is None else first_answer_at - started,
        extra=extra,
    )


def _usage(usage: Any) -> tuple[int, int, int, int]:
    # (input, output, cached of the input, reasoning of the output).
    if usage is None:
        return 0, 0, 0, 0
    prompt = usage.input_tokens_details
    completion = usage.output_tokens_details
    cached = (prompt.cached_tokens or 0) if prompt is not None else 0
    reasoned = (completion.reasoning_tokens or 0) if completion is not None else 0
    return usage.input_tokens or 0, usage.output_tokens or 0, cached, reasoned


def _refuse_a_body_that_is_not_a_stream(stream: Any) -> None:
    import openai

    content_type = stream.response.headers.get("content-type", "")
    if content_type and "event-stream" not in content_type.lower():
        raise openai.APIResponseValidationError(
            response=stream.response,
            body=None,
            message=(
                f"the endpoint answered {stream.response.status_code} with Content-Type "
                f"{content_type.split(';')[0].strip()!r}, not an event stream: is the base URL "
                "the OpenAI Responses API?"
            ),
        )
