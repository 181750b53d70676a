"""A run as the Vercel AI SDK's UI message stream: what ``useChat`` reads.

The protocol is the one the ``ai`` npm package (7.x) parses: Server-Sent
Events whose ``data`` is one JSON chunk each, under the response header
``x-vercel-ai-ui-message-stream: v1``, ending with ``data: [DONE]``. The run's
events map onto it one for one:

| run | chunks |
| --- | --- |
| the run starts | ``start`` (with the assistant message's id) |
| a model turn's first event | ``start-step`` |
| text of an attempt | ``text-start`` / ``text-delta`` / ``text-end`` (one text part per attempt) |
| the model's reasoning (thinking) | ``reasoning-start`` / ``reasoning-delta`` / ``reasoning-end`` |
| a tool call's arguments streaming | ``tool-input-start`` / ``tool-input-delta`` |
| the turn's calls are settled | ``tool-input-available`` (``tool-input-error``: not JSON) |
| a call finished | ``tool-output-available`` |
| a call failed, was not run, or was interrupted | ``tool-output-error``, its text saying which |
| a **reset** (a fallback withdrew the attempt) | ``reset-step`` |
| the turn's tool calls answered, or the turn ended without any | ``finish-step`` |
| a handoff (the run changed hands) | ``data-handoff``, its data the run's ``handoff`` frame |
| the run failed | ``error`` |
| the run ended | ``finish`` (with its reason), then ``[DONE]`` |

``reset-step`` is the protocol's own retraction: the client removes every
part received since the step's ``start-step``, so a mid-stream fallback shows
the fallback's answer alone, never the dead attempt's text with the new one
after it. The step itself stays open: the replacement streams into it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

from juno_bind_trio._validate import error_kind
from juno_bind_trio.agent import (
    HandoffEvent,
    ReasoningEvent,
    ResetEvent,
    RunEndedEvent,
    TextEvent,
    ToolCallDeltaEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
)

from ._live_run import RunHandle
from ._runs import last_turn_calls

__all__ = [
    "UI_MESSAGE_STREAM_HEADERS",
    "UIMessageStreamEncoder",
    "ui_message_stream",
]

UI_MESSAGE_STREAM_HEADERS: Final[Mapping[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers a UI message stream is served with."""

_FINISH_REASONS: Final[Mapping[str, str]] = {
    "completed": "stop",
    "max_iterations": "length",
    "failed": "error",
    "cancelled": "interrupted",
    "stopped": "interrupted",
    "suspended": "tool-calls",
}

DONE_FRAME: Final = "data: [DONE]\n\n"


