"""The provider seam: what routing needs from one provider's SDK, and nothing more.

Every provider speaks a wire of its own (OpenAI chat completions, Anthropic
Messages, the Responses API, Gemini, Bedrock's Converse), but a routed turn
asks each of them the same two questions, once per attempt:

1. **Stream this turn.** Given the transcript (always in the chat-completions
   shape every other layer reads), the tools, the model name and the request
   options, make one streamed request, read it inside a
   [`StreamWatchdog`][juno_bind_trio.completion.StreamWatchdog] entered *before*
   the request is sent, fold tool-call pieces into whole calls, forward text
   deltas to the turn's [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream]
   (reasoning deltas to its ``reasoning()``), and return one
   [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult]; or raise what went wrong.
2. **Judge a failure.** Map what that raised onto the routing taxonomy
   ([`ClassifiedError`][juno_bind_trio.routing.ClassifiedError]: retry the endpoint,
   the next candidate, the next stage, or propagate, with the server's
   ``Retry-After``).

Everything else a routed turn does is the same for every provider and lives
once, in [`RoutedModel`][juno_bind_trio.providers.RoutedModel]: opening the
attempt on the text stream before anything can fail, merging a candidate's
options over the request's, reading ``produced_output`` onto the failure,
tracing, walking the plan. So a provider is a small object with
[`ProviderAdapter`][juno_bind_trio.providers.ProviderAdapter]'s four members,
and a plan may mix them: its candidates name adapters, not SDKs.

Provider state
--------------

Some providers hand back state that has no place in a chat-completions
message and that they require on the next request: Anthropic's thinking
blocks with their signatures, the Responses API's encrypted reasoning,
Gemini's thought signatures. An adapter returns it in its result's ``extra``
under [`PROVIDER_STATE_KEY`][juno_bind_trio.providers.PROVIDER_STATE_KEY]
(``"provider_state"``), a JSON object naming the adapter that made it:
``{"provider": "anthropic", ...}``. The loop writes it onto the transcript's
assistant message; the store and healing keep it as they keep any key; the
same adapter finds it there on the next turn with
[`provider_state_of()`][juno_bind_trio.providers.provider_state_of] and sends
it back unchanged. Any other adapter drops it
([`strip_provider_state()`][juno_bind_trio.providers.strip_provider_state]):
a signature is only meaningful to the provider that signed it, and a turn
routed elsewhere must not send a field the other wire would refuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import attrs

from juno_bind_trio._options import RESERVED_REQUEST_OPTIONS
from juno_bind_trio._validate import (
    a_mapping,
    instance_of,
    non_empty_str,
    optional,
    positive_seconds,
    sequence_of,
)
from juno_bind_trio.completion import TurnTextStream

if TYPE_CHECKING:
    from juno_bind_trio.loop import ModelTurnResult
    from juno_bind_trio.routing import Candidate, ClassifiedError, RouteCursor

__all__ = [
    "PROVIDER_STATE_KEY",
    "RESERVED_REQUEST_OPTIONS",
    "ProviderAdapter",
    "ProviderRequest",
    "provider_state_of",
    "strip_provider_state",
]

PROVIDER_STATE_KEY: Final = "provider_state"
"""The assistant-message key a provider's own state travels under: ``{"provider": name, ...}``."""


_NAME: Final = non_empty_str(blank=False)
_MESSAGES: Final = sequence_of(a_mapping(), expects="a sequence of chat message dicts")
_TOOLS: Final = sequence_of(a_mapping(), expects="a sequence of tool dicts")
_SECONDS: Final = positive_seconds()
_STREAM: Final = optional(instance_of(TurnTextStream))


