"""Fuzz entries for the exception classes `juno_bind_trio` exports.

The package constructs these itself; a host raises a few of them
(`UsageError`, `ToolFailureError`) and catches the rest. So each is fuzzed
with values of its annotated types (``auto(..., junk=False)``): it must
construct, and its ``str`` and ``repr`` must work, whatever those values are.
"""

from __future__ import annotations

from typing import Any

from fuzz_support import Call, Entry, auto

from juno_bind_trio import (
    AbortedToolCallError,
    AllRoutesFailedError,
    CompletionDefectError,
    GuardrailTripped,
    InterruptedToolCallError,
    JunoBindError,
    MCPConnectionError,
    MCPToolError,
    ModelRetry,
    NoViableEndpointError,
    RoutingError,
    RunLimitError,
    RunTimeoutError,
    SchemaError,
    StreamStallError,
    StructuredOutputError,
    ToolCallArgumentsError,
    ToolCallAssemblyError,
    ToolCallError,
    ToolCallHistoryError,
    ToolFailureError,
    TranscriptError,
    TurnStreamUsageError,
    UsageError,
    UsageLimitExceeded,
    WireFormatError,
)


def _renders(arguments: Call, error: Any) -> None:
    assert isinstance(error, BaseException)
    assert isinstance(str(error), str)
    assert isinstance(repr(error), str)


def _exception(cls: type[BaseException], xfail: str | None = None) -> Entry:
    return Entry(cls, args=auto(cls, junk=False), check=_renders, xfail=xfail)


ENTRIES = [
    _exception(AbortedToolCallError),
    _exception(AllRoutesFailedError),
    _exception(CompletionDefectError),
    _exception(GuardrailTripped),
    _exception(InterruptedToolCallError),
    _exception(MCPConnectionError),
    _exception(MCPToolError),
    _exception(JunoBindError),
    _exception(ModelRetry),
    _exception(NoViableEndpointError),
    _exception(RoutingError),
    _exception(RunLimitError),
    _exception(RunTimeoutError),
    _exception(SchemaError),
    _exception(StreamStallError),
    _exception(StructuredOutputError),
    _exception(ToolCallArgumentsError),
    _exception(ToolCallAssemblyError),
    _exception(ToolCallError),
    _exception(ToolCallHistoryError),
    _exception(ToolFailureError),
    _exception(TranscriptError),
    _exception(TurnStreamUsageError),
    _exception(UsageError),
    _exception(UsageLimitExceeded),
    _exception(WireFormatError),
]