def _frame(chunk: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"


def _error_text(event: ToolCallEndedEvent) -> str:
    """What a failed, refused or interrupted call says to the reader, from its tool message."""
    said: object = event.content
    try:
        envelope = json.loads(event.content)
    except ValueError:
        envelope = None
    if isinstance(envelope, dict) and isinstance(envelope.get("error"), str):
        said = envelope["error"]
    if event.status == "failed":
        return str(said)
    # Said as what it is: not run (no effect), interrupted (effect unknown).
    label = "not run" if event.status == "not_run" else "interrupted"
    return f"{label}: {said}"


def _output_of(content: str) -> object:
    try:
        return json.loads(content)
    except ValueError:
        return content


class _Call:
    __slots__ = ("announced", "available", "buffer", "id", "name", "output")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.buffer: list[str] = []
        self.announced = False  # tool-input-start sent
        self.available = False  # tool-input-available (or -error) sent
        self.output = False  # tool-output-* sent


class UIMessageStreamEncoder:
    """Turns a run's events into UI message stream chunks, one event at a time.

    ``encoder.start()``, then ``encoder.feed(event, messages)`` for each event
    (*messages*: the run's transcript at that moment, read only when a turn's
    tool calls are settled), each returning the chunks (dicts) to send.
    [ui_message_stream][juno_bind_trio.web.ui_message_stream] drives it.
    """

    __slots__ = (
        "_by_id",
        "_calls",
        "_ended",
        "_message_id",
        "_reasoning_id",
        "_reasonings",
        "_settle",
        "_step",
        "_streamed",
        "_text_id",
        "_texts",
        "_turn",
    )

    def __init__(self, *, message_id: str | None = None) -> None:
        given: object = message_id
        if given is not None and (not isinstance(given, str) or not given):
            raise error_kind(given, str)(
                f"UIMessageStreamEncoder: message_id must be a non-empty str or None, "
                f"got {message_id!r}"
            )
        self._message_id = message_id or f"msg-{secrets.token_hex(12)}"
        self._turn: str | None = None
        self._step = False
        self._streamed = False  # this attempt's text has been sent
        self._text_id: str | None = None
        self._texts = 0
        self._reasoning_id: str | None = None  # the open reasoning part
        self._reasonings = 0
        self._calls: dict[int, _Call] = {}
        self._by_id: dict[str, _Call] = {}
        self._settle = False  # the turn ended with tool calls not yet made available
        self._ended = False

    @property
    def message_id(self) -> str:
        """The assistant message's id, as the ``start`` chunk says it."""
        return self._message_id

    def start(self) -> list[dict[str, Any]]:
        """The stream's first chunk."""
        return [{"type": "start", "messageId": self._message_id}]

    def feed(
        self, event: object, messages: Sequence[Mapping[str, Any]] = ()
    ) -> list[dict[str, Any]]:
        """The chunks for one event of the run."""
        out: list[dict[str, Any]] = []
        if isinstance(event, TextEvent):
            text = event.text
            self._open_step(event.turn_id, out)
            if not text:
                return out
            self._end_reasoning(out)
            if self._text_id is None:
                self._texts += 1
                self._text_id = f"{self._message_id}-text-{self._texts}"
                out.append({"type": "text-start", "id": self._text_id})
            out.append({"type": "text-delta", "id": self._text_id, "delta": text})
            self._streamed = True
        elif isinstance(event, ReasoningEvent):
            self._open_step(event.turn_id, out)
            if event.text:
                if self._text_id is not None:  # reasoning after text: the text part ends
                    out.append({"type": "text-end", "id": self._text_id})
                    self._text_id = None
                if self._reasoning_id is None:
                    self._reasonings += 1
                    self._reasoning_id = f"{self._message_id}-reasoning-{self._reasonings}"
                    out.append({"type": "reasoning-start", "id": self._reasoning_id})
                out.append(
                    {"type": "reasoning-delta", "id": self._reasoning_id, "delta": event.text}
                )
        elif isinstance(event, ResetEvent):
            if self._step and self._turn == event.turn_id:
                # Everything since start-step goes on the client: the text
                # and reasoning parts and any tool input of the withdrawn attempt.
                out.append({"type": "reset-step"})
                self._text_id = None
                self._reasoning_id = None
                self._streamed = False
                for withdrawn in self._calls.values():
                    if withdrawn.id is not None:
                        self._by_id.pop(withdrawn.id, None)
                self._calls = {}
        elif isinstance(event, ToolCallDeltaEvent):
            self._tool_delta(event, out)
        elif isinstance(event, TurnEndedEvent):
            self._open_step(event.turn_id, out)
            content = event.content
            self._end_reasoning(out)
            if self._text_id is None and content and not self._streamed:
                # A model that did not stream its text: the answer in one part.
                self._texts += 1
                self._text_id = f"{self._message_id}-text-{self._texts}"
                out.append({"type": "text-start", "id": self._text_id})
                out.append({"type": "text-delta", "id": self._text_id, "delta": content})
            self._end_text(out)
            if event.tool_calls:
                self._settle = True  # settled from the transcript at the next tool event
            else:
                self._close_step(out)
        elif isinstance(event, ToolCallStartedEvent | ToolCallEndedEvent):
            self._settle_calls(messages, out)
            call_id = event.tool_call_id
            call = self._by_id.get(call_id)
            if call is None:  # a call the transcript did not show: announce it from the event
                call = self._adopt(call_id, event.tool_name, out)
                if isinstance(event, ToolCallStartedEvent):
                    self._available(call, event.arguments, out)
            if isinstance(event, ToolCallEndedEvent) and not call.output:
                call.output = True
                if not call.available:
                    self._available(call, "", out)
                if event.status == "finished":
                    out.append(
                        {
                            "type": "tool-output-available",
                            "toolCallId": call_id,
                            "output": _output_of(event.content),
                        }
                    )
                else:
                    out.append(
                        {
                            "type": "tool-output-error",
                            "toolCallId": call_id,
                            "errorText": _error_text(event),
                        }
                    )
        elif isinstance(event, HandoffEvent):
            # The run changed hands: a data part (``data-handoff``) the host's UI reads.
            out.append({"type": "data-handoff", "data": event.to_wire()})
        elif isinstance(event, RunEndedEvent):
            self._settle_calls(messages, out)
            self._end_text(out)
            self._close_step(out)
            reason = event.reason
            if reason == "failed":
                out.append({"type": "error", "errorText": "the run failed"})
            out.append({"type": "finish", "finishReason": _FINISH_REASONS.get(reason, "other")})
            self._ended = True
        return out

    @property
    def ended(self) -> bool:
        """Whether the ``finish`` chunk was sent."""
        return self._ended

    # -- internals ----------------------------------------------------------------------

    def _open_step(self, turn_id: str, out: list[dict[str, Any]]) -> None:
        if self._turn != turn_id:
            self._settle = False
            self._end_text(out)
            self._close_step(out)
            self._turn = turn_id
            self._calls = {}
            self._streamed = False
        if not self._step:
            self._step = True
            out.append({"type": "start-step"})

    def _close_step(self, out: list[dict[str, Any]]) -> None:
        if self._step:
            self._step = False
            out.append({"type": "finish-step"})

    def _end_reasoning(self, out: list[dict[str, Any]]) -> None:
        if self._reasoning_id is not None:
            out.append({"type": "reasoning-end", "id": self._reasoning_id})
            self._reasoning_id = None

    def _end_text(self, out: list[dict[str, Any]]) -> None:
        self._end_reasoning(out)
        if self._text_id is not None:
            out.append({"type": "text-end", "id": self._text_id})
            self._text_id = None

    def _tool_delta(self, event: ToolCallDeltaEvent, out: list[dict[str, Any]]) -> None:
        self._open_step(event.turn_id, out)
        call = self._calls.get(event.index)
        if call is None:
            call = self._calls[event.index] = _Call()
        if call.id is None and event.tool_call_id:
            call.id = event.tool_call_id
        if call.name is None and event.name:
            call.name = event.name
        if event.delta:
            call.buffer.append(event.delta)
        if call.id is None or call.name is None:
            return  # held until the call has its id and name: the protocol needs both
        if not call.announced:
            self._end_text(out)
            call.announced = True
            self._by_id[call.id] = call
            out.append({"type": "tool-input-start", "toolCallId": call.id, "toolName": call.name})
        if call.buffer:
            out.append(
                {
                    "type": "tool-input-delta",
                    "toolCallId": call.id,
                    "inputTextDelta": "".join(call.buffer),
                }
            )
            call.buffer = []

    def _adopt(self, call_id: str, name: str, out: list[dict[str, Any]]) -> _Call:
        call = _Call()
        call.id, call.name = call_id, name
        self._by_id[call_id] = call
        if not self._step:
            self._step = True
            out.append({"type": "start-step"})
        call.announced = True
        out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": name})
        return call

    def _available(self, call: _Call, arguments: str, out: list[dict[str, Any]]) -> None:
        call.available = True
        raw = arguments.strip()
        try:
            value: object = json.loads(raw) if raw and raw != "null" else {}
        except ValueError:
            out.append(
                {
                    "type": "tool-input-error",
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "input": arguments,
                    "errorText": "the arguments are not JSON",
                }
            )
            call.output = True  # tool-input-error is the call's end state on the client
            return
        out.append(
            {
                "type": "tool-input-available",
                "toolCallId": call.id,
                "toolName": call.name,
                "input": value,
            }
        )

    def _settle_calls(
        self, messages: Sequence[Mapping[str, Any]], out: list[dict[str, Any]]
    ) -> None:
        """Make the ended turn's calls available, from its assistant message in the transcript."""
        if not self._settle:
            return
        self._settle = False
        for call_id, name, arguments in last_turn_calls(messages):
            call = self._by_id.get(call_id)
            if call is None:
                call = self._adopt(call_id, name, out)
            if not call.available:
                self._available(call, arguments, out)


async def ui_message_stream(run: RunHandle, *, message_id: str | None = None) -> AsyncIterator[str]:
    """The UI message stream of *run*: Server-Sent Events frames (``str``), then ``[DONE]``.

    *run* is an [AgentRun][juno_bind_trio.agent.AgentRun] (anything with its
    events and ``messages``), read until its last event. Serve the frames
    with [UI_MESSAGE_STREAM_HEADERS][juno_bind_trio.web.UI_MESSAGE_STREAM_HEADERS],
    in any framework:

    ```python
    async with agent.open_run(prompt) as run:
        async for frame in ui_message_stream(run):
            await write(frame)
    ```

    *message_id*: the assistant message's id (a fresh one by default).
    """
    encoder = UIMessageStreamEncoder(message_id=message_id)
    frame = _frame
    yield "".join(map(frame, encoder.start()))
    async for event in run:
        cls = event.__class__
        messages = (
            run.messages
            if cls is ToolCallStartedEvent or cls is ToolCallEndedEvent or cls is RunEndedEvent
            else ()
        )
        chunks = encoder.feed(event, messages)
        if chunks:
            yield "".join(map(frame, chunks))
    if not encoder.ended:
        chunks = encoder.feed(RunEndedEvent("", "cancelled"), run.messages)
        yield "".join(map(frame, chunks))
    yield DONE_FRAME
