"""Handoffs: one agent giving the rest of its run to another.

A handoff is not a sub-agent call. The model of the agent in charge calls a
``transfer_to_<name>`` tool; the batch that call is in is answered as every
batch is (the other calls run; a second handoff in the same turn is refused
``not_run``: the first in call order wins), and the *same* run then goes on
under the target: its instructions become the system message, its tools and
output type are what the next turn offers and reads, its model answers. The
loop, the iteration count, the usage limits, the soft stop and the store stay
the run's: a handoff spends nothing a run does not already count.

Where the transfer is recorded is the transcript itself, so that nothing else
has to be kept in step with it: the handoff call's answer is a tool message
naming both agents (``{"transferred_to": …, "transferred_from": …}``). The
agent in charge of a transcript is the target of its last such answer; a run
resumed from a store reads it there and goes on under that agent, found by
name in the handoff graph of the agent resuming it. The switch itself (the
system message, the *input_filter*) is made when the target's first turn is
built, so a crash between the handoff's batch and that turn leaves a
transcript that says "switch pending" (no assistant message after the
answer), and the resumed run makes the switch then; once the target has
answered, its turn is after the marker, and the switch is not made twice.

*input_filter* rewrites the history the target inherits, the messages
before the handoff turn. The handoff turn (the assistant message with the
call and its answers) is always kept: it is the run's record of the transfer,
and dropping it would leave the target's tool calls' neighbours unanswered
or the transfer unrecorded.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import pydantic

from juno_bind_trio._errors import ToolFailureError
from juno_bind_trio._validate import shown

from ._tool import Tool, validation_message

if TYPE_CHECKING:
    from ._run import RunSettings

__all__ = [
    "Handoff",
    "HandoffInputFilter",
    "HandoffSpec",
    "HandoffTarget",
    "Transfer",
    "handoff_specs",
    "handoff_tool_name",
    "reachable",
]

HandoffInputFilter = Callable[[list[dict[str, Any]]], Sequence[Mapping[str, Any]]]
"""``(history) -> history``: what a handoff's target inherits of the messages before it."""

_NOT_NAME: Final = re.compile(r"[^a-zA-Z0-9_-]+")


def handoff_tool_name(agent_name: str) -> str:
    """``transfer_to_<agent name>``, the name squeezed into the function-name rule."""
    squeezed = _NOT_NAME.sub("_", agent_name).strip("_").lower() or "agent"
    return f"transfer_to_{squeezed}"[:64]


@final
@attrs.frozen(eq=False)
class Handoff:
    """A handoff target with its options: ``Agent(handoffs=[Handoff(billing, ...)])``.

    A bare agent in ``handoffs=`` is ``Handoff(agent)``.

    * *agent*: the [Agent][juno_bind_trio.agent.Agent] that takes over; it
      must have a ``name`` (the run's record of who is speaking, and how a
      resumed run finds it again).
    * *name*: the tool's name, ``transfer_to_<agent name>`` by default.
    * *description*: what the model reads to decide when to hand off
      (``"Hand the conversation to <name>."`` by default).
    * *input_type*: a type pydantic validates (a model, dataclass or
      TypedDict whose JSON schema is an object): the arguments the model
      must give with the call (``reason``, ``priority``, …), validated like a
      tool's; a call that does not validate is answered as a ``validation``
      failure and hands nothing off. ``None``: the call takes no arguments.
    * *input_filter*: ``(history) -> history``, a synchronous function given
      the messages before the handoff turn (without the system message); its
      return replaces them. For a target that should not see the earlier
      tool traffic, say. The handoff turn itself is always kept.
    """

    agent: Any
    name: str | None = attrs.field(default=None, kw_only=True)
    description: str | None = attrs.field(default=None, kw_only=True)
    input_type: Any = attrs.field(default=None, kw_only=True)
    input_filter: HandoffInputFilter | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        owner = "Handoff"
        target_name = getattr(self.agent, "name", None) if _is_agent(self.agent) else None
        if not _is_agent(self.agent):
            raise TypeError(f"{owner}: agent must be an Agent, got {shown(self.agent)}")
        if target_name is None:
            raise ValueError(
                f"{owner}: the target {self.agent!r} has no name; build it with "
                "Agent(..., name='billing'): the run records who speaks by name"
            )
        given: tuple[tuple[str, object], ...] = (
            ("name", self.name),
            ("description", self.description),
        )
        for label, value in given:
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{owner}: {label} must be a non-empty str or None, got {value!r}")
        if self.input_filter is not None and not callable(self.input_filter):
            raise TypeError(
                f"{owner}: input_filter must be a function (history) -> history, "
                f"got {self.input_filter!r}"
            )


