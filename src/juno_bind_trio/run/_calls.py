"""The two shapes a tool call arrives in, and the one thing the pool reads from a stop.

A host hands the harness tool calls either as the openai SDK's objects (what a
non-streaming completion returns) or as plain dicts of the same shape (what a
streamed completion is reassembled into, what a transcript is reloaded as).
Everything downstream needs three strings from a call: its id, its tool's name
and its raw arguments. The accessors here read those from either shape and
refuse a malformed call with an error that names it, at the boundary, so a
bad call fails when the batch is built rather than as a confusing
``KeyError`` from inside a worker.

The SDK is not imported at run time: ``import openai`` costs about half a
second, and reading three attributes needs no class. Any object with ``id``
and ``function.name`` / ``function.arguments`` is accepted, which is exactly
what the SDK's function-tool-call class is across its versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

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
"""A function tool call: the openai SDK's object, or a mapping of the same shape.

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


def _malformed(what: str, call: object) -> TypeError:
    return TypeError(
        f"{what}: expected a function tool call (the openai SDK's object, or a mapping "
        f'{{"id": str, "type": "function", "function": {{"name": str, "arguments": str}}}}), '
        f"got {call!r}"
    )


def _function_part(what: str, call: object) -> Any:
    """Return the ``function`` part of *call*, whichever shape it is."""
    if isinstance(call, Mapping):
        kind = call.get("type", "function")
        if kind != "function":
            raise _malformed(what, call)
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise _malformed(what, call)
        return function
    function = getattr(call, "function", None)
    # A custom tool call (type "custom") has no `function`: refusing it here is
    # what keeps it from being dispatched as if it were a function call.
    if function is None or getattr(call, "type", "function") != "function":
        raise _malformed(what, call)
    return function


def _field(what: str, call: object, part: object, name: str) -> str:
    value = part.get(name) if isinstance(part, Mapping) else getattr(part, name, None)
    if not isinstance(value, str):
        raise _malformed(what, call)
    return value


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


def read_tool_call(what: str, call: object) -> tuple[str, str, str]:
    """Return ``(id, name, arguments)`` of *call*; *what* names the caller in the error.

    Every accessor checks the whole shape, not just the field it returns: a
    call that is malformed anywhere is refused wherever it is first read,
    rather than half-used.
    """
    # The fast path: a plain dict, as reassembled from a stream. Exact type
    # checks cost a fraction of the Mapping ABC check, and the pool reads
    # every call of a batch on the way in.
    if type(call) is dict:
        try:
            function = call["function"]
            call_id = call["id"]
            name = function["name"]
            arguments = function["arguments"]
        except (KeyError, TypeError):
            pass  # the slow path below names the fault
        else:
            if (
                type(function) is dict
                and type(call_id) is str
                and type(name) is str
                and type(arguments) is str
                and call.get("type", "function") == "function"
            ):
                return call_id, name, arguments
    part = _function_part(what, call)
    if isinstance(call, Mapping):
        call_id = call.get("id")
    else:
        call_id = getattr(call, "id", None)
    name = _field(what, call, part, "name")
    arguments = _field(what, call, part, "arguments")
    if not isinstance(call_id, str):
        raise _malformed(what, call)
    return call_id, name, arguments
