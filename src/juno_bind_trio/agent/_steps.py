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

from ._context import RunContext
from ._prepare import StepTools
from ._processors import run_processors
from ._tool import run_tools
from ._tool_guards import not_offered

if TYPE_CHECKING:
    from juno_bind_trio.loop import ModelTurn, ToolCallOutcome
    from juno_bind_trio.run import ToolCallLike

    from ._run import _RunCore

__all__ = [
    "collect_tools",
    "offered_only",
    "open_turn_port",
    "shape_turn",
    "step_context",
    "step_tools",
]

_Port = Callable[["ToolCallLike"], Awaitable["ToolCallOutcome"]]


def collect_tools(core: _RunCore[Any]) -> None:
    """Read the run's tools, a toolset's at this run's start (its handoffs' too), into *core*."""
    core.tools, core.tool_dicts = run_tools(core.settings, core.deps)


def step_tools(core: _RunCore[Any]) -> StepTools | None:
    """The per-step choice of the tools of the agent in charge (a handoff's target, after
    one), or ``None`` when nothing chooses them."""
    settings = core.agent
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
    if core.step_tools is None:
        return inner

    async def run_tool_call(given: ToolCallLike) -> ToolCallOutcome:
        error = not_offered(core, given)
        if error is not None:
            raise error
        return await inner(given)

    return run_tool_call


async def open_turn_port(core: _RunCore[Any], inner: _Port, iteration: int) -> _Port:
    """*inner* for the calls of a turn left open (a resume): only what its step offered runs."""
    step = core.step_tools
    if step is None:
        return inner
    _, core.offered = await step.offer(step_context(core, iteration))
    return offered_only(core, inner)


async def shape_turn(core: _RunCore[Any], turn: ModelTurn) -> ModelTurn:
    """The turn as this step sends it: its tools chosen, its history processed."""
    context = step_context(core, turn.iteration)
    step = core.step_tools
    if step is not None:
        dicts, core.offered = await step.offer(context)
        answer = core.agent.output.tool_definitions
        turn = turn.with_tools([*dicts, *answer] if answer else dicts)
    processors = core.agent.history_processors
    if processors is not None:
        sent = await run_processors(processors, turn.messages, lambda: context(""))
        turn = turn.with_messages(sent)
    return turn
