"""Tool calls Gemini did not make get the stand-in signature on its OpenAI-compatible endpoint.

Gemini 3 refuses a request whose current turn holds a function call without
the ``thought_signature`` Gemini gave it (400 ``INVALID_ARGUMENT``, "Function
call is missing a thought_signature"); on the OpenAI-compatible endpoint the
signature travels on the tool call as ``extra_content.google.thought_signature``.
Calls Gemini made carry theirs (``providers/openai/_origin.py`` keeps it and
sends it back). Calls another provider made do not: after a fallback from,
say, Anthropic to Gemini in the middle of a tool loop, the transcript's last
assistant message has Anthropic's calls, and without a signature the fallback
is refused at once, so one failover would end the run.

The Gemini API documents stand-in values for history it did not sign
(``"skip_thought_signature_validator"``, which this module sends, and
``"context_engineering_is_the_way_to_go"``). So, on the way to a Gemini
endpoint, each assistant message this endpoint did not sign whose first call
has no signature gets the stand-in on that call, the one Gemini itself signs
in a step of parallel calls. Messages the endpoint signed go as they came:
Gemini decides what it signs, and a signature must come back unmodified.
The transcript is not touched (a message that changes is a copy): the
stand-in is written on the wire, never into the run's history, so a later
turn routed to OpenAI's API sends none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY

if TYPE_CHECKING:
    import httpx2

__all__ = ["GEMINI_HOST", "PLACEHOLDER_SIGNATURE", "is_gemini_endpoint", "with_placeholders"]

GEMINI_HOST: Final = "generativelanguage.googleapis.com"
"""The host of the Gemini API, whose ``/v1beta/openai/`` path speaks chat completions."""

PLACEHOLDER_SIGNATURE: Final = "skip_thought_signature_validator"
"""The signature the Gemini API documents for function calls it did not issue."""


def is_gemini_endpoint(url: httpx2.URL) -> bool:
    """Whether a client's base URL is the Gemini API's own host (a proxy's is not: say so)."""
    return (url.host or "").lower().rstrip(".") == GEMINI_HOST


def with_placeholders(
    original: Sequence[Mapping[str, Any]], outgoing: Sequence[Mapping[str, Any]], origin: str
) -> Sequence[Mapping[str, Any]]:
    """*outgoing* with the stand-in on each foreign call turn's first call (see the module's notes).

    *original* is the transcript as routing handed it, *outgoing* the same
    messages as this endpoint may be sent them (``messages_for_origin``), one
    for one: the signatures that say which messages *origin* made are read
    from the first, the copies are made of the second.
    """
    changed: list[Mapping[str, Any]] | None = None
    for at, message in enumerate(original):
        if message.get("role") != "assistant" or _signed_by(message, origin):
            continue
        sent = outgoing[at]
        calls = sent.get("tool_calls")
        if not isinstance(calls, Sequence) or isinstance(calls, str | bytes) or not calls:
            continue
        first = calls[0]
        if not isinstance(first, Mapping) or _signature(first) is not None:
            continue
        if changed is None:
            changed = list(outgoing)
        changed[at] = {**sent, "tool_calls": [_with_placeholder(first), *calls[1:]]}
    return outgoing if changed is None else changed


def _signed_by(message: Mapping[str, Any], origin: str) -> bool:
    state = message.get(PROVIDER_STATE_KEY)
    return (
        isinstance(state, Mapping)
        and state.get("provider") == "openai"
        and state.get("origin") == origin
    )


def _signature(call: Mapping[str, Any]) -> object:
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, Mapping) else None
    return google.get("thought_signature") if isinstance(google, Mapping) else None


def _with_placeholder(call: Mapping[str, Any]) -> dict[str, Any]:
    # Whatever else the call's extra_content holds (another vendor's key, a
    # google object without a signature) is kept beside the stand-in.
    extra = call.get("extra_content")
    extra = dict(extra) if isinstance(extra, Mapping) else {}
    google = extra.get("google")
    google = dict(google) if isinstance(google, Mapping) else {}
    google["thought_signature"] = PLACEHOLDER_SIGNATURE
    extra["google"] = google
    return {**call, "extra_content": extra}
