"""Fuzz entries for `juno_bind_trio.agent` (argument strategies drawn from the signatures)."""

from __future__ import annotations

from fuzz_support import Entry

from juno_bind_trio.agent import (
    Agent,
    AgentResult,
    AgentRun,
    Approve,
    Deny,
    ExternalTool,
    InMemorySession,
    PendingToolCall,
    RunContext,
    RunEndedEvent,
    StoreSession,
    Tool,
    ToolCallDeltaEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    TurnEndedEvent,
    UsageLimits,
    tool,
)

ENTRIES = [
    Entry(Agent),
    Entry(AgentResult),
    Entry(AgentRun),
    Entry(Approve),
    Entry(Deny),
    Entry(ExternalTool),
    Entry(PendingToolCall),
    Entry(InMemorySession),
    Entry(RunContext),
    Entry(RunEndedEvent),
    Entry(StoreSession),
    Entry(Tool),
    Entry(ToolCallDeltaEvent),
    Entry(ToolCallEndedEvent),
    Entry(ToolCallStartedEvent),
    Entry(TurnEndedEvent),
    Entry(UsageLimits),
    Entry(tool),
]
