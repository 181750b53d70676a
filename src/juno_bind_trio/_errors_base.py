"""The base of the exception tree, and the errors of usage, tool calls, completions and routing.

``_errors`` re-exports every name here and holds the rest of the tree; its
docstring draws the whole tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, get_args

if TYPE_CHECKING:
    # Annotations only: a routing failure carries routing's attempt records as
    # plain data, and nothing here runs routing's code (docs/explanation/layering.md).
    from juno_bind_trio.routing import AttemptRecord, SkippedCandidate

__all__ = [
    "ABORTED_TOOL_CALL_MESSAGE",
    "INTERRUPTED_TOOL_CALL_MESSAGE",
    "TOOL_FAILURE_KINDS",
    "AbortedToolCallError",
    "AllRoutesFailedError",
    "CompletionDefectError",
    "ConversationBusy",
    "InterruptedToolCallError",
    "JunoBindError",
    "ModelRetry",
    "NoViableEndpointError",
    "RoutingError",
    "RunLimitError",
    "StreamStallError",
    "StructuredOutputError",
    "ToolCallArgumentsError",
    "ToolCallAssemblyError",
    "ToolCallError",
    "ToolFailureError",
    "ToolFailureKind",
    "TurnStreamUsageError",
    "UsageError",
    "WireFormatError",
]


# The failure kinds live here, below every subpackage, because ToolFailureError
# checks its kind; juno_bind_trio.plugins re-exports both names as their public home.
ToolFailureKind = Literal[
    "authz", "validation", "not_found", "conflict", "external", "not_run", "system", "interrupted"
]
"""Why a tool call failed, as a discriminant a model or a host can act on.

* ``"authz"``: the caller may not do this.
* ``"validation"``: the arguments are wrong; fixing them may help.
* ``"not_found"``: what the call names does not exist.
* ``"conflict"``: the target's state forbids it now (a version mismatch, a duplicate).
* ``"external"``: a service the tool depends on failed.
* ``"not_run"``: the harness refused the call before it started; nothing
  happened and nothing changed ([`AbortedToolCallError`][juno_bind_trio.AbortedToolCallError]).
* ``"system"``: the tool or the harness is broken.
* ``"interrupted"``: this port's addition: the call started and a cancel cut
  it off, so whether it took effect is unknown
  ([`InterruptedToolCallError`][juno_bind_trio.InterruptedToolCallError]). Not ``"not_run"``:
  a resumed run must check before repeating it, not assume nothing happened.

Tools should set it explicitly, by raising
[`ToolFailureError`][juno_bind_trio.ToolFailureError].
"""

TOOL_FAILURE_KINDS: Final[frozenset[str]] = frozenset(get_args(ToolFailureKind))
"""Every [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind], for checking a value at run
time."""


class JunoBindError(Exception):
    """Base class of every exception this package raises on purpose."""


class UsageError(JunoBindError, RuntimeError):
    """The caller broke a lifetime or call-order rule of an API."""


class RunLimitError(UsageError):
    """[LiveRuns.start][juno_bind_trio.web.LiveRuns.start] was called with ``limit`` runs going.

    ``limit`` is the [LiveRuns][juno_bind_trio.web.LiveRuns]' ``max_active_runs``.
    Nothing was started. The web app answers it with ``429 Too Many Requests``;
    a host calling ``start`` itself catches it to wait or refuse in its own way.
    """

    limit: int

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[type[RunLimitError], tuple[str, int]]:
        return (type(self), (str(self), self.limit))


class TurnStreamUsageError(UsageError):
    """A [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream] was driven out of order."""


class ConversationBusy(UsageError):
    """A run on a conversation that another run holds, or that moved on without this run.

    ``Agent.run(prompt, conversation=...)`` refuses, before anything is
    stored or asked of the model, to start while another run of that
    conversation is going (they would both answer the same history, and one
    answer would be lost); ``conversation_id`` names the conversation and
    ``holder`` the run holding it (or ``None``). Retry when it ended, or
    send the message after its answer. A resume of a conversation's run
    that the conversation has moved on from since (another run answered
    after it) is refused the same way. ``delete_conversation`` refuses a
    conversation a run holds.
    """

    conversation_id: str
    holder: str | None

    def __init__(self, message: str, conversation_id: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id
        self.holder = holder

    def __reduce__(self) -> tuple[type[ConversationBusy], tuple[str, str, str | None]]:
        return (type(self), (str(self), self.conversation_id, self.holder))


class WireFormatError(JunoBindError, ValueError):
    """A wire event could not be parsed; the message names the field and the value."""


# --- tool calls the harness refused or lost (juno_bind_trio.run) -------------

ABORTED_TOOL_CALL_MESSAGE = (
    "This call was never started, so nothing happened and nothing changed. "
    "The run is ending — do not retry it and do not report it as a failure."
)
"""The message a refused call carries into the transcript, and so into the model's next turn.

