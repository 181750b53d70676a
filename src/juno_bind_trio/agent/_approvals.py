"""Tool calls that wait for a person or for a host: approvals and external tools.

A tool may need a decision before it runs (``tool(fn, requires_approval=True)``,
or a predicate of the run's context and the call's validated arguments), or
may be run by the host somewhere else (``tool(fn, external=True)``,
[ExternalTool][juno_bind_trio.agent.ExternalTool]). When the model calls such
a tool, the *gate* here answers the call with a placeholder and a suspend
directive instead of running it: the rest of the batch runs, the loop ends
``"suspended"``, and the run's result lists each waiting call as a
[PendingToolCall][juno_bind_trio.agent.PendingToolCall]. Nothing waits in
memory.

The gate sits **outside** the receipts: a call waiting for a decision has no
receipt, so it provably never started; an approved call goes through the
receipt path like any other call (written ``started`` before it runs), so a
crash while it runs is answered ``interrupted`` on resume, never run twice.
A denial, an expiry, an external result or error is the gate's own answer,
recorded with the decision, and needs no receipt either.

Continuing: [Agent.resume][juno_bind_trio.agent.Agent.resume] with
``approvals=``, ``results=``, ``errors=`` (durable: the decisions are written
to the store first, then the run is claimed), or
[Agent.run][juno_bind_trio.agent.Agent.run] with ``message_history=`` and the
same keywords (in memory: the waiting calls are the placeholders at the end
of the history).
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, final

import attrs
import outcome

from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.plugins import (
    SuspendDirective,
    kind_for_error,
    tool_error_text,
    tool_failure_message,
)
from juno_bind_trio.run import ToolBatch, ToolCall

from ._approval_decisions import Decision, decision_message
from ._approval_placeholders import (
    held_outcome,
    pending_of,
    trailing_calls,
    trailing_indices,
    trailing_waiting,
    waiting_in,
    waiting_run,
)
from ._approval_types import PendingKind, PendingToolCall
from ._context import call_context

if TYPE_CHECKING:
    from juno_bind_trio.run import ToolCallLike

    from ._context import RunContext
    from ._tool import Tool

__all__ = [
    "ApprovalGate",
    "bind_gate",
    "check_continuation",
    "result_pending",
    "validated_arguments",
]


def _now() -> float:
    """The clock of a run in memory (wall-clock seconds): pending calls may wait days."""
    return time.time()


def _corrected_content(content: object, arguments: dict[str, Any]) -> str:
    # The model asked with other arguments: its answer says which ones ran.
    result: object = content
    if isinstance(content, str):
        try:
            result = json.loads(content)
        except ValueError:
            result = content
    return json.dumps(
        {
            "result": result,
            "arguments_corrected_to": arguments,
            "note": "the person approving this call changed its arguments before it ran",
        }
    )


# --- the gate ----------------------------------------------------------------------------


def validated_arguments(found: Tool, parsed: dict[str, Any]) -> dict[str, Any]:
    """*parsed* validated by *found*'s schema, as a JSON-compatible ``dict``.

    :raises ToolFailureError: of kind ``"validation"``.
    """
    check = found._validate
    if check is None:
        return dict(parsed)
    return check(parsed)


@final
class ApprovalGate:
    """One run's gate: which calls wait, which were decided, and the answers for them.

    ``decisions``: this run's, by call id (given to the run, or read from the
    store). ``waiting``: the calls known to wait (placeholders at the end of a
    history, or the store's rows). ``held``: the calls this run left waiting,
    in the order it met them: the result's ``pending``.
    """

    __slots__ = (
        "_clock",
        "_context",
        "decisions",
        "expired",
        "held",
        "run_id",
        "tools",
        "waiting",
    )

    def __init__(self, decisions: Mapping[str, Decision] | None = None) -> None:
        self.decisions: dict[str, Decision] = dict(decisions or {})
        self.waiting: dict[str, PendingToolCall] = {}
        self.held: list[PendingToolCall] = []
        self.expired: list[PendingToolCall] = []
        self.tools: Mapping[str, Tool] = {}
        self.run_id: str | None = None  # named in the placeholders (see placeholder)
        self._clock: Callable[[], float] = _now
        self._context: Callable[[ToolCall], RunContext[Any]] | None = None

    def bind(
        self,
        tools: Mapping[str, Tool],
        context: Callable[[ToolCall], RunContext[Any]],
        clock: Callable[[], float] | None = None,
        *,
        run_id: str | None = None,
    ) -> None:
        """The run's tools, how it builds a call's context, its clock and its id."""
        self.tools = tools
        self.run_id = run_id
        self._context = context
        if clock is not None:
            self._clock = clock

    def set_clock(self, clock: Callable[[], float]) -> None:
        """The store's clock: expiries are in it."""
        self._clock = clock

    @property
    def active(self) -> bool:
        """Whether any tool of the run may wait, or any call already does."""
        return bool(self.waiting or self.decisions) or any(
            t.external or t.requires_approval is not False for t in self.tools.values()
        )

    def check_decisions(self, owner: str, waiting: Mapping[str, PendingToolCall]) -> None:
        """Refuse (``UsageError`` naming the id) a decision for a call that does not wait,
        or of the wrong sort; validate corrected arguments. Changes nothing."""
        for call_id, decision in self.decisions.items():
            call = waiting.get(call_id)
            if call is None:
                raise UsageError(
                    f"{owner}: no call {call_id!r} is waiting for a decision (unknown, or "
                    "already settled); the waiting calls are: "
                    + (", ".join(sorted(waiting)) or "none")
                )
            if call.kind == "approval" and decision.kind not in ("approved", "denied"):
                raise UsageError(
                    f"{owner}: call {call_id!r} ({call.name}) waits for an approval; "
                    "answer it with approvals=, not results= or errors="
                )
            if call.kind == "external" and decision.kind not in ("result", "error"):
                raise UsageError(
                    f"{owner}: call {call_id!r} ({call.name}) is run by the host; answer it "
                    "with results= or errors=, not approvals="
                )
            if decision.arguments is not None:
                found = self.tools.get(call.name)
                if found is None:
                    raise UsageError(f"{owner}: call {call_id!r}: no tool named {call.name!r}")
                try:
                    corrected = validated_arguments(found, decision.arguments)
                except ToolFailureError as exc:
                    raise ValueError(
                        f"{owner}: approvals[{call_id!r}]: the corrected arguments do not "
                        f"validate: {exc}"
                    ) from None
                self.decisions[call_id] = attrs.evolve(decision, arguments=corrected)

    def adopt(self, calls: Sequence[PendingToolCall], decided: Mapping[str, Decision]) -> None:
        """Calls known to wait, and decisions recorded for them (a store's rows)."""
        for call in calls:
            self.waiting[call.id] = call
        for call_id, decision in decided.items():
            self.decisions.setdefault(call_id, decision)

    def forget_turn(self) -> None:
        """The waiting turn is answered: its calls and decisions are done with.

        A later turn's call that happens to reuse an id (some models number
        their calls per turn) is a new call, and must not inherit a decision
        made for the old one."""
        self.waiting.clear()
        self.decisions.clear()

    async def check(self, given: ToolCallLike) -> ToolCallOutcome | None:
        """The gate's answer for *given*, or ``None``: dispatch it (with its receipt)."""
        call = ToolCall.of(given)
        call_id = call.id
        decision = self.decisions.get(call_id)
        if decision is not None:
            return (
                None
                if decision.kind == "approved"
                else ToolCallOutcome(tool_message=decision_message(decision, call_id))
            )
        known = self.waiting.get(call_id)
        if known is not None:
            if known.expires_at is not None and self._clock() >= known.expires_at:
                self.expired.append(known)
                expired = self.decisions[call_id] = Decision(
                    kind="expired", decided_at=known.expires_at
                )
                return ToolCallOutcome(tool_message=decision_message(expired, call_id))
            self.held.append(known)
            return held_outcome(known, self.run_id)
        found = self.tools.get(call.name)
        if found is None or (not found.external and found.requires_approval is False):
            return None
        try:
            arguments = validated_arguments(found, call.parsed)
        except Exception:
            return None  # the dispatch refuses it, as for any tool: the model fixes it
        kind: PendingKind = "external" if found.external else "approval"
        predicate = found.requires_approval
        if kind == "approval" and predicate is not True:
            assert callable(predicate)
            assert self._context is not None
            verdict: object = predicate(self._context(call), dict(arguments))
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if not isinstance(verdict, bool):
                raise UsageError(
                    f"tool {found.name!r}: requires_approval(ctx, arguments) must return a "
                    f"bool, got {verdict!r:.80}"
                )
            if not verdict:
                return None
        timeout = found.approval_timeout
        expires = None if timeout is None else self._clock() + timeout
        pending = PendingToolCall(call_id, call.name, arguments, kind, expires)
        self.held.append(pending)
        return held_outcome(pending, self.run_id)

    def outer(
        self, run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]
    ) -> Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]:
        """*run_tool_call* (with its receipts) behind the gate."""

        async def gated(call: ToolCallLike) -> ToolCallOutcome:
            answer = await self.check(call)
            if answer is not None:
                return answer
            return await run_tool_call(call)

        return gated

    def inner(
        self, dispatch: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]
    ) -> Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]:
        """*dispatch*, running an approved call with its corrected arguments (inside the
        receipt, which keeps the model's call: a resume recognises it)."""

        async def corrected(given: ToolCallLike) -> ToolCallOutcome:
            call = ToolCall.of(given)
            decision = self.decisions.get(call.id)
            if decision is None or decision.kind != "approved" or decision.arguments is None:
                return await dispatch(call)
            arguments = decision.arguments
            ran = await dispatch(ToolCall(call.id, call.name, json.dumps(arguments)))
            message = dict(ran.tool_message)
            message["content"] = _corrected_content(message.get("content"), arguments)
            return attrs.evolve(ran, tool_message=message)

        return corrected

    async def settle_trailing(
        self,
        messages: list[dict[str, Any]],
        dispatch: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]],
        *,
        per_tool_limit: int,
        end: int | None = None,
    ) -> bool:
        """Answer, in place, the waiting calls of the history's last turn (a run in memory).

        *end*: where the history ends in *messages* (a new prompt follows it): the
        waiting calls are the history's last, not the prompt's.

        Returns whether any still waits (the run ends ``"suspended"`` then).
        """
        history = messages if end is None else messages[:end]
        indices = sorted(trailing_indices(history))
        to_run: list[tuple[int, ToolCall]] = []
        calls = trailing_calls(history)
        for index in indices:
            held = waiting_in(messages[index])
            if held is None:
                continue
            call = calls.get(held.id) or ToolCall(held.id, held.name, json.dumps(held.arguments))
            answer = await self.check(call)
            if answer is None:
                to_run.append((index, call))
            else:
                messages[index] = answer.tool_message
        if to_run:
            batch: ToolBatch[ToolCallOutcome] = ToolBatch([call for _, call in to_run])
            results = await batch.run(self.inner(dispatch), per_tool_limit=per_tool_limit)
            for (index, call), result in zip(to_run, results, strict=True):
                messages[index] = _answer(call.id, result)
        if not self.held:
            self.forget_turn()
        return bool(self.held)


