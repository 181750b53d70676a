"""What each step of a run offers and sends: its tools collected and chosen, its history shaped.

A run's tools are read once, at its start (a toolset's included); then,
before every model request, the step's tools are chosen (each tool's
*prepare*, the agent's *prepare_tools*: ``_prepare``) and its history is
shaped (the agent's *history_processors*: ``_processors``). The run's
``call_model`` port calls ``shape_turn()``; the tool calls of a step go
through ``offered_only()``, so a tool the step did not offer never runs.
A run with neither prepares nor processors pays for none of it: the run
builds no ``StepTools`` and its ``call_model`` skips the shaping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio.run import ToolCall, tool_call_name

from ._context import RunContext
from ._prepare import StepTools
from ._processors import run_processors
from ._tool import Tool, check_deps_value
from ._tool_report import tool_failed

if TYPE_CHECKING:
    from juno_bind_trio.loop import ModelTurn, ToolCallOutcome
    from juno_bind_trio.run import ToolCallLike

    from ._run import _RunCore

__all__ = ["collect_tools", "offered_only", "shape_turn", "step_context", "step_tools"]

_Port = Callable[["ToolCallLike"], Awaitable["ToolCallOutcome"]]


def collect_tools(core: _RunCore[Any]) -> None:
    """Read the run's tools, a toolset's at this run's start, into *core*."""
    settings = core.settings
    if all(isinstance(t, Tool) for t in settings.tools):
        return
    tools: dict[str, Tool] = {}
    for item in settings.tools:
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
    check_deps_value("Agent.run", tools.values(), core.deps)
    core.tools = tools
    core.tool_dicts = tuple(settings.tool_dict(t) for t in tools.values())


def step_tools(core: _RunCore[Any]) -> StepTools | None:
    """The run's per-step choice of tools, or ``None`` when nothing chooses them."""
    settings = core.settings
    tools = core.tools
    if settings.prepare_tools is None and all(t.prepare is None for t in tools.values()):
        return None
    return StepTools(
        tools,
        dict(zip(tools, core.tool_dicts, strict=True)),
        settings.prepare_tools,
        settings.dialect,
    )


def step_context(core: _RunCore[Any], iteration: int) -> Callable[[str], RunContext[Any]]:
    """A step's context maker: the run's, at no tool call (a prepare's tool name, or ``""``)."""

    def context(tool_name: str) -> RunContext[Any]:
        return RunContext(
            deps=core.deps,
            run_id=core.run_id,
            tool_call_id="",
            tool_name=tool_name,
            iteration=iteration,
            chain=core.chain,
            children=core.children,
        )

    return context


def offered_only(core: _RunCore[Any], inner: _Port) -> _Port:
    """*inner*, for the calls of tools offered at their step; the rest are not found."""

    async def run_tool_call(given: ToolCallLike) -> ToolCallOutcome:
        offered = core.offered
        name = tool_call_name(given)
        if offered is None or name in offered or name in core.settings.output.tool_names:
            return await inner(given)
        error = ToolFailureError(
            "not_found",
            f"there is no tool named {name!r} at this step; the tools are: "
            + (", ".join(sorted(offered)) or "none"),
        )
        if core.emit is not None:
            call = ToolCall.of(given)
            core.emit(tool_failed(core.iteration, call.id, name, error, "not_found"))
        raise error

    return run_tool_call


async def shape_turn(core: _RunCore[Any], turn: ModelTurn) -> ModelTurn:
    """The turn as this step sends it: its tools chosen, its history processed."""
    context = step_context(core, turn.iteration)
    step = core.step_tools
    if step is not None:
        dicts, core.offered = await step.offer(context)
        answer = core.settings.output.tool_definitions
        turn = turn.with_tools([*dicts, *answer] if answer else dicts)
    processors = core.settings.history_processors
    if processors is not None:
        sent = await run_processors(processors, turn.messages, lambda: context(""))
        turn = turn.with_messages(sent)
    return turn