The TypeScript package's exact sentence. Shared by both refusal sites (the
pool and the loop's serial phase) because to the only reader they are the
same fact, and two literals for one fact drift. It names no batch, worker or
claim (internals the model cannot act on), does not repeat the call id (the
tool message's own ``tool_call_id`` carries it), and leads with the fact that
matters: nothing happened.
"""

INTERRUPTED_TOOL_CALL_MESSAGE = (
    "This call was started, but the run was cancelled before it finished, so it "
    "is unknown whether it took effect. Check its effect before repeating it."
)
"""The message a call cut off by a hard cancel carries into the transcript.

This port's addition. Unlike a refused call, an interrupted one may have done
some or all of its work (a write, an email, a POST), so the actionable fact is
"unknown, check first", the opposite of the refusal's "nothing happened".
"""


class ToolCallError(JunoBindError):
    """A tool call the harness itself refused or lost, as opposed to one that ran and failed.

    Carried as ``outcome.Error(...)`` in a batch's results and turned into a
    tool message; raised only if the caller unwraps that outcome.
    """

    tool_call_id: str

    def __init__(self, tool_call_id: str, message: str) -> None:
        super().__init__(message)
        self.tool_call_id = tool_call_id

    def __reduce__(self) -> tuple[type[ToolCallError], tuple[str]]:
        return (type(self), (self.tool_call_id,))


class AbortedToolCallError(ToolCallError):
    """A call the batch refused because the stop fired before any worker claimed it.

    The id is a **field**, not part of the message, so a rejection observer
    or an operator log can filter on it.
    """

    def __init__(self, tool_call_id: str) -> None:
        super().__init__(tool_call_id, ABORTED_TOOL_CALL_MESSAGE)


class InterruptedToolCallError(ToolCallError):
    """A call that was claimed and running when a hard cancel cut it off: its effect is unknown."""

    def __init__(self, tool_call_id: str) -> None:
        super().__init__(tool_call_id, INTERRUPTED_TOOL_CALL_MESSAGE)


class ToolFailureError(JunoBindError):
    """A tool's own failure, raised by the tool with an explicit ``kind``.

    ``ToolFailureError(kind, message)``: *kind* is a
    [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind] (``"validation"``,
    ``"not_found"``, …) so the loop's envelope can say what kind of failure
    it was without matching on the message, which is brittle and
    locale-dependent; ``str(error)`` is *message* alone.

    :raises ValueError: *kind* is not a ToolFailureKind.
    :raises TypeError: *message* is not a string.
    """

    kind: ToolFailureKind
    message: str

    def __init__(self, kind: ToolFailureKind, message: str) -> None:
        given: object = kind
        if not isinstance(given, str) or given not in TOOL_FAILURE_KINDS:
            raise ValueError(
                f"ToolFailureError: kind must be one of {sorted(TOOL_FAILURE_KINDS)}, got {kind!r}"
            )
        text: object = message
        if not isinstance(text, str):
            raise TypeError(f"ToolFailureError: message must be a string, got {message!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __reduce__(self) -> tuple[type[ToolFailureError], tuple[ToolFailureKind, str]]:
        return (type(self), (self.kind, self.message))


class ModelRetry(ToolFailureError):
    """Ask the model again: raised by a tool or an output function with what to correct.

    ``raise ModelRetry("the date must be in the future")``. From a tool, it is
    the tool's failure of kind ``"validation"`` (the model reads *message*
    and may call again). From an output function (``Agent(output_type=fn)``),
    the answer is not accepted: the model is asked again within the turn,
    *message* telling it why, and a reader sees the rejected answer
    withdrawn, as for an answer that did not validate.

    :raises TypeError: *message* is not a string.
    """

    def __init__(self, message: str) -> None:
        super().__init__("validation", message)

    def __reduce__(self) -> tuple[type[ModelRetry], tuple[str]]:  # type: ignore[override]
        return (type(self), (self.message,))


# --- provider streams (juno_bind_trio.completion) -----------------------------


class StreamStallError(JunoBindError):
    """A provider stream went silent for longer than one of the watchdog's budgets.

    ``budget`` says which: ``"time_to_first_token"`` (no *answer* token, content
    or tool call, arrived in time: reasoning does not count) or
    ``"inter_chunk"`` (the stream went silent between chunks). ``timeout`` is
    that budget in seconds. Routing treats it as a failure of the endpoint.
    """

    budget: Literal["time_to_first_token", "inter_chunk"]
    timeout: float

    def __init__(
        self, budget: Literal["time_to_first_token", "inter_chunk"], timeout: float
    ) -> None:
        what = "first token" if budget == "time_to_first_token" else "next chunk"
        super().__init__(f"provider stream stalled: no {what} within {timeout:g}s ({budget})")
        self.budget = budget
        self.timeout = timeout

    def __reduce__(self) -> tuple[type[StreamStallError], tuple[str, float]]:
        return (type(self), (self.budget, self.timeout))


class CompletionDefectError(JunoBindError):
    """A completion that arrived but cannot be used as it is.

    ``kind`` names the defect (for example ``"empty"``, ``"truncated"``,
    ``"no_finish_reason"``, ``"unparseable_tool_arguments"``,
    ``"content_filtered"``, ``"structured_output"``); ``detail`` says what was
    seen. Routing retries the same endpoint within the defect budget.
    """

    kind: str
    detail: str

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"completion defect ({kind}): {detail}")
        self.kind = kind
        self.detail = detail

    def __reduce__(self) -> tuple[type[CompletionDefectError], tuple[str, str]]:
        return (type(self), (self.kind, self.detail))


class ToolCallAssemblyError(CompletionDefectError):
    """Streamed tool-call deltas that cannot belong to one call, or a call left incomplete.

    ``kind`` is ``"inconsistent_tool_call_delta"`` (a delta gave an index a
    second id or name, or a malformed field) or ``"incomplete_tool_call"`` (the
    stream ended with a call that has no id or no name). ``index`` is the
    call's position in the stream, or ``None`` when the delta had none.
    """

    index: int | None

    def __init__(self, kind: str, detail: str, index: int | None = None) -> None:
        super().__init__(kind, detail)
        self.index = index

    def __reduce__(  # type: ignore[override]
        self,
    ) -> tuple[type[ToolCallAssemblyError], tuple[str, str, int | None]]:
        return (type(self), (self.kind, self.detail, self.index))


class ToolCallArgumentsError(CompletionDefectError):
    """A tool call's arguments are not a JSON object: malformed JSON, or another JSON value.

    ``kind`` is always ``"unparseable_tool_arguments"``; ``arguments`` is the
    raw string as the model sent it (the message shows a shortened copy).
    """

    arguments: str

    def __init__(self, detail: str, arguments: str) -> None:
        super().__init__("unparseable_tool_arguments", detail)
        self.arguments = arguments

    def __reduce__(self) -> tuple[type[ToolCallArgumentsError], tuple[str, str]]:
        return (type(self), (self.detail, self.arguments))


class StructuredOutputError(CompletionDefectError):
    """Every attempt of a structured-output retry loop returned output that does not parse.

    ``kind`` is always ``"structured_output"``; ``attempts`` counts the
    completions that were asked for, and ``content`` is the last one's text.
    """

    attempts: int
    content: str | None

    def __init__(self, detail: str, attempts: int, content: str | None) -> None:
        super().__init__("structured_output", detail)
        self.attempts = attempts
        self.content = content

    def __reduce__(  # type: ignore[override]
        self,
    ) -> tuple[type[StructuredOutputError], tuple[str, int, str | None]]:
        return (type(self), (self.detail, self.attempts, self.content))


# --- provider routing (juno_bind_trio.routing) ---------------------------------


class RoutingError(JunoBindError):
    """Routing ended without an answer. ``attempts`` is the whole trail, ``skipped``
    the candidates a circuit breaker refused.

    Not an exception group, though shaped like one
    ([`exceptions`][juno_bind_trio.RoutingError.exceptions]): a plan with one candidate that fails
    once would otherwise raise a group of one, and ``except*`` would start matching SDK errors
    inside a routing failure.
    """

    attempts: tuple[AttemptRecord[Any], ...]
    skipped: tuple[SkippedCandidate, ...]

    def __init__(
        self,
        message: str,
        attempts: tuple[AttemptRecord[Any], ...] = (),
        skipped: tuple[SkippedCandidate, ...] = (),
    ) -> None:
        super().__init__(message)
        self.attempts = tuple(attempts)
        self.skipped = tuple(skipped)

    @property
    def exceptions(self) -> tuple[Exception, ...]:
        """Every failed attempt's exception, in order."""
        return tuple(e for e in (record.error for record in self.attempts) if e is not None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.attempts, self.skipped))


