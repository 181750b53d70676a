"""Fuzz entries for `juno_bind_trio.plugins`."""

from __future__ import annotations

from fuzz_support import Entry

from juno_bind_trio.plugins import (
    SuspendDirective,
    ToolDef,
    kind_for_error,
    tool_error_text,
    tool_failure_content,
    tool_failure_message,
)

ENTRIES = [
    Entry(SuspendDirective),
    Entry(ToolDef),
    Entry(kind_for_error),
    Entry(tool_error_text),
    Entry(tool_failure_content),
    Entry(tool_failure_message),
]
