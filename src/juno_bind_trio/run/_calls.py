"""The two shapes a tool call arrives in, and the one thing the pool reads from a stop.

A host hands the harness tool calls either as the openai SDK's objects (what a
non-streaming completion returns) or as plain dicts of the same shape (what a
streamed completion is reassembled into, what a transcript is reloaded as),
and the harness hands them on as [`ToolCall`][juno_bind_trio.run.ToolCall]s,
which read as both. Everything downstream needs three strings from a call:
its id, its tool's name and its raw arguments. The accessors here read those
from any of the three and refuse a malformed call with an error that names
it, at the boundary, so a bad call fails when the batch is built rather than
as a confusing ``KeyError`` from inside a worker.

The SDK is not imported at run time: ``import openai`` costs about half a
second, and reading three attributes needs no class. Any object with ``id``
and ``function.name`` / ``function.arguments`` is accepted, which is exactly
what the SDK's function-tool-call class is across its versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from juno_bind_trio._calls import read_tool_call

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageToolCall

__all__ = [
    "StopSignal",
    "ToolCallLike",
    "tool_call_arguments",
    "tool_call_id",
    "tool_call_name",
]

ToolCallLike: TypeAlias = "ChatCompletionMessageToolCall | Mapping[str, Any]"
"""A function tool call: the openai SDK's object, or a mapping of the same shape
(a [`ToolCall`][juno_bind_trio.run.ToolCall] is one).

The mapping form is ``{"id": str, "type": "function", "function": {"name":
str, "arguments": str}}``; ``"type"`` may be left out, and if present must be
``"function"``.
"""


class StopSignal(Protocol):
    """Anything with a read-only ``cancel_called``: the soft stop the pool reads at claim time.

    A ``trio.CancelScope`` and an ``anyio.CancelScope`` both qualify, entered
    or not. The pool and the loop only ever *read* it: cancelling it is the
    caller's way of saying "start nothing new", and it never cancels anything
    in flight.
    """

    @property
    def cancel_called(self) -> bool: ...


def tool_call_id(call: ToolCallLike) -> str:
    """Return the call's ``id``.

    :raises TypeError: *call* is not a well-formed function tool call.
    """
    return read_tool_call("tool_call_id", call)[0]


def tool_call_name(call: ToolCallLike) -> str:
    """Return the name of the tool the call asks for (``function.name``).

    :raises TypeError: *call* is not a well-formed function tool call.
    """
    return read_tool_call("tool_call_name", call)[1]


def tool_call_arguments(call: ToolCallLike) -> str:
    """Return the call's raw arguments (``function.arguments``): JSON, as the model wrote it.

    Not parsed here: a model's arguments are often invalid JSON, and what to
    do about that is the caller's decision.

    :raises TypeError: *call* is not a well-formed function tool call.
    """
    return read_tool_call("tool_call_arguments", call)[2]
