"""Streaming completions: the turn text stream, its sinks and its client-side view.

The TypeScript package's ``@juno-ai/bind/completion`` subpath.
"""

from juno_bind_trio._errors import TurnStreamUsageError as TurnStreamUsageError
from juno_bind_trio._errors import WireFormatError as WireFormatError

from ._events import RESET_REASONS as RESET_REASONS
from ._events import ResetEvent as ResetEvent
from ._events import TextEvent as TextEvent
from ._events import TurnResetReason as TurnResetReason
from ._events import TurnStreamEvent as TurnStreamEvent
from ._events import event_from_wire as event_from_wire
from ._sinks import DEFAULT_SINK_BUFFER_SIZE as DEFAULT_SINK_BUFFER_SIZE
from ._sinks import ListSink as ListSink
from ._sinks import MemoryStreamSink as MemoryStreamSink
from ._sinks import TurnStreamSink as TurnStreamSink
from ._sinks import open_memory_sink as open_memory_sink
from ._text_stream import TurnOutcome as TurnOutcome
from ._text_stream import TurnTextStream as TurnTextStream
from ._text_view import DEFAULT_MAX_HELD as DEFAULT_MAX_HELD
from ._text_view import TurnTextView as TurnTextView

__all__ = [
    "DEFAULT_MAX_HELD",
    "DEFAULT_SINK_BUFFER_SIZE",
    "RESET_REASONS",
    "ListSink",
    "MemoryStreamSink",
    "ResetEvent",
    "TextEvent",
    "TurnOutcome",
    "TurnResetReason",
    "TurnStreamEvent",
    "TurnStreamSink",
    "TurnStreamUsageError",
    "TurnTextStream",
    "TurnTextView",
    "WireFormatError",
    "event_from_wire",
    "open_memory_sink",
]