class HandoffTarget(abc.ABC):  # noqa: B024  # a mark to register with, nothing to implement
    """What a handoff may hand a run to: an [Agent][juno_bind_trio.agent.Agent], the one class
    registered (``_agent.py``, ``HandoffTarget.register(Agent)``).

    The agent imports this module, so this module cannot import the agent to ask
    ``isinstance(value, Agent)``; the agent registers itself here instead, the way
    ``collections.abc`` is told of a class, and stays as it is (no base class added).
    """


def _is_agent(value: object) -> bool:
    return isinstance(value, HandoffTarget)


@attrs.frozen
class Transfer:
    """What a handoff tool's call returns to the run: the call was valid, hand off."""

    spec: HandoffSpec
    input: Any


@final
@attrs.frozen(kw_only=True, eq=False)
class HandoffSpec:
    """One handoff of an agent, checked: its tool, its target and its filter."""

    handoff: Handoff
    tool: Tool
    target: Any  # the Agent
    target_name: str
    input_filter: HandoffInputFilter | None

    def settings(self) -> RunSettings:
        """The target's settings now (an ``Agent.override`` block applies)."""
        settings: RunSettings = self.target._settings_now()
        return settings


def _schema_and_validator(
    owner: str, tool_name: str, input_type: Any
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], Any]]:
    if input_type is None:

        def nothing(_arguments: dict[str, Any]) -> Any:
            return None

        return {"type": "object", "properties": {}}, nothing
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(input_type)
        schema = adapter.json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise TypeError(
            f"{owner}: input_type {input_type!r} is not a type pydantic can validate ({exc})"
        ) from None
    if schema.get("type") != "object":
        raise TypeError(
            f"{owner}: input_type must describe a JSON object (a model, dataclass or "
            f"TypedDict), got {input_type!r}"
        )
    schema.pop("title", None)

    def validate(arguments: dict[str, Any]) -> Any:
        try:
            return adapter.validate_python(arguments)
        except pydantic.ValidationError as exc:
            raise ToolFailureError("validation", validation_message(tool_name, exc)) from None

    return schema, validate


def _spec(owner: str, given: object, index: int) -> HandoffSpec:
    handoff = given if isinstance(given, Handoff) else None
    if handoff is None:
        if not _is_agent(given):
            raise TypeError(
                f"{owner}: handoffs[{index}] must be an Agent or a Handoff, got {shown(given)}"
            )
        try:
            handoff = Handoff(agent=given)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{owner}: handoffs[{index}]: {exc}") from None
    target_name: str = handoff.agent.name
    tool_name = handoff.name or handoff_tool_name(target_name)
    description = handoff.description or f"Hand the conversation to {target_name}."
    schema, validate = _schema_and_validator(
        f"{owner}: handoffs[{index}]", tool_name, handoff.input_type
    )
    spec_cell: list[HandoffSpec] = []

    async def transfer(_ctx: Any, arguments: dict[str, Any]) -> object:
        return Transfer(spec_cell[0], validate(arguments))

    made = Tool.from_schema(
        name=tool_name, description=description, parameters=schema, handler=transfer
    )
    spec = HandoffSpec(
        handoff=handoff,
        tool=made,
        target=handoff.agent,
        target_name=target_name,
        input_filter=handoff.input_filter,
    )
    spec_cell.append(spec)
    return spec


def handoff_specs(
    owner: str, handoffs: Iterable[object], name: str | None
) -> tuple[HandoffSpec, ...]:
    """``Agent(handoffs=...)`` checked: each target named, tool names distinct, the graph
    reachable from here free of two agents sharing a name."""
    if isinstance(handoffs, str | bytes | Mapping) or not isinstance(handoffs, Iterable):
        raise TypeError(
            f"{owner}: handoffs must be a list of Agents or Handoffs, got {shown(handoffs)}"
        )
    specs = tuple(_spec(owner, given, index) for index, given in enumerate(handoffs))
    if specs and name is None:
        raise ValueError(
            f"{owner}: an agent with handoffs needs a name (Agent(..., name='triage')): "
            "the run records who speaks by name"
        )
    seen: dict[str, HandoffSpec] = {}
    for spec in specs:
        if spec.tool.name in seen:
            raise ValueError(
                f"{owner}: two handoffs are named {spec.tool.name!r}; give one Handoff(name=...)"
            )
        seen[spec.tool.name] = spec
    # Names identify agents across a crash: two different agents under one name
    # would resume a run under whichever was found first.
    agents: dict[str, Any] = {}
    for spec in specs:
        for each_name, each in reachable(spec.target):
            if each_name == name:
                continue  # a target's handoff back to an agent named like this one
            if agents.setdefault(each_name, each) is not each:
                raise ValueError(
                    f"{owner}: two different agents in the handoff graph are named "
                    f"{each_name!r}; give each its own name"
                )
    return specs


def reachable(start: Any) -> list[tuple[str, Any]]:
    """Every agent *start*'s handoffs reach (*start* first), with its name."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()
    todo = [start]
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        found.append((agent.name, agent))
        todo.extend(spec.target for spec in agent._settings.handoffs)
    return found
