"""The Gemini API's wire: SSE chunks of ``GenerateContentResponse``, and the turns it refuses.

``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` answers
``data: <GenerateContentResponse>`` chunks, each with one candidate whose
``content.parts`` are the new parts; the last chunk carries
``finishReason`` and ``usageMetadata``. ``:generateContent`` answers the same
folded into one. Unlike the other wires a function call is never streamed in
pieces: it arrives whole, in one part, ``args`` an object.

How the script's vocabulary plays here:

* [TextDelta][juno_bind_trio.testing.TextDelta]: a ``{"text": …}`` part;
* [ReasoningDelta][juno_bind_trio.testing.ReasoningDelta]: a ``{"text": …, "thought": true}`` part;
* [ToolCallDelta][juno_bind_trio.testing.ToolCallDelta]: its fragments joined into one
  ``functionCall`` part, sent where the call's first fragment stands (the *id* is not
  sent: the Gemini API gives none);
* thought signatures, as Gemini 3 issues them: on the first ``functionCall`` part of a
  response, or, in a response without calls, on its last text part;
* [Finish][juno_bind_trio.testing.Finish]: ``STOP`` (``"tool_calls"`` too), ``MAX_TOKENS``
  (``"length"``), ``SAFETY`` (``"content_filter"``), anything else verbatim;
* [Usage][juno_bind_trio.testing.Usage]: ``usageMetadata`` on the finishing chunk;
* [ErrorEvent][juno_bind_trio.testing.ErrorEvent]: ``data: {"error": {code, message, status}}``,
  *code* the status (``"INTERNAL"`` by default);
* an [ErrorResponse][juno_bind_trio.testing.ErrorResponse]: the API's error body with the
  gRPC status for its HTTP status (429 ``RESOURCE_EXHAUSTED``, 503 ``UNAVAILABLE``, …;
  *code* overrides it) and, with *retry_after*, a ``RetryInfo`` detail.

What it refuses, with the real API's words (400 ``INVALID_ARGUMENT``): a role
other than ``user`` / ``model``; a function call turn not followed by a turn of
as many function responses; function responses after anything but a function
call turn; in the current turn (the contents after the last user message that
is not function responses), a function call turn whose first ``functionCall``
part has no ``thoughtSignature``; any signature that is not one this server
issued, unmodified (the documented dummy signatures pass).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import attrs

from ._script import (
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    Finish,
    MalformedChunk,
    Pause,
    RawEvent,
    ReasoningDelta,
    StreamEvent,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ._wire import Frame, Header, ProviderRequest, read_turn

__all__ = ["GeminiWire"]

_ROUTE: Final = re.compile(
    r"^/v1(?:alpha|beta)?/models/([^/]+):(streamGenerateContent|generateContent)$"
)
_FINISH: Final = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
_STATUS: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# Signatures the API documents as accepted for calls it did not issue (history
# from elsewhere, hand-written examples).
_DUMMY_SIGNATURES: Final = (
    b"skip_thought_signature_validator",
    b"context_engineering_is_the_way_to_go",
)
_SIGNATURE_MISSING: Final = (
    "Function call is missing a thought_signature in functionCall parts. This is required "
    "for tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `{name}` , position {position}. Please "
    "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def _usage(usage: Usage) -> dict[str, int]:
    metadata = {
        "promptTokenCount": usage.prompt_tokens,
        "candidatesTokenCount": usage.completion_tokens,
        "totalTokenCount": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens:
        metadata["cachedContentTokenCount"] = usage.cached_tokens
    if usage.reasoning_tokens:
        metadata["thoughtsTokenCount"] = usage.reasoning_tokens
    return metadata


def _invalid(message: str) -> ErrorResponse:
    return ErrorResponse(400, message, code="INVALID_ARGUMENT")


def _decode_signature(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_")
    except (binascii.Error, ValueError):
        try:
            return base64.b64decode(value + "=" * (-len(value) % 4))
        except (binascii.Error, ValueError):
            return None


def _parts(content: object) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


@attrs.define(eq=False)
class GeminiWire:
    """The Gemini API's ``generateContent`` family; see the module docstring."""

    name: str = "gemini"
    _issued: set[bytes] = attrs.field(factory=set, init=False)

    def base_url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    def route(self, method: str, target: str, body: Any) -> tuple[str | None, bool] | None:
        match = _ROUTE.match(urlsplit(target).path)
        if method != "POST" or match is None:
            return None
        return unquote(match.group(1)), match.group(2) == "streamGenerateContent"

    # -- what it refuses ----------------------------------------------------------

    def refuse(self, body: dict[str, Any], record: ProviderRequest) -> ErrorResponse | None:
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return _invalid("* GenerateContentRequest.contents: contents is not specified")
        for content in contents:
            role = content.get("role", "user") if isinstance(content, dict) else None
            if role not in ("user", "model"):
                return _invalid("Please use a valid role: user, model.")
        for at, content in enumerate(contents):
            parts = _parts(content)
            calls = [p for p in parts if "functionCall" in p]
            answers = [p for p in parts if "functionResponse" in p]
            previous_calls = (
                [p for p in _parts(contents[at - 1]) if "functionCall" in p] if at else []
            )
            if answers and not previous_calls:
                return _invalid(
                    "Please ensure that function response turn comes immediately after a "
                    "function call turn."
                )
            if previous_calls and len(answers) != len(previous_calls):
                return _invalid(
                    "Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn."
                )
            if calls and at == len(contents) - 1:
                return _invalid(
                    "Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn."
                )
        return self._refuse_signatures(contents)

    def _refuse_signatures(self, contents: list[Any]) -> ErrorResponse | None:
        # The current turn: everything after the last user message that is
        # not only function responses (Gemini 3 checks signatures there only).
        start = 0
        for at, content in enumerate(contents):
            parts = _parts(content)
            is_user = isinstance(content, dict) and content.get("role", "user") == "user"
            if is_user and any("functionResponse" not in p for p in parts):
                start = at + 1
        for at, content in enumerate(contents):
            for position, part in enumerate(_parts(content)):
                signature = part.get("thoughtSignature")
                if signature is None:
                    continue
                decoded = _decode_signature(signature)
                if decoded is None or (
                    decoded not in self._issued and decoded not in _DUMMY_SIGNATURES
                ):
                    return _invalid(
                        f"Thought signature is not valid (contents[{at}].parts[{position}])."
                    )
        for content in contents[start:]:
            parts = _parts(content)
            for position, part in enumerate(parts):
                if "functionCall" in part:
                    if part.get("thoughtSignature") is None:
                        call = part["functionCall"]
                        name = call.get("name") if isinstance(call, dict) else None
                        return _invalid(_SIGNATURE_MISSING.format(name=name, position=position + 1))
                    break  # only the first call of a turn carries one
        return None

    # -- what it answers ----------------------------------------------------------

    def error(self, response: ErrorResponse, record: ProviderRequest) -> tuple[list[Header], bytes]:
        status = response.code or _STATUS.get(response.status, "UNKNOWN")
        error: dict[str, Any] = {
            "code": response.status,
            "message": response.message or f"fake server: scripted {response.status}",
            "status": status,
        }
        if response.retry_after is not None:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{response.retry_after:g}s",
                }
            ]
        return [("content-type", "application/json; charset=UTF-8")], json.dumps(
            {"error": error}
        ).encode()

    def stream_headers(self) -> list[Header]:
        return [("content-type", "text/event-stream")]

    def _signature(self, record: ProviderRequest, label: str) -> str:
        raw = f"fake-thought:{record.index}:{label}".encode()
        self._issued.add(raw)
        return base64.b64encode(raw).decode()

    def _plan(
        self, response: StreamResponse, record: ProviderRequest
    ) -> tuple[dict[int, dict[str, Any]], int | None]:
        """Each call's whole part, and which text event takes the signature of a call-less turn."""
        turn = read_turn(response.events)
        parts: dict[int, dict[str, Any]] = {}
        for call in turn.calls:
            try:
                args = json.loads(call.arguments or "{}")
            except ValueError:
                args = {"__fake_unparsable_arguments__": call.arguments}
            parts[call.index] = {"functionCall": {"name": call.name, "args": args}}
        if parts:
            first = min(parts)
            parts[first]["thoughtSignature"] = self._signature(record, f"call{first}")
            return parts, None
        last_text = None
        for at, event in enumerate(response.events):
            if isinstance(event, TextDelta):
                last_text = at
        return parts, last_text

    def _chunk(
        self,
        model: str,
        record: ProviderRequest,
        parts: list[dict[str, Any]],
        finish: str | None = None,
        usage: Usage | None = None,
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"index": 0}
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        if finish is not None:
            candidate["finishReason"] = _FINISH.get(finish, finish)
        chunk: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": model,
            "responseId": f"fake-response-{record.index}",
        }
        if usage is not None:
            chunk["usageMetadata"] = _usage(usage)
        return chunk

    def _part(
        self,
        event: StreamEvent,
        at: int,
        calls: dict[int, dict[str, Any]],
        signed_text: int | None,
        record: ProviderRequest,
    ) -> dict[str, Any] | None:
        if isinstance(event, TextDelta):
            part: dict[str, Any] = {"text": event.text}
            if at == signed_text:
                part["thoughtSignature"] = self._signature(record, "text")
            return part
        if isinstance(event, ReasoningDelta):
            return {"text": event.text, "thought": True}
        if isinstance(event, ToolCallDelta):
            return calls.pop(event.index, None)
        return None

    def frames(
        self, response: StreamResponse, record: ProviderRequest
    ) -> Iterator[tuple[StreamEvent | None, Frame]]:
        model = response.model or record.model or "fake-model"
        calls, signed_text = self._plan(response, record)
        usage = read_turn(response.events).usage
        finished = False
        for at, event in enumerate(response.events):
            if isinstance(event, Pause | Disconnect):
                yield event, event
            elif isinstance(event, MalformedChunk):
                yield event, f"data: {event.raw}\r\n\r\n".encode()
            elif isinstance(event, RawEvent):
                yield event, f"data: {event.data}\r\n\r\n".encode()
            elif isinstance(event, ErrorEvent):
                error = {"code": 500, "message": event.message, "status": event.code or "INTERNAL"}
                yield event, _sse({"error": error})
            elif isinstance(event, Finish):
                finished = True
                yield event, _sse(self._chunk(model, record, [], event.reason, usage))
            elif isinstance(event, Usage):
                if not finished:
                    yield event, _sse(self._chunk(model, record, [], None, usage))
            else:
                part = self._part(event, at, calls, signed_text, record)
                if part is not None:
                    yield event, _sse(self._chunk(model, record, [part]))

    def complete(self, response: StreamResponse, record: ProviderRequest) -> bytes:
        model = response.model or record.model or "fake-model"
        calls, signed_text = self._plan(response, record)
        turn = read_turn(response.events)
        parts: list[dict[str, Any]] = []
        for at, event in enumerate(response.events):
            part = self._part(event, at, calls, signed_text, record)
            if part is None:
                continue
            same_kind = parts and "text" in parts[-1] and "text" in part
            if same_kind and parts[-1].get("thought") == part.get("thought"):
                parts[-1] = {**parts[-1], **part, "text": parts[-1]["text"] + part["text"]}
            else:
                parts.append(part)
        chunk = self._chunk(model, record, parts, turn.finish or "stop", turn.usage)
        return json.dumps(chunk).encode()


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\r\n\r\n"
