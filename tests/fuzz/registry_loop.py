"""Fuzz entries for `juno_bind_trio.loop`."""

from __future__ import annotations

from fuzz_support import Entry

from juno_bind_trio.loop import (
    AssistantMessageEvent,
    Interrupt,
    InterruptReceivedEvent,
    LoopResult,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    OutputProgressEvent,
    RunStats,
    StatusEvent,
    TextSinkErrorsEvent,
    ThinkingEvent,
    ToolCallOutcome,
    ToolCallRejectedEvent,
    ToolLoop,
    ToolLoopStatistics,
)

ENTRIES = [
    Entry(AssistantMessageEvent),
    Entry(Interrupt),
    Entry(InterruptReceivedEvent),
    Entry(LoopResult),
    Entry(LoopState),
    Entry(ModelTurn),
    Entry(ModelTurnResult),
    Entry(OutputProgressEvent),
    Entry(RunStats),
    Entry(StatusEvent),
    Entry(TextSinkErrorsEvent),
    Entry(ThinkingEvent),
    Entry(ToolCallOutcome),
    Entry(ToolCallRejectedEvent),
    Entry(ToolLoop),
    Entry(ToolLoopStatistics),
]
