"""Streaming completions: the turn text stream, its sinks and its client-side view; the
stream watchdog, tool-call assembly and argument parsing; completion-defect and
structured-output checks.

The TypeScript package's ``@juno-ai/bind/completion`` subpath.
"""

from juno_bind_trio._errors import CompletionDefectError as CompletionDefectError
from juno_bind_trio._errors import StreamStallError as StreamStallError
from juno_bind_trio._errors import StructuredOutputError as StructuredOutputError
from juno_bind_trio._errors import ToolCallArgumentsError as ToolCallArgumentsError
from juno_bind_trio._errors import ToolCallAssemblyError as ToolCallAssemblyError
from juno_bind_trio._errors import TurnStreamUsageError as TurnStreamUsageError
from juno_bind_trio._errors import WireFormatError as WireFormatError
from juno_bind_trio._public import publish as _publish

from ._assembly import AssembledToolCall as AssembledToolCall
from ._assembly import DispatchableToolCall as DispatchableToolCall
from ._assembly import ToolCallAccumulator as ToolCallAccumulator
from ._assembly import ToolCallDelta as ToolCallDelta
from ._assembly import ToolCallDeltaObject as ToolCallDeltaObject
from ._assembly import ToolCallFunction as ToolCallFunction
from ._coalescing import DEFAULT_HANDOFF_INTERVAL as DEFAULT_HANDOFF_INTERVAL
from ._coalescing import CoalescingReceiver as CoalescingReceiver
from ._coalescing import CoalescingSink as CoalescingSink
from ._coalescing import CoalescingSinkStatistics as CoalescingSinkStatistics
from ._coalescing import MemorySinkPair as MemorySinkPair
from ._defects import DEFAULT_COMPLETION_DEFECT_MAX_RETRIES as DEFAULT_COMPLETION_DEFECT_MAX_RETRIES
from ._defects import DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES as DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES
from ._defects import AssembledCompletion as AssembledCompletion
from ._defects import CompletionDefect as CompletionDefect
from ._defects import CompletionDefectKind as CompletionDefectKind
from ._defects import CompletionOutputs as CompletionOutputs
from ._defects import ResponseFormatShape as ResponseFormatShape
from ._defects import StreamedToolCall as StreamedToolCall
from ._defects import detect_completion_defect as detect_completion_defect
from ._defects import expects_json_output as expects_json_output
from ._defects import json_parses as json_parses
from ._defects import structured_output_parses as structured_output_parses
from ._events import RESET_REASONS as RESET_REASONS
from ._events import ResetEvent as ResetEvent
from ._events import TextEvent as TextEvent
from ._events import TurnResetReason as TurnResetReason
from ._events import TurnStreamEvent as TurnStreamEvent
from ._events import event_from_wire as event_from_wire
from ._reasoning import ReasoningEvent as ReasoningEvent
from ._sinks import DEFAULT_SINK_BUFFER_SIZE as DEFAULT_SINK_BUFFER_SIZE
from ._sinks import ListSink as ListSink
from ._sinks import MemoryStreamSink as MemoryStreamSink
from ._sinks import TurnStreamSink as TurnStreamSink
from ._sinks import open_memory_sink as open_memory_sink
from ._structured import retry_structured_output as retry_structured_output
from ._text_stream import TurnOutcome as TurnOutcome
from ._text_stream import TurnTextStream as TurnTextStream
from ._text_view import DEFAULT_MAX_HELD as DEFAULT_MAX_HELD
from ._text_view import TurnTextView as TurnTextView
from ._tool_call_delta import ToolCallDeltaEvent as ToolCallDeltaEvent
from ._tool_calls import ToolCallArguments as ToolCallArguments
from ._tool_calls import parse_tool_call_arguments as parse_tool_call_arguments
from ._tool_calls import tool_call_arguments_absent as tool_call_arguments_absent
from ._watchdog import DEFAULT_INTER_CHUNK_TIMEOUT as DEFAULT_INTER_CHUNK_TIMEOUT
from ._watchdog import DEFAULT_TIME_TO_FIRST_TOKEN as DEFAULT_TIME_TO_FIRST_TOKEN
from ._watchdog import StreamBudget as StreamBudget
from ._watchdog import StreamWatchdog as StreamWatchdog
from ._watchdog import StreamWatchdogStatistics as StreamWatchdogStatistics

__all__ = [
    "DEFAULT_COMPLETION_DEFECT_MAX_RETRIES",
    "DEFAULT_HANDOFF_INTERVAL",
    "DEFAULT_INTER_CHUNK_TIMEOUT",
    "DEFAULT_MAX_HELD",
    "DEFAULT_SINK_BUFFER_SIZE",
    "DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES",
    "DEFAULT_TIME_TO_FIRST_TOKEN",
    "RESET_REASONS",
    "AssembledCompletion",
    "AssembledToolCall",
    "CoalescingReceiver",
    "CoalescingSink",
    "CoalescingSinkStatistics",
    "CompletionDefect",
    "CompletionDefectError",
    "CompletionDefectKind",
    "CompletionOutputs",
    "DispatchableToolCall",
    "ListSink",
    "MemorySinkPair",
    "MemoryStreamSink",
    "ReasoningEvent",
    "ResetEvent",
    "ResponseFormatShape",
    "StreamBudget",
    "StreamStallError",
    "StreamWatchdog",
    "StreamWatchdogStatistics",
    "StreamedToolCall",
    "StructuredOutputError",
    "TextEvent",
    "ToolCallAccumulator",
    "ToolCallArguments",
    "ToolCallArgumentsError",
    "ToolCallAssemblyError",
    "ToolCallDelta",
    "ToolCallDeltaEvent",
    "ToolCallDeltaObject",
    "ToolCallFunction",
    "TurnOutcome",
    "TurnResetReason",
    "TurnStreamEvent",
    "TurnStreamSink",
    "TurnStreamUsageError",
    "TurnTextStream",
    "TurnTextView",
    "WireFormatError",
    "detect_completion_defect",
    "event_from_wire",
    "expects_json_output",
    "json_parses",
    "open_memory_sink",
    "parse_tool_call_arguments",
    "retry_structured_output",
    "structured_output_parses",
    "tool_call_arguments_absent",
]

_publish(__name__, globals(), __all__)
