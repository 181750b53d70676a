"""Fuzz entries for `juno_bind_trio.completion`."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from fuzz_json import JSON_TEXT
from fuzz_support import JUNK, Call, Entry, call

from juno_bind_trio import ToolCallArgumentsError
from juno_bind_trio.completion import (
    AssembledCompletion,
    AssembledToolCall,
    CoalescingReceiver,
    CoalescingSink,
    CoalescingSinkStatistics,
    CompletionDefect,
    ListSink,
    MemorySinkPair,
    MemoryStreamSink,
    ReasoningEvent,
    ResetEvent,
    StreamWatchdog,
    StreamWatchdogStatistics,
    TextEvent,
    ToolCallAccumulator,
    ToolCallDeltaEvent,
    TurnTextStream,
    TurnTextView,
    detect_completion_defect,
    event_from_wire,
    expects_json_output,
    json_parses,
    open_memory_sink,
    parse_tool_call_arguments,
    retry_structured_output,
    structured_output_parses,
    tool_call_arguments_absent,
)
from juno_bind_trio.run import canonical_json

ARGUMENT_TEXT = st.one_of(JSON_TEXT, JSON_TEXT, st.none(), JUNK).map(call)


def parsed_arguments_are_json(arguments: Call, result: Any) -> None:
    """A JSON object every other party can read back, so it can be hashed."""
    assert isinstance(result, dict)
    canonical_json(result)


ENTRIES = [
    Entry(CoalescingReceiver),
    Entry(CoalescingSink),
    Entry(CoalescingSinkStatistics),
    Entry(MemorySinkPair),
    Entry(AssembledCompletion),
    Entry(AssembledToolCall),
    Entry(CompletionDefect),
    Entry(ListSink),
    Entry(MemoryStreamSink),
    Entry(ResetEvent),
    Entry(StreamWatchdog),
    Entry(StreamWatchdogStatistics),
    Entry(ReasoningEvent),
    Entry(TextEvent),
    Entry(ToolCallAccumulator),
    Entry(ToolCallDeltaEvent),
    Entry(TurnTextStream),
    Entry(TurnTextView),
    Entry(detect_completion_defect),
    Entry(event_from_wire),
    Entry(expects_json_output),
    Entry(json_parses, args=ARGUMENT_TEXT),
    Entry(open_memory_sink, also_named=("CoalescingSink",)),  # it builds one; the checks are its
    Entry(
        parse_tool_call_arguments,
        args=ARGUMENT_TEXT,
        raises=(ToolCallArgumentsError,),
        check=parsed_arguments_are_json,
    ),
    Entry(retry_structured_output, also_named=("expects_json_output",)),
    Entry(structured_output_parses),
    Entry(tool_call_arguments_absent, args=ARGUMENT_TEXT),
]
