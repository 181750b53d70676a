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
    Handoff,
    HandoffEvent,
    InMemorySession,
    NativeOutput,
    PendingToolCall,
    PromptedOutput,
    RunContext,
    RunEndedEvent,
    StoreSession,
    Tool,
    ToolCallDeltaEvent,
    ToolCallEndedEvent,
    ToolCallStartedEvent,
    ToolOutput,
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
    Entry(Handoff),
    Entry(HandoffEvent),
    Entry(PendingToolCall),
    Entry(InMemorySession),
    Entry(NativeOutput),
    Entry(PromptedOutput),
    Entry(RunContext),
    Entry(RunEndedEvent),
    Entry(StoreSession),
    Entry(Tool),
    Entry(ToolOutput),
    Entry(ToolCallDeltaEvent),
    Entry(ToolCallEndedEvent),
    Entry(ToolCallStartedEvent),
    Entry(TurnEndedEvent),
    Entry(UsageLimits),
    Entry(tool),
]
