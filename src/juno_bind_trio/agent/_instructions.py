"""The system message a run starts under: the instructions of the agent in charge, computed once.

An agent's ``instructions`` is a string, a sync function of the run's deps,
or an async function of its [RunContext][juno_bind_trio.agent.RunContext].
A plain agent's sync function is called when the run is made (a mistake in
it is raised where the run is asked for); an async one is awaited when the
run starts. An agent with handoffs waits until the run starts too: a history
it continues (``message_history=``, a conversation's) may be in the hands of
one of its targets, and then only the target's instructions are computed,
never the starting agent's for nothing. A resumed run computes none: its
stored system message stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._context import run_context

if TYPE_CHECKING:
    from ._run import RunSettings, _RunCore

__all__ = ["at_construction", "head_with", "take_instructions"]


def at_construction(settings: RunSettings, deps: object) -> str | None:
    """The instructions computed when the run is made: a plain agent's string or sync
    function's text; ``None`` when there are none, or they wait for the run's start."""
    instructions = settings.instructions
    if settings.instructions_awaited or settings.handoffs:
        return None  # take_instructions, when the run starts
    if callable(instructions):
        instructions = instructions(deps)
        if not isinstance(instructions, str):
            raise TypeError(f"Agent: instructions(deps) must return a str, got {instructions!r}")
    return instructions


def head_with(messages: list[dict[str, Any]], text: str) -> bool:
    """Put *text* at the head of *messages* as the system message, unless it is there
    already; whether it was put there."""
    if messages and messages[0].get("role") == "system" and messages[0].get("content") == text:
        return False
    messages.insert(0, {"role": "system", "content": text})
    return True


async def take_instructions(core: _RunCore[Any], history: Sequence[Mapping[str, Any]]) -> None:
    """The instructions at the head of *core*'s transcript: those of the agent in charge
    of *history* (the run's own agent unless the history records a handoff).

    Before the first request, and before a durable run is first stored.
    """
    settings = core.settings
    handover = core.handover
    if handover is not None:
        settings = handover.in_charge_of(history)
    if settings is not core.settings:
        assert handover is not None
        text = await handover.instructions_of(settings)
    elif settings.instructions_awaited:
        # The run's own context, at no tool call yet (empty call id and name, iteration 0).
        function = settings.instructions
        assert callable(function)
        text = await function(run_context(core, 0))
        if not isinstance(text, str):
            raise TypeError(f"Agent: instructions(ctx) must return a str, got {text!r}")
    elif callable(settings.instructions):
        text = settings.instructions(core.deps)
        if not isinstance(text, str):
            raise TypeError(f"Agent: instructions(deps) must return a str, got {text!r}")
    else:
        text = settings.instructions
    if text is None:
        return
    if head_with(core.state.messages, text):
        core.new_start += 1
    core.instructions_text = text