def _answer(call_id: str, result: outcome.Outcome[ToolCallOutcome]) -> dict[str, Any]:
    if isinstance(result, outcome.Value) and isinstance(result.value, ToolCallOutcome):
        return result.value.tool_message
    error = (
        result.error
        if isinstance(result, outcome.Error)
        else TypeError(f"run_tool_call must return a ToolCallOutcome, got {result!r}")
    )
    if isinstance(error, UsageError):
        raise error
    return tool_failure_message(call_id, tool_error_text(error), kind_for_error(error))


def check_continuation(
    gate: ApprovalGate,
    history: Sequence[Mapping[str, Any]],
    *,
    prompted: bool,
    stored: bool = False,
) -> None:
    """A run in memory continuing its history: the decisions name waiting calls, and a
    run without a new prompt has calls to continue.

    *stored*: the agent keeps its runs in a store, where the calls of a history
    that ends waiting belong to a stored run: that run is continued, by
    ``Agent.resume``, never a copy of it here (which would run an approved call
    with no receipt, and leave the stored run waiting for ever).
    """
    waiting = trailing_waiting(history)
    if stored and waiting:
        run_id = waiting_run(history)
        named = "RUN_ID" if run_id is None else repr(run_id)
        raise UsageError(
            "Agent.run: message_history ends with calls waiting for a decision ("
            + ", ".join(waiting)
            + ") and this agent keeps its runs in a store: continue the stored run "
            f"itself, with `await agent.resume({named}, approvals=..., results=..., "
            "errors=...)`; it runs each approved call once, under its receipt, and records "
            "how the run ends (a copy continued in memory would do neither)"
        )
    gate.check_decisions("Agent.run", waiting)
    gate.adopt(tuple(waiting.values()), {})
    # A history whose last turn's calls are answered (by a frontend that ran them, say)
    # needs no prompt either: the model is asked for what comes after the answers.
    answered = bool(history) and history[-1].get("role") == "tool"
    if not prompted and not waiting and not answered:
        raise UsageError(
            "Agent.run: a prompt is needed, unless message_history ends with calls waiting "
            "for a decision (AgentResult.pending) that this run continues, or with the "
            "answers to its last turn's calls"
        )
    undecided = [i for i in waiting if i not in gate.decisions]
    if prompted and undecided:
        raise UsageError(
            f"Agent.run: the history's calls {undecided} still wait for a decision; decide "
            "them (approvals=, results=, errors=) before sending a new prompt, or continue "
            "without one"
        )


def result_pending(
    gate: ApprovalGate, reason: str, suspensions: Sequence[SuspendDirective]
) -> tuple[PendingToolCall, ...]:
    """A result's ``pending``, in call order (the loop gathers a batch's directives so)."""
    if reason != "suspended":
        return ()
    return pending_of(suspensions) if suspensions else tuple(gate.held)


def bind_gate(core: Any) -> None:
    """Give a run's gate its tools and its calls' context; check an in-memory continuation.

    *core* is the run (``_run._RunCore``), read for its tools, deps and lineage.
    """
    # A call's RunContext before it runs: what an approval predicate reads.
    core.gate.bind(core.tools, functools.partial(call_context, core), run_id=core.run_id)
    # A run on a conversation is checked once its history is read (_run.with_history).
    if (core.settings.store is None or not core.resuming) and core.conversation is None:
        check_continuation(
            core.gate,
            core.state.messages[: core.new_start],
            prompted=core.prompted,
            stored=core.settings.store is not None,
        )
