"""Run mechanics: the one tool-call value and the two messages about it; the tool batch
pool and the errors for calls it refused or lost; the run's deadline and failure
classification; the soft stop; the coalesced heartbeat; sub-agent lineage, admission and polling;
tool-call receipts and keys for a safe resume.

The TypeScript package's ``@juno-ai/bind/run`` subpath.
"""

from juno_bind_trio._calls import ToolCall as ToolCall
from juno_bind_trio._calls import assistant_message as assistant_message
from juno_bind_trio._calls import tool_message as tool_message
from juno_bind_trio._errors import ABORTED_TOOL_CALL_MESSAGE as ABORTED_TOOL_CALL_MESSAGE
from juno_bind_trio._errors import INTERRUPTED_TOOL_CALL_MESSAGE as INTERRUPTED_TOOL_CALL_MESSAGE
from juno_bind_trio._errors import AbortedToolCallError as AbortedToolCallError
from juno_bind_trio._errors import InterruptedToolCallError as InterruptedToolCallError
from juno_bind_trio._errors import RunTimeoutError as RunTimeoutError
from juno_bind_trio._errors import ToolCallError as ToolCallError
from juno_bind_trio._public import publish as _publish

from ._calls import StopSignal as StopSignal
from ._calls import ToolCallLike as ToolCallLike
from ._calls import tool_call_arguments as tool_call_arguments
from ._calls import tool_call_id as tool_call_id
from ._calls import tool_call_name as tool_call_name
from ._children import ChainLink as ChainLink
from ._children import ChainRef as ChainRef
from ._children import ChainRule as ChainRule
from ._children import ChildAdmission as ChildAdmission
from ._children import ChildRefusal as ChildRefusal
from ._children import PollSchedule as PollSchedule
from ._children import PollStep as PollStep
from ._children import admit_child_run as admit_child_run
from ._children import descend_chain as descend_chain
from ._children import root_chain as root_chain
from ._classify import RunFailure as RunFailure
from ._classify import RunFailureStatus as RunFailureStatus
from ._classify import classify_run_failure as classify_run_failure
from ._deadline import RunDeadline as RunDeadline
from ._deadline import RunStop as RunStop
from ._heartbeat import CoalescedHeartbeat as CoalescedHeartbeat
from ._heartbeat import HeartbeatStatistics as HeartbeatStatistics
from ._heartbeat import open_coalesced_heartbeat as open_coalesced_heartbeat
from ._pool import DEFAULT_PER_TOOL_LIMIT as DEFAULT_PER_TOOL_LIMIT
from ._pool import CallState as CallState
from ._pool import ToolBatch as ToolBatch
from ._pool import ToolBatchStatistics as ToolBatchStatistics
from ._pool import run_tool_calls_pooled_by_tool as run_tool_calls_pooled_by_tool
from ._receipts import DigestFn as DigestFn
from ._receipts import EffectResumability as EffectResumability
from ._receipts import ReceiptAction as ReceiptAction
from ._receipts import ReceiptDecision as ReceiptDecision
from ._receipts import ReceiptState as ReceiptState
from ._receipts import ToolCallReceiptKey as ToolCallReceiptKey
from ._receipts import canonical_json as canonical_json
from ._receipts import decide_tool_call_receipt as decide_tool_call_receipt
from ._receipts import tool_call_args_hash as tool_call_args_hash
from ._receipts import tool_call_idempotency_key as tool_call_idempotency_key
from ._receipts import tool_call_receipt_key as tool_call_receipt_key
from ._receipts import tool_call_receipt_key_string as tool_call_receipt_key_string
from ._stop import SoftStop as SoftStop
from ._stop import either_stop as either_stop

__all__ = [
    "ABORTED_TOOL_CALL_MESSAGE",
    "DEFAULT_PER_TOOL_LIMIT",
    "INTERRUPTED_TOOL_CALL_MESSAGE",
    "AbortedToolCallError",
    "CallState",
    "ChainLink",
    "ChainRef",
    "ChainRule",
    "ChildAdmission",
    "ChildRefusal",
    "CoalescedHeartbeat",
    "DigestFn",
    "EffectResumability",
    "HeartbeatStatistics",
    "InterruptedToolCallError",
    "PollSchedule",
    "PollStep",
    "ReceiptAction",
    "ReceiptDecision",
    "ReceiptState",
    "RunDeadline",
    "RunFailure",
    "RunFailureStatus",
    "RunStop",
    "RunTimeoutError",
    "SoftStop",
    "StopSignal",
    "ToolBatch",
    "ToolBatchStatistics",
    "ToolCall",
    "ToolCallError",
    "ToolCallLike",
    "ToolCallReceiptKey",
    "admit_child_run",
    "assistant_message",
    "canonical_json",
    "classify_run_failure",
    "decide_tool_call_receipt",
    "descend_chain",
    "either_stop",
    "open_coalesced_heartbeat",
    "root_chain",
    "run_tool_calls_pooled_by_tool",
    "tool_call_args_hash",
    "tool_call_arguments",
    "tool_call_id",
    "tool_call_idempotency_key",
    "tool_call_name",
    "tool_call_receipt_key",
    "tool_call_receipt_key_string",
    "tool_message",
]

_publish(__name__, globals(), __all__)
