"""The tool-calling turn kernel: [`ToolLoop`][juno_bind_trio.loop.ToolLoop], its turn and result
records, its events.

The TypeScript package's ``@juno-ai/bind/loop`` subpath (``runToolLoop``).
"""

from juno_bind_trio._public import publish as _publish

from ._counters import ToolLoopStatistics as ToolLoopStatistics
from ._events import AssistantMessageEvent as AssistantMessageEvent
from ._events import Interrupt as Interrupt
from ._events import InterruptReceivedEvent as InterruptReceivedEvent
from ._events import LoopEvent as LoopEvent
from ._events import LoopStatus as LoopStatus
from ._events import OutputProgressEvent as OutputProgressEvent
from ._events import StatusEvent as StatusEvent
from ._events import TextSinkErrorsEvent as TextSinkErrorsEvent
from ._events import ThinkingEvent as ThinkingEvent
from ._events import ToolCallRejectedEvent as ToolCallRejectedEvent
from ._loop import ToolLoop as ToolLoop
from ._results import LOOP_END_REASONS as LOOP_END_REASONS
from ._results import LoopEndReason as LoopEndReason
from ._results import LoopResult as LoopResult
from ._results import LoopState as LoopState
from ._results import ModelTurnResult as ModelTurnResult
from ._results import RunStats as RunStats
from ._results import SupportsMessages as SupportsMessages
from ._results import ToolCallOutcome as ToolCallOutcome
from ._turn import ModelTurn as ModelTurn

__all__ = [
    "LOOP_END_REASONS",
    "AssistantMessageEvent",
    "Interrupt",
    "InterruptReceivedEvent",
    "LoopEndReason",
    "LoopEvent",
    "LoopResult",
    "LoopState",
    "LoopStatus",
    "ModelTurn",
    "ModelTurnResult",
    "OutputProgressEvent",
    "RunStats",
    "StatusEvent",
    "SupportsMessages",
    "TextSinkErrorsEvent",
    "ThinkingEvent",
    "ToolCallOutcome",
    "ToolCallRejectedEvent",
    "ToolLoop",
    "ToolLoopStatistics",
]

_publish(__name__, globals(), __all__)
