"""Run mechanics: the tool batch pool, and the errors for calls it refused or lost.

The TypeScript package's ``@juno-ai/bind/run`` subpath.
"""

from juno_bind_trio._errors import ABORTED_TOOL_CALL_MESSAGE as ABORTED_TOOL_CALL_MESSAGE
from juno_bind_trio._errors import INTERRUPTED_TOOL_CALL_MESSAGE as INTERRUPTED_TOOL_CALL_MESSAGE
from juno_bind_trio._errors import AbortedToolCallError as AbortedToolCallError
from juno_bind_trio._errors import InterruptedToolCallError as InterruptedToolCallError
from juno_bind_trio._errors import ToolCallError as ToolCallError

from ._calls import StopSignal as StopSignal
from ._calls import ToolCallLike as ToolCallLike
from ._calls import tool_call_arguments as tool_call_arguments
from ._calls import tool_call_id as tool_call_id
from ._calls import tool_call_name as tool_call_name
from ._pool import DEFAULT_PER_TOOL_LIMIT as DEFAULT_PER_TOOL_LIMIT
from ._pool import CallState as CallState
from ._pool import ToolBatch as ToolBatch
from ._pool import ToolBatchStatistics as ToolBatchStatistics
from ._pool import run_tool_calls_pooled_by_tool as run_tool_calls_pooled_by_tool

__all__ = [
    "ABORTED_TOOL_CALL_MESSAGE",
    "DEFAULT_PER_TOOL_LIMIT",
    "INTERRUPTED_TOOL_CALL_MESSAGE",
    "AbortedToolCallError",
    "CallState",
    "InterruptedToolCallError",
    "StopSignal",
    "ToolBatch",
    "ToolBatchStatistics",
    "ToolCallError",
    "ToolCallLike",
    "run_tool_calls_pooled_by_tool",
    "tool_call_arguments",
    "tool_call_id",
    "tool_call_name",
]
