"""The OpenAI chat-completions wire on the provider seam, as
[`OpenAIChatAdapter`][juno_bind_trio.providers.openai.OpenAIChatAdapter]."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

from ._classify import classify_openai_error
from ._gemini import is_gemini_endpoint, with_placeholders
from ._origin import messages_for_origin, origin_of, sign_result
from ._stream import StreamPath, check_client, check_stream_path, stream_chat_completion

if TYPE_CHECKING:
    import openai

    from juno_bind_trio.loop import ModelTurnResult
    from juno_bind_trio.providers._adapter import ProviderRequest
    from juno_bind_trio.providers._routed import Classifier

__all__ = ["OpenAIChatAdapter"]

_NAME: Final = "openai"


@final
class OpenAIChatAdapter:
    """An ``AsyncOpenAI`` client speaking chat completions, as a
    [`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter].

    ``OpenAIChatAdapter(client, classify=classify_openai_error, stream_path="lean",
    gemini_compat=None)``: *client*
    created with ``max_retries=0`` (routing decides what to retry), not owned
    (close it where you opened it); *classify* the error classifier, by
    default [`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error];
    *stream_path* how the stream is read (``"lean"``, the default, or ``"sdk"``; see
    [`stream_chat_completion()`][juno_bind_trio.providers.openai.stream_chat_completion]). Any
    OpenAI-compatible endpoint serves (a Gemini or DeepSeek compatibility endpoint, a local
    server): fields the SDK does not model, on a tool call (``extra_content``) or on the message
    (``reasoning_content``), are carried into the transcript and sent back to the endpoint that
    sent them, and to no other: the assistant message carries a ``provider_state`` naming its
    endpoint (the client's base URL without user info or query), and a turn that goes to another
    endpoint is sent the message without those fields (see ``providers/openai/_origin.py``).

    *gemini_compat*: whether the endpoint is the Gemini API's OpenAI-compatible one, which refuses
    a turn whose tool calls carry no thought signature. ``None`` (the default) reads it from the
    client's base URL (host ``generativelanguage.googleapis.com``); say ``True`` for a proxy or
    gateway in front of Gemini. On such an endpoint, tool calls another provider made (before a
    fallback) are sent with the stand-in signature the Gemini API documents for them (see
    ``providers/openai/_gemini.py``); the transcript keeps none.
    """

    __slots__ = ("_classify", "_client", "_gemini_compat", "_stream_path")

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        classify: Classifier = classify_openai_error,
        stream_path: StreamPath = "lean",
        gemini_compat: bool | None = None,
    ) -> None:
        self._client = check_client("OpenAIChatAdapter", client)
        if not callable(classify):
            raise TypeError(f"OpenAIChatAdapter: classify must be callable, got {classify!r}")
        self._classify = classify
        self._stream_path = check_stream_path("OpenAIChatAdapter", stream_path)
        given: object = gemini_compat  # checked at run time, whatever the type says
        if given is not None and not isinstance(given, bool):
            raise TypeError(
                f"OpenAIChatAdapter: gemini_compat must be a bool or None, got {given!r}"
            )
        self._gemini_compat = (
            is_gemini_endpoint(self._client.base_url) if gemini_compat is None else gemini_compat
        )

    def __repr__(self) -> str:
        return f"<OpenAIChatAdapter {self._client.base_url}>"

    @property
    def name(self) -> str:
        """``"openai"``."""
        return _NAME

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The client it sends through."""
        return self._client

    @property
    def stream_path(self) -> StreamPath:
        """How the stream is read: ``"lean"`` or ``"sdk"``."""
        return self._stream_path

    @property
    def gemini_compat(self) -> bool:
        """Whether tool calls Gemini did not sign are sent with the stand-in signature."""
        return self._gemini_compat

    @property
    def server(self) -> tuple[str, int] | None:
        """The host and port the client sends to."""
        url = self._client.base_url
        if not url.host:
            return None
        port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
        return url.host, port

    async def stream_turn(self, request: ProviderRequest) -> ModelTurnResult:
        """One streamed chat completion, by
        [`stream_chat_completion()`][juno_bind_trio.providers.openai.stream_chat_completion]."""
        origin = origin_of(self._client.base_url)
        messages = messages_for_origin(request.messages, origin)
        if self._gemini_compat:
            messages = with_placeholders(request.messages, messages, origin)
        result = await stream_chat_completion(
            self._client,
            model=request.model,
            messages=messages,
            tools=request.tools,
            text_stream=request.text_stream,
            time_to_first_token=request.time_to_first_token,
            inter_chunk_timeout=request.inter_chunk_timeout,
            request_options=request.options,
            stream_path=self._stream_path,
        )
        return sign_result(result, origin)

    def classify(
        self, error: Exception, candidate: Candidate, cursor: RouteCursor
    ) -> ClassifiedError:
        """The classifier's verdict on *error*."""
        return self._classify(error, candidate, cursor)
