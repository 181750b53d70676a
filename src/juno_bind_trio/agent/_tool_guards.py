"""Tool guardrails: a check before a call that may refuse it, and one after that may replace it.

The check before a call has to come before anything the call leaves behind.
With a store, a call's receipt is written before the call runs (a resume
reads it to know the call began), so a refusal decided inside the receipts
would leave a receipt for a call that never ran. The ``before`` checks
therefore wrap the run's tool port from outside its receipts (and outside
the approval gate: a call refused outright waits for nobody's approval).
They see the arguments validated by the tool's schema, as the tool would; a
call whose arguments do not validate is left to the tool, which refuses it
for the model to correct. A refusal is the model's to read: a failure of
kind ``"authz"`` with the guard's message; the tool never starts.

The ``after`` checks run inside the call, once the tool returned and before
its value becomes the tool message, so the receipt records what the model
reads.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, final

import anyio.to_thread

from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio._validate import is_async_callable, shown
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.plugins import tool_error_text, tool_failure_message
from juno_bind_trio.run import ToolCall, tool_call_name

from ._approvals import validated_arguments
from ._context import RunContext, call_context
from ._tool_report import tool_failed
from ._verdict import GuardrailResult

if TYPE_CHECKING:
    from juno_bind_trio.run import ToolCallLike

    from ._run import _RunCore
    from ._tool import Tool

__all__ = [
    "OpenTurnGuards",
    "ToolGuard",
    "after_guards",
    "check_tool_guards",
    "has_after_guards",
    "not_offered",
    "open_turn_guards",
    "refusing_calls",
]


def _function(owner: str, what: str, value: object) -> Callable[..., Any] | None:
    if value is None:
        return None
    if not callable(value):
        raise TypeError(
            f"{owner}: {what} must be a function of (ctx, {what}) or None, got {shown(value)}"
        )
    return value


@final
class ToolGuard:
    """A check around a tool's calls: ``tool(fn, guards=[...])`` or ``Agent(tool_guards=[...])``.

    ```python
    def no_deletes_in_prod(ctx: RunContext[Env], arguments: dict) -> GuardrailResult:
        return GuardrailResult(
            tripwire=ctx.deps.prod and arguments["action"] == "delete",
            message="deleting is not allowed in production",
        )

    shell = tool(run_command, guards=[ToolGuard(before=no_deletes_in_prod)])
    ```

    * *before*: ``(ctx, arguments) -> GuardrailResult``, called with the
      call's [RunContext][juno_bind_trio.agent.RunContext] and its arguments
      validated by the tool's schema (a JSON-compatible dict), before the
      call starts. A trip refuses the call: the model reads a failure of kind
      ``"authz"`` with the result's *message*, the tool never starts, and
      (with a store) no receipt of the call is written.
    * *after*: ``(ctx, result) -> replacement``, called with what the tool
      returned, before the model reads it: return a new value to replace it,
      or ``None`` to keep it.
    * *name*: for messages (default: the *before* or *after* function's name).

    Either may be ``async``; a synchronous one runs in a worker thread. An
    agent's guards come before a tool's own. A guard that raises fails the
    call as a tool failure would (the model reads it).
    """

    __slots__ = ("after", "before", "name")

    def __init__(
        self,
        before: Callable[..., Any] | None = None,
        after: Callable[..., Any] | None = None,
        name: str | None = None,
    ) -> None:
        owner = "ToolGuard"
        self.before: Callable[..., Any] | None = _function(owner, "before", before)
        self.after: Callable[..., Any] | None = _function(owner, "after", after)
        if before is None and after is None:
            raise ValueError(f"{owner}: give before=, after= or both")
        if name is None:
            first = before if before is not None else after
            name = getattr(first, "__name__", None) or type(first).__name__
        if not isinstance(name, str) or not name:
            raise TypeError(f"{owner}: name must be a non-empty str or None, got {shown(name)}")
        self.name: str = name

    def __repr__(self) -> str:
        return f"<ToolGuard {self.name!r}>"


def check_tool_guards(owner: str, given: object) -> tuple[ToolGuard, ...]:
    """``guards=`` / ``tool_guards=``: ToolGuard objects, in order."""
    if given is None:
        return ()
    if isinstance(given, str | bytes | ToolGuard) or not isinstance(given, Iterable):
        raise TypeError(f"{owner}: guards must be a list of ToolGuard objects, got {shown(given)}")
    guards = tuple(given)
    for index, each in enumerate(guards):
        if not isinstance(each, ToolGuard):
            raise TypeError(
                f"{owner}: guards[{index}] must be a ToolGuard(before=..., after=...), "
                f"got {shown(each)}"
            )
    return guards


async def _call(function: Callable[..., Any], ctx: RunContext[Any], value: object) -> Any:
    if is_async_callable(function):
        return await function(ctx, value)
    return await anyio.to_thread.run_sync(functools.partial(function, ctx, value))


def _guards_of(core: _RunCore[Any], found: Tool | None) -> tuple[ToolGuard, ...]:
    # The agent in charge's guards (a handoff's target's, once it took over).
    own: tuple[ToolGuard, ...] = () if found is None else found.guards
    agents: tuple[ToolGuard, ...] = core.agent.tool_guards
    return (*agents, *own) if agents else own


def _any_guards(core: _RunCore[Any]) -> bool:
    """Whether a call of this run may meet a guard: with handoffs, any agent the run can be
    handed to may bring its own (agent-level or on its tools), so the port is always wrapped."""
    if core.handover is not None:
        return True
    return bool(core.settings.tool_guards) or any(t.guards for t in core.tools.values())


async def _refusal(core: _RunCore[Any], call: ToolCall) -> ToolFailureError | None:
    """The ``before`` guards' refusal of *call* (kind ``authz``, reported), or ``None``."""
    found = core.tools.get(call.name)
    befores = [g for g in _guards_of(core, found) if g.before is not None]
    if found is None or not befores:
        return None
    try:
        arguments = validated_arguments(found, call.parsed)
    except Exception:
        return None  # the tool refuses it, for the model to fix
    ctx = call_context(core, call)
    for guard in befores:
        assert guard.before is not None
        verdict = await _call(guard.before, ctx, dict(arguments))
        if not isinstance(verdict, GuardrailResult):
            raise UsageError(
                f"the tool guard {guard.name!r} returned {shown(verdict)} for a call of "
                f"{call.name!r}; before= returns GuardrailResult(tripwire=...)"
            )
        if verdict.tripwire:
            said = verdict.message or f"the {guard.name} check refused this call"
            error = ToolFailureError("authz", said)
            if core.emit is not None:
                core.emit(tool_failed(core.iteration, call.id, call.name, error, "authz"))
            return error
    return None


def refusing_calls(
    core: _RunCore[Any],
    run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]],
    *,
    screened: OpenTurnGuards | None = None,
) -> Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]:
    """*run_tool_call* (with its receipts) behind the ``before`` guards of the call's tool;
    *run_tool_call* itself when no tool of the run has one. A call *screened* let through
    already (a resumed open turn's, checked before its receipt) is not checked twice."""
    if not _any_guards(core):
        return run_tool_call

    async def guarded(given: ToolCallLike) -> ToolCallOutcome:
        call = ToolCall.of(given)
        if screened is None or call.id not in screened.passed:
            error = await _refusal(core, call)
            if error is not None:
                raise error
        return await run_tool_call(call)

    return guarded


