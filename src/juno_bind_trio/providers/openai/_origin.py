"""What an OpenAI-compatible server adds to a turn goes back to that server, and to no other.

The chat-completions wire is spoken by many servers, and some of them add
fields of their own that they require on the next request: Gemini's
compatibility endpoint puts a call's ``thought_signature`` in the call's
``extra_content``, DeepSeek-style servers put ``reasoning_content`` on the
message. The chat path keeps them (``_chunks.py``, ``ToolCall.extra``), and
an adapter sends them back. But every one of those servers is the same
adapter name (``"openai"``), so in a plan where Gemini's endpoint fails over
to OpenAI's, the name alone cannot tell a transcript's own fields from a
foreign server's, and OpenAI's API refuses a message with a field it does
not define (``Additional properties are not allowed ('extra_content' was
unexpected)``): one fallback would poison every later turn.

So the fields are signed with where they came from. When a turn carries any
field the wire does not define, the adapter writes a provider state on the
assistant message, ``{"provider": "openai", "origin": <the endpoint>,
"fields": [<the message's own fields>]}``; the endpoint is the client's base
URL without user info, query or fragment (a key there must not reach a
transcript). On the way out, an assistant message signed by this adapter's
endpoint goes as it was made; one signed by another endpoint loses the
fields its signature names and its calls' extra fields; the signature itself
is harness state and never goes on the wire. A message with no signature
(written by hand, or stored before signatures) is sent as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY

if TYPE_CHECKING:
    import httpx2

    from juno_bind_trio.loop import ModelTurnResult

__all__ = ["messages_for_origin", "origin_of", "sign_result"]

_NAME: Final = "openai"
_CALL_FIELDS: Final = ("id", "type", "function")


def origin_of(url: httpx2.URL) -> str:
    """The endpoint a client sends to, as a signature names it: no user info, query or fragment."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


def sign_result(result: ModelTurnResult, origin: str) -> ModelTurnResult:
    """*result* with a signature naming *origin*, if it carries fields the wire does not define."""
    if not result.extra and not any(call.extra for call in result.tool_calls):
        return result
    fields = sorted(key for key in result.extra if key != PROVIDER_STATE_KEY)
    state = {"provider": _NAME, "origin": origin, "fields": fields}
    return attrs.evolve(result, extra={**result.extra, PROVIDER_STATE_KEY: state})


def messages_for_origin(
    messages: Sequence[Mapping[str, Any]], origin: str
) -> Sequence[Mapping[str, Any]]:
    """*messages* as the endpoint *origin* may be sent them (see the module's notes).

    The transcript is not touched: a message that changes is a copy, and a
    transcript without signatures is returned as it is.
    """
    if not any(PROVIDER_STATE_KEY in message for message in messages):
        return messages
    out: list[Mapping[str, Any]] = []
    for message in messages:
        if PROVIDER_STATE_KEY in message:
            message = _for_origin(message, origin)
        out.append(message)
    return out


def _for_origin(message: Mapping[str, Any], origin: str) -> Mapping[str, Any]:
    state = message[PROVIDER_STATE_KEY]
    signed = isinstance(state, Mapping) and state.get("provider") == _NAME
    if not signed or state.get("origin") == origin:
        # Ours, or no signature of this wire's (another adapter's state, which
        # routing strips before an adapter sees it): only the key goes.
        return {k: v for k, v in message.items() if k != PROVIDER_STATE_KEY}
    named = state.get("fields")
    dropped = {PROVIDER_STATE_KEY}
    if isinstance(named, Sequence) and not isinstance(named, str | bytes):
        dropped.update(field for field in named if isinstance(field, str))
    kept = {k: v for k, v in message.items() if k not in dropped}
    calls = kept.get("tool_calls")
    if isinstance(calls, Sequence) and not isinstance(calls, str | bytes):
        kept["tool_calls"] = [_bare(call) for call in calls]
    return kept


def _bare(call: object) -> object:
    if not isinstance(call, Mapping):
        return call  # not a call this module can judge; the server will say what it is
    return {k: call[k] for k in _CALL_FIELDS if k in call}
