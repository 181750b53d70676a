"""[`GeminiAdapter`][juno_bind_trio.providers.google.GeminiAdapter]: the Gemini API's
``streamGenerateContent``, on the provider seam.

One attempt is one streamed request read chunk by chunk, the way the other
adapters read their events: inside a
[`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] entered before the request is
sent; text parts to the turn's text stream as they arrive; thought parts to
its reasoning (liveness for the watchdog, never the answer's first token);
each ``functionCall`` part, which Gemini sends whole, folded by a
[`ToolCallAccumulator`][juno_bind_trio.completion.ToolCallAccumulator] as one piece (an id
made up for it where Gemini gives none); every thought signature kept, by
the part it came on, for the next request to the same provider. Two ways
to read it, one folder for both (``_turn.py``): the lean path (the default,
``_lean.py``: the SDK builds the request, the event stream is read into
dicts) and the SDK's own ``generate_content_stream``.

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
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast, final

import anyio

from juno_bind_trio.completion import StreamWatchdog
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

from ._convert import NAME, convert_messages, convert_tools, request_config
from ._errors import classify_gemini_error
from ._lean import lean_available, read_lean
from ._turn import TurnFolder

if TYPE_CHECKING:
    from google import genai

    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["STREAM_PATHS", "GeminiAdapter", "StreamPath", "check_gemini_client"]

StreamPath: TypeAlias = Literal["lean", "sdk"]
"""How a Gemini stream is read: ``"lean"`` (the SDK builds the request, this package reads the
event stream into plain dicts) or ``"sdk"`` (the SDK's ``GenerateContentResponse`` models)."""

STREAM_PATHS: Final = ("lean", "sdk")


def _check_stream_path(value: object) -> StreamPath:
    if not isinstance(value, str):
        raise TypeError(f"GeminiAdapter: stream_path must be 'lean' or 'sdk', got {value!r}")
    if value not in STREAM_PATHS:
        raise ValueError(f"GeminiAdapter: stream_path must be 'lean' or 'sdk', got {value!r}")
    return cast("StreamPath", value)


def check_gemini_client(owner: str, client: object) -> genai.Client:
    """Refuse what is not a ``genai.Client`` on an httpx async client of the host's, retries off."""
    from google import genai

    if not isinstance(client, genai.Client):
        raise TypeError(f"{owner}: client must be a google.genai.Client, got {client!r}")
    options = _options_of(client)
    if options is None:
        return client  # an SDK whose client keeps its options elsewhere: nothing to check
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


def _options_of(client: genai.Client) -> Any:
    # The SDK has no public accessor for the options a client was made with.
    return getattr(getattr(client, "_api_client", None), "_http_options", None)


def _base_url(client: genai.Client) -> str:
    options = _options_of(client)
    return str(getattr(options, "base_url", None) or "")


@final
class GeminiAdapter:
    """A ``google.genai.Client`` speaking the Gemini API, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``GeminiAdapter(client, max_tokens=None, classify=classify_gemini_error, stream_path="lean")``:
    *client* from [`open_gemini_client()`][juno_bind_trio.providers.google.open_gemini_client]
    (or made the same way: an httpx async client handed to it, one attempt per
    request), not owned (close it where you opened it); *max_tokens* for a
    request whose options set none (``None``: the model's default);
    *classify* the error classifier; *stream_path* how the stream is read:
    ``"lean"`` (the default) has the SDK build the request (its body, URL, key
    and headers) and sends it on the client's httpx client, then reads the
    event stream into plain dicts by the SDK's own rules, raising the SDK's
    exceptions; ``"sdk"`` reads the SDK's ``GenerateContentResponse`` models,
    which cost several times more per chunk. Where the installed SDK lacks the
    request builder the lean path uses, the adapter reads through the SDK
    ([`stream_path`][juno_bind_trio.providers.google.GeminiAdapter.stream_path]
    says which). See ``providers/google/_lean.py`` for how the two differ.

    Request options are read as the chat-completions names a plan shares
    (``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``,
    ``tool_choice``, ``response_format``) or as ``GenerateContentConfig``'s own
    (``thinking_config``, ``safety_settings``, ``top_k``, ``tool_config``, ...).
    A ``response_format`` is Gemini's native structured output (a JSON response,
    with the schema in the ``gemini`` dialect). Options only the OpenAI wire
    has (``parallel_tool_calls``, ``stream_options``, ...) are not sent; any
    other goes in the request body as it is.
    """

    __slots__ = ("_classify", "_client", "_max_tokens", "_stream_path")

    def __init__(
        self,
        client: genai.Client,
        *,
        max_tokens: int | None = None,
        classify: Classifier = classify_gemini_error,
        stream_path: StreamPath = "lean",
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
        path = _check_stream_path(stream_path)
        if path == "lean" and not lean_available(self._client):
            path = "sdk"
        self._stream_path: StreamPath = path

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
    def stream_path(self) -> StreamPath:
        """How the stream is read: ``"lean"`` or ``"sdk"``."""
        return self._stream_path

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
        """One ``streamGenerateContent`` request, as a turn."""
        system, contents = convert_messages(request.messages)
        config = request_config(
            request.options,
            system=system,
            tools=convert_tools(request.tools),
            max_tokens=self._max_tokens,
        )
        return await _stream(self._client, request, contents, config, self._stream_path)


async def _stream(
    client: genai.Client,
    request: ProviderRequest,
    contents: list[dict[str, Any]],
    config: dict[str, Any],
    path: StreamPath,
) -> ModelTurnResult:
    started = anyio.current_time()
    with StreamWatchdog(request.time_to_first_token, request.inter_chunk_timeout) as watchdog:
        folder = TurnFolder(watchdog, request.text_stream)
        if path == "lean":
            await read_lean(client, request.model, contents, config, folder)
        else:
            await _read_sdk(client, request.model, contents, config, folder)
    return folder.result(started)


async def _read_sdk(
    client: genai.Client,
    model: str,
    contents: list[dict[str, Any]],
    config: dict[str, Any],
    folder: TurnFolder,
) -> None:
    stream: Any = await client.aio.models.generate_content_stream(
        model=model,
        contents=contents,
        config=config,  # type: ignore[arg-type]
    )
    try:
        # Read as the SDK parsed it (pydantic models); the per-chunk path
        # reads one candidate's new parts and tests the common case first.
        async for chunk in stream:
            candidates = chunk.candidates
            if not candidates:
                feedback = chunk.prompt_feedback
                if feedback is not None and feedback.block_reason is not None:
                    folder.blocked()
                _usage(folder, chunk.usage_metadata)
                folder.alive()
                continue
            candidate = candidates[0]
            body = candidate.content
            parts = body.parts if body is not None else None
            answered = False
            for part in parts or ():
                text = part.text
                raw = part.thought_signature
                signature = None if raw is None else _b64(raw)
                if text is not None and part.function_call is None:
                    if part.thought:
                        folder.thought(text, signature)
                    elif folder.text(text, signature):
                        answered = True
                    continue
                function_call = part.function_call
                if function_call is not None:
                    folder.call(function_call.id, function_call.name, function_call.args, signature)
                    answered = True
                elif signature is not None:
                    folder.signature(signature)  # a part with only a signature
            if candidate.finish_reason is not None:
                finish = str(getattr(candidate.finish_reason, "value", None) or "")
                folder.finish(finish or str(candidate.finish_reason))
            _usage(folder, chunk.usage_metadata)
            if answered:
                folder.answered()
            else:
                folder.alive()
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()


def _b64(signature: bytes) -> str:
    return base64.b64encode(signature).decode("ascii")


def _usage(folder: TurnFolder, usage: Any) -> None:
    if usage is not None:
        folder.usage(
            usage.prompt_token_count or 0,
            usage.candidates_token_count or 0,
            usage.thoughts_token_count or 0,
            usage.cached_content_token_count or 0,
        )
