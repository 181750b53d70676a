"""Tools chosen per step: ``tool(fn, prepare=...)`` and ``Agent(prepare_tools=...)``.

Before every model request of a run, each tool's *prepare* is asked what the
model should see of it this step (its definition, a changed copy, or ``None``
to hide it), then the agent's *prepare_tools* gets the whole list and returns
the list to offer. The failure this module prevents is a tool the model was
not shown being run anyway: the names offered at a step are the only names
a call of that step may run, and a call to any other is answered
``not_found``, as a call of a tool the agent never had would be. The check is
made on the way in, before approvals and receipts, so a hidden tool that would
need approval is never held for one either.

What comes back is checked, because a wiring mistake found here is found in
every run: a prepare returning something that is not a
[ToolDefinition][juno_bind_trio.agent.ToolDefinition], renaming a tool (the
call would name a tool the run cannot find), or a *prepare_tools* offering a
tool it was not given, or one twice, raises
[UsageError][juno_bind_trio.UsageError] naming the function, and no request is
made. A definition returned unchanged (equal to the one the agent built) is
sent as the agent built it; a changed one is rewritten into the agent's
schema dialect again.

Every prepare is handed fresh definitions at every step, their schemas copies
of the tool's own: a ``ToolDefinition`` is frozen, but its schema is a dict,
and a prepare that edits it in place (``del d.parameters_json_schema[...]``)
would otherwise edit the tool itself, and every later step would offer the
edited schema while believing it unchanged. An in-place edit is a change
like any other: it is sent this step and forgotten at the next.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from juno_bind_trio._errors import SchemaError, UsageError
from juno_bind_trio._json import json_copy
from juno_bind_trio._validate import error_kind, shown
from juno_bind_trio.schema import SchemaDialect, sanitize_tool_schema

if TYPE_CHECKING:
    from ._context import RunContext
    from ._tool import Tool

__all__ = [
    "PrepareFn",
    "PrepareToolsFn",
    "StepTools",
    "ToolDefinition",
    "check_prepare",
    "definition_of",
]


def _check_description(_self: Any, _field: Any, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"ToolDefinition: description must be a str or None, got {shown(value)}")


def _check_schema(_self: Any, _field: Any, value: Any) -> None:
    if not isinstance(value, dict):
        raise TypeError(
            f"ToolDefinition: parameters_json_schema must be a JSON Schema dict, got {shown(value)}"
        )


def _check_bool(_self: Any, _field: Any, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"ToolDefinition: strict must be a bool, got {shown(value)}")


def _check_name(_self: Any, _field: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise error_kind(value, str)(
            f"ToolDefinition: name must be a non-empty str, got {shown(value)}"
        )


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """What the model is shown of a tool at one step: what a *prepare* gets and returns.

    * *name*: the tool's name (a prepare may not change it: the model's call
      names the tool the run looks up).
    * *description*: what the model reads to decide when to call it.
    * *parameters_json_schema*: the JSON Schema of its arguments, before the
      agent rewrites it for the provider. Narrowing it (an ``enum`` of the
      values allowed this step) changes what the model is asked for; the
      tool still validates each call against its own signature.
    * *strict*: the tool is sent in OpenAI strict mode.

    Make a changed copy with [replace][juno_bind_trio.agent.ToolDefinition.replace].
    A prepare is handed a fresh one at every step (its schema a copy of the
    tool's own), so editing that schema in place changes only this step.
    """

    name: str = attrs.field(validator=_check_name)
    description: str | None = attrs.field(validator=_check_description)
    parameters_json_schema: dict[str, Any] = attrs.field(validator=_check_schema)
    strict: bool = attrs.field(default=False, validator=_check_bool)

    def replace(
        self,
        *,
        description: str | None = None,
        parameters_json_schema: Mapping[str, Any] | None = None,
        strict: bool | None = None,
    ) -> ToolDefinition:
        """A copy with the given fields changed (the name stays).

        ``description=None`` keeps the description; pass ``""`` to send none.
        """
        try:
            return ToolDefinition(
                name=self.name,
                description=self.description
                if description is None
                else (None if description == "" else description),
                parameters_json_schema=self.parameters_json_schema
                if parameters_json_schema is None
                else _as_dict(parameters_json_schema),
                strict=self.strict if strict is None else strict,
            )
        except TypeError as exc:
            raise TypeError(
                str(exc).replace("ToolDefinition:", "ToolDefinition.replace:", 1)
            ) from None


def _as_dict(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(
            "ToolDefinition.replace: parameters_json_schema must be a JSON Schema mapping, "
            f"got {shown(value)}"
        )
    return dict(value)


PrepareFn: TypeAlias = Callable[
    ["RunContext[Any]", ToolDefinition],
    "ToolDefinition | Awaitable[ToolDefinition | None] | None",
]
"""``(ctx, definition) -> definition | None``, sync or async: a tool's *prepare*."""

PrepareToolsFn: TypeAlias = Callable[
    ["RunContext[Any]", list[ToolDefinition]],
    "Sequence[ToolDefinition] | Awaitable[Sequence[ToolDefinition]]",
]
"""``(ctx, definitions) -> definitions``, sync or async: an agent's *prepare_tools*."""


def check_prepare(owner: str, name: str, value: object) -> None:
    """A *prepare* given where one is taken: a function or ``None``."""
    if value is not None and not callable(value):
        raise TypeError(
            f"{owner}: {name} must be a function (ctx, definition) -> definition | None, "
            f"sync or async, or None; got {shown(value)}"
        )


def definition_of(each: Tool, *, strict: bool) -> ToolDefinition:
    """The definition a tool is offered with unless a prepare changes it."""
    return ToolDefinition(
        name=each.name,
        description=each.description,
        parameters_json_schema=each.parameters,
        strict=strict,
    )


def _label(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _fresh(definition: ToolDefinition) -> ToolDefinition:
    """A copy of *definition* a prepare may edit, schema and all."""
    return attrs.evolve(
        definition, parameters_json_schema=json_copy(definition.parameters_json_schema)
    )


async def _called(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


@attrs.define(eq=False)
class StepTools:
    """One run's per-step choice of tools: what to offer at a step, and by what name to run.

    Built once per run from its tools; ``offer()`` is awaited before each
    model request.
    """

    tools: Mapping[str, Tool]
    tool_dicts: Mapping[str, dict[str, Any]]
    prepare_tools: PrepareToolsFn | None
    dialect: SchemaDialect
    definitions: dict[str, ToolDefinition] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        strict = self.dialect == "openai_strict"
        self.definitions = {
            name: definition_of(each, strict=strict) for name, each in self.tools.items()
        }

    async def offer(
        self, context: Callable[[str], RunContext[Any]]
    ) -> tuple[list[dict[str, Any]], dict[str, Tool]]:
        """The tool dicts to send this step and the tools a call of this step may run.

        *context* makes the step's [RunContext][juno_bind_trio.agent.RunContext]
        for a tool's name (``""`` for *prepare_tools*).
        """
        chosen: list[ToolDefinition] = []
        for name, each in self.tools.items():
            original = self.definitions[name]
            prepare = each.prepare
            if prepare is None:
                chosen.append(original)
                continue
            got = await _called(prepare, context(name), _fresh(original))
            if got is None:
                continue
            if not isinstance(got, ToolDefinition):
                raise UsageError(
                    f"Agent.run: tool {name!r}'s prepare {_label(prepare)} must return a "
                    f"ToolDefinition or None, got {shown(got)}"
                )
            if got.name != name:
                raise UsageError(
                    f"Agent.run: tool {name!r}'s prepare {_label(prepare)} renamed it to "
                    f"{got.name!r}; a prepare may change a tool's description and schema, "
                    "not its name"
                )
            chosen.append(self._same_or(got))
        whole = self.prepare_tools
        if whole is not None:
            given = {d.name for d in chosen}
            returned = await _called(whole, context(""), [_fresh(d) for d in chosen])
            if isinstance(returned, str | bytes | Mapping) or not isinstance(returned, Sequence):
                raise UsageError(
                    f"Agent.run: prepare_tools {_label(whole)} must return a list of "
                    f"ToolDefinitions, got {shown(returned)}"
                )
            seen: set[str] = set()
            for index, got in enumerate(returned):
                if not isinstance(got, ToolDefinition):
                    raise UsageError(
                        f"Agent.run: prepare_tools {_label(whole)} returned {shown(got)} at "
                        f"[{index}], not a ToolDefinition"
                    )
                if got.name not in given:
                    raise UsageError(
                        f"Agent.run: prepare_tools {_label(whole)} offered {got.name!r}, which "
                        "it was not given (a tool hidden this step, or none of the agent's)"
                    )
                if got.name in seen:
                    raise UsageError(
                        f"Agent.run: prepare_tools {_label(whole)} offered {got.name!r} twice"
                    )
                seen.add(got.name)
            chosen = [self._same_or(got) for got in returned]
        return [self._tool_dict(d) for d in chosen], {d.name: self.tools[d.name] for d in chosen}

    def _same_or(self, definition: ToolDefinition) -> ToolDefinition:
        # The agent's own definition when *definition* equals it (its tool dict is
        # built already); else *definition*, to be rewritten for the dialect.
        original = self.definitions[definition.name]
        return original if definition == original else definition

    def _tool_dict(self, definition: ToolDefinition) -> dict[str, Any]:
        name = definition.name
        if definition is self.definitions[name]:
            return self.tool_dicts[name]
        dialect: SchemaDialect = self.dialect
        if definition.strict:
            dialect = "openai_strict"
        elif dialect == "openai_strict":
            dialect = "openai"
        try:
            schema = sanitize_tool_schema(definition.parameters_json_schema, dialect=dialect).schema
        except SchemaError as exc:
            raise UsageError(
                f"Agent.run: tool {name!r}'s definition this step cannot be expressed in the "
                f"{dialect!r} dialect at {exc.pointer or '(root)'}: {exc}"
            ) from None
        function: dict[str, Any] = {"name": name}
        if definition.description:
            function["description"] = definition.description
        function["parameters"] = schema
        if dialect == "openai_strict":
            function["strict"] = True
        return {"type": "function", "function": function}
