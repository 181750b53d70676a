"""What an output type is made of: its members, each a type or an output function of one.

A plain type is one member; a list of types, or a union, several. A function
is an output function: its value parameter's type is asked for, it is called
with the validated value, and what it returns is the run's output.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Final, final

import attrs

from ._context import RunContext
from ._output_modes import NativeOutput, PromptedOutput, ToolOutput
from ._tool_signature import is_run_context

__all__ = ["NAME_PART", "Member", "OutputFunction", "members_of", "union_of"]

# What a member's label may not hold in a tool name.
NAME_PART: Final = re.compile(r"[^A-Za-z0-9_-]")


@final
class OutputFunction:
    """An output function: called with the validated value; its return is the run's output."""

    __slots__ = ("function", "name", "takes_context", "value_type")

    def __init__(self, owner: str, function: Callable[..., Any]) -> None:
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            raise TypeError(f"{owner}: output function {function!r} has no signature") from None
        parameters = [
            p
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception as exc:  # an annotation that does not resolve
            raise TypeError(
                f"{owner}: output function {function!r} has annotations that do not resolve "
                f"({type(exc).__name__}: {exc})"
            ) from None
        takes_context = bool(parameters) and is_run_context(
            hints.get(parameters[0].name, parameters[0].annotation)
        )
        values = parameters[1:] if takes_context else parameters
        if len(values) != 1:
            raise TypeError(
                f"{owner}: output function {_name_of(function)} must take one value "
                "parameter (after an optional RunContext first), the validated output; "
                f"it takes {len(values)}"
            )
        value = values[0]
        if value.name not in hints:
            raise TypeError(
                f"{owner}: output function {_name_of(function)}'s parameter {value.name!r} "
                "needs a type annotation: it is the type the model is asked for"
            )
        self.function: Callable[..., Any] = function
        self.name: str = _name_of(function)
        self.takes_context: bool = takes_context
        self.value_type: Any = hints[value.name]

    async def __call__(self, context: RunContext[Any], value: Any) -> Any:
        result = self.function(context, value) if self.takes_context else self.function(value)
        if inspect.isawaitable(result):
            result = await result
        return result


def _name_of(function: object) -> str:
    return str(getattr(function, "__name__", None) or type(function).__name__)


def _is_function(value: object) -> bool:
    given: Any = value
    return (
        callable(given)
        and not isinstance(given, type)
        and typing.get_origin(given) is None
        and not _is_typing_form(given)
    )


def _is_typing_form(value: object) -> bool:
    module = getattr(type(value), "__module__", "")
    return module in ("typing", "typing_extensions", "types")


@final
@attrs.frozen
class Member:
    """One member of an output type: a type, or a function of one."""

    value_type: Any
    function: OutputFunction | None
    label: str

    @property
    def is_text(self) -> bool:
        return self.value_type is str and self.function is None


def members_of(owner: str, output_type: object) -> list[Member]:
    if isinstance(output_type, list | tuple):
        given: list[object] = list(output_type)
        if not given:
            raise ValueError(f"{owner}: output_type is an empty list; give at least one type")
    elif isinstance(output_type, types.UnionType) or typing.get_origin(output_type) is typing.Union:
        given = list(typing.get_args(output_type))
    else:
        given = [output_type]
    members: list[Member] = []
    for item in given:
        if isinstance(item, ToolOutput | NativeOutput | PromptedOutput):
            raise TypeError(
                f"{owner}: {item!r} inside an output type; wrap the whole list in one mode "
                "instead (ToolOutput([A, B]))"
            )
        if item is None or item is type(None):
            raise TypeError(f"{owner}: output_type cannot have None as a member")
        if _is_function(item):
            function = OutputFunction(owner, item)  # type: ignore[arg-type]
            members.append(Member(function.value_type, function, function.name))
        else:
            label = getattr(item, "__name__", None) or NAME_PART.sub("_", repr(item))
            members.append(Member(item, None, str(label)))
    return members


def union_of(members: Sequence[Member]) -> Any:
    types_ = [m.value_type for m in members]
    if len(types_) == 1:
        return types_[0]
    return typing.Union[tuple(types_)]  # noqa: UP007 - built at run time
