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
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import outcome
import pydantic_core

from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio._pending import CallDecision
from juno_bind_trio._validate import error_kind
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.plugins import (
    SuspendDirective,
    kind_for_error,
    tool_error_text,
    tool_failure_message,
)
from juno_bind_trio.run import ToolBatch, ToolCall, tool_message

from ._approval_types import (
    ApprovalPredicate,
    Approve,
    Deny,
    PendingKind,
    PendingToolCall,
    check_approval_options,
)

if TYPE_CHECKING:
    from juno_bind_trio.run import ToolCallLike

    from ._context import RunContext
    from ._tool import Tool

__all__ = [
    "APPROVAL_DENIED_MESSAGE",
    "APPROVAL_TIMED_OUT_MESSAGE",
    "ApprovalGate",
    "ApprovalPredicate",
    "Approve",
    "Decision",
    "Deny",
    "ExternalTool",
    "PendingKind",
    "PendingToolCall",
    "check_approval_options",
    "decision_message",
    "read_decisions",
]


APPROVAL_DENIED_MESSAGE: Final = "The call was denied by the person reviewing it, and was not run"
"""What a denied call's answer says before the reason (``kind: "authz"``)."""

APPROVAL_TIMED_OUT_MESSAGE: Final = (
    "The call was denied: no decision was made before its deadline, and it was not run"
)
"""What a call whose approval deadline passed is answered (``kind: "authz"``)."""

# The key of the placeholder answer that marks a call as waiting (in its content).
_AWAITING: Final = "awaiting"
# The key of the placeholder that names the run the call waits in (a store resumes it).
_RUN: Final = "run_id"
# The key of a suspend directive's payload that carries the pending call.
_PAYLOAD: Final = "pending_tool_call"


def _now() -> float:
    """The clock of a run in memory (wall-clock seconds): pending calls may wait days."""
    return time.time()


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
    from ._tool import Tool

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


# --- decisions -------------------------------------------------------------------------

Decision = CallDecision  # the agent's name for it: what was decided for one waiting call


def decision_message(decision: CallDecision, call_id: str) -> dict[str, Any]:
    """The tool message answering a decided call (for every kind but ``"approved"``)."""
    if decision.kind == "denied":
        return tool_failure_message(
            call_id, f"{APPROVAL_DENIED_MESSAGE}: {decision.answer}", "authz"
        )
    if decision.kind == "expired":
        return tool_failure_message(call_id, f"{APPROVAL_TIMED_OUT_MESSAGE}.", "authz")
    if decision.kind == "error":
        return tool_failure_message(call_id, str(decision.answer), "external")
    assert decision.kind == "result"
    value = decision.answer
    content = value if type(value) is str else pydantic_core.to_json(value).decode()
    return tool_message(call_id, content)


def read_decisions(
    owner: str,
    approvals: object,
    results: object,
    errors: object,
    principal: object,
) -> dict[str, Decision]:
    """The keywords ``approvals=``, ``results=``, ``errors=`` as one decision per call id."""
    if principal is not None and (not isinstance(principal, str) or not principal):
        raise error_kind(principal, str)(
            f"{owner}: principal must be a non-empty str or None, got {principal!r:.80}"
        )
    who = principal
    decided: dict[str, Decision] = {}

    def add(call_id: object, decision: Decision, keyword: str) -> None:
        if not isinstance(call_id, str) or not call_id:
            raise error_kind(call_id, str)(
                f"{owner}: {keyword} keys must be tool call ids, got {call_id!r:.80}"
            )
        if call_id in decided:
            raise UsageError(f"{owner}: call {call_id!r} is decided twice ({keyword} and another)")
        decided[call_id] = decision

    for keyword, given in (("approvals", approvals), ("results", results), ("errors", errors)):
        if given is not None and not isinstance(given, Mapping):
            raise TypeError(f"{owner}: {keyword} must be a dict by call id, got {given!r:.80}")
    for call_id, value in (approvals or {}).items():  # type: ignore[attr-defined]
        if value is True:
            decision = Decision(kind="approved", principal=who)
        elif value is False:
            decision = Decision(kind="denied", answer="denied", principal=who)
        elif isinstance(value, Approve):
            decision = Decision(kind="approved", arguments=value.arguments, principal=who)
        elif isinstance(value, Deny):
            decision = Decision(kind="denied", answer=value.reason, principal=who)
        else:
            raise TypeError(
                f"{owner}: approvals[{call_id!r}] must be True, False, Approve(...) or "
                f"Deny(...), got {value!r:.80}"
            )
        add(call_id, decision, "approvals")
    for call_id, value in (results or {}).items():  # type: ignore[attr-defined]
        try:
            pydantic_core.to_json(value)
        except pydantic_core.PydanticSerializationError as exc:
            raise TypeError(
                f"{owner}: results[{call_id!r}] cannot be written as JSON ({exc})"
            ) from None
        add(call_id, Decision(kind="result", answer=value, principal=who), "results")
    for call_id, value in (errors or {}).items():  # type: ignore[attr-defined]
        if not isinstance(value, str) or not value:
            raise error_kind(value, str)(
                f"{owner}: errors[{call_id!r}] must be a non-empty str, got {value!r:.80}"
            )
        add(call_id, Decision(kind="error", answer=value, principal=who), "errors")
    return decided


