"""What [open_run][juno_bind_trio.agent.Agent.open_run] yields: one ordered, typed stream.

The turn text stream's own events ([TextEvent][juno_bind_trio.completion.TextEvent],
[ResetEvent][juno_bind_trio.completion.ResetEvent],
[ToolCallDeltaEvent][juno_bind_trio.completion.ToolCallDeltaEvent] for a tool
call's arguments as they stream, and
[ReasoningEvent][juno_bind_trio.completion.ReasoningEvent] for the model's
thinking) travel unchanged, so a
client written for the TypeScript package's wire renders them as it always
did. The four events here add what a UI shows around the text: a tool call
starting and ending (however it ended), a turn ending, the run ending. Each
has ``to_wire()``, a JSON-ready dict whose ``"kind"`` names it and whose keys
are camelCase like the text events' (``"turnId"``, ``"toolCallId"``). In
Python, tell them apart with ``isinstance`` (or ``match``): on
[ToolCallEndedEvent][juno_bind_trio.agent.ToolCallEndedEvent] the attribute
``kind`` is the failure's [ToolFailureKind][juno_bind_trio.plugins.ToolFailureKind],
as on the loop's own rejection event, and its wire key is ``"failureKind"``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs

from juno_bind_trio.completion import ReasoningEvent, ResetEvent, TextEvent, ToolCallDeltaEvent
from juno_bind_trio.plugins import ToolFailureKind

__all__ = [
    "AgentEvent",
    "HandoffEvent",
    "RunEndedEvent",
    "RunStatus",
    "RunStatusEvent",
    "ToolCallEndStatus",
    "ToolCallEndedEvent",
    "ToolCallStartedEvent",
    "TurnEndedEvent",
]

ToolCallEndStatus: TypeAlias = Literal["finished", "failed", "not_run", "interrupted"]
"""How a tool call ended: ran and returned; ran and failed; never started; cut off by a cancel."""


@attrs.frozen
class ToolCallStartedEvent:
    """A tool call's arguments validated and its tool is about to run.

    Sent only for a call whose tool is called: a call to an unknown tool, or
    one whose arguments do not validate, ends (``"failed"``) without starting.
    A call the run refused before it started ends ``"not_run"`` without it too,
    except a synchronous tool's call that a cancel caught before its worker
    thread began: that one started, then ended ``"not_run"``.
    """

    iteration: int
    tool_call_id: str
    tool_name: str
    arguments: str

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "tool_call_started", "iteration", "toolCallId", "toolName", "arguments"}``."""
        return {
            "kind": "tool_call_started",
            "iteration": self.iteration,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "arguments": self.arguments,
        }


@attrs.frozen
class ToolCallEndedEvent:
    """A tool call was answered. *content* is the tool message the model reads.

    *status*: ``"finished"`` (it returned), ``"failed"`` (it raised, or its
    arguments did not validate: *kind* says which), ``"not_run"`` (refused
    before it started: a stop, or a cancel before it was claimed),
    ``"interrupted"`` (a cancel cut it off; its effect is unknown).
    *kind* is the failure's kind (``None`` when it finished, or failed without one).
    *error* is the exception, for the developer (never on the wire): what the
    tool raised when it failed, the refusal or interruption for ``"not_run"``
    and ``"interrupted"`` (what the tool raised as it was cut off is its
    ``__cause__``), ``None`` when it finished. A failed call is also logged
    on the ``juno_bind_trio`` logger at WARNING, with the traceback.
    """

    iteration: int
    tool_call_id: str
    tool_name: str
    status: ToolCallEndStatus
    kind: ToolFailureKind | None
    content: str
    error: BaseException | None = attrs.field(default=None, eq=False)

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "tool_call_ended", ..., "status", "failureKind", "content"}``."""
        return {
            "kind": "tool_call_ended",
            "iteration": self.iteration,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "status": self.status,
            "failureKind": self.kind,
            "content": self.content,
        }


@attrs.frozen
class TurnEndedEvent:
    """Model turn *iteration* returned: its final text and how many tool calls it asked for.

    *agent*: the name of the agent whose turn it was (the agent in charge: a
    handoff's target after one; ``None`` for an unnamed agent).
    """

    iteration: int
    turn_id: str
    content: str | None
    tool_calls: int
    agent: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "turn_ended", "iteration", "turnId", "content", "toolCalls", "agent"}``
        (``"agent"`` only for a named agent's turn)."""
        wire: dict[str, Any] = {
            "kind": "turn_ended",
            "iteration": self.iteration,
            "turnId": self.turn_id,
            "content": self.content,
            "toolCalls": self.tool_calls,
        }
        if self.agent is not None:
            wire["agent"] = self.agent
        return wire


@attrs.frozen
class HandoffEvent:
    """The run changed hands: *to_agent* speaks from the next turn on.

    Sent once the handoff's batch is answered, when the target's first turn
    is built (its instructions in place, its tools offered). *from_agent* is
    the agent that called the handoff tool (``None`` for an unnamed agent),
    *call_id* that call's id: every assistant message after the call's answer
    in the transcript is *to_agent*'s, until the next handoff. Also the record
    kept in ``AgentResult.handoffs``.
    """

    from_agent: str | None
    to_agent: str
    call_id: str

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "handoff", "fromAgent", "toAgent", "toolCallId"}``."""
        return {
            "kind": "handoff",
            "fromAgent": self.from_agent,
            "toAgent": self.to_agent,
            "toolCallId": self.call_id,
        }


@attrs.frozen
class RunEndedEvent:
    """The run ended. *reason*: a [LoopEndReason][juno_bind_trio.loop.LoopEndReason],
    ``"cancelled"`` or ``"failed"``."""

    run_id: str
    reason: str

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "run_ended", "runId", "reason"}``."""
        return {"kind": "run_ended", "runId": self.run_id, "reason": self.reason}


RunStatus: TypeAlias = Literal["compacting"]
"""What a run is busy with besides its model turns and tools: ``"compacting"``."""


@attrs.frozen
class RunStatusEvent:
    """The run is busy with something other than a turn or a tool: *status*.

    ``"compacting"``: the run's [Compaction][juno_bind_trio.agent.Compaction]
    is summarizing its old turns, after iteration *iteration*.
    """

    iteration: int
    status: RunStatus

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "status", "iteration", "status"}``."""
        return {"kind": "status", "iteration": self.iteration, "status": self.status}


AgentEvent: TypeAlias = (
    TextEvent
    | ResetEvent
    | ToolCallDeltaEvent
    | ReasoningEvent
    | ToolCallStartedEvent
    | ToolCallEndedEvent
    | TurnEndedEvent
    | HandoffEvent
    | RunEndedEvent
    | RunStatusEvent
)
"""Everything an [AgentRun][juno_bind_trio.agent.AgentRun] yields, in the order it happened."""
