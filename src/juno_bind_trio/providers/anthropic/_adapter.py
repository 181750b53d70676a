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

from juno_bind_trio.completion import (
    AssembledCompletion,
    StreamWatchdog,
    ToolCallAccumulator,
    detect_completion_defect,
)
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY
from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

from ._convert import (
    NAME,
    convert_messages,
    convert_tools,
    request_arguments,
    structured_content,
)
from ._errors import classify_anthropic_error

if TYPE_CHECKING:
    import anthropic

    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicAdapter", "check_anthropic_client"]

DEFAULT_MAX_TOKENS: Final = 4096
"""``max_tokens`` of a request whose options set none (the Messages API requires one)."""

_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


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

    ``AnthropicAdapter(client, max_tokens=4096, classify=classify_anthropic_error)``:
    *client* created with ``max_retries=0``, not owned (close it where you
    opened it); *max_tokens* for a request whose options set none;
    *classify* the error classifier.

    Request options are read as the chat-completions names a plan shares
    (``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``tool_choice``,
    ``parallel_tool_calls``, ``response_format``) or as the Messages API's own
    (``top_k``, ``thinking``, ``metadata``, ``stop_sequences``, ``extra_headers``,
    ...). A ``response_format`` JSON schema becomes a tool the model is made to
    call (offered, with thinking on), and its input the turn's content.
    Options only the OpenAI wire has (``seed``, ``stream_options``, ...) are not
    sent; any other goes in the request body as it is.
    """

    __slots__ = ("_classify", "_client", "_max_tokens")

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        classify: Classifier = classify_anthropic_error,
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

    def __repr__(self) -> str:
        return f"<AnthropicAdapter {self._client.base_url}>"

    @property
    def name(self) -> str:
        """``"anthropic"``."""
        return NAME

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
        return await _stream(self._client, request, messages, arguments, structured)


async def _stream(
    client: anthropic.AsyncAnthropic,
    request: ProviderRequest,
    messages: list[dict[str, Any]],
    arguments: dict[str, Any],
    structured: str | None,
) -> ModelTurnResult:
    text_stream = request.text_stream
    observe = text_stream.observe if text_stream is not None else None
    reason = text_stream.reasoning if text_stream is not None else None
    # Each fragment also goes to the text stream, for a surface that shows
    # arguments as they arrive (a no-op for any other).
    accumulator = ToolCallAccumulator(
        on_delta=text_stream.tool_call_delta if text_stream is not None else None
    )
    content: list[str] = []
    thoughts: list[str] = []
    # Thinking blocks by content-block index while open, then in order.
    open_thinking: dict[int, dict[str, Any]] = {}
    kept: list[dict[str, Any]] = []
    stop_reason: str | None = None
    stopped = False
    input_tokens = cached_tokens = output_tokens = 0
    started = anyio.current_time()

    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
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
        answer, alive, thinking = watchdog.answer, watchdog.chunk, watchdog.reasoning
        add_text, add_call = content.append, accumulator.add
        # Read untyped: the event's `type` says which it is, and the per-event
        # path does one string test per branch, not an isinstance chain.
        events: Any = stream
        async with stream:
            _refuse_a_body_that_is_not_a_stream(stream.response)
            async for event in events:
                kind = event.type
                if kind == "content_block_delta":
                    delta = event.delta
                    delta_kind = delta.type
                    if delta_kind == "text_delta":
                        text = delta.text
                        add_text(text)
                        if observe is not None:
                            observe(text)
                        answer()
                    elif delta_kind == "input_json_delta":
                        add_call(
                            {"index": event.index, "function": {"arguments": delta.partial_json}}
                        )
                        answer()
                    elif delta_kind == "thinking_delta":
                        thought = delta.thinking
                        block = open_thinking.get(event.index)
                        if block is not None:
                            block["thinking"] += thought
                        thoughts.append(thought)
                        if reason is not None:
                            reason(thought)
                        thinking()
                    elif delta_kind == "signature_delta":
                        block = open_thinking.get(event.index)
                        if block is not None:
                            block["signature"] += delta.signature
                        alive()
                    else:
                        alive()
                elif kind == "content_block_start":
                    block_start = event.content_block
                    block_kind = block_start.type
                    if block_kind == "tool_use":
                        initial = block_start.input
                        add_call(
                            {
                                "index": event.index,
                                "id": block_start.id,
                                "type": "function",
                                "function": {
                                    "name": block_start.name,
                                    # Streamed input comes as deltas; a block that
                                    # arrives whole carries it here.
                                    "arguments": _json(initial) if initial else "",
                                },
                            }
                        )
                        answer()
                    elif block_kind == "thinking":
                        opened = {"type": "thinking", "thinking": block_start.thinking}
                        opened["signature"] = block_start.signature
                        open_thinking[event.index] = opened
                        kept.append(opened)
                        thinking()
                    elif block_kind == "redacted_thinking":
                        kept.append({"type": "redacted_thinking", "data": block_start.data})
                        thinking()
                    elif block_kind == "text":
                        if block_start.text:
                            add_text(block_start.text)
                            if observe is not None:
                                observe(block_start.text)
                            answer()
                        else:
                            alive()
                    else:
                        alive()
                elif kind == "message_start":
                    usage = event.message.usage
                    cached_tokens = usage.cache_read_input_tokens or 0
                    input_tokens = (
                        usage.input_tokens
                        + cached_tokens
                        + (usage.cache_creation_input_tokens or 0)
                    )
                    output_tokens = usage.output_tokens
                    alive()
                elif kind == "message_delta":
                    if event.delta.stop_reason is not None:
                        stop_reason = event.delta.stop_reason
                    output_tokens = event.usage.output_tokens
                    alive()
                elif kind == "message_stop":
                    stopped = True
                    alive()
                else:  # content_block_stop, and events of later API versions
                    alive()

    first_answer_at = watchdog.statistics().first_answer_at
    text_out = "".join(content) if content else None
    # The body ended without `message_stop`: cut off, whatever it said before.
    finish = (_FINISH.get(stop_reason, "stop") if stop_reason else None) if stopped else None
    assembled = accumulator.assembled()
    calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
    if structured is not None and calls is not None:
        answer_call = next((c for c in calls if c.name == structured), None)
        if answer_call is not None:
            # The structured answer: the tool's input is the content.
            text_out = structured_content(answer_call.arguments)
            calls = [c for c in calls if c is not answer_call]
            if finish == "tool_calls" and not calls:
                finish = "stop"
    completion = AssembledCompletion(
        content=text_out,
        tool_calls=assembled if calls is None else calls,
        finish_reason=finish,
        refusal=None,
    )
    defect = detect_completion_defect(completion)
    if defect is not None:
        raise defect.as_error()
    extra: dict[str, Any] = {}
    if kept:
        extra[PROVIDER_STATE_KEY] = {"provider": NAME, "thinking": kept}
    return ModelTurnResult(
        content=text_out,
        tool_calls=accumulator.tool_calls() if calls is None else calls,
        reasoning="".join(thoughts) if thoughts else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached_tokens,
        time_to_first_token=None if first_answer_at is None else first_answer_at - started,
        extra=extra,
    )


def _json(value: object) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def _refuse_a_body_that_is_not_a_stream(response: Any) -> None:
    import anthropic

    content_type = response.headers.get("content-type", "")
    if content_type and "event-stream" not in content_type.lower():
        raise anthropic.APIResponseValidationError(
            response=response,
            body=None,
            message=(
                f"the endpoint answered {response.status_code} with Content-Type "
                f"{content_type.split(';')[0].strip()!r}, not an event stream: is the base URL "
                "the Anthropic API?"
            ),
        )
