"""A fake of Anthropic's Messages API on loopback: the wire, and the rules it enforces.

The script is the OpenAI fake's (``StreamResponse``, ``ErrorResponse``, ...),
spoken in Anthropic's streaming events: ``message_start``, a content block
per run of text (``text_delta``), of reasoning (a ``thinking`` block, closed
with its ``signature_delta``) and per tool call (``tool_use``, its arguments
as ``input_json_delta``), ``message_delta`` with the stop reason and usage,
``message_stop``. A script's ``done=False`` leaves ``message_stop`` out, the
truncation a client must notice itself. An ``ErrorEvent`` is the API's
``event: error`` (give it ``type="overloaded_error"`` for the overload), a
``MalformedChunk`` a delta whose data is not JSON, and a ``RawEvent``'s text
goes out verbatim as one whole SSE block.

It refuses, as the real API does, with a 400 in the API's error shape: a
request without ``max_tokens``; a ``system`` message in ``messages``; a
conversation that does not start with the user; a ``tool_use`` not answered
by a ``tool_result`` in the very next user turn, or a ``tool_result`` that
answers no ``tool_use`` of the turn before; a ``thinking`` block whose text or
signature was changed (the fake signs each block it streams, and checks the
signature on the way back); and, with thinking enabled, a final assistant
turn of a tool loop that does not start with its thinking block.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, final

from ._loopback import LoopbackServer, open_loopback_server, sse
from ._script import (
    CompletionResponse,
    ErrorEvent,
    ErrorResponse,
    Finish,
    MalformedChunk,
    RawEvent,
    ReasoningDelta,
    StreamEvent,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ._server import RecordedRequest, Script, _compile_script
from ._thread_env import serve_in_thread

__all__ = [
    "ANTHROPIC_ENV_VARIABLES",
    "AnthropicWire",
    "anthropic_signature",
    "fake_anthropic_env",
    "open_fake_anthropic_server",
]

ANTHROPIC_ENV_VARIABLES: Final = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")

_PATH: Final = "/v1/messages"

_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

_STOP_REASONS: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def anthropic_signature(thinking: str) -> str:
    """The signature the fake gives a thinking block of text *thinking* (and checks on return)."""
    if not isinstance(thinking, str):
        raise TypeError(f"anthropic_signature: thinking must be a str, got {thinking!r}")
    digest = hashlib.sha256(b"fake-anthropic-thinking:" + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def _refusal(message: str) -> ErrorResponse:
    return ErrorResponse(400, message, code="invalid_request_error")


def _blocks(content: object) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def find_anthropic_fault(body: Mapping[str, Any]) -> str | None:
    """Why the real Messages API would refuse *body*, or ``None``."""
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Field required (a positive integer)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    thinking = body.get("thinking")
    thinking_on = isinstance(thinking, Mapping) and thinking.get("type") == "enabled"
    previous_uses: set[str] = set()
    last_assistant = -1
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, Mapping):
            return f"{where}: Input should be an object"
        role = message.get("role")
        if role not in ("user", "assistant"):
            return (
                f'{where}: Unexpected role "{role}". The Messages API accepts a top-level '
                "`system` parameter, not a system role in messages"
            )
        if index == 0 and role != "user":
            return "messages: the first message must use the user role"
        blocks = _blocks(message.get("content"))
        if not blocks and role == "user":
            return f"{where}: user messages must have non-empty content"
        if role == "assistant":
            last_assistant = index
            if previous_uses:
                return (
                    f"{where}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {sorted(previous_uses)}"
                )
            uses: set[str] = set()
            for block in blocks:
                kind = block.get("type")
                if kind == "thinking":
                    text = block.get("thinking")
                    if not isinstance(text, str) or block.get("signature") != anthropic_signature(
                        text
                    ):
                        return f"{where}: Invalid `signature` in `thinking` block"
                elif kind == "tool_use":
                    call_id = block.get("id")
                    if not isinstance(call_id, str) or not isinstance(block.get("input"), Mapping):
                        return f"{where}: a tool_use block needs an id and an object input"
                    uses.add(call_id)
                elif kind == "text" and not block.get("text"):
                    return f"{where}: text content blocks must be non-empty"
            previous_uses = uses
            continue
        answered = {
            block.get("tool_use_id") for block in blocks if block.get("type") == "tool_result"
        }
        stray = sorted(str(a) for a in answered - previous_uses)
        if stray:
            return (
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {stray}. Each "
                "`tool_result` block must have a corresponding `tool_use` block in the previous "
                "message"
            )
        missing = previous_uses - answered
        if missing:
            return (
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {sorted(missing)}"
            )
        previous_uses = set()
    if previous_uses and last_assistant != len(messages) - 1:
        return "messages: a tool_use is left without its tool_result"
    if thinking_on and last_assistant >= 0:
        final = _blocks(messages[last_assistant].get("content"))
        if any(b.get("type") == "tool_use" for b in final) and (
            not final or final[0].get("type") not in ("thinking", "redacted_thinking")
        ):
            return (
                f"messages.{last_assistant}.content.0.type: Expected `thinking` or "
                "`redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block"
            )
    for index, tool in enumerate(body.get("tools") or []):
        schema = tool.get("input_schema") if isinstance(tool, Mapping) else None
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            return f"tools.{index}.input_schema: must be a JSON schema of type object"
    return None


@final
class _Encoder:
    """One streamed answer in Anthropic's events."""

    content_type = "text/event-stream; charset=utf-8"

    def __init__(self, response: StreamResponse, record: RecordedRequest) -> None:
        self._response = response
        self._model = response.model or _model_of(record) or "claude-fake"
        self._id = f"msg_fake_{record.index}"
        usage = next((e for e in response.events if isinstance(e, Usage)), None)
        # Anthropic's input_tokens leave the cache reads out; the script's prompt counts them.
        self._cached = usage.cached_tokens if usage is not None else 0
        self._input = (usage.prompt_tokens if usage is not None else 0) - self._cached
        self._output = usage.completion_tokens if usage is not None else 0
        self._index = -1
        self._open: str | None = None
        self._thinking: list[str] = []

    def start(self) -> bytes:
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self._input,
                "cache_read_input_tokens": self._cached,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
        }
        return sse("message_start", {"type": "message_start", "message": message})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        out = b""
        if self._open == "thinking":
            signature = anthropic_signature("".join(self._thinking))
            delta = {"type": "signature_delta", "signature": signature}
            out += self._delta(delta)
            self._thinking = []
        self._open = None
        return out + sse("content_block_stop", {"type": "content_block_stop", "index": self._index})

    def _begin(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self._index += 1
        self._open = kind
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        return out + sse("content_block_start", start)

    def _delta(self, delta: dict[str, Any]) -> bytes:
        body = {"type": "content_block_delta", "index": self._index, "delta": delta}
        return sse("content_block_delta", body)

    def event(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):
            out = b"" if self._open == "text" else self._begin("text", {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": event.text})
        if isinstance(event, ReasoningDelta):
            out = b""
            if self._open != "thinking":
                out = self._begin("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self._thinking.append(event.text)
            return out + self._delta({"type": "thinking_delta", "thinking": event.text})
        if isinstance(event, ToolCallDelta):
            out = b""
            if event.id is not None or self._open != "tool_use":
                block = {
                    "type": "tool_use",
                    "id": event.id or f"toolu_fake_{self._index + 1}",
                    "name": event.name or "",
                    "input": {},
                }
                out = self._begin("tool_use", block)
            if event.arguments:
                out += self._delta({"type": "input_json_delta", "partial_json": event.arguments})
            return out
        if isinstance(event, Finish):
            delta = {
                "type": "message_delta",
                "delta": {
                    "stop_reason": _STOP_REASONS.get(event.reason, event.reason),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": self._output},
            }
            return self._close() + sse("message_delta", delta)
        if isinstance(event, Usage):
            return b""
        if isinstance(event, ErrorEvent):
            kind = "api_error" if event.type == "server_error" else event.type
            error = {"type": "error", "error": {"type": kind, "message": event.message}}
            return sse("error", error)
        if isinstance(event, MalformedChunk):
            return f"event: content_block_delta\ndata: {event.raw}\n\n".encode()
        if isinstance(event, RawEvent):
            return f"{event.data}\n\n".encode()
        raise AssertionError(f"not a data event: {event!r}")  # pragma: no cover

    def end(self, done: bool) -> bytes:
        if not done:
            return b""
        return self._close() + sse("message_stop", {"type": "message_stop"})


def _model_of(record: RecordedRequest) -> str | None:
    body = record.json
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


@final
class AnthropicWire:
    """Anthropic's Messages API (``POST /v1/messages``), for the loopback server."""

    name = "Anthropic"

    def route(self, record: RecordedRequest) -> str | None:
        if record.method == "POST" and record.target.split("?")[0] == _PATH:
            return None
        return f"no route for {record.method} {record.target}"

    def refuse(self, record: RecordedRequest) -> ErrorResponse | None:
        fault = find_anthropic_fault(record.json)
        return None if fault is None else _refusal(fault)

    def model_of(self, record: RecordedRequest) -> str | None:
        return _model_of(record)

    def error_body(self, response: ErrorResponse) -> tuple[bytes, list[tuple[str, str]]]:
        kind = response.code or _ERROR_TYPES.get(response.status, "api_error")
        error = {
            "type": "error",
            "error": {
                "type": kind,
                "message": response.message or f"fake server: scripted {response.status}",
            },
        }
        return json.dumps(error).encode(), []

    def completion(self, response: CompletionResponse, record: RecordedRequest) -> bytes:
        content: list[dict[str, Any]] = []
        if response.reasoning is not None:
            content.append(
                {
                    "type": "thinking",
                    "thinking": response.reasoning,
                    "signature": anthropic_signature(response.reasoning),
                }
            )
        if response.content:
            content.append({"type": "text", "text": response.content})
        for call_id, name, arguments in response.tool_calls:
            content.append(
                {"type": "tool_use", "id": call_id, "name": name, "input": json.loads(arguments)}
            )
        usage = response.usage or Usage()
        message = {
            "id": f"msg_fake_{record.index}",
            "type": "message",
            "role": "assistant",
            "model": response.model or _model_of(record) or "claude-fake",
            "content": content,
            "stop_reason": _STOP_REASONS.get(response.finish_reason, response.finish_reason),
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
            },
        }
        return json.dumps(message).encode()

    def stream(self, response: StreamResponse, record: RecordedRequest) -> _Encoder:
        return _Encoder(response, record)


@asynccontextmanager
async def open_fake_anthropic_server(
    script: Script = None, *, validate_history: bool = True
) -> AsyncIterator[LoopbackServer]:
    """Start a fake Anthropic Messages API on 127.0.0.1 for the body of an ``async with``.

    ```python
    async with open_fake_anthropic_server([StreamResponse.of_text("Hi")]) as server:
        client = anthropic.AsyncAnthropic(base_url=server.base_url, api_key="k", max_retries=0)
    ```

    *script* is what [`open_fake_openai_server()`][juno_bind_trio.testing.open_fake_openai_server]
    takes, played in Anthropic's events (see this module). *validate_history*
    (on by default) refuses, with the API's 400, a conversation the real API
    refuses: a ``tool_use`` without its ``tool_result``, a ``thinking`` block
    changed on its way back, ``max_tokens`` missing, ...
    """
    async with open_loopback_server(
        AnthropicWire(), script, validate=validate_history, owner="open_fake_anthropic_server"
    ) as server:
        yield server


@contextmanager
def fake_anthropic_env(
    script: Script = None, *, api_key: str = "fake-key", validate_history: bool = True
) -> Iterator[LoopbackServer]:
    """Serve *script* from a thread and point ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` at it.

    ```python
    with fake_anthropic_env([StreamResponse.of_text("Hello!")]):
        print(Agent("anthropic:claude-sonnet-4-5").run_sync("Hi").output)
    ```

    Like [`fake_openai_env()`][juno_bind_trio.testing.fake_openai_env]: the
    server runs on the real clock in its own event loop, the variables get
    their old values back on the way out, and it refuses to run inside an
    event loop (use ``open_fake_anthropic_server`` there).
    """
    _compile_script(script)
    if not isinstance(validate_history, bool):
        raise TypeError(
            f"fake_anthropic_env: validate_history must be a bool, got {validate_history!r}"
        )
    with serve_in_thread(
        "fake_anthropic_env",
        lambda: open_fake_anthropic_server(script, validate_history=validate_history),
        api_key=api_key,
        variables=lambda server, key: {
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": key,
        },
    ) as server:
        yield server
