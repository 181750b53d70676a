"""[`BedrockAdapter`][juno_bind_trio.providers.bedrock.BedrockAdapter]: Bedrock's
``ConverseStream``, on the provider seam.

One attempt is one ``converse_stream`` through aiobotocore (its httpx
backend, [`StreamingHttpxSession`][juno_bind_trio.providers.bedrock.StreamingHttpxSession]),
read event by event as the other adapters read theirs: inside a
[`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] entered before the request is
signed and sent; text deltas to the turn's text stream as they arrive; each
``toolUse`` block (its ``contentBlockStart``, then its ``toolUse.input``
deltas) folded by a [`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator], each
fragment also forwarded as a tool-call delta; ``reasoningContent`` deltas to
the stream's reasoning (liveness for the watchdog, never the answer's first
token), each reasoning block kept whole with its signature for the next
request to the same provider.

What botocore does not check and a turn needs:

* **Truncation.** A body that ends without ``messageStop`` raises nothing; it
  is a turn without a finish reason, a
  [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], retried.
* **The connection.** botocore's ``EventStream.close()`` cannot await; the
  body is closed here (shielded) on every way out, cancellation included,
  so an abandoned stream never holds a pooled connection.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Final, final

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

from ._client import close_event_stream, endpoint_of, region_of
from ._convert import (
    NAME,
    convert_messages,
    convert_tools,
    request_arguments,
    structured_content,
)
from ._errors import classify_bedrock_error

if TYPE_CHECKING:
    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["BedrockAdapter", "check_bedrock_client"]

_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def check_bedrock_client(owner: str, client: object) -> Any:
    """Refuse what is not an aiobotocore ``bedrock-runtime`` client that makes one attempt."""
    meta = getattr(client, "meta", None)
    service = getattr(getattr(meta, "service_model", None), "service_name", None)
    converse = getattr(client, "converse_stream", None)
    if service != "bedrock-runtime" or converse is None:
        raise TypeError(
            f"{owner}: client must be an aiobotocore 'bedrock-runtime' client "
            f"(open_bedrock_client()), got {client!r}"
        )
    from aiobotocore.client import AioBaseClient

    if not isinstance(client, AioBaseClient):
        raise TypeError(
            f"{owner}: client must be an aiobotocore (async) client, not a sync botocore one; "
            f"got {client!r}"
        )
    config = getattr(meta, "config", None)
    retries = getattr(config, "retries", None) or {}
    attempts = retries.get("total_max_attempts")
    if attempts is None and retries.get("max_attempts") is not None:
        attempts = retries["max_attempts"] + 1
    if attempts != 1:
        # botocore's own retries (throttling, 5xx) would spend the turn on one
        # endpoint before routing hears of it.
        raise ValueError(
            f"{owner}: the client must be created with retries={{'total_max_attempts': 1}} so "
            f"that routing, not botocore, decides what to retry; got retries={dict(retries)!r}"
        )
    return client


@final
class BedrockAdapter:
    """An aiobotocore ``bedrock-runtime`` client speaking ``ConverseStream``, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``BedrockAdapter(client, max_tokens=None, classify=classify_bedrock_error)``:
    *client* from [`open_bedrock_client()`][juno_bind_trio.providers.bedrock.open_bedrock_client]
    (or made the same way: the streaming httpx session, one attempt), not
    owned (close it where you opened it); *max_tokens* for a request whose
    options set none (``None``: the model's default); *classify* the error
    classifier. The model name is the Bedrock model id or inference profile
    (``anthropic.claude-sonnet-4-5-v1:0``, ``us.amazon.nova-pro-v1:0``, an ARN).

    Request options are read as the chat-completions names a plan shares
    (``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``tool_choice``,
    ``response_format``) or as ``ConverseStream``'s own (``inferenceConfig``,
    ``additionalModelRequestFields``, ``guardrailConfig``, ...); ``thinking``
    and any other name go to the model in ``additionalModelRequestFields``.
    A ``response_format`` JSON schema becomes a tool the model is made to
    call (offered, with thinking on), and its input the turn's content.
    Options only the OpenAI wire has (``seed``, ``stream_options``, ...) are not sent.
    """

    __slots__ = ("_classify", "_client", "_max_tokens")

    def __init__(
        self,
        client: Any,
        *,
        max_tokens: int | None = None,
        classify: Classifier = classify_bedrock_error,
    ) -> None:
        self._client = check_bedrock_client("BedrockAdapter", client)
        given: object = max_tokens
        if given is not None and (isinstance(given, bool) or not isinstance(given, int)):
            raise TypeError(f"BedrockAdapter: max_tokens must be an int or None, got {given!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"BedrockAdapter: max_tokens must be positive, got {max_tokens!r}")
        if not callable(classify):
            raise TypeError(f"BedrockAdapter: classify must be callable, got {classify!r}")
        self._max_tokens = max_tokens
        self._classify = classify

    def __repr__(self) -> str:
        return f"<BedrockAdapter {region_of(self._client)} {self._client.meta.endpoint_url}>"

    @property
    def name(self) -> str:
        """``"bedrock"``."""
        return NAME

    @property
    def client(self) -> Any:
        """The client it sends through."""
        return self._client

    @property
    def server(self) -> tuple[str, int] | None:
        """The host and port the client sends to."""
        return endpoint_of(self._client)

    def classify(
        self, error: Exception, candidate: Candidate, cursor: RouteCursor
    ) -> ClassifiedError:
        """The classifier's verdict on *error*."""
        return self._classify(error, candidate, cursor)

    async def stream_turn(self, request: ProviderRequest) -> ModelTurnResult:
        """One ``converse_stream``, as a turn."""
        system, messages = convert_messages(request.messages)
        tools = convert_tools(request.tools)
        arguments, structured = request_arguments(request.options, tools, self._max_tokens)
        if system:
            arguments["system"] = system
        return await _stream(self._client, request, messages, arguments, structured)


