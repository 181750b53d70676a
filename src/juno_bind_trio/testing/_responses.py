"""The OpenAI Responses API's wire: named SSE events, output items, and what ``input`` it refuses.

A streamed answer (``POST /v1/responses`` with ``"stream": true``) is a run of
``event: <type>`` / ``data: <json>`` pairs with a ``sequence_number`` each:
``response.created``, then per output item ``response.output_item.added``,
its deltas (``response.output_text.delta``,
``response.reasoning_summary_text.delta``,
``response.function_call_arguments.delta``), its ``…done`` events and
``response.output_item.done``, and at the end ``response.completed`` (or
``response.incomplete``) carrying the whole response with its ``usage``. There
is no ``[DONE]``: a body that ends without the terminal event is a truncation.

How the script's vocabulary plays here:

* [TextDelta][juno_bind_trio.testing.TextDelta]: an ``output_text`` delta of a ``message`` item;
* [ReasoningDelta][juno_bind_trio.testing.ReasoningDelta]: a reasoning summary delta of a
  ``reasoning`` item, which carries ``encrypted_content`` when the request's ``include``
  asked for ``"reasoning.encrypted_content"``;
* [ToolCallDelta][juno_bind_trio.testing.ToolCallDelta]: a ``function_call`` item
  (``call_id`` = the delta's *id*) and its argument deltas;
* [Finish][juno_bind_trio.testing.Finish]: ``response.completed``; ``"length"`` and
  ``"content_filter"`` give ``response.incomplete`` with that reason;
* [Usage][juno_bind_trio.testing.Usage] (anywhere): the terminal event's ``usage``;
* [ErrorEvent][juno_bind_trio.testing.ErrorEvent]: an ``error`` event, or
  ``response.failed`` when its *type* is ``"response.failed"``;
* [MalformedChunk][juno_bind_trio.testing.MalformedChunk] /
  [RawEvent][juno_bind_trio.testing.RawEvent]: a ``data:`` line verbatim.

What it refuses, with the real API's words (400, ``param: "input"``): a
``function_call_output`` whose ``call_id`` no earlier ``function_call``
has; a ``function_call`` with no ``function_call_output``; a function call
item this server issued sent back without the reasoning item that came with
it; a reasoning item whose ``encrypted_content`` is not the one issued (or,
with ``store: false``, missing).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlsplit

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

__all__ = ["ResponsesWire"]

_PATH: Final = "/v1/responses"
_INCOMPLETE: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def _refusal(message: str, *, status: int = 400, code: str | None = None) -> ErrorResponse:
    return ErrorResponse(status, message, param="input", code=code)


@attrs.define(eq=False)
class _Play:
    """One streamed answer being encoded: its items, in order, as they grow."""

    wire: ResponsesWire
    record: ProviderRequest
    response_id: str
    model: str
    encrypted: bool
    sequence: int = 0
    items: list[dict[str, Any]] = attrs.field(factory=list)
    open: dict[str, Any] | None = None
    calls: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    last_reasoning: str | None = None

    def event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": self.model,
            "output": list(self.items),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            **fields,
        }

    def add(self, item: dict[str, Any]) -> bytes:
        self.items.append(item)
        self.open = item
        return self.event(
            "response.output_item.added", output_index=len(self.items) - 1, item=dict(item)
        )

    def close(self) -> bytes:
        item, self.open = self.open, None
        if item is None:
            return b""
        index = self.items.index(item)
        out = b""
        if item["type"] == "message":
            text = item["content"][0]["text"]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            out += self.event("response.output_text.done", text=text, **where)
            out += self.event("response.content_part.done", part=item["content"][0], **where)
        elif item["type"] == "reasoning":
            where = {"item_id": item["id"], "output_index": index, "summary_index": 0}
            part = item["summary"][0]
            out += self.event("response.reasoning_summary_text.done", text=part["text"], **where)
            out += self.event("response.reasoning_summary_part.done", part=part, **where)
            if self.encrypted:
                item["encrypted_content"] = self.wire.issue_reasoning(item["id"], part["text"])
        elif item["type"] == "function_call":
            out += self.event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
        item["status"] = "completed"
        return out + self.event("response.output_item.done", output_index=index, item=item)

    def text(self, delta: str) -> bytes:
        out = b""
        if self.open is None or self.open["type"] != "message":
            out += self.close()
            part = {"type": "output_text", "text": "", "annotations": []}
            item_id = f"msg_fake_{self.record.index}_{len(self.items)}"
            out += self.add(
                {
                    "id": item_id,
                    "type": "message",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [part],
                }
            )
            out += self.event(
                "response.content_part.added",
                item_id=item_id,
                output_index=len(self.items) - 1,
                content_index=0,
                part=dict(part),
            )
        assert self.open is not None
        self.open["content"][0]["text"] += delta
        return out + self.event(
            "response.output_text.delta",
            item_id=self.open["id"],
            output_index=len(self.items) - 1,
            content_index=0,
            delta=delta,
            logprobs=[],
        )

    def reasoning(self, delta: str) -> bytes:
        out = b""
        if self.open is None or self.open["type"] != "reasoning":
            out += self.close()
            item_id = f"rs_fake_{self.record.index}_{len(self.items)}"
            out += self.add({"id": item_id, "type": "reasoning", "summary": []})
            assert self.open is not None
            part = {"type": "summary_text", "text": ""}
            self.open["summary"].append(part)
            out += self.event(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=len(self.items) - 1,
                summary_index=0,
                part=dict(part),
            )
            self.last_reasoning = item_id
        assert self.open is not None
        self.open["summary"][0]["text"] += delta
        return out + self.event(
            "response.reasoning_summary_text.delta",
            item_id=self.open["id"],
            output_index=len(self.items) - 1,
            summary_index=0,
            delta=delta,
        )

    def call(self, delta: ToolCallDelta) -> bytes:
        out = b""
        item = self.calls.get(delta.index)
        if item is None:
            out += self.close()
            item_id = f"fc_fake_{self.record.index}_{len(self.items)}"
            item = {
                "id": item_id,
                "type": "function_call",
                "call_id": delta.id or f"call_fake_{self.record.index}_{delta.index}",
                "name": delta.name or "",
                "arguments": "",
                "status": "in_progress",
            }
            self.calls[delta.index] = item
            self.wire.issue_call(item_id, self.last_reasoning)
            out += self.add(item)
        if not delta.arguments:
            return out
        item["arguments"] += delta.arguments
        return out + self.event(
            "response.function_call_arguments.delta",
            item_id=item["id"],
            output_index=self.items.index(item),
            delta=delta.arguments,
        )

    def finish(self, reason: str, usage: Usage | None) -> bytes:
        out = self.close()
        incomplete = _INCOMPLETE.get(reason)
        if incomplete is None:
            body = self.response("completed", usage=_usage(usage))
            return out + self.event("response.completed", response=body)
        body = self.response(
            "incomplete", usage=_usage(usage), incomplete_details={"reason": incomplete}
        )
        return out + self.event("response.incomplete", response=body)

    def error(self, event: ErrorEvent) -> bytes:
        if event.type == "response.failed":
            error = {"code": event.code or "server_error", "message": event.message}
            return self.event("response.failed", response=self.response("failed", error=error))
        return self.event("error", code=event.code, message=event.message, param=None)


@attrs.define(eq=False)
class ResponsesWire:
    """The Responses API (``POST /v1/responses``); see the module docstring."""

    name: str = "responses"
    # What this server issued, for checking it comes back unmodified.
    _reasoning: dict[str, str] = attrs.field(factory=dict, init=False)
    _call_reasoning: dict[str, str | None] = attrs.field(factory=dict, init=False)

    def base_url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}/v1"

    def issue_reasoning(self, item_id: str, text: str) -> str:
        sealed = base64.b64encode(f"fake-sealed:{item_id}:{text}".encode()).decode()
        self._reasoning[item_id] = sealed
        return sealed

    def issue_call(self, item_id: str, reasoning_id: str | None) -> None:
        self._call_reasoning[item_id] = reasoning_id

    def route(self, method: str, target: str, body: Any) -> tuple[str | None, bool] | None:
        if method != "POST" or urlsplit(target).path != _PATH:
            return None
        if not isinstance(body, dict):
            return None, False
        model = body.get("model")
        return (model if isinstance(model, str) else None), body.get("stream") is True

    def refuse(self, body: dict[str, Any], record: ProviderRequest) -> ErrorResponse | None:
        items = body.get("input")
        if items is None or isinstance(items, str):
            return None
        if not isinstance(items, list):
            return _refusal("Invalid type for 'input': expected a string or an array of items.")
        return self._refuse_items(items, store=body.get("store") is not False)

    def _refuse_items(self, items: list[Any], *, store: bool) -> ErrorResponse | None:
        calls: list[str] = []
        answered: set[str] = set()
        seen_reasoning: set[str] = set()
        for item in items:
            if not isinstance(item, dict):
                return _refusal("Invalid type for 'input[]': expected an object.")
            kind = item.get("type")
            if kind == "reasoning":
                item_id = item.get("id")
                issued = self._reasoning.get(item_id) if isinstance(item_id, str) else None
                sealed = item.get("encrypted_content")
                if issued is not None and sealed is None and not store:
                    return _refusal(
                        f"Item with id '{item_id}' not found. Items are not persisted when "
                        "`store` is set to false. Try again with `store` set to true, or "
                        "remove this item from your input.",
                        status=404,
                    )
                if issued is not None and sealed is not None and sealed != issued:
                    return _refusal(
                        f"The encrypted content for item {item_id} could not be verified.",
                        code="invalid_encrypted_content",
                    )
                if isinstance(item_id, str):
                    seen_reasoning.add(item_id)
            elif kind == "function_call":
                call_id = item.get("call_id")
                if not isinstance(call_id, str) or not call_id:
                    return _refusal("Missing required parameter: 'input[].call_id'.")
                item_id = item.get("id")
                needed = self._call_reasoning.get(item_id) if isinstance(item_id, str) else None
                if needed is not None and needed not in seen_reasoning:
                    return _refusal(
                        f"Item '{item_id}' of type 'function_call' was provided without its "
                        f"required 'reasoning' item: '{needed}'."
                    )
                calls.append(call_id)
            elif kind == "function_call_output":
                call_id = item.get("call_id")
                if call_id not in calls:
                    return _refusal(
                        f"No tool call found for function call output with call_id {call_id}."
                    )
                answered.add(call_id)
        for call_id in calls:
            if call_id not in answered:
                return _refusal(f"No tool output found for function call {call_id}.")
        return None

    def error(self, response: ErrorResponse, record: ProviderRequest) -> tuple[list[Header], bytes]:
        return [("content-type", "application/json")], response.body()

    def stream_headers(self) -> list[Header]:
        return [("content-type", "text/event-stream"), ("cache-control", "no-cache")]

    def _play(self, response: StreamResponse, record: ProviderRequest) -> _Play:
        body = record.json
        include = body.get("include") if isinstance(body, dict) else None
        return _Play(
            wire=self,
            record=record,
            response_id=f"resp_fake_{record.index}",
            model=response.model or record.model or "fake-model",
            encrypted=isinstance(include, list) and "reasoning.encrypted_content" in include,
        )

    def frames(
        self, response: StreamResponse, record: ProviderRequest
    ) -> Iterator[tuple[StreamEvent | None, Frame]]:
        play = self._play(response, record)
        usage = read_turn(response.events).usage
        created = play.response("in_progress")
        yield (
            None,
            play.event("response.created", response=created)
            + play.event("response.in_progress", response=created),
        )
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
                yield event, play.finish(event.reason, usage)
            elif isinstance(event, ErrorEvent):
                yield event, play.error(event)
            elif isinstance(event, MalformedChunk):
                yield event, f"event: response.output_text.delta\ndata: {event.raw}\n\n".encode()
            elif isinstance(event, RawEvent):
                yield event, f"data: {event.data}\n\n".encode()
            # Usage has no frame of its own: it rides on the terminal event.

    def complete(self, response: StreamResponse, record: ProviderRequest) -> bytes:
        play = self._play(response, record)
        finish: str = "stop"
        for event in response.events:
            if isinstance(event, TextDelta):
                play.text(event.text)
            elif isinstance(event, ReasoningDelta):
                play.reasoning(event.text)
            elif isinstance(event, ToolCallDelta):
                play.call(event)
            elif isinstance(event, Finish):
                finish = event.reason
        play.close()
        usage = _usage(read_turn(response.events).usage)
        incomplete = _INCOMPLETE.get(finish)
        if incomplete is None:
            body = play.response("completed", usage=usage)
        else:
            body = play.response(
                "incomplete", usage=usage, incomplete_details={"reason": incomplete}
            )
        return json.dumps(body).encode()
