"""Bedrock's Converse wire: AWS's binary event stream, its errors, and the turns it refuses.

``POST /model/{modelId}/converse-stream`` answers
``application/vnd.amazon.eventstream``: binary messages, each a prelude
(total length, headers length, their CRC32), headers (``:message-type``,
``:event-type`` or ``:exception-type``, ``:content-type``), a JSON payload
and a CRC32 of the whole message. The events are ``messageStart``, per
content block ``contentBlockStart`` (tool use only), ``contentBlockDelta``s
and ``contentBlockStop``, then ``messageStop`` and ``metadata`` (usage). A
failure mid-stream is an *exception* message (``throttlingException``,
``modelStreamErrorException``, …). ``/model/{modelId}/converse`` answers the
same folded into one JSON body.

How the script's vocabulary plays here:

* [TextDelta][juno_bind_trio.testing.TextDelta]: a ``text`` delta;
* [ReasoningDelta][juno_bind_trio.testing.ReasoningDelta]: a ``reasoningContent.text`` delta;
  the block ends with a ``reasoningContent.signature`` delta this server issues;
* [ToolCallDelta][juno_bind_trio.testing.ToolCallDelta]: a block started with
  ``toolUse {toolUseId, name}``, its fragments ``toolUse.input`` deltas;
* [Finish][juno_bind_trio.testing.Finish]: ``messageStop``: ``end_turn``, ``tool_use``
  (``"tool_calls"``), ``max_tokens`` (``"length"``), ``content_filtered``
  (``"content_filter"``), anything else verbatim;
* [Usage][juno_bind_trio.testing.Usage]: a ``metadata`` event where it stands;
* [ErrorEvent][juno_bind_trio.testing.ErrorEvent]: an exception message of type *code*, or
  by *type* (``"server_error"``: ``internalServerException``, ``"overloaded_error"``:
  ``serviceUnavailableException``, ``"rate_limit_error"``: ``throttlingException``,
  ``"model_stream_error"``: ``modelStreamErrorException``);
* [MalformedChunk][juno_bind_trio.testing.MalformedChunk]: a ``contentBlockDelta`` message
  whose CRC32 does not match (a payload that is merely not JSON is dropped by botocore
  without a word, so the fault on this wire is a broken frame);
  [RawEvent][juno_bind_trio.testing.RawEvent]: *data* is
  ``{"<eventType>": payload}`` and becomes that event;
* an [ErrorResponse][juno_bind_trio.testing.ErrorResponse]: ``x-amzn-ErrorType`` by status
  (429 ``ThrottlingException``, 503 ``ServiceUnavailableException``, 400
  ``ValidationException``, …; *code* overrides it), body ``{"message": …}``.

What it refuses (400 ``ValidationException``, the real API's words): a
conversation that does not start with a user message or does not alternate;
an assistant message's ``toolUse`` blocks not answered, each, by a
``toolResult`` in the next user message, or answered by more; a reasoning
block this server issued coming back with another text or signature.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
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

__all__ = ["BedrockWire", "encode_message"]

_ROUTE: Final = re.compile(r"^/model/([^/]+)/(converse-stream|converse)$")
_STOP: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
}
_ERROR_TYPES: Final = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_EXCEPTIONS: Final = {
    "server_error": "internalServerException",
    "overloaded_error": "serviceUnavailableException",
    "rate_limit_error": "throttlingException",
    "model_stream_error": "modelStreamErrorException",
    "invalid_request_error": "validationException",
}
_ALTERNATE: Final = (
    "A conversation must alternate between user and assistant roles. Make sure the "
    "conversation alternates between user and assistant roles and try again."
)


def encode_message(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One event-stream message: prelude, its CRC32, string headers, payload, message CRC32."""
    head = b""
    for name, value in headers:
        raw_name, raw_value = name.encode(), value.encode()
        head += bytes([len(raw_name)]) + raw_name + b"\x07"
        head += struct.pack(">H", len(raw_value)) + raw_value
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _event(kind: str, payload: dict[str, Any] | bytes) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = [
        (":event-type", kind),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ]
    return encode_message(headers, body)


def _exception(kind: str, message: str) -> bytes:
    headers = [
        (":exception-type", kind),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    ]
    return encode_message(headers, json.dumps({"message": message}).encode())