async def _stream(
    client: Any,
    request: ProviderRequest,
    messages: list[dict[str, Any]],
    arguments: dict[str, Any],
    structured: str | None,
) -> ModelTurnResult:
    text_stream = request.text_stream
    observe = text_stream.observe if text_stream is not None else None
    reason = text_stream.reasoning if text_stream is not None else None
    accumulator = ToolCallAccumulator(
        on_delta=text_stream.tool_call_delta if text_stream is not None else None
    )
    content: list[str] = []
    thoughts: list[str] = []
    # Reasoning blocks by content-block index while open, then in order.
    open_reasoning: dict[int, dict[str, Any]] = {}
    kept: list[dict[str, Any]] = []
    stop_reason: str | None = None
    stopped = False
    input_tokens = cached_tokens = output_tokens = 0
    started = anyio.current_time()

    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
        answer_of = await client.converse_stream(
            modelId=request.model, messages=messages, **arguments
        )
        events: Any = answer_of["stream"]
        answer, alive, thinking = watchdog.answer, watchdog.chunk, watchdog.reasoning
        add_text, add_call = content.append, accumulator.add
        try:
            # Each event is a one-key dict; the per-event path tests the key
            # of the common case first and reads the rest only when present.
            async for event in events:
                delta_event = event.get("contentBlockDelta")
                if delta_event is not None:
                    delta = delta_event["delta"]
                    text = delta.get("text")
                    if text is not None:
                        add_text(text)
                        if observe is not None:
                            observe(text)
                        answer()
                        continue
                    tool_use = delta.get("toolUse")
                    if tool_use is not None:
                        add_call(
                            {
                                "index": delta_event["contentBlockIndex"],
                                "function": {"arguments": tool_use.get("input", "")},
                            }
                        )
                        answer()
                        continue
                    reasoning = delta.get("reasoningContent")
                    if reasoning is not None:
                        at = delta_event["contentBlockIndex"]
                        block = open_reasoning.get(at)
                        if block is None:
                            block = open_reasoning[at] = {}
                            kept.append(block)
                        thought = reasoning.get("text")
                        if thought is not None:
                            block["text"] = block.get("text", "") + thought
                            thoughts.append(thought)
                            if reason is not None:
                                reason(thought)
                            thinking()
                        signature = reasoning.get("signature")
                        if signature is not None:
                            block["signature"] = block.get("signature", "") + signature
                            alive()
                        redacted = reasoning.get("redactedContent")
                        if redacted is not None:
                            block["redacted"] = block.get("redacted", b"") + redacted
                            thinking()
                        continue
                    alive()
                    continue
                start_event = event.get("contentBlockStart")
                if start_event is not None:
                    tool_start = start_event.get("start", {}).get("toolUse")
                    if tool_start is not None:
                        add_call(
                            {
                                "index": start_event["contentBlockIndex"],
                                "id": tool_start.get("toolUseId"),
                                "type": "function",
                                "function": {"name": tool_start.get("name"), "arguments": ""},
                            }
                        )
                        answer()
                    else:
                        alive()
                    continue
                stop_event = event.get("messageStop")
                if stop_event is not None:
                    stop_reason = stop_event.get("stopReason")
                    stopped = True
                    alive()
                    continue
                metadata = event.get("metadata")
                if metadata is not None:
                    usage = metadata.get("usage") or {}
                    cached_tokens = usage.get("cacheReadInputTokens") or 0
                    # Converse counts cached input apart from inputTokens; the
                    # harness's input is the whole prompt the turn saw.
                    input_tokens = (
                        (usage.get("inputTokens") or 0)
                        + cached_tokens
                        + (usage.get("cacheWriteInputTokens") or 0)
                    )
                    output_tokens = usage.get("outputTokens") or 0
                    alive()
                    continue
                alive()  # messageStart, contentBlockStop, events of later API versions
        finally:
            await close_event_stream(events)

    first_answer_at = watchdog.statistics().first_answer_at
    text_out = "".join(content) if content else None
    # The body ended without `messageStop`: cut off, whatever it said before.
    finish = (_FINISH.get(stop_reason, "stop") if stop_reason else None) if stopped else None
    assembled = accumulator.assembled()
    calls = accumulator.tool_calls() if all(c.complete for c in assembled) else None
    if structured is not None and calls is not None:
        answer_call = next((c for c in calls if c.name == structured), None)
        if answer_call is not None:
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
        extra[PROVIDER_STATE_KEY] = {"provider": NAME, "reasoning": [_kept(b) for b in kept]}
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


def _kept(block: dict[str, Any]) -> dict[str, Any]:
    """A streamed reasoning block as the transcript keeps it: a Converse block, JSON-safe."""
    redacted = block.get("redacted")
    if redacted is not None:
        return {"reasoningContent": {"redactedContent": base64.b64encode(redacted).decode()}}
    text: dict[str, Any] = {"text": block.get("text", "")}
    if "signature" in block:
        text["signature"] = block["signature"]
    return {"reasoningContent": {"reasoningText": text}}
