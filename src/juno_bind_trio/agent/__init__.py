"""The application developer's layer: [Agent][juno_bind_trio.agent.Agent], ``@tool``,
[RunContext][juno_bind_trio.agent.RunContext], structured output, streaming runs.

Built on the kernel, adding no loop of its own: every run is one
[ToolLoop][juno_bind_trio.loop.ToolLoop], its model an
[OpenAIChatModel][juno_bind_trio.providers.openai.OpenAIChatModel] (or any
``async (ModelTurn) -> ModelTurnResult``), its tools typed functions whose
schemas come from their signatures. Where a run's state lives is its
[RunSession][juno_bind_trio.agent.RunSession]: in memory, or in a run store.
"""

from juno_bind_trio._errors import ConversationBusy as ConversationBusy
from juno_bind_trio._errors import GuardrailTripped as GuardrailTripped
from juno_bind_trio._errors import ModelRetry as ModelRetry
from juno_bind_trio._errors import UsageLimitExceeded as UsageLimitExceeded
from juno_bind_trio._public import publish as _publish
from juno_bind_trio.completion import ReasoningEvent as ReasoningEvent
from juno_bind_trio.completion import ResetEvent as ResetEvent
from juno_bind_trio.completion import TextEvent as TextEvent
from juno_bind_trio.completion import ToolCallDeltaEvent as ToolCallDeltaEvent

from ._agent import DEFAULT_MAX_ITERATIONS as DEFAULT_MAX_ITERATIONS
from ._agent import Agent as Agent
from ._approval_types import Approve as Approve
from ._approval_types import Deny as Deny
from ._approval_types import PendingToolCall as PendingToolCall
from ._compaction import DEFAULT_COMPACTION_INSTRUCTIONS as DEFAULT_COMPACTION_INSTRUCTIONS
from ._compaction import Compaction as Compaction
from ._context import RunContext as RunContext
from ._events import AgentEvent as AgentEvent
from ._events import HandoffEvent as HandoffEvent
from ._events import RunEndedEvent as RunEndedEvent
from ._events import RunStatus as RunStatus
from ._events import RunStatusEvent as RunStatusEvent
from ._events import ToolCallEndedEvent as ToolCallEndedEvent
from ._events import ToolCallEndStatus as ToolCallEndStatus
from ._events import ToolCallStartedEvent as ToolCallStartedEvent
from ._events import TurnEndedEvent as TurnEndedEvent
from ._guardrails import InputGuardrail as InputGuardrail
from ._guardrails import OutputGuardrail as OutputGuardrail
from ._guardrails import input_guardrail as input_guardrail
from ._guardrails import output_guardrail as output_guardrail
from ._handle import AgentRun as AgentRun
from ._handoff import Handoff as Handoff
from ._handoff import HandoffInputFilter as HandoffInputFilter
from ._handover import agent_in_charge as agent_in_charge
from ._limits import UsageLimits as UsageLimits
from ._output_modes import NativeOutput as NativeOutput
from ._output_modes import PromptedOutput as PromptedOutput
from ._output_modes import ToolOutput as ToolOutput
from ._prepare import ToolDefinition as ToolDefinition
from ._processors import DEFAULT_TOOL_RESULT_MARKER as DEFAULT_TOOL_RESULT_MARKER
from ._processors import drop_old_tool_results as drop_old_tool_results
from ._processors import keep_last_turns as keep_last_turns
from ._result import AgentResult as AgentResult
from ._session import InMemorySession as InMemorySession
from ._session import RunSession as RunSession
from ._store_session import StoreSession as StoreSession
from ._tool import ExternalTool as ExternalTool
from ._tool import Tool as Tool
from ._tool import Toolset as Toolset
from ._tool_function import tool as tool
from ._tool_guards import ToolGuard as ToolGuard
from ._verdict import GuardrailResult as GuardrailResult

__all__ = [
    "DEFAULT_COMPACTION_INSTRUCTIONS",
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_TOOL_RESULT_MARKER",
    "Agent",
    "AgentEvent",
    "AgentResult",
    "AgentRun",
    "Approve",
    "Compaction",
    "ConversationBusy",
    "Deny",
    "ExternalTool",
    "GuardrailResult",
    "GuardrailTripped",
    "Handoff",
    "HandoffEvent",
    "HandoffInputFilter",
    "InMemorySession",
    "InputGuardrail",
    "ModelRetry",
    "NativeOutput",
    "OutputGuardrail",
    "PendingToolCall",
    "PromptedOutput",
    "ReasoningEvent",
    "ResetEvent",
    "RunContext",
    "RunEndedEvent",
    "RunSession",
    "RunStatus",
    "RunStatusEvent",
    "StoreSession",
    "TextEvent",
    "Tool",
    "ToolCallDeltaEvent",
    "ToolCallEndStatus",
    "ToolCallEndedEvent",
    "ToolCallStartedEvent",
    "ToolDefinition",
    "ToolGuard",
    "ToolOutput",
    "Toolset",
    "TurnEndedEvent",
    "UsageLimitExceeded",
    "UsageLimits",
    "agent_in_charge",
    "drop_old_tool_results",
    "input_guardrail",
    "keep_last_turns",
    "output_guardrail",
    "tool",
]

_publish(__name__, globals(), __all__)