def _messages(value: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return _MESSAGES.check("ProviderRequest: messages", value)


def _tools(value: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return _TOOLS.check("ProviderRequest: tools", value)


def _options(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return a_mapping().check("ProviderRequest: options", value)


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """One attempt's request, as [`RoutedModel`][juno_bind_trio.providers.RoutedModel] hands it to
    an adapter's [`stream_turn()`][juno_bind_trio.providers.ProviderAdapter.stream_turn].

    * *model*: the model name to send (the cursor's: a candidate's own spelling wins).
    * *messages*: the transcript, in the chat-completions shape (system, user,
      assistant with ``tool_calls``, tool messages); the adapter converts it to
      its own wire and must not mutate it. Assistant messages may carry
      ``provider_state``: the adapter's own to send back, anyone else's to drop.
    * *tools*: the turn's tools as chat-completions function tools
      (``{"type": "function", "function": {"name", "description", "parameters"}}``).
    * *options*: the model's request options with the candidate's merged over
      them; an adapter reads the ones its wire knows (``max_tokens``,
      ``temperature``, ``response_format``, ...) and passes the rest on.
    * *text_stream*: the turn's stream, its attempt already opened; the adapter
      calls ``observe()`` per text delta and ``reasoning()`` per reasoning
      delta, and never ``begin_attempt()`` or ``finish()``.
    * *time_to_first_token*, *inter_chunk_timeout*: the watchdog's budgets, in seconds.
    """

    model: str = attrs.field(validator=_NAME)
    messages: Sequence[Mapping[str, Any]] = attrs.field(converter=_messages)
    tools: Sequence[Mapping[str, Any]] = attrs.field(default=(), converter=_tools)
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options)
    text_stream: TurnTextStream | None = attrs.field(default=None, validator=_STREAM)
    time_to_first_token: float = attrs.field(validator=_SECONDS)
    inter_chunk_timeout: float = attrs.field(validator=_SECONDS)


@runtime_checkable
class ProviderAdapter(Protocol):
    """One provider's SDK, as routing drives it: stream a turn, judge a failure.

    Implemented by [`OpenAIChatAdapter`][juno_bind_trio.providers.openai.OpenAIChatAdapter] and by
    each provider subpackage; give [`RoutedModel`][juno_bind_trio.providers.RoutedModel] one per
    ``Candidate.provider`` of its plan. An adapter wraps a client it does not own: close the client
    where you opened it.
    """

    @property
    def name(self) -> str:
        """The wire this adapter speaks (``"openai"``, ``"anthropic"``, ...): the ``"provider"``
        of the provider state it writes, and the only state it sends back."""
        ...

    @property
    def server(self) -> tuple[str, int] | None:
        """The host and port the client sends to, for a span's ``server.*``; ``None`` if unknown."""
        ...

    async def stream_turn(self, request: ProviderRequest) -> ModelTurnResult:
        """Make one streamed request and return the turn, or raise what went wrong.

        One attempt: no retry of its own (the client's retries off). A cut-off,
        empty or unusable completion raises a
        [`CompletionDefectError`][juno_bind_trio.CompletionDefectError]; silence past a budget a
        [`StreamStallError`][juno_bind_trio.StreamStallError] (the watchdog's); the SDK's own
        exceptions pass as they are. Cancellation propagates, the connection closed on the way out.
        """
        ...

    def classify(
        self, error: Exception, candidate: Candidate, cursor: RouteCursor
    ) -> ClassifiedError:
        """The routing verdict on what
        [`stream_turn()`][juno_bind_trio.providers.ProviderAdapter.stream_turn] raised (never
        called with a cancellation)."""
        ...


def provider_state_of(message: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The provider state on *message* that adapter *name* wrote, or ``None``.

    ``None`` too for a message with no state, or with another provider's, or
    with a value that is not a ``{"provider": ...}`` object (a transcript edited
    by hand is read as having none, not as an error).
    """
    a_mapping().check("provider_state_of: message", message)
    _NAME.check("provider_state_of: name", name)
    state = message.get(PROVIDER_STATE_KEY)
    if isinstance(state, Mapping) and state.get("provider") == name:
        return state
    return None


def strip_provider_state(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """*messages* with every ``provider_state`` removed: what a chat-completions wire may be sent.

    Messages without one are the same objects; a message with one is a copy
    without it (the transcript itself is not touched).
    """
    messages = _MESSAGES.check("strip_provider_state: messages", messages)
    out: list[Mapping[str, Any]] = []
    for message in messages:
        if PROVIDER_STATE_KEY in message:
            message = {k: v for k, v in message.items() if k != PROVIDER_STATE_KEY}
        out.append(message)
    return out
