"""A run's events that make the UI message stream encoder send every chunk type it has."""

from __future__ import annotations

from typing import Any

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
from juno_bind_trio.web import UIMessageStreamEncoder


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("c1", "look", '{"q": "x"}'),
            call("c2", "look", "{not json"),
            call("c3", "fail", "{}"),
            call("c4", "slow", "{}"),
            call("c5", "later", "{}"),
        ],
    },
]

EVENTS: list[object] = [
    ReasoningEvent("t1", 0, "Hmm, "),
    ReasoningEvent("t1", 0, "the weather."),
    TextEvent("t1", 0, 0, "Let me "),
    ResetEvent("t1", 1, 1, "attempt_failed"),
    ToolCallDeltaEvent("t1", 0, "c1", "look", '{"q": '),
    ToolCallDeltaEvent("t1", 0, None, None, '"x"}'),
    TurnEndedEvent(1, "t1", None, 5),
    ToolCallStartedEvent(1, "c1", "look", '{"q": "x"}'),
    ToolCallEndedEvent(1, "c1", "look", "finished", None, '{"found": 1}'),
    ToolCallEndedEvent(1, "c3", "fail", "failed", "system", '{"success":false,"error":"boom"}'),
    ToolCallEndedEvent(
        1, "c4", "slow", "interrupted", "interrupted", '{"success":false,"error":"cut off"}'
    ),
    ToolCallEndedEvent(1, "c5", "later", "not_run", "not_run", '{"success":false,"error":"stop"}'),
    HandoffEvent("triage", "billing", "c1"),  # the next turn is another agent's
    ReasoningEvent("t2", 0, "All answered."),
    TextEvent("t2", 0, 0, "Done."),
    TurnEndedEvent(2, "t2", "Done.", 0),
    RunEndedEvent("r", "failed"),
]


def every_chunk() -> list[dict[str, Any]]:
    encoder = UIMessageStreamEncoder(message_id="m1")
    chunks = encoder.start()
    for event in EVENTS:
        chunks.extend(encoder.feed(event, TRANSCRIPT))
    return chunks
