"""Tools from typed functions: the schema from the signature, validation before the call.

``@tool`` reads a function once, at decoration time, and turns it into a
[Tool][juno_bind_trio.agent.Tool]: a name, a description, the JSON schema of
its arguments and a compiled pydantic validator for them. Everything that can
be wrong with the function as a tool is found there, named, and refused with
a ``TypeError`` that says what to change: a parameter without a type, a type
pydantic cannot express, ``*args``, a ``RunContext`` that is not first. None
of those can be fixed by the model, so none of them may reach it.

What the model *can* fix reaches it: arguments that do not validate are
answered with a ``validation``-kind failure naming every bad field and why,
and the function is not called. The arguments are the call's own
[ToolCall.parsed][juno_bind_trio.run.ToolCall.parsed], parsed once under the
package's one rule for every reader of the call (the receipt key, the
idempotency key, this validation); pydantic's compiled core validates that
value.

``null`` for an optional parameter means "not given". OpenAI strict mode
requires every property, so a model in strict mode writes ``null`` for the
ones it means to leave out; when the first validation fails, the arguments
are read again with every such ``null`` removed (at any depth, guided by the
schema) before the failure is reported.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Final,
    Protocol,
    TypeVar,
    cast,
    final,
    get_args,
    get_origin,
    overload,
)

import anyio.from_thread
import anyio.to_thread
import attrs
import pydantic
import pydantic_core
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from juno_bind_trio._calls import ToolCall, parse_arguments
from juno_bind_trio._cancel import cancelled_now
from juno_bind_trio._errors import (
    AbortedToolCallError,
    SchemaError,
    ToolCallArgumentsError,
    ToolFailureError,
    UsageError,
)
from juno_bind_trio._validate import is_async_callable
from juno_bind_trio.schema import sanitize_tool_schema

from ._approvals import ApprovalPredicate, check_approval_options
from ._context import RunContext
from ._docstrings import parse_docstring
from ._prepare import PrepareFn, check_prepare

__all__ = [
    "Tool",
    "ToolFunction",
    "Toolset",
    "announce_start",
    "check_deps_value",
    "check_tool_deps",
    "tool",
    "validation_message",
]

F = TypeVar("F", bound=Callable[..., Any])

ToolFunction = Callable[..., Any]
"""What ``@tool`` accepts: async or sync, typed parameters, an optional ``RunContext`` first."""

# The function-name rule of OpenAI-compatible APIs (the same rule ToolDef checks).
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_SHOWN: Final = 60
# What a worker thread returns for a function it did not start (a cancel came first).
_NOT_BEGUN: Final = object()
# How deep unions nest inside unions in a schema before it is read as going no further.
_MAX_UNION_DEPTH: Final = 32


def _check_name(owner: str, name: object) -> str:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(
            f"{owner}: a tool name must be 1 to 64 letters, digits, '_' or '-' "
            f"(the function-name rule of OpenAI-compatible APIs), got {name!r}"
        )
    return name


def _check_flag(owner: str, name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be a bool, got {value!r}")
    return value


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


# --- null as "not given" ---------------------------------------------------------------


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and seen < 32:
        ref: str = schema["$ref"]
        if not ref.startswith("#/"):
            return schema
        node: Any = root
        for part in ref[2:].split("/"):
            if not isinstance(node, Mapping):
                return schema
            node = node.get(part.replace("~1", "/").replace("~0", "~"))
        schema = node
        seen += 1
    return schema


def _accepts_null(schema: Any, root: Mapping[str, Any], depth: int = 0) -> bool:
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        # Unions nest only as deep as the type that was written; a schema whose
        # union contains itself is read as refusing null past that.
        return depth < _MAX_UNION_DEPTH and any(
            _accepts_null(option, root, depth + 1) for option in options
        )
    return kind is None and not options and "enum" not in schema and "const" not in schema


def _object_schema(value: Any, schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema *value* (a dict or a list) is read against: a union's option of its shape."""
    for _ in range(_MAX_UNION_DEPTH):
        schema = _resolve(schema, root)
        if not isinstance(schema, Mapping):
            return None
        options = schema.get("anyOf") or schema.get("oneOf")
        if not isinstance(options, list):
            return schema
        wanted = "object" if isinstance(value, dict) else "array"
        for option in options:
            resolved = _resolve(option, root)
            if isinstance(resolved, Mapping) and resolved.get("type") == wanted:
                schema = resolved
                break
        else:
            return None
    return None