def _usage(usage: Usage) -> dict[str, int]:
    fields = {
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens:
        fields["cacheReadInputTokens"] = usage.cached_tokens
    return fields


def _invalid(message: str) -> ErrorResponse:
    return ErrorResponse(400, message, code="ValidationException")


def _blocks(message: object) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


@attrs.define(eq=False)
class _Play:
    """One answer being encoded: its content blocks as they grow."""

    wire: BedrockWire
    record: ProviderRequest
    blocks: list[dict[str, Any]] = attrs.field(factory=list)
    kinds: list[str] = attrs.field(factory=list)
    open: int | None = None
    calls: dict[int, int] = attrs.field(factory=dict)  # script index -> block index

    def close(self) -> bytes:
        at, self.open = self.open, None
        if at is None:
            return b""
        out = b""
        if self.kinds[at] == "reasoning":
            text = self.blocks[at]["reasoningContent"]["reasoningText"]
            text["signature"] = self.wire.issue(self.record, at, text["text"])
            delta = {"reasoningContent": {"signature": text["signature"]}}
            out += _event("contentBlockDelta", {"contentBlockIndex": at, "delta": delta})
        return out + _event("contentBlockStop", {"contentBlockIndex": at})

    def begin(self, kind: str, block: dict[str, Any]) -> tuple[int, bytes]:
        out = self.close()
        self.blocks.append(block)
        self.kinds.append(kind)
        self.open = len(self.blocks) - 1
        return self.open, out

    def text(self, delta: str) -> bytes:
        out = b""
        if self.open is None or self.kinds[self.open] != "text":
            _, out = self.begin("text", {"text": ""})
        assert self.open is not None
        self.blocks[self.open]["text"] += delta
        payload = {"contentBlockIndex": self.open, "delta": {"text": delta}}
        return out + _event("contentBlockDelta", payload)

    def reasoning(self, delta: str) -> bytes:
        out = b""
        if self.open is None or self.kinds[self.open] != "reasoning":
            _, out = self.begin("reasoning", {"reasoningContent": {"reasoningText": {"text": ""}}})
        assert self.open is not None
        self.blocks[self.open]["reasoningContent"]["reasoningText"]["text"] += delta
        payload = {"contentBlockIndex": self.open, "delta": {"reasoningContent": {"text": delta}}}
        return out + _event("contentBlockDelta", payload)

    def call(self, delta: ToolCallDelta) -> bytes:
        out = b""
        at = self.calls.get(delta.index)
        if at is None:
            tool_use = {
                "toolUseId": delta.id or f"tooluse_fake_{self.record.index}_{delta.index}",
                "name": delta.name or "",
            }
            at, out = self.begin("tool", {"toolUse": {**tool_use, "input": ""}})
            self.calls[delta.index] = at
            start = {"contentBlockIndex": at, "start": {"toolUse": tool_use}}
            out += _event("contentBlockStart", start)
        if not delta.arguments:
            return out
        self.blocks[at]["toolUse"]["input"] += delta.arguments
        payload = {"contentBlockIndex": at, "delta": {"toolUse": {"input": delta.arguments}}}
        return out + _event("contentBlockDelta", payload)

    def folded(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for block in self.blocks:
            if "toolUse" in block:
                raw = block["toolUse"]["input"] or "{}"
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = {"__fake_unparsable_input__": raw}
                out.append({"toolUse": {**block["toolUse"], "input": parsed}})
            else:
                out.append(block)
        return out


@attrs.define(eq=False)
class BedrockWire:
    """Bedrock runtime's ``Converse`` and ``ConverseStream``; see the module docstring."""

    name: str = "bedrock"
    _issued: dict[str, str] = attrs.field(factory=dict, init=False)  # signature -> text

    def base_url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    def issue(self, record: ProviderRequest, at: int, text: str) -> str:
        signature = f"fake-signature-{record.index}-{at}-{zlib.crc32(text.encode()):08x}"
        self._issued[signature] = text
        return signature

    def route(self, method: str, target: str, body: Any) -> tuple[str | None, bool] | None:
        match = _ROUTE.match(urlsplit(target).path)
        if method != "POST" or match is None:
            return None
        return unquote(match.group(1)), match.group(2) == "converse-stream"

    def refuse(self, body: dict[str, Any], record: ProviderRequest) -> ErrorResponse | None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _invalid(
                "1 validation error detected: Value at 'messages' failed to satisfy constraint"
            )
        previous: str | None = None
        open_calls: list[str] = []
        for at, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if at == 0 and role != "user":
                return _invalid(
                    "A conversation must start with a user message. Try again with a "
                    "conversation that starts with a user message."
                )
            if role not in ("user", "assistant") or role == previous:
                return _invalid(_ALTERNATE)
            previous = role
            blocks = _blocks(message)
            results = [
                b["toolResult"].get("toolUseId")
                for b in blocks
                if isinstance(b.get("toolResult"), dict)
            ]
            if len(results) > len(open_calls):
                return _invalid(
                    f"The number of toolResult blocks at messages.{at}.content exceeds the "
                    "number of toolUse blocks of previous turn."
                )
            missing = [call for call in open_calls if call not in results]
            if missing:
                return _invalid(
                    f"Expected toolResult blocks at messages.{at}.content for the following "
                    f"Ids: {', '.join(missing)}"
                )
            open_calls = []
            if role == "assistant":
                open_calls = [
                    b["toolUse"].get("toolUseId")
                    for b in blocks
                    if isinstance(b.get("toolUse"), dict)
                ]
                refusal = self._refuse_reasoning(at, blocks)
                if refusal is not None:
                    return refusal
        if open_calls:
            return _invalid(
                f"Expected toolResult blocks at messages.{len(messages)}.content for the "
                f"following Ids: {', '.join(open_calls)}"
            )
        return None

    def _refuse_reasoning(self, at: int, blocks: list[dict[str, Any]]) -> ErrorResponse | None:
        for position, block in enumerate(blocks):
            reasoning = block.get("reasoningContent")
            text = reasoning.get("reasoningText") if isinstance(reasoning, dict) else None
            if not isinstance(text, dict):
                continue
            signature = text.get("signature")
            if not isinstance(signature, str) or not signature.startswith("fake-signature-"):
                continue  # not one of ours: the real API would judge it; the fake cannot
            if self._issued.get(signature) != text.get("text"):
                return _invalid(
                    f"messages.{at}.content.{position}: Invalid `signature` in `thinking` block"
                )
        return None

    def error(self, response: ErrorResponse, record: ProviderRequest) -> tuple[list[Header], bytes]:
        kind = response.code or _ERROR_TYPES.get(response.status, "InternalServerException")
        message = response.message or f"fake server: scripted {response.status}"
        return [
            ("content-type", "application/json"),
            ("x-amzn-errortype", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        ], json.dumps({"message": message}).encode()

    def stream_headers(self) -> list[Header]:
        return [("content-type", "application/vnd.amazon.eventstream")]

    def frames(
        self, response: StreamResponse, record: ProviderRequest
    ) -> Iterator[tuple[StreamEvent | None, Frame]]:
        play = _Play(self, record)
        yield None, _event("messageStart", {"role": "assistant"})
        for event in response.events:
            if isinstance(event, Pause | Disconnect):
                yield event, event
            elif isinstance(event, TextDelta):
                yield event, play.text(event.text)
            elif isinstance(event, ReasoningDelta):
                yield event, play.reasoning(event.text)
            elif isinstance(event, ToolCallDelta):
                yield event, play.call(event)
            elif isinstance(event, Finish):
                stop = {"stopReason": _STOP.get(event.reason, event.reason)}
                yield event, play.close() + _event("messageStop", stop)
            elif isinstance(event, Usage):
                metadata = {"usage": _usage(event), "metrics": {"latencyMs": 0}}
                yield event, _event("metadata", metadata)
            elif isinstance(event, ErrorEvent):
                kind = event.code or _EXCEPTIONS.get(event.type, "internalServerException")
                yield event, _exception(kind, event.message)
            elif isinstance(event, MalformedChunk):
                yield event, _corrupt(_event("contentBlockDelta", event.raw.encode()))
            else:
                yield event, _raw(event)

    def complete(self, response: StreamResponse, record: ProviderRequest) -> bytes:
        play = _Play(self, record)
        for event in response.events:
            if isinstance(event, TextDelta):
                play.text(event.text)
            elif isinstance(event, ReasoningDelta):
                play.reasoning(event.text)
            elif isinstance(event, ToolCallDelta):
                play.call(event)
        play.close()
        turn = read_turn(response.events)
        body: dict[str, Any] = {
            "output": {"message": {"role": "assistant", "content": play.folded()}},
            "stopReason": _STOP.get(turn.finish or "stop", turn.finish or "stop"),
            "usage": _usage(turn.usage or Usage()),
            "metrics": {"latencyMs": 0},
        }
        return json.dumps(body).encode()


def _corrupt(message: bytes) -> bytes:
    return message[:-4] + struct.pack(">I", zlib.crc32(message[:-4]) ^ 0xFFFFFFFF)


def _raw(event: RawEvent) -> bytes:
    try:
        parsed = json.loads(event.data)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and len(parsed) == 1:
        ((kind, payload),) = parsed.items()
        if isinstance(payload, dict):
            return _event(kind, payload)
    return _event("contentBlockDelta", event.data.encode())
