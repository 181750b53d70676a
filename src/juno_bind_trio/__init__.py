"""juno-bind-trio: a Trio-native agent harness.

The subpackages mirror the TypeScript package's subpaths: ``completion``,
``loop``, ``run``, ``routing``, ``plugins``, ``transcript``, ``schema``, plus
``providers.openai`` (the real SDK adapter) and ``testing`` (fakes for your own
tests), and ``agent``, the layer an application is written against. This top
level re-exports the exception tree and the agent's four everyday names
(``Agent``, ``tool``, ``RunContext``, ``AgentResult``); import everything else
from its subpackage.
"""

from ._errors import ABORTED_TOOL_CALL_MESSAGE as ABORTED_TOOL_CALL_MESSAGE
from ._errors import INTERRUPTED_TOOL_CALL_MESSAGE as INTERRUPTED_TOOL_CALL_MESSAGE
from ._errors import AbortedToolCallError as AbortedToolCallError
from ._errors import AllRoutesFailedError as AllRoutesFailedError
from ._errors import CompletionDefectError as CompletionDefectError
from ._errors import ConversationBusy as ConversationBusy
from ._errors import InterruptedToolCallError as InterruptedToolCallError
from ._errors import JunoBindError as JunoBindError
from ._errors import LeaseLostError as LeaseLostError
from ._errors import MCPConnectionError as MCPConnectionError
from ._errors import MCPToolError as MCPToolError
from ._errors import ModelRetry as ModelRetry
from ._errors import NoViableEndpointError as NoViableEndpointError
from ._errors import RoutingError as RoutingError
from ._errors import RunExistsError as RunExistsError
from ._errors import RunLeasedError as RunLeasedError
from ._errors import RunLimitError as RunLimitError
from ._errors import RunNotFoundError as RunNotFoundError
from ._errors import RunTimeoutError as RunTimeoutError
from ._errors import SchemaError as SchemaError
from ._errors import SchemaVersionError as SchemaVersionError
from ._errors import SimulatedCrash as SimulatedCrash
from ._errors import StoreDataError as StoreDataError
from ._errors import StoreError as StoreError
from ._errors import StreamStallError as StreamStallError
from ._errors import StructuredOutputError as StructuredOutputError
from ._errors import ToolCallArgumentsError as ToolCallArgumentsError
from ._errors import ToolCallAssemblyError as ToolCallAssemblyError
from ._errors import ToolCallError as ToolCallError
from ._errors import ToolCallHistoryError as ToolCallHistoryError
from ._errors import ToolFailureError as ToolFailureError
from ._errors import TranscriptError as TranscriptError
from ._errors import TurnStreamUsageError as TurnStreamUsageError
from ._errors import UsageError as UsageError
from ._errors import UsageLimitExceeded as UsageLimitExceeded
from ._errors import WireFormatError as WireFormatError
from ._public import publish as _publish

# The exception tree is published here, before anything below imports a
# subpackage that re-exports it: the first publish of a name wins, and an
# exception's home is the top level (``juno_bind_trio.UsageError``).
_publish(__name__, globals(), [name for name in list(globals()) if not name.startswith("_")])

from .agent import Agent as Agent  # noqa: E402
from .agent import AgentResult as AgentResult  # noqa: E402
from .agent import Approve as Approve  # noqa: E402
from .agent import Deny as Deny  # noqa: E402
from .agent import ExternalTool as ExternalTool  # noqa: E402
from .agent import NativeOutput as NativeOutput  # noqa: E402
from .agent import PendingToolCall as PendingToolCall  # noqa: E402
from .agent import PromptedOutput as PromptedOutput  # noqa: E402
from .agent import RunContext as RunContext  # noqa: E402
from .agent import ToolOutput as ToolOutput  # noqa: E402
from .agent import tool as tool  # noqa: E402

__version__ = "0.1.0.dev0"

__all__ = [
    "ABORTED_TOOL_CALL_MESSAGE",
    "INTERRUPTED_TOOL_CALL_MESSAGE",
    "AbortedToolCallError",
    "Agent",
    "AgentResult",
    "AllRoutesFailedError",
    "Approve",
    "CompletionDefectError",
    "ConversationBusy",
    "Deny",
    "ExternalTool",
    "InterruptedToolCallError",
    "JunoBindError",
    "LeaseLostError",
    "MCPConnectionError",
    "MCPToolError",
    "ModelRetry",
    "NativeOutput",
    "NoViableEndpointError",
    "PendingToolCall",
    "PromptedOutput",
    "RoutingError",
    "RunContext",
    "RunExistsError",
    "RunLeasedError",
    "RunLimitError",
    "RunNotFoundError",
    "RunTimeoutError",
    "SchemaError",
    "SchemaVersionError",
    "SimulatedCrash",
    "StoreDataError",
    "StoreError",
    "StreamStallError",
    "StructuredOutputError",
    "ToolCallArgumentsError",
    "ToolCallAssemblyError",
    "ToolCallError",
    "ToolCallHistoryError",
    "ToolFailureError",
    "ToolOutput",
    "TranscriptError",
    "TurnStreamUsageError",
    "UsageError",
    "UsageLimitExceeded",
    "WireFormatError",
    "__version__",
    "tool",
]

_publish(__name__, globals(), __all__)