# --- the placeholder answer ------------------------------------------------------------


def placeholder(call: PendingToolCall, run_id: str | None = None) -> dict[str, Any]:
    """The answer a waiting call holds in the transcript until it is decided.

    A failure of kind ``"not_run"`` (true: it has not run), with the pending
    call under ``"awaiting"`` so a continuation in memory finds it again, and
    the id of the run it waits in under ``"run_id"``: with a store, that run
    is the one to continue (``Agent.resume``), never a copy of it in memory.
    """
    text = (
        "This call is waiting for a person's approval and has not run yet"
        if call.kind == "approval"
        else "This call is run by the host and has not been answered yet"
    )
    content: dict[str, Any] = {
        "success": False,
        "kind": "not_run",
        "error": text,
        _AWAITING: call.to_json(),
    }
    if run_id is not None:
        content[_RUN] = run_id
    return tool_message(call.id, json.dumps(content))


def waiting_run(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The id of the run whose calls wait at the end of *messages* (its placeholders
    name it), or ``None``: no call waits there, or its placeholder names no run."""
    for index in sorted(_trailing_indices(messages)):
        message = messages[index]
        if waiting_in(message) is None:
            continue
        content = message.get("content")
        try:
            run_id = json.loads(content).get(_RUN) if isinstance(content, str) else None
        except (ValueError, AttributeError):
            run_id = None
        if isinstance(run_id, str) and run_id:
            return run_id
    return None


def waiting_in(message: Mapping[str, Any]) -> PendingToolCall | None:
    """The pending call a placeholder answer holds, or ``None`` for any other message."""
    if message.get("role") != "tool":
        return None
    content = message.get("content")
    if not isinstance(content, str) or _AWAITING not in content:
        return None
    try:
        value = json.loads(content)
        held = value[_AWAITING]
        if value.get("kind") != "not_run" or held["id"] != message.get("tool_call_id"):
            return None
        return PendingToolCall.from_json(held)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def pending_of(suspensions: Sequence[SuspendDirective]) -> tuple[PendingToolCall, ...]:
    """The pending calls among a suspended run's directives, in call order."""
    found: list[PendingToolCall] = []
    for directive in suspensions:
        held = directive.payload.get(_PAYLOAD)
        if isinstance(held, Mapping):
            found.append(PendingToolCall.from_json(held))
    return tuple(found)


def _held(call: PendingToolCall, run_id: str | None) -> ToolCallOutcome:
    reason = (
        f"approval required: {call.name}"
        if call.kind == "approval"
        else f"external result required: {call.name}"
    )
    return ToolCallOutcome(
        tool_message=placeholder(call, run_id),
        suspend=SuspendDirective(
            tool_call_id=call.id, reason=reason, payload={_PAYLOAD: call.to_json()}
        ),
    )


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
            return _held(known, self.run_id)
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
        return _held(pending, self.run_id)

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
        indices = sorted(_trailing_indices(history))
        to_run: list[tuple[int, ToolCall]] = []
        calls = _trailing_calls(history)
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


def _trailing_indices(messages: Sequence[Mapping[str, Any]]) -> set[int]:
    found: set[int] = set()
    index = len(messages) - 1
    while index >= 0 and messages[index].get("role") == "tool":
        found.add(index)
        index -= 1
    return found


def _trailing_calls(messages: Sequence[Mapping[str, Any]]) -> dict[str, ToolCall]:
    index = len(messages) - 1
    while index >= 0 and messages[index].get("role") == "tool":
        index -= 1
    if index < 0 or messages[index].get("role") != "assistant":
        return {}
    calls = [ToolCall.of(c) for c in messages[index].get("tool_calls") or ()]
    return {c.id: c for c in calls}


def trailing_waiting(messages: Sequence[Mapping[str, Any]]) -> dict[str, PendingToolCall]:
    """The calls waiting at the end of a transcript (its last turn's placeholders)."""
    found: dict[str, PendingToolCall] = {}
    for index in sorted(_trailing_indices(messages)):
        held = waiting_in(messages[index])
        if held is not None:
            found[held.id] = held
    return found


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
    from ._context import call_context

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