def not_offered(core: _RunCore[Any], given: ToolCallLike) -> ToolFailureError | None:
    """The ``not_found`` failure (reported) of a call to a tool its step did not offer, or
    ``None`` when the tool was offered (or every tool is, with no per-step tools)."""
    offered = core.offered
    if core.step_tools is None or offered is None:
        return None
    name = tool_call_name(given)
    if name in offered or name in core.agent.output.tool_names:
        return None
    error = ToolFailureError(
        "not_found",
        f"there is no tool named {name!r} at this step; the tools are: "
        + (", ".join(sorted(offered)) or "none"),
    )
    if core.emit is not None:
        call = ToolCall.of(given)
        core.emit(tool_failed(core.iteration, call.id, name, error, "not_found"))
    return error


@final
class OpenTurnGuards:
    """The ``before`` guards of a resumed run's open turn, checked before any receipt.

    A resume dispatches the open turn's never-started calls through the
    store, which writes each one's receipt before it runs: a refusal decided
    in the tool port would leave a ``"failed"`` receipt for a call that never
    began. So the store's session shows each such call to ``screen`` first
    (before the approval gate, as in the loop); a refusal answers the call
    there, with no receipt, and the calls let through are remembered so that
    the port does not ask the guards again.
    """

    __slots__ = ("_core", "passed")

    def __init__(self, core: _RunCore[Any]) -> None:
        self._core = core
        self.passed: set[str] = set()

    async def screen(self, given: ToolCallLike) -> ToolCallOutcome | None:
        """The answer for *given* when it never starts: a tool its step did not offer
        (kind ``not_found``) or a guard's refusal (kind ``authz``); else ``None``,
        dispatch it."""
        core = self._core
        call = ToolCall.of(given)
        missing = not_offered(core, call)
        if missing is not None:
            text = tool_error_text(missing)
            return ToolCallOutcome(tool_message=tool_failure_message(call.id, text, "not_found"))
        error = await _refusal(core, call)
        if error is None:
            self.passed.add(call.id)
            return None
        text = tool_error_text(error)
        return ToolCallOutcome(tool_message=tool_failure_message(call.id, text, "authz"))


def open_turn_guards(core: _RunCore[Any]) -> OpenTurnGuards | None:
    """The screen a store session shows a resumed open turn's calls, when any may meet a
    ``before`` guard."""
    return OpenTurnGuards(core) if _any_guards(core) or core.step_tools is not None else None


async def after_guards(
    core: _RunCore[Any], ctx: RunContext[Any], found: Tool, value: object
) -> object:
    """*value* (what the tool returned) as the ``after`` guards of its tool leave it."""
    for guard in _guards_of(core, found):
        if guard.after is not None:
            replaced = await _call(guard.after, ctx, value)
            if replaced is not None:
                value = replaced
    return value


def has_after_guards(core: _RunCore[Any], found: Tool) -> bool:
    """Whether a call of *found* passes through any ``after`` guard."""
    return any(g.after is not None for g in _guards_of(core, found))
