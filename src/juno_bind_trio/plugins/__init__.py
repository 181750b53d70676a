"""The tool vocabulary: tool definitions, failure kinds and their envelope, the suspend directive.

The TypeScript package's ``@juno-ai/bind/plugins`` subpath.
"""

from juno_bind_trio._errors import ToolFailureError as ToolFailureError
from juno_bind_trio._public import publish as _publish

from ._suspend import SuspendDirective as SuspendDirective
from ._tool import TOOL_FAILURE_KINDS as TOOL_FAILURE_KINDS
from ._tool import ToolDef as ToolDef
from ._tool import ToolFailureKind as ToolFailureKind
from ._tool import ToolHandler as ToolHandler
from ._tool import kind_for_error as kind_for_error
from ._tool import tool_error_text as tool_error_text
from ._tool import tool_failure_content as tool_failure_content
from ._tool import tool_failure_message as tool_failure_message

__all__ = [
    "TOOL_FAILURE_KINDS",
    "SuspendDirective",
    "ToolDef",
    "ToolFailureError",
    "ToolFailureKind",
    "ToolHandler",
    "kind_for_error",
    "tool_error_text",
    "tool_failure_content",
    "tool_failure_message",
]

_publish(__name__, globals(), __all__)
