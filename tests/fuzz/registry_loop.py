"""Fuzz entries for `juno_bind_trio.loop`."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from fuzz_support import JUNK, Call, Entry, call

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


def _a_turn() -> ModelTurn:
    return ModelTurn(
        iteration=1,
        turn_id="r:1",
        messages=[{"role": "user", "content": "hi"}],
        tools=(),
        text_stream=None,
        emit=lambda event: None,
    )


def _extras_appended(arguments: Call, result: Any) -> None:
    assert isinstance(result, ModelTurn)
    (given,) = arguments.args
    assert result.messages[0] == {"role": "user", "content": "hi"}
    assert len(result.messages) == 1 + len(given)


_message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "developer", "tool"]) | JUNK,
            "content": st.text(max_size=5) | JUNK,
        },
        optional={"tool_calls": JUNK, "name": JUNK},
    ),
    JUNK,
)

ENTRIES = [
    Entry(
        _a_turn().with_extra_messages,
        args=(st.lists(_message, max_size=3) | JUNK).map(lambda messages: call(messages)),
        check=_extras_appended,
        label="loop.ModelTurn.with_extra_messages",
    ),
    Entry(
        _a_turn().with_messages,
        args=(st.lists(_message, max_size=3) | JUNK).map(lambda messages: call(messages)),
        label="loop.ModelTurn.with_messages",
    ),
    Entry(
        _a_turn().with_tools,
        args=(
            st.lists(st.dictionaries(st.text(max_size=3), JUNK, max_size=2), max_size=3) | JUNK
        ).map(lambda tools: call(tools)),
        label="loop.ModelTurn.with_tools",
    ),
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
