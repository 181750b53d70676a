"""The placeholder answer a waiting tool call holds in the transcript, and how a waiting
call is found again.

A waiting call is answered at once (the transcript never holds a call
without its answer) with a placeholder that carries the pending call itself,
so that a history read back, in memory or from a store, says which calls
wait and in which run; the gate (``_approvals``) writes and reads them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.plugins import SuspendDirective
from juno_bind_trio.run import ToolCall, tool_message

from ._approval_types import PendingToolCall

__all__ = [
    "held_outcome",
    "pending_of",
    "placeholder",
    "trailing_calls",
    "trailing_indices",
    "trailing_waiting",
    "waiting_in",
    "waiting_run",
]

# The key of the placeholder answer that marks a call as waiting (in its content).
_AWAITING: Final = "awaiting"
# The key of the placeholder that names the run the call waits in (a store resumes it).
_RUN: Final = "run_id"
# The key of a suspend directive's payload that carries the pending call.
_PAYLOAD: Final = "pending_tool_call"


def placeholder(call: PendingToolCall, run_id: str | None = None) -> dict[str, Any]:
    """The answer a waiting call holds in the transcript until it is decided.

    A failure of kind ``"not_run"`` (true: it has not run), with the pending
    call under ``"awaiting"`` so a continuation in memory finds it again, and
    the id of the run it waits in under ``"run_id"``: with a store, that run
    is the one to continue (``Agent.resume``), never a copy of it in memory.
    """
    text = (
        "This call is waiting for a person's approval and has not run yet"
        if call.kind == "approval"
        else "This call is run by the host and has not been answered yet"
    )
    content: dict[str, Any] = {
        "success": False,
        "kind": "not_run",
        "error": text,
        _AWAITING: call.to_json(),
    }
    if run_id is not None:
        content[_RUN] = run_id
    return tool_message(call.id, json.dumps(content))


def waiting_run(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The id of the run whose calls wait at the end of *messages* (its placeholders
    name it), or ``None``: no call waits there, or its placeholder names no run."""
    for index in sorted(trailing_indices(messages)):
        message = messages[index]
        if waiting_in(message) is None:
            continue
        content = message.get("content")
        try:
            run_id = json.loads(content).get(_RUN) if isinstance(content, str) else None
        except (ValueError, AttributeError):
            run_id = None
        if isinstance(run_id, str) and run_id:
            return run_id
    return None


def waiting_in(message: Mapping[str, Any]) -> PendingToolCall | None:
    """The pending call a placeholder answer holds, or ``None`` for any other message."""
    if message.get("role") != "tool":
        return None
    content = message.get("content")
    if not isinstance(content, str) or _AWAITING not in content:
        return None
    try:
        value = json.loads(content)
        held = value[_AWAITING]
        if value.get("kind") != "not_run" or held["id"] != message.get("tool_call_id"):
            return None
        return PendingToolCall.from_json(held)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def pending_of(suspensions: Sequence[SuspendDirective]) -> tuple[PendingToolCall, ...]:
    """The pending calls among a suspended run's directives, in call order."""
    found: list[PendingToolCall] = []
    for directive in suspensions:
        held = directive.payload.get(_PAYLOAD)
        if isinstance(held, Mapping):
            found.append(PendingToolCall.from_json(held))
    return tuple(found)


def held_outcome(call: PendingToolCall, run_id: str | None) -> ToolCallOutcome:
    reason = (
        f"approval required: {call.name}"
        if call.kind == "approval"
        else f"external result required: {call.name}"
    )
    return ToolCallOutcome(
        tool_message=placeholder(call, run_id),
        suspend=SuspendDirective(
            tool_call_id=call.id, reason=reason, payload={_PAYLOAD: call.to_json()}
        ),
    )


def trailing_indices(messages: Sequence[Mapping[str, Any]]) -> set[int]:
    found: set[int] = set()
    index = len(messages) - 1
    while index >= 0 and messages[index].get("role") == "tool":
        found.add(index)
        index -= 1
    return found


def trailing_calls(messages: Sequence[Mapping[str, Any]]) -> dict[str, ToolCall]:
    index = len(messages) - 1
    while index >= 0 and messages[index].get("role") == "tool":
        index -= 1
    if index < 0 or messages[index].get("role") != "assistant":
        return {}
    calls = [ToolCall.of(c) for c in messages[index].get("tool_calls") or ()]
    return {c.id: c for c in calls}


def trailing_waiting(messages: Sequence[Mapping[str, Any]]) -> dict[str, PendingToolCall]:
    """The calls waiting at the end of a transcript (its last turn's placeholders)."""
    found: dict[str, PendingToolCall] = {}
    for index in sorted(trailing_indices(messages)):
        held = waiting_in(messages[index])
        if held is not None:
            found[held.id] = held
    return found
