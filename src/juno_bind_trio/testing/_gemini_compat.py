"""Gemini 3's thought signatures on its OpenAI-compatible endpoint, as the OpenAI fake plays them.

With ``FakeOpenAIServer.gemini_signatures`` on, the fake signs what it streams
and checks what comes back the way Gemini 3's compatible endpoint does. It
signs the first tool call of each streamed answer (``extra_content.google.
thought_signature``, a token of its own unless the script gave one), the one
call of a step Gemini signs. It refuses, with Gemini's 400 ``INVALID_ARGUMENT``
words, a request whose current turn (the messages after the last ``user``
message) holds an assistant message whose first tool call carries no
signature, or one the server did not issue; the stand-ins the Gemini API
documents for calls it did not make pass. Earlier turns are not checked, as
Gemini checks only the current one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ._script import ErrorResponse, FakeResponse, RawEvent, StreamResponse, ToolCallDelta

__all__ = ["DUMMY_SIGNATURES", "refuse_unsigned_calls", "sign_first_call"]

DUMMY_SIGNATURES: Final = frozenset(
    {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}
)
"""The signatures the Gemini API documents as accepted for calls it did not issue."""

_MISSING: Final = (
    "Function call is missing a thought_signature in functionCall parts. This is required "
    "for tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `{name}` , position {position}. Please "
    "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def sign_first_call(response: FakeResponse, index: int, issued: set[str]) -> FakeResponse:
    """*response* with its first tool call signed, and every signature it sends in *issued*."""
    if not isinstance(response, StreamResponse):
        return response
    events = list(response.events)
    for event in events:
        if isinstance(event, RawEvent):
            issued.update(_signatures_in(event.data))
        elif isinstance(event, ToolCallDelta) and event.thought_signature is not None:
            issued.add(event.thought_signature)
    for at, event in enumerate(events):
        if isinstance(event, ToolCallDelta) and event.id is not None:
            if event.thought_signature is None:
                token = base64.b64encode(f"fake-signature-{index}".encode()).decode()
                issued.add(token)
                events[at] = attrs.evolve(event, thought_signature=token)
                return attrs.evolve(response, events=events)
            break
    return response


def refuse_unsigned_calls(body: Mapping[str, Any], issued: set[str]) -> ErrorResponse | None:
    """The 400 Gemini 3 answers a current turn with an unsigned call, or ``None``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    users = [at for at, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    start = users[-1] + 1 if users else 0
    for at in range(start, len(messages)):
        message = messages[at]
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            continue
        first = calls[0] if isinstance(calls[0], dict) else {}
        signature = _signature(first)
        if signature is None:
            function = first.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            text = _MISSING.format(name=name, position=at + 1)
            return ErrorResponse(400, text, code="INVALID_ARGUMENT")
        if signature not in issued and signature not in DUMMY_SIGNATURES:
            text = f"Thought signature is not valid (messages[{at}].tool_calls[0])."
            return ErrorResponse(400, text, code="INVALID_ARGUMENT")
    return None


def _signature(call: Mapping[str, Any]) -> object:
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    return google.get("thought_signature") if isinstance(google, dict) else None


def _signatures_in(data: str) -> list[str]:
    # A scripted raw chunk may carry signatures of its own (a test writing
    # Gemini's exact bytes): they are the server's, as if it had issued them.
    try:
        chunk = json.loads(data)
    except ValueError:
        return []
    found: list[str] = []
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        calls = delta.get("tool_calls") if isinstance(delta, dict) else None
        for call in calls if isinstance(calls, list) else ():
            signature = _signature(call) if isinstance(call, dict) else None
            if isinstance(signature, str):
                found.append(signature)
    return found
