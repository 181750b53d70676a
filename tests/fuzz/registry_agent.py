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
    ToolDefinition,
    ToolOutput,
    TurnEndedEvent,
    UsageLimits,
    drop_old_tool_results,
    keep_last_turns,
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
    Entry(ToolDefinition),
    Entry(
        ToolDefinition(name="t", description=None, parameters_json_schema={}).replace,
        label="agent.ToolDefinition.replace",
    ),
    Entry(keep_last_turns),
    Entry(drop_old_tool_results),
    Entry(tool),
]
