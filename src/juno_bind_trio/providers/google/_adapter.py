"""[`GeminiAdapter`][juno_bind_trio.providers.google.GeminiAdapter]: the Gemini API's
``generate_content_stream``, on the provider seam.

One attempt is one ``client.aio.models.generate_content_stream`` read chunk
by chunk, the way the other adapters read their events: inside a
[`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] entered before the request is
sent (the SDK sends it at the first read); text parts to the turn's text
stream as they arrive; thought parts to its reasoning (liveness for the
watchdog, never the answer's first token); each ``functionCall`` part, which
Gemini sends whole, folded by a
[`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator] as one piece (an id
made up for it where Gemini gives none); every thought signature kept, by
the part it came on, for the next request to the same provider.

What the SDK does not check and a turn needs:

* **Truncation.** A body that ends without a ``finishReason`` raises
  nothing; it is a turn without a finish reason, a
  [`CompletionDefectError`][juno_bind_trio.CompletionDefectError], retried.
* **A prompt it blocked.** A response with no candidate and a
  ``promptFeedback.blockReason`` is the content filter, not an empty turn.
* **The connection.** The stream is an async generator; it is closed here
  (shielded) on every way out, so a turn that stops reading early does not
  leave the response to the garbage collector.
"""

from __future__ import annotations

import base64
import secrets
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

from ._convert import NAME, arguments_text, convert_messages, convert_tools, request_config
from ._errors import classify_gemini_error

if TYPE_CHECKING:
    from google import genai

    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["GeminiAdapter", "check_gemini_client"]

_FINISH: Final = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}


def check_gemini_client(owner: str, client: object) -> genai.Client:
    """Refuse what is not a ``genai.Client`` on an httpx async client of the host's, retries off."""
    from google import genai

    if not isinstance(client, genai.Client):
        raise TypeError(f"{owner}: client must be a google.genai.Client, got {client!r}")
    # The SDK has no public accessor for the options a client was made with.
    options: Any = client._api_client._http_options
    if options.httpx_async_client is None:
        # The SDK's own async transport does not run under Trio; on asyncio it
        # is aiohttp or a pool per loop that nothing here closes.
        raise ValueError(
            f"{owner}: the client must be given its HTTP client, "
            "genai.Client(http_options=HttpOptions(httpx_async_client=httpx2.AsyncClient(), ...)) "
            "(open_gemini_client() makes one so)"
        )
    retry = options.retry_options
    if retry is not None and retry.attempts not in (0, 1):
        # Its retries (429, 5xx, with backoff) would spend the turn on one
        # endpoint before routing hears of it.
        raise ValueError(
            f"{owner}: the client must make one attempt per request so that routing, not the SDK, "
            f"decides what to retry (HttpRetryOptions(attempts=1), or none); got "
            f"attempts={retry.attempts!r}"
        )
    return client


def _base_url(client: genai.Client) -> str:
    options: Any = client._api_client._http_options
    return str(options.base_url or "")


