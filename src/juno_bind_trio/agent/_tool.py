"""The [Tool][juno_bind_trio.agent.Tool] value (a name, a description, an argument schema
and what it runs) and the tools a run of an agent is given.

A tool is made by [tool][juno_bind_trio.agent.tool] from a typed function
(`_tool_function.py`) or by [Tool.from_schema][juno_bind_trio.agent.Tool.from_schema]
from a schema written elsewhere. Its arguments are parsed once, under the
package's one rule, for every reader of the call.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, final

import attrs
import pydantic

from juno_bind_trio._calls import ToolCall, parse_arguments
from juno_bind_trio._errors import SchemaError, ToolCallArgumentsError, ToolFailureError, UsageError
from juno_bind_trio._validate import a_bool, is_async_callable, is_tool_name, shown
from juno_bind_trio.schema import sanitize_tool_schema

from ._approval_types import ApprovalPredicate, check_approval_options
from ._context import RunContext
from ._prepare import PrepareFn, check_prepare
from ._tool_guards import ToolGuard

__all__ = [
    "ExternalTool",
    "Tool",
    "ToolFunction",
    "Toolset",
    "announce_start",
    "check_deps_value",
    "check_name",
    "check_tool_deps",
    "check_tool_options",
    "run_tools",
    "validation_message",
]

ToolFunction = Callable[..., Any]
"""What ``@tool`` accepts: async or sync, typed parameters, an optional ``RunContext`` first."""

_MAX_SHOWN: Final = 60


def check_name(owner: str, name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{owner}: a tool name must be a str, got {shown(name)}")
    if not is_tool_name(name):
        raise ValueError(
            f"{owner}: a tool name must be 1 to 64 letters, digits, '_' or '-' "
            f"(the function-name rule of OpenAI-compatible APIs), got {name!r}"
        )
    return name


def check_tool_options(
    owner: str,
    *,
    description: object,
    serial: object,
    repeatable: object,
    uses_idempotency_key: object,
    requires_approval: object,
    external: object,
    approval_timeout: object,
    prepare: object,
) -> tuple[bool | ApprovalPredicate, bool, float | None, bool]:
    """What ``@tool`` and ``Tool.from_schema`` both take, checked one way: the approval
    options (see `check_approval_options`) and the resolved *repeatable* returned."""
    if description is not None and not isinstance(description, str):
        raise TypeError(f"{owner}: description must be a str or None, got {description!r}")
    approval, waits_outside, timeout, repeats = check_approval_options(
        owner, requires_approval, external, approval_timeout, repeatable
    )
    for flag, value in (
        ("serial", serial),
        ("repeatable", repeats),
        ("uses_idempotency_key", uses_idempotency_key),
    ):
        a_bool().check(f"{owner}: {flag}", value)
    check_prepare(owner, "prepare", prepare)
    return approval, waits_outside, timeout, repeats


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def validation_message(tool_name: str, error: pydantic.ValidationError) -> str:
    """The text a model reads when its arguments for *tool_name* did not validate.

    Every bad field, by its path in the arguments, with pydantic's reason and
    the value the model sent, so it can correct all of them in one go.
    """
    problems: list[str] = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"])
        kind = item["type"]
        if kind == "json_invalid":
            problems.append(f"the arguments are not valid JSON ({item['msg']})")
        elif kind == "missing":
            problems.append(f"{location}: required, but missing")
        elif kind == "extra_forbidden":
            problems.append(f"{location}: no such parameter")
        elif location:
            problems.append(f"{location}: {item['msg']} (got {_shown(item['input'])})")
        else:
            problems.append(f"{item['msg']} (got {_shown(item['input'])})")
    return f"invalid arguments for {tool_name}: " + "; ".join(problems)


def announce_start(ctx: RunContext[Any]) -> None:
    """Tell the run the call's arguments validated and its function is about to run."""
    hook = ctx._on_start
    if hook is not None:
        hook()


# What a tool runs, given the call's arguments already parsed under the package's one rule.
_Invoke = Callable[[RunContext[Any], dict[str, Any]], Awaitable[object]]