class AllRoutesFailedError(RoutingError):
    """Every attempt routing was allowed to make failed. The message lists each one.

    Its ``__cause__`` is the last attempt's exception, so a traceback ends at
    the failure that exhausted the plan.
    [`retry_after`][juno_bind_trio.AllRoutesFailedError.retry_after] is the shortest wait any server
    asked for (the earliest moment one said it would take traffic again), or ``None``.
    """

    def __init__(
        self,
        attempts: tuple[AttemptRecord[Any], ...],
        skipped: tuple[SkippedCandidate, ...] = (),
        message: str | None = None,
    ) -> None:
        # The full message is built when first read, not here: a host that
        # handles the failure (falls back, retries later) never pays for
        # formatting every attempt's exception.
        super().__init__(f"all routes failed after {len(attempts)} attempt(s)", attempts, skipped)
        self._message = message
        if attempts and attempts[-1].error is not None:
            self.__cause__: BaseException | None = attempts[-1].error

    def __str__(self) -> str:
        if self._message is None:
            lines = [f"all routes failed after {len(self.attempts)} attempt(s):"]
            for record in self.attempts:
                cursor, error = record.cursor, record.error
                action = record.action.value if record.action is not None else "-"
                lines.append(
                    f"  [{cursor.attempt}] {record.candidate.endpoint} (model {cursor.model!r}): "
                    f"{type(error).__name__}: {error} -> {action}"
                )
            if self.skipped:
                refused = ", ".join(s.candidate.endpoint for s in self.skipped)
                lines.append(f"  circuit breaker open, not tried: {refused}")
            self._message = "\n".join(lines)
        return self._message

    @property
    def retry_after(self) -> float | None:
        """The shortest ``retry_after`` among the failures, or ``None`` if none sent one."""
        hints = [
            record.outcome.error.retry_after
            for record in self.attempts
            if hasattr(record.outcome, "error") and record.outcome.error.retry_after is not None
        ]
        return min(hints) if hints else None

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.attempts, self.skipped, str(self)))


class NoViableEndpointError(RoutingError):
    """Nothing was attempted: the circuit breaker refused every candidate of the plan.

    A different fact from [`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError] (everything
    tried failed): here no endpoint was even asked, so the useful reaction is to
    wait for a breaker to half-open, not to investigate the request.
    """

    def __init__(self, skipped: tuple[SkippedCandidate, ...], message: str | None = None) -> None:
        if message is None:
            refused = ", ".join(dict.fromkeys(s.candidate.endpoint for s in skipped))
            message = f"no viable endpoint: the circuit breaker is open for {refused or 'nothing'}"
        super().__init__(message, (), skipped)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.skipped, str(self)))