@final
class GeminiAdapter:
    """A ``google.genai.Client`` speaking the Gemini API, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``GeminiAdapter(client, max_tokens=None, classify=classify_gemini_error)``:
    *client* from [`open_gemini_client()`][juno_bind_trio.providers.google.open_gemini_client]
    (or made the same way: an httpx async client handed to it, one attempt per
    request), not owned (close it where you opened it); *max_tokens* for a
    request whose options set none (``None``: the model's default);
    *classify* the error classifier.

    Request options are read as the chat-completions names a plan shares
    (``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``,
    ``tool_choice``, ``response_format``) or as ``GenerateContentConfig``'s own
    (``thinking_config``, ``safety_settings``, ``top_k``, ``tool_config``, ...).
    A ``response_format`` is Gemini's native structured output (a JSON response,
    with the schema in the ``gemini`` dialect). Options only the OpenAI wire
    has (``parallel_tool_calls``, ``stream_options``, ...) are not sent; any
    other goes in the request body as it is.
    """

    __slots__ = ("_classify", "_client", "_max_tokens")

    def __init__(
        self,
        client: genai.Client,
        *,
        max_tokens: int | None = None,
        classify: Classifier = classify_gemini_error,
    ) -> None:
        self._client = check_gemini_client("GeminiAdapter", client)
        given: object = max_tokens
        if given is not None and (isinstance(given, bool) or not isinstance(given, int)):
            raise TypeError(f"GeminiAdapter: max_tokens must be an int or None, got {given!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"GeminiAdapter: max_tokens must be positive, got {max_tokens!r}")
        if not callable(classify):
            raise TypeError(f"GeminiAdapter: classify must be callable, got {classify!r}")
        self._max_tokens = max_tokens
        self._classify = classify

    def __repr__(self) -> str:
        return f"<GeminiAdapter {_base_url(self._client)}>"

    @property
    def name(self) -> str:
        """``"google"``."""
        return NAME

    @property
    def client(self) -> genai.Client:
        """The client it sends through."""
        return self._client

    @property
    def server(self) -> tuple[str, int] | None:
        """The host and port the client sends to."""
        from urllib.parse import urlsplit

        url = urlsplit(_base_url(self._client))
        if not url.hostname:
            return None
        port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
        return url.hostname, port

    def classify(
        self, error: Exception, candidate: Candidate, cursor: RouteCursor
    ) -> ClassifiedError:
        """The classifier's verdict on *error*."""
        return self._classify(error, candidate, cursor)

    async def stream_turn(self, request: ProviderRequest) -> ModelTurnResult:
        """One ``generate_content_stream``, as a turn."""
        system, contents = convert_messages(request.messages)
        config = request_config(
            request.options,
            system=system,
            tools=convert_tools(request.tools),
            max_tokens=self._max_tokens,
        )
        return await _stream(self._client, request, contents, config)


def _new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


async def _stream(
    client: genai.Client,
    request: ProviderRequest,
    contents: list[dict[str, Any]],
    config: dict[str, Any],
) -> ModelTurnResult:
    text_stream = request.text_stream
    observe = text_stream.observe if text_stream is not None else None
    reason = text_stream.reasoning if text_stream is not None else None
    accumulator = ToolCallAccumulator(
        on_delta=text_stream.tool_call_delta if text_stream is not None else None
    )
    content: list[str] = []
    thoughts: list[str] = []
    signed_thoughts: list[dict[str, str]] = []
    call_signatures: dict[str, str] = {}
    own_ids: list[str] = []
    text_signature: str | None = None
    finish_reason: str | None = None
    blocked = False
    calls = 0
    usage: Any = None
    started = anyio.current_time()

    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
        stream: Any = await client.aio.models.generate_content_stream(
            model=request.model,
            contents=contents,
            config=config,  # type: ignore[arg-type]
        )
        answer, alive, thinking = watchdog.answer, watchdog.chunk, watchdog.reasoning
        add_text, add_call = content.append, accumulator.add
        try:
            # Read as the SDK parsed it (pydantic models); the per-chunk path
            # reads one candidate's new parts and tests the common case first.
            async for chunk in stream:
                candidates = chunk.candidates
                if not candidates:
                    feedback = chunk.prompt_feedback
                    if feedback is not None and feedback.block_reason is not None:
                        blocked = True
                    if chunk.usage_metadata is not None:
                        usage = chunk.usage_metadata
                    alive()
                    continue
                candidate = candidates[0]
                body = candidate.content
                parts = body.parts if body is not None else None
                answered = False
                for part in parts or ():
                    text = part.text
                    signature = part.thought_signature
                    if text is not None and part.function_call is None:
                        if part.thought:
                            thoughts.append(text)
                            if reason is not None and text:
                                reason(text)
                            thinking()
                            if signature is not None:
                                signed_thoughts.append({"text": text, "signature": _b64(signature)})
                            continue
                        if text:
                            add_text(text)
                            if observe is not None:
                                observe(text)
                            answered = True
                        if signature is not None:
                            text_signature = _b64(signature)
                        continue
                    function_call = part.function_call
                    if function_call is not None:
                        call_id = function_call.id
                        if call_id:
                            own_ids.append(call_id)
                        else:
                            call_id = _new_call_id()
                        if signature is not None:
                            call_signatures[call_id] = _b64(signature)
                        add_call(
                            {
                                "index": calls,
                                "id": call_id,
                                "type": "function",
                                "function": {
                                    "name": function_call.name,
                                    "arguments": arguments_text(function_call.args),
                                },
                            }
                        )
                        calls += 1
                        answered = True
                    elif signature is not None:
                        text_signature = _b64(signature)  # a part with only a signature
                if candidate.finish_reason is not None:
                    finish_reason = str(getattr(candidate.finish_reason, "value", None) or "")
                    finish_reason = finish_reason or str(candidate.finish_reason)
                if chunk.usage_metadata is not None:
                    usage = chunk.usage_metadata
                if answered:
                    answer()
                else:
                    alive()
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    first_answer_at = watchdog.statistics().first_answer_at
    text_out = "".join(content) if content else None
    if blocked and finish_reason is None:
        finish: str | None = "content_filter"
    elif finish_reason is None:
        finish = None  # the body ended without one: cut off, whatever it said before
    else:
        finish = _FINISH.get(finish_reason, finish_reason.lower())
        if finish == "stop" and calls:
            finish = "tool_calls"
    completion = AssembledCompletion(
        content=text_out,
        tool_calls=accumulator.assembled(),
        finish_reason=finish,
        refusal=None,
    )
    defect = detect_completion_defect(completion)
    if defect is not None:
        raise defect.as_error()
    extra: dict[str, Any] = {}
    state: dict[str, Any] = {}
    if call_signatures:
        state["calls"] = call_signatures
    if text_signature is not None:
        state["text"] = text_signature
    if signed_thoughts:
        state["thoughts"] = signed_thoughts
    if own_ids:
        state["ids"] = own_ids
    if state:
        extra[PROVIDER_STATE_KEY] = {"provider": NAME, **state}
    input_tokens, output_tokens, cached, reasoned = _usage(usage)
    return ModelTurnResult(
        content=text_out,
        tool_calls=accumulator.tool_calls(),
        reasoning="".join(thoughts) if thoughts else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached,
        reasoning_tokens=reasoned,
        time_to_first_token=None if first_answer_at is None else first_answer_at - started,
        extra=extra,
    )


def _b64(signature: bytes) -> str:
    return base64.b64encode(signature).decode("ascii")


def _usage(usage: Any) -> tuple[int, int, int, int]:
    # (input, output, cached of the input, reasoning of the output). Gemini
    # counts thoughts apart from the candidates; the harness's output is both,
    # as the other wires count it.
    if usage is None:
        return 0, 0, 0, 0
    thoughts = usage.thoughts_token_count or 0
    output = (usage.candidates_token_count or 0) + thoughts
    return usage.prompt_token_count or 0, output, usage.cached_content_token_count or 0, thoughts
