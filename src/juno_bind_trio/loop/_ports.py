"""What the loop asks of its ports: checked when it is built, and again when one answers.

Every port the loop awaits must be an async function, and every value a host
hands it (the state, the stop, the channels, the sink, the counts) has one
shape. Each is refused at construction, naming the parameter and the value,
because a port that is wrong there fails on its first call, mid-run, far from
the wiring that is wrong. What a port *returns* is checked where the loop
receives it, and a wrong answer is a [UsageError][juno_bind_trio.UsageError]
for the host, never a tool message the model reads.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable
from typing import Any, Final

import anyio.lowlevel

from juno_bind_trio._calls import ToolCall
from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio._validate import count, error_kind, is_async_callable

from ._results import ToolCallOutcome

__all__ = [
    "NotAwaitable",
    "awaitable",
    "check_events",
    "check_first_iteration",
    "check_interrupts",
    "check_max_iterations",
    "check_max_text_resets",
    "check_owns_text_sink",
    "check_per_tool_limit",
    "check_run_id",
    "check_state",
    "check_stop",
    "check_text_sink",
    "new_run_id",
    "no_tools",
    "optional_async",
    "optional_callable",
    "required_async",
    "wiring_mistake",
]

# --- at construction -------------------------------------------------------------------


_COUNT: Final = count(minimum=1)


def required_async(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if not is_async_callable(value):
            raise TypeError(f"ToolLoop: {name} must be an async function, got {value!r}")

    return check


def optional_async(name: str) -> Any:
    # The ports the loop awaits. A plain function (or one returning a coroutine
    # it made itself) is refused here, as ToolDef refuses a sync handler: left
    # in, it fails on its first call, mid-run, far from the wiring that is wrong.
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None and not is_async_callable(value):
            raise TypeError(f"ToolLoop: {name} must be an async function or None, got {value!r}")

    return check


def optional_callable(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None and not callable(value):
            raise TypeError(f"ToolLoop: {name} must be callable or None, got {value!r}")

    return check


def check_state(_instance: Any, _attribute: Any, value: Any) -> None:
    if not isinstance(getattr(value, "messages", None), list):
        raise TypeError(f"ToolLoop: state must have a `messages` list, got {value!r}")


def _positive_int(name: str, value: object) -> int:
    return _COUNT.check(f"ToolLoop: {name}", value)


def check_max_iterations(value: int) -> int:
    return _positive_int("max_iterations", value)


def check_first_iteration(value: int) -> int:
    return _positive_int("first_iteration", value)


def check_per_tool_limit(value: int) -> int:
    return _positive_int("per_tool_limit", value)


def check_stop(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(getattr(value, "cancel_called", None), bool):
        raise TypeError(
            "ToolLoop: stop must be None or have a bool `cancel_called` "
            f"(a trio or anyio CancelScope), got {value!r}"
        )


def check_events(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is not None and not callable(getattr(value, "send_nowait", None)):
        raise TypeError(
            f"ToolLoop: events must be None or a memory object send stream, got {value!r}"
        )


def check_interrupts(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is not None and not callable(getattr(value, "receive_nowait", None)):
        raise TypeError(
            f"ToolLoop: interrupts must be None or a memory object receive stream, got {value!r}"
        )


def check_text_sink(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is None or callable(getattr(value, "emit", None)) or callable(value):
        return
    raise TypeError(
        "ToolLoop: text_sink must be None, a TurnStreamSink, or a factory "
        f"`(turn_id) -> TurnStreamSink`, got {value!r}"
    )


def check_owns_text_sink(instance: Any, _attribute: Any, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"ToolLoop: owns_text_sink must be a bool, got {value!r}")
    if not value:
        return
    sink = instance._text_sink
    if sink is None:
        raise TypeError("ToolLoop: owns_text_sink=True needs a text_sink to own")
    if callable(getattr(sink, "emit", None)) and not callable(getattr(sink, "close", None)):
        raise TypeError(
            f"ToolLoop: owns_text_sink=True, but the text_sink has no close(): {sink!r}"
        )


def check_max_text_resets(given: int | None) -> int | None:
    value: object = given  # checked at run time, whatever the type says
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        wrong_type = isinstance(value, bool) or not isinstance(value, int)
        raise (TypeError if wrong_type else ValueError)(
            f"ToolLoop: max_text_resets must be None or a non-negative integer, got {value!r}"
        )
    return value


def check_run_id(given: str) -> str:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, str) or not value:
        raise error_kind(value, str)(f"ToolLoop: run_id must be a non-empty string, got {value!r}")
    return value


def new_run_id() -> str:
    return uuid.uuid4().hex


# --- when a port answers -------------------------------------------------------------


def awaitable(port: str, pending: object) -> Awaitable[Any]:
    """*pending*, what an async port's call returned, if it can be awaited; else UsageError.

    Only a function marked as a coroutine function that is not one gets past
    the construction check; without this, ``await`` would raise a TypeError
    that reads as if the loop were broken.
    """
    if inspect.isawaitable(pending):
        return pending
    raise UsageError(
        f"ToolLoop: {port} must be an async function; calling it returned {pending!r}, "
        "which cannot be awaited"
    )


def wiring_mistake(call_id: str, value: object) -> UsageError:
    if isinstance(value, NotAwaitable):
        return UsageError(
            "ToolLoop: run_tool_call must be an async function returning a ToolCallOutcome; "
            f"calling it returned {value.returned!r}, which cannot be awaited"
        )
    if isinstance(value, ToolCallOutcome):
        return UsageError(
            f"ToolLoop: run_tool_call answered {value.tool_call_id!r} when called for {call_id!r}"
        )
    return UsageError(f"ToolLoop: run_tool_call must return a ToolCallOutcome, got {value!r}")


class NotAwaitable:
    """What the loop's tool wrapper settles when ``run_tool_call`` returned a non-awaitable."""

    __slots__ = ("returned",)

    def __init__(self, returned: object) -> None:
        self.returned = returned


async def no_tools(call: ToolCall) -> ToolCallOutcome:
    # The run_tool_call of a loop built without one (a text-only run). A model
    # that calls a tool anyway made the mistake, not the host, so it reads the
    # answer a tool that does not exist gets, and the run goes on.
    await anyio.lowlevel.checkpoint()
    raise ToolFailureError(
        "not_found", f"There is no tool named {call.name!r}: this run offers no tools."
    )
