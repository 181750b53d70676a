"""[tool][juno_bind_trio.agent.tool]: a typed function made into a Tool, its arguments
validated before each call.

``@tool`` reads a function once, at decoration time (see `_tool_signature.py`),
and turns it into a [Tool][juno_bind_trio.agent.Tool]: a name, a description,
the JSON schema of its arguments and a compiled pydantic validator for them.

What the model *can* fix reaches it: arguments that do not validate are
answered with a ``validation``-kind failure naming every bad field and why,
and the function is not called. The arguments are the call's own
[ToolCall.parsed][juno_bind_trio.run.ToolCall.parsed], parsed once under the
package's one rule for every reader of the call (the receipt key, the
idempotency key, this validation); pydantic's compiled core validates that
value, and again with ``null`` read as "not given" (`_tool_nulls.py`) before
a failure is reported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast, overload

import anyio.from_thread
import anyio.to_thread
import pydantic
import pydantic_core

from juno_bind_trio._cancel import cancelled_now
from juno_bind_trio._errors import AbortedToolCallError, ToolFailureError
from juno_bind_trio._validate import is_async_callable

from ._approval_types import ApprovalPredicate
from ._context import RunContext
from ._prepare import PrepareFn
from ._tool import (
    Tool,
    ToolFunction,
    Toolset,
    announce_start,
    check_name,
    check_tool_options,
    validation_message,
)
from ._tool_guards import ToolGuard, check_tool_guards
from ._tool_nulls import drop_absent_nulls
from ._tool_signature import function_name, read_function

__all__ = ["collect_tools", "tool"]

# What a worker thread returns for a function it did not start (a cancel came first).
_NOT_BEGUN: Final = object()


def _function_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    serial: bool,
    repeatable: bool | None,
    uses_idempotency_key: bool,
    requires_approval: object = False,
    external: object = False,
    approval_timeout: object = None,
    guards: object = (),
    prepare: object = None,
) -> Tool:
    if not callable(fn):
        raise TypeError(f"tool: expected a function, got {fn!r}")
    if isinstance(fn, Tool):
        raise TypeError(f"tool: {fn.name!r} is already a Tool")
    tool_name = function_name(fn) if name is None else name
    owner = f"tool {tool_name!r}" if isinstance(tool_name, str) else "tool"
    check_name(owner, tool_name)
    assert tool_name is not None
    approval, waits_outside, approval_timeout, repeatable = check_tool_options(
        owner,
        description=description,
        serial=serial,
        repeatable=repeatable,
        uses_idempotency_key=uses_idempotency_key,
        requires_approval=requires_approval,
        external=external,
        approval_timeout=approval_timeout,
        prepare=prepare,
    )
    read = read_function(fn, owner, description)
    validate_python = read.model.__pydantic_validator__.validate_python
    names = read.names
    schema = read.parameters
    is_async = is_async_callable(fn)
    takes_context = read.takes_context

    def arguments_of(parsed: dict[str, Any]) -> dict[str, Any]:
        try:
            values = validate_python(parsed).__dict__.values()
        except pydantic.ValidationError as first:
            # A second reading, with "null means not given" (see the module docstring).
            try:
                values = validate_python(
                    drop_absent_nulls(parsed, schema, schema)
                ).__dict__.values()
            except pydantic.ValidationError as second:
                raise ToolFailureError(
                    "validation", validation_message(tool_name, second)
                ) from None
            except RecursionError:
                # Nested past what the validator can walk: the first reading's answer.
                raise ToolFailureError("validation", validation_message(tool_name, first)) from None
        return dict(zip(names, values, strict=True))

    if is_async:

        async def invoke(ctx: RunContext[Any], arguments: dict[str, Any]) -> object:
            kwargs = arguments_of(arguments)
            announce_start(ctx)
            if takes_context:
                return await fn(ctx, **kwargs)
            return await fn(**kwargs)

    else:

        async def invoke(ctx: RunContext[Any], arguments: dict[str, Any]) -> object:
            kwargs = arguments_of(arguments)
            announce_start(ctx)
            began = False

            def call() -> object:
                nonlocal began
                # The thread may take the function after a cancel came (on trio it
                # starts through a shielded step): then it does not start at all.
                try:
                    anyio.from_thread.check_cancelled()
                except BaseException:
                    return _NOT_BEGUN
                began = True
                return fn(ctx, **kwargs) if takes_context else fn(**kwargs)

            # A thread cannot be interrupted: a cancel waits for the function to
            # return, and the call is answered with what it returned (it ran to
            # the end; its result is as real as any). A cancel that came before
            # the thread took the function (anyio checkpoints first) found it
            # never started: that is a refusal, not an interruption, and the
            # pool and the loop answer it "not_run". See docs/how-to/agent-tools.md.
            try:
                value = await anyio.to_thread.run_sync(call, abandon_on_cancel=False)
            except BaseException:
                if not began and cancelled_now():
                    raise AbortedToolCallError(ctx.tool_call_id) from None
                raise
            if value is _NOT_BEGUN:
                raise AbortedToolCallError(ctx.tool_call_id)
            return value

    made = Tool(
        name=tool_name,
        description=read.description,
        parameters=schema,
        serial=serial,
        repeatable=repeatable,
        uses_idempotency_key=uses_idempotency_key,
        invoke=invoke,
        requires_approval=approval,
        external=waits_outside,
        approval_timeout=approval_timeout,
        guards=check_tool_guards(owner, guards),
        prepare=cast("PrepareFn | None", prepare),
    )
    object.__setattr__(made, "_context_deps", read.context_deps)
    object.__setattr__(made, "_validate", _jsonable(arguments_of))
    return made


def _jsonable(
    arguments_of: Callable[[dict[str, Any]], dict[str, Any]],
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    # The validated arguments as a JSON-compatible dict (what a pending call shows).
    def validate(parsed: dict[str, Any]) -> dict[str, Any]:
        value: dict[str, Any] = pydantic_core.to_jsonable_python(arguments_of(parsed))
        return value

    return validate


@overload
def tool(
    fn: ToolFunction,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    serial: bool = False,
    repeatable: bool | None = None,
    uses_idempotency_key: bool = False,
    requires_approval: bool | ApprovalPredicate = False,
    external: bool = False,
    approval_timeout: float | None = None,
    guards: Iterable[ToolGuard] = (),
    prepare: PrepareFn | None = None,
) -> Tool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    serial: bool = False,
    repeatable: bool | None = None,
    uses_idempotency_key: bool = False,
    requires_approval: bool | ApprovalPredicate = False,
    external: bool = False,
    approval_timeout: float | None = None,
    guards: Iterable[ToolGuard] = (),
    prepare: PrepareFn | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    serial: bool = False,
    repeatable: bool | None = None,
    uses_idempotency_key: bool = False,
    requires_approval: bool | ApprovalPredicate = False,
    external: bool = False,
    approval_timeout: float | None = None,
    guards: Iterable[ToolGuard] = (),
    prepare: PrepareFn | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a [Tool][juno_bind_trio.agent.Tool] from a typed function: ``@tool`` or ``@tool(...)``.

    ```python
    @tool
    async def get_weather(city: str, days: int = 1) -> str:
        \"\"\"Forecast for a city.

        Args:
            city: The city's name, in English.
            days: How many days ahead, 1 to 7.
        \"\"\"
    ```

    The argument schema comes from the signature through pydantic (``Literal``,
    ``Optional``, defaults, enums, nested models, dataclasses, TypedDicts,
    ``list[...]``, ``Annotated[..., Field(description=...)]``); the
    description and each parameter's description from the docstring (Google,
    NumPy or Sphinx style). An optional **first** parameter annotated
    ``RunContext[Deps]`` is injected and left out of the schema.

    *name* defaults to the function's name, *description* to the docstring's.
    *serial*, *repeatable*, *uses_idempotency_key*: see
    [Tool][juno_bind_trio.agent.Tool]; *repeatable* defaults to ``True``,
    and to ``False`` for a tool that requires approval.

    *requires_approval*: ``True``, or a predicate ``(ctx, arguments) -> bool``
    (sync or async; *arguments* the validated arguments as a JSON-compatible
    dict): a call that needs it waits for a decision instead of running, and
    the run ends ``"suspended"`` with the call in ``AgentResult.pending``
    (see [Approve][juno_bind_trio.agent.Approve]). *external*: the host runs
    the tool elsewhere and answers its calls (``results=``, ``errors=``); the
    function only gives the schema. *approval_timeout*: seconds a call waits
    before it is answered as denied (timed out) on the next continuation.

    *guards*: [ToolGuard][juno_bind_trio.agent.ToolGuard]s around each call:
    ``before`` sees the validated arguments and may refuse the call (the
    model reads a failure of kind ``"authz"``; the tool never starts),
    ``after`` sees the result and may replace it.
    *prepare*: ``(ctx, definition) -> definition | None``, sync or async,
    called before each model request of a run with the step's
    [RunContext][juno_bind_trio.agent.RunContext] (its ``iteration`` the
    request's, its ``tool_name`` this tool's) and the tool's
    [ToolDefinition][juno_bind_trio.agent.ToolDefinition]: return it to
    offer the tool as it is, a changed copy
    (``definition.replace(description=...)``) to offer that, or ``None`` to
    hide the tool this step. A call the model makes to a tool not offered at
    its step is answered ``"not_found"`` and the tool does not run.

    A synchronous function runs in a worker thread; a cancel cannot stop a
    thread, so it waits for the function to return, and the call is answered
    with what the function returned (it ran to its end). A call a cancel
    caught before a thread took it never started, and is answered
    ``"not_run"``.

    :raises TypeError: the function cannot be a tool (the message says why and
        what to change).
    :raises ValueError: the name breaks the function-name rule.
    """
    make = functools.partial(
        _function_tool,
        name=name,
        description=description,
        serial=serial,
        repeatable=repeatable,
        uses_idempotency_key=uses_idempotency_key,
        requires_approval=requires_approval,
        external=external,
        approval_timeout=approval_timeout,
        guards=guards,
        prepare=prepare,
    )
    return make if fn is None else make(fn)


def collect_tools(owner: str, given: Iterable[object]) -> list[Tool | Toolset]:
    """Normalise an agent's ``tools=``: functions become tools, toolsets stay toolsets."""
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable):
        raise TypeError(f"{owner}: tools must be an iterable of tools, got {given!r}")
    collected: list[Tool | Toolset] = []
    for item in given:
        if isinstance(item, Tool) or (isinstance(item, Toolset) and not callable(item)):
            collected.append(item)
        elif callable(item):
            collected.append(tool(item))
        else:
            raise TypeError(
                f"{owner}: a tool must be a Tool, a function or a Toolset, got {item!r}"
            )
    return collected