def _parsed(tool_name: str, arguments: object) -> dict[str, Any]:
    """The arguments of a call to *tool_name*, as the package's one rule parses them.

    A [ToolCall][juno_bind_trio.run.ToolCall]'s are parsed once for all its
    readers; raw text is parsed here. Text the rule refuses is the model's to
    fix: a ``"validation"`` failure.
    """
    try:
        if type(arguments) is ToolCall:
            return arguments.parsed
        if not isinstance(arguments, str):
            raise TypeError(
                f"Tool.invoke: arguments must be a ToolCall or the raw JSON text, got {arguments!r}"
            )
        return parse_arguments("Tool.invoke", arguments)
    except ToolCallArgumentsError as exc:
        raise ToolFailureError(
            "validation", f"invalid arguments for {tool_name}: {exc.detail}"
        ) from None


@final
@attrs.frozen(kw_only=True, eq=False)
class Tool:
    """A tool a model may call: its name, description, argument schema and what it runs.

    Made by [tool][juno_bind_trio.agent.tool] from a typed function, or by
    [Tool.from_schema][juno_bind_trio.agent.Tool.from_schema] from a schema
    written elsewhere (an MCP server's). Frozen; compared by identity.

    * *name*: what the model calls it (the OpenAI function-name rule, checked).
    * *description*: what the model reads to decide when to call it.
    * *parameters*: the JSON Schema of the arguments object, dialect-neutral;
      the agent rewrites it per provider when it builds the request.
    * *serial*: calls to it run one at a time, before the rest of the batch.
    * *repeatable*: ``False`` marks an effect that must never happen twice: a
      call of it cut off by a cancel is never run again on resume.
    * *uses_idempotency_key*: the tool passes ``ctx.idempotency_key`` to its
      effect, so an interrupted call of it may be sent again safely.
    * *requires_approval*, *external*, *approval_timeout*: a call of it waits
      for a decision, or is run by the host
      (see [tool][juno_bind_trio.agent.tool]).
    * *guards*: its [ToolGuard][juno_bind_trio.agent.ToolGuard]s, checks
      before each call (which may refuse it) and after (which may replace its result).
    * *prepare*: chooses, before each model request, whether and how the
      tool is offered (see [tool][juno_bind_trio.agent.tool]).
    """

    name: str
    description: str | None
    parameters: dict[str, Any] = attrs.field(repr=False)
    serial: bool = False
    repeatable: bool = True
    uses_idempotency_key: bool = False
    _invoke: _Invoke = attrs.field(alias="invoke", repr=False)
    # The X of the function's RunContext[X] (checked against an agent's deps_type).
    _context_deps: object = attrs.field(default=None, init=False, repr=False)
    # #31: calls that wait for a person's decision, or that the host runs elsewhere.
    requires_approval: bool | ApprovalPredicate = attrs.field(default=False, repr=False)
    external: bool = False
    approval_timeout: float | None = None
    # Validates a call's parsed arguments into a JSON-compatible dict (None: as parsed).
    _validate: Callable[[dict[str, Any]], dict[str, Any]] | None = attrs.field(
        default=None, init=False, repr=False
    )
    # #32: checks before (may refuse) and after (may replace) each call; see _tool_guards.
    guards: tuple[ToolGuard, ...] = attrs.field(default=(), repr=False)
    # #33: what the model is shown of the tool at each step (None: always as it is).
    prepare: PrepareFn | None = attrs.field(
        default=None,
        repr=False,
        validator=lambda _t, _a, value: check_prepare("Tool", "prepare", value),
    )

    async def invoke(self, ctx: RunContext[Any], arguments: str | ToolCall) -> object:
        """Validate the call's arguments, then run the tool with them.

        *arguments* is the [ToolCall][juno_bind_trio.run.ToolCall] (its
        arguments parsed once, for every reader of the call) or the model's
        raw JSON text, read under the same rule (``""`` and ``"null"`` are
        ``{}``; anything but a JSON object is refused). Returns what the tool
        returned. Arguments that do not validate raise
        [ToolFailureError][juno_bind_trio.ToolFailureError] of kind
        ``"validation"`` naming every bad field, and the tool is not run.
        """
        return await self._invoke(ctx, _parsed(self.name, arguments))

    def to_openai_tool(self, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """This tool as an OpenAI ``tools`` entry, with *parameters* (sanitized) if given."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = dict(self.parameters if parameters is None else parameters)
        return {"type": "function", "function": function}

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str | None,
        parameters: Mapping[str, Any],
        handler: Callable[[RunContext[Any], dict[str, Any]], Awaitable[object]],
        serial: bool = False,
        repeatable: bool | None = None,
        uses_idempotency_key: bool = False,
        requires_approval: bool | ApprovalPredicate = False,
        external: bool = False,
        approval_timeout: float | None = None,
        prepare: PrepareFn | None = None,
    ) -> Tool:
        """A tool whose argument schema comes from elsewhere (an MCP server, a config file).

        *handler* is ``async (ctx, arguments) -> result`` and gets the parsed
        arguments object; arguments that are not a JSON object are a
        ``"validation"`` failure and the handler is not called. The schema is
        checked here (a malformed one raises
        [SchemaError][juno_bind_trio.SchemaError] naming the pointer) but not
        enforced on each call: this package carries no JSON Schema validator.
        *requires_approval*, *external*, *approval_timeout*, *prepare*: as for
        [tool][juno_bind_trio.agent.tool].
        """
        owner = "Tool.from_schema"
        check_name(owner, name)
        approval, external, approval_timeout, repeatable = check_tool_options(
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
        if not isinstance(parameters, Mapping):
            raise TypeError(
                f"{owner}: parameters must be a JSON Schema mapping, got {parameters!r}"
            )
        if parameters.get("type", "object") != "object":
            raise ValueError(
                f"{owner}: parameters must describe an object (type 'object'), "
                f"got type {parameters.get('type')!r}"
            )
        try:
            detached: dict[str, Any] = json.loads(json.dumps(parameters, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{owner}: parameters must be JSON-serialisable ({exc})") from None
        try:
            sanitize_tool_schema(detached, dialect="openai")
        except SchemaError as exc:
            raise SchemaError(f"{owner}: tool {name!r}: {exc}", exc.pointer) from None
        given: object = handler
        if not callable(given) or not is_async_callable(given):
            raise TypeError(f"{owner}: handler must be an async function, got {handler!r}")

        async def invoke(ctx: RunContext[Any], arguments: dict[str, Any]) -> object:
            announce_start(ctx)
            # A copy of its own: the parsed arguments are shared by every reader of the call.
            return await handler(ctx, dict(arguments))

        return cls(
            name=name,
            description=description,
            parameters=detached,
            serial=serial,
            repeatable=repeatable,
            uses_idempotency_key=uses_idempotency_key,
            invoke=invoke,
            requires_approval=approval,
            external=external,
            approval_timeout=approval_timeout,
            prepare=prepare,
        )


def ExternalTool(  # a constructor by its use: ExternalTool(name, schema)
    name: str,
    parameters_schema: Mapping[str, Any],
    *,
    description: str | None = None,
    approval_timeout: float | None = None,
) -> Tool:
    """A tool the host runs elsewhere (a browser, a job queue, another service).

    ``ExternalTool("pick_date", {"type": "object", "properties": {...}},
    description="Ask the user for a date")`` is a [Tool][juno_bind_trio.agent.Tool]
    the model may call; a call of it never runs here: the run suspends with a
    [PendingToolCall][juno_bind_trio.agent.PendingToolCall] of kind
    ``"external"``, and the host answers it with ``results={id: value}`` (the
    value serialized as JSON, as a local tool's return value is) or
    ``errors={id: text}`` (a failure of kind ``"external"``).
    """

    async def never(ctx: RunContext[Any], arguments: dict[str, Any]) -> object:
        raise UsageError(
            f"ExternalTool {name!r}: an external tool is run by the host, never here; "
            "answer its call with results= or errors="
        )

    try:
        return Tool.from_schema(
            name=name,
            description=description,
            parameters=parameters_schema,
            handler=never,
            external=True,
            approval_timeout=approval_timeout,
        )
    except (TypeError, ValueError) as exc:
        text = str(exc).replace("Tool.from_schema", "ExternalTool", 1)
        raise type(exc)(text) from None


@typing.runtime_checkable
class Toolset(Protocol):
    """A group of tools known only at run time (an MCP server's): read at the start of each run."""

    @property
    def tools(self) -> Sequence[Tool]: ...


def _checkable(wanted: object) -> type | None:
    """The class a tool's ``RunContext[X]`` asks for, when that is a class to check."""
    if wanted is None or wanted is Any or wanted is object or wanted is type(None):
        return None
    if not isinstance(wanted, type):
        return None  # a generic alias, a union, a type variable: not checked
    return wanted


def check_tool_deps(owner: str, tools: Iterable[Tool], deps_type: object) -> None:
    """Refuse a tool whose ``RunContext[X]`` the agent's *deps_type* cannot give.

    A tool that reads ``ctx.deps.db`` on an agent built without a ``deps_type``
    would fail at its first call, with an ``AttributeError`` the model reads;
    found here, it is a ``TypeError`` naming the tool and the fix. Only plain
    classes are compared (a union, a generic alias or a protocol is not).
    """
    for each in tools:
        wanted = _checkable(each._context_deps)
        if wanted is None:
            continue
        name = wanted.__name__
        if deps_type is type(None):
            raise TypeError(
                f"{owner}: tool {each.name!r} takes RunContext[{name}], but the agent has no "
                f"deps_type; build it with Agent(..., deps_type={name}) and pass "
                f"deps={name}(...) to each run"
            )
        if not isinstance(deps_type, type):
            continue
        try:
            gives = issubclass(deps_type, wanted)
        except TypeError:  # a protocol issubclass cannot answer: not checked
            continue
        if not gives:
            raise TypeError(
                f"{owner}: tool {each.name!r} takes RunContext[{name}], but the agent's "
                f"deps_type is {deps_type.__name__}; make them agree (the tool's "
                f"RunContext[{deps_type.__name__}], or Agent(..., deps_type={name}))"
            )


def check_deps_value(owner: str, tools: Iterable[Tool], deps: object) -> None:
    """At a run's start: every tool's ``RunContext[X]`` gets an ``X`` (toolsets' tools included)."""
    for each in tools:
        wanted = _checkable(each._context_deps)
        if wanted is None:
            continue
        try:
            ok = isinstance(deps, wanted)
        except TypeError:
            continue
        if not ok:
            raise UsageError(
                f"{owner}: tool {each.name!r} takes RunContext[{wanted.__name__}], but the run's "
                f"deps is {deps!r}; pass deps={wanted.__name__}(...) (and give the agent "
                f"deps_type={wanted.__name__})"
            )


def run_tools(settings: Any, deps: object) -> tuple[Mapping[str, Tool], tuple[dict[str, Any], ...]]:
    """An agent's tools for one run (its ``RunSettings``), and their request entries: the
    static ones, or, with toolsets, every tool read now (its handoffs' tools included)."""
    given: tuple[Tool | Toolset, ...] = settings.tools
    if all(isinstance(t, Tool) for t in given):
        return settings.static_tools, settings.static_tool_dicts
    tools: dict[str, Tool] = {}
    for item in (*given, *(spec.tool for spec in settings.handoffs)):
        group: list[Tool] = [item] if isinstance(item, Tool) else list(item.tools)
        for each in group:
            if not isinstance(each, Tool):
                raise UsageError(f"Agent.run: a toolset's tools must be Tool objects, got {each!r}")
            if each.name in tools and tools[each.name] is not each:
                raise UsageError(
                    f"Agent.run: two tools are named {each.name!r} (a toolset's tools are "
                    "read at the start of each run); rename one"
                )
            tools[each.name] = each
    # A toolset's tools are known only now: their RunContext[X] checked against deps.
    check_deps_value("Agent.run", tools.values(), deps)
    return tools, tuple(settings.tool_dict(t) for t in tools.values())
