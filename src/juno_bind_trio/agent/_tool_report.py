"""What a run tells its reader and its log about one tool call that ended or failed."""

from __future__ import annotations

from typing import Any

from juno_bind_trio import _tracing
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.plugins import tool_error_text, tool_failure_content

from ._events import ToolCallEndedEvent

__all__ = ["log_tool_failure", "tool_ended", "tool_failed"]


def tool_ended(
    iteration: int, call_id: str, name: str, status: Any, kind: Any, outcome: ToolCallOutcome
) -> ToolCallEndedEvent:
    """The ended event of a call that returned *outcome*."""
    content = outcome.tool_message.get("content")
    return ToolCallEndedEvent(
        iteration=iteration,
        tool_call_id=call_id,
        tool_name=name,
        status=status,
        kind=kind,
        content=content if isinstance(content, str) else str(content),
    )


def tool_failed(
    iteration: int, call_id: str, name: str, error: Exception, kind: Any
) -> ToolCallEndedEvent:
    """The ended event of a call that raised *error*."""
    return ToolCallEndedEvent(
        iteration=iteration,
        tool_call_id=call_id,
        tool_name=name,
        status="failed",
        kind=kind,
        content=tool_failure_content(tool_error_text(error), kind),
        error=error,
    )


def log_tool_failure(
    run_id: str,
    iteration: int,
    call_id: str,
    name: str,
    arguments: str,
    kind: Any,
    exc: Exception,
    ran: bool,
) -> None:
    """Log a tool call's failure for the developer (the model reads it in the tool message)."""
    # The model reads the failure in the tool message; this is the developer's
    # copy. The tool's own exception comes with its traceback; a call refused
    # before the tool ran (no such tool, arguments that did not validate) is
    # said in one line, its reason. Arguments are content: only when content is on.
    what = "failed" if ran else "refused before it ran"
    if _tracing.capture_content():
        _tracing.logger.warning(
            "run %s: tool %s %s (call %s, iteration %d, kind %s, arguments %s): %s",
            run_id,
            name,
            what,
            call_id,
            iteration,
            kind,
            arguments,
            tool_error_text(exc),
            exc_info=exc if ran else None,
        )
    else:
        _tracing.logger.warning(
            "run %s: tool %s %s (call %s, iteration %d, kind %s): %s",
            run_id,
            name,
            what,
            call_id,
            iteration,
            kind,
            tool_error_text(exc),
            exc_info=exc if ran else None,
        )