def _drop_absent_nulls(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """*value* without the ``null`` of every optional property whose schema refuses ``null``.

    Walked with a stack of its own, not by recursion: arguments nested as
    deep as the JSON parser reads (a recursive model a few hundred levels
    down) are read again here like any other, never a ``RecursionError``.
    The containers are copied; everything else is shared.
    """
    if not isinstance(value, dict | list):
        return value
    top: list[Any] = [None]
    # (a value to copy, its schema, the container to put the copy in, the key or index)
    stack: list[tuple[Any, Any, Any, Any]] = [(value, schema, top, 0)]
    while stack:
        item, sub, parent, slot = stack.pop()
        node = _object_schema(item, sub, root) if isinstance(item, dict | list) else None
        if isinstance(item, dict):
            properties = None if node is None else node.get("properties")
            if not isinstance(properties, Mapping):
                parent[slot] = item
                continue
            assert node is not None
            required = set(node.get("required") or ())
            cleaned: dict[str, Any] = {}
            parent[slot] = cleaned
            for key, entry in item.items():
                inner = properties.get(key)
                if inner is None:
                    cleaned[key] = entry
                elif entry is None and key not in required and not _accepts_null(inner, root):
                    continue
                elif isinstance(entry, dict | list):
                    cleaned[key] = None  # keeps the key order; filled from the stack
                    stack.append((entry, inner, cleaned, key))
                else:
                    cleaned[key] = entry
        elif isinstance(item, list):
            items = None if node is None else node.get("items")
            if not isinstance(items, Mapping):
                parent[slot] = item
                continue
            copied: list[Any] = list(item)
            parent[slot] = copied
            for index, entry in enumerate(item):
                if isinstance(entry, dict | list):
                    stack.append((entry, items, copied, index))
        else:  # pragma: no cover - only containers are pushed
            parent[slot] = item
    return top[0]


# --- reading a function ------------------------------------------------------------------


def _is_run_context(annotation: object) -> bool:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation is RunContext or get_origin(annotation) is RunContext


def _context_deps(annotation: object) -> object:
    """The ``X`` of a ``RunContext[X]`` annotation; ``None`` for a bare ``RunContext``."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    args = get_args(annotation)
    return args[0] if args else None


def _function_name(fn: object) -> str | None:
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    name = getattr(type(fn), "__name__", None)
    return name if isinstance(name, str) else None


def _has_described_field(annotation: object) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description for meta in get_args(annotation)[1:]
    )


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the titles pydantic derives from names: noise to a model, and repeated per call."""
    schema.pop("title", None)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for prop in properties.values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


@attrs.frozen
class _Signature:
    """What ``@tool`` learned from a function: names in call order and the argument model."""

    takes_context: bool
    context_deps: object  # the X of its RunContext[X], or None
    names: tuple[str, ...]
    model: type[pydantic.BaseModel]
    parameters: dict[str, Any]
    description: str | None


def _read_function(fn: Callable[..., Any], owner: str, description: str | None) -> _Signature:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{owner}: cannot read the signature of {fn!r} ({exc})") from None
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = getattr(target, "__call__", target)  # noqa: B004
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # NameError for an unresolvable forward reference, mostly
        raise TypeError(
            f"{owner}: cannot resolve the type hints of {fn!r} ({type(exc).__name__}: {exc}); "
            "every name a parameter's annotation uses must be importable where the function "
            "is defined"
        ) from None
    doc = parse_docstring(inspect.getdoc(target))
    fields: dict[str, Any] = {}
    names: list[str] = []
    takes_context = False
    context_deps: object = None
    for position, parameter in enumerate(signature.parameters.values()):
        annotation = hints.get(parameter.name, parameter.annotation)
        if _is_run_context(annotation):
            if position != 0:
                raise TypeError(
                    f"{owner}: parameter {parameter.name!r} is a RunContext but not the first "
                    "parameter; make it the first (it is injected, never sent by the model)"
                )
            takes_context = True
            context_deps = _context_deps(annotation)
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            star = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{owner}: parameter {star}{parameter.name} cannot be described to a model; "
                "name and type each argument the tool takes"
            )
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{owner}: parameter {parameter.name!r} is positional-only, and a model passes "
                "arguments by name; remove the '/' from the signature"
            )
        if annotation is inspect.Parameter.empty:
            raise TypeError(
                f"{owner}: parameter {parameter.name!r} has no type annotation; annotate it "
                "(the model is told the type, and the arguments are validated against it)"
            )
        default = (
            PydanticUndefined if parameter.default is inspect.Parameter.empty else parameter.default
        )
        text = doc.parameters.get(parameter.name)
        # Only a description we have: an explicit None would override the one an
        # Annotated[..., Field(description=...)] carries.
        if text is not None and not _has_described_field(annotation):
            info = pydantic.Field(default, alias=parameter.name, description=text)
        else:
            info = pydantic.Field(default, alias=parameter.name)
        fields[f"p{len(names)}"] = (annotation, info)
        names.append(parameter.name)
    model_name = _function_name(fn) or "tool"
    try:
        model = pydantic.create_model(
            f"{model_name}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        parameters = _clean_schema(model.model_json_schema())
    except (pydantic.PydanticUserError, pydantic.ValidationError, TypeError, ValueError) as exc:
        raise TypeError(_inexpressible(owner, fields, names, exc)) from None
    return _Signature(
        takes_context,
        context_deps,
        tuple(names),
        model,
        parameters,
        description or doc.description,
    )


def _inexpressible(owner: str, fields: dict[str, Any], names: list[str], exc: Exception) -> str:
    for (annotation, _info), name in zip(fields.values(), names, strict=True):
        try:
            pydantic.TypeAdapter(annotation).json_schema()
        except Exception as inner:  # any failure names the parameter; the reason follows
            return (
                f"{owner}: parameter {name!r} has type {annotation!r}, which pydantic cannot "
                f"express as JSON Schema ({type(inner).__name__}: {inner})"
            )
    return f"{owner}: the parameters cannot be expressed as JSON Schema ({exc})"


# --- the tool ------------------------------------------------------------------------------


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
        check_prepare(owner, "prepare", prepare)
        approval, external, approval_timeout, repeatable = check_approval_options(
            owner, requires_approval, external, approval_timeout, repeatable
        )
        _check_name(owner, name)
        if description is not None and not isinstance(description, str):
            raise TypeError(f"{owner}: description must be a str or None, got {description!r}")
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
        for flag, value in (
            ("serial", serial),
            ("repeatable", repeatable),
            ("uses_idempotency_key", uses_idempotency_key),
        ):
            _check_flag(owner, flag, value)

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
    prepare: object = None,
) -> Tool:
    if not callable(fn):
        raise TypeError(f"tool: expected a function, got {fn!r}")
    if isinstance(fn, Tool):
        raise TypeError(f"tool: {fn.name!r} is already a Tool")
    tool_name = _function_name(fn) if name is None else name
    owner = f"tool {tool_name!r}" if isinstance(tool_name, str) else "tool"
    _check_name(owner, tool_name)
    assert tool_name is not None
    if description is not None and not isinstance(description, str):
        raise TypeError(f"{owner}: description must be a str or None, got {description!r}")
    approval, waits_outside, approval_timeout, repeatable = check_approval_options(
        owner, requires_approval, external, approval_timeout, repeatable
    )
    for flag, value in (
        ("serial", serial),
        ("repeatable", repeatable),
        ("uses_idempotency_key", uses_idempotency_key),
    ):
        _check_flag(owner, flag, value)
    check_prepare(owner, "prepare", prepare)
    read = _read_function(fn, owner, description)
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
                    _drop_absent_nulls(parsed, schema, schema)
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
    if fn is None:

        def decorate(function: ToolFunction) -> Tool:
            return _function_tool(
                function,
                name=name,
                description=description,
                serial=serial,
                repeatable=repeatable,
                uses_idempotency_key=uses_idempotency_key,
                requires_approval=requires_approval,
                external=external,
                approval_timeout=approval_timeout,
                prepare=prepare,
            )

        return decorate
    return _function_tool(
        fn,
        name=name,
        description=description,
        serial=serial,
        repeatable=repeatable,
        uses_idempotency_key=uses_idempotency_key,
        requires_approval=requires_approval,
        external=external,
        approval_timeout=approval_timeout,
        prepare=prepare,
    )


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
