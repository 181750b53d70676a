"""Every exception this package defines, in one tree.

Whose fault an error is shows in where it hangs:

    JunoBindError                      base of everything raised on purpose here
    ├── UsageError (RuntimeError)      you: the caller broke a lifetime or call-order rule
    │   ├── RunLimitError              LiveRuns.start with max_active_runs runs going
    │   │                              (juno_bind_trio.web; the app answers 429)
    │   ├── TurnStreamUsageError       observe() before begin_attempt()
    │   └── ConversationBusy           a run on a conversation another run holds
    │                                  (Agent.run(conversation=...); names both)
    ├── WireFormatError (ValueError)   them: a peer sent an event this protocol cannot parse
    ├── TranscriptError (ValueError)   you: a message heal_transcript cannot read (names its index)
    ├── ToolCallHistoryError (ValueError)  a transcript the Chat Completions API would refuse
    │                                  (juno_bind_trio.testing; names the index and the id)
    ├── SchemaError (ValueError)       you: a tool schema that is invalid or cannot be expressed
    │                                  in the target dialect (names the JSON pointer)
    ├── ToolCallError                  a tool call the harness refused or lost (a *result*
    │   │                              in the transcript, raised only inside outcome.Error)
    │   ├── AbortedToolCallError       never claimed: the soft stop fired first
    │   └── InterruptedToolCallError   claimed, then cut off by a cancel: effect unknown
    ├── ToolFailureError               a tool's own failure, with its ToolFailureKind (raised
    │                                  by tools; becomes a result, never leaves the pool)
    ├── StreamStallError               them: a provider stream went silent past a budget
    ├── CompletionDefectError          them: a completion that cannot be used as it is
    │   ├── ToolCallAssemblyError      streamed tool-call deltas that contradict each other
    │   ├── ToolCallArgumentsError     tool-call arguments that are not a JSON object
    │   └── StructuredOutputError      no parseable structured output within the retry budget
    ├── RoutingError                   them: no route answered (carries the whole trail)
    │   ├── AllRoutesFailedError       every attempt failed: one error, every attempt in it
    │   └── NoViableEndpointError      circuit breakers left nothing to try
    ├── RunTimeoutError (TimeoutError) the run's own deadline expired
    ├── UsageLimitExceeded             an agent run reached one of its UsageLimits and
    │                                  stopped softly (carries the result so far)
    ├── StoreError                     a run store refused or could not do what was asked
    │   ├── RunNotFoundError (KeyError)    no run with that id
    │   ├── RunExistsError                 create_run with an id already stored
    │   ├── LeaseLostError                 this worker's lease on the run is gone: write nothing
    │   ├── RunLeasedError                 another worker holds the run's lease
    │   ├── StoreDataError (ValueError)    a stored row, transcript or receipt that cannot be
    │   │                                  read or does not fit the run (names the run)
    │   └── SchemaVersionError             the database's schema is newer than this package
    ├── MCPConnectionError             an MCP server could not be started, reached or
    │                                  greeted (juno_bind_trio.mcp)
    └── MCPToolError                   an MCP tool answered a call with ``isError`` (a result,
                                       raised inside the tool; never leaves the pool)

    SimulatedCrash (BaseException)     juno_bind_trio.testing's crash harness: the process
                                       "died" here (not an Exception, so no handler of the
                                       code under test swallows it)

Argument validation at a public boundary raises the builtin that means the
same thing (``TypeError`` for a wrong type, ``ValueError`` for a wrong value),
with a message that names the function and the value, as the TypeScript
package's own messages do. ``trio.Cancelled`` / anyio's cancellation exception
are never caught, wrapped or translated by this package.

Subpackages add their exceptions to this module, in this tree, and re-export
them from their own ``__init__``.
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
    "AbortedToolCallError",
    "AllRoutesFailedError",
    "CompletionDefectError",
    "ConversationBusy",
    "InterruptedToolCallError",
    "JunoBindError",
    "LeaseLostError",
    "MCPConnectionError",
    "MCPToolError",
    "NoViableEndpointError",
    "RoutingError",
    "RunExistsError",
    "RunLeasedError",
    "RunLimitError",
    "RunNotFoundError",
    "RunTimeoutError",
    "SchemaError",
    "SchemaVersionError",
    "SimulatedCrash",
    "StoreDataError",
    "StoreError",
    "StreamStallError",
    "StructuredOutputError",
    "ToolCallArgumentsError",
    "ToolCallAssemblyError",
    "ToolCallError",
    "ToolCallHistoryError",
    "ToolFailureError",
    "TranscriptError",
    "TurnStreamUsageError",
    "UsageError",
    "UsageLimitExceeded",
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


# --- the run's own time budget (juno_bind_trio.run) ---------------------------


class RunTimeoutError(JunoBindError, TimeoutError):
    """The run's own deadline (a [`RunDeadline`][juno_bind_trio.run.RunDeadline]) ran out.

    Raised where the deadline's scope ends, never for a cancellation that came
    from outside it: a timeout and a cancellation are different outcomes, and
    a host stores them differently
    ([`classify_run_failure()`][juno_bind_trio.run.classify_run_failure]). ``seconds`` is the budget
    that ran out. A ``TimeoutError``, so code that already handles timeouts generically keeps
    working.
    """

    seconds: float

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the run's deadline expired: its budget of {seconds:g}s ran out")
        self.seconds = seconds

    def __reduce__(self) -> tuple[type[RunTimeoutError], tuple[float]]:
        return (type(self), (self.seconds,))


class UsageLimitExceeded(JunoBindError):
    """An agent run reached one of its [UsageLimits][juno_bind_trio.agent.UsageLimits].

    The run stopped softly before raising this: no request past the limit was
    made, and its transcript answers every call (calls of a response that went
    past a limit are answered ``not_run``). *limit* names the limit
    (``"request_limit"``, ``"input_tokens_limit"``, ``"output_tokens_limit"``,
    ``"total_tokens_limit"``, ``"tool_calls_limit"``), *value* is its value and
    *used* what the run had used (or was about to) when it stopped. *result* is
    the [AgentResult][juno_bind_trio.agent.AgentResult] so far: its
    ``messages`` to store or go on from, its ``stats`` (tokens, calls) as
    *usage*; ``None`` only when the error was made by hand.
    """

    limit: str
    value: int
    used: int
    result: Any

    def __init__(self, limit: str, value: int, used: int, result: Any = None) -> None:
        super().__init__(f"the run reached its {limit} of {value} ({used} used) and stopped")
        self.limit = limit
        self.value = value
        self.used = used
        self.result = result

    @property
    def usage(self) -> Any:
        """The run's [RunStats][juno_bind_trio.loop.RunStats] so far (``None`` without a result)."""
        return getattr(self.result, "stats", None)

    def __reduce__(self) -> tuple[type[UsageLimitExceeded], tuple[str, int, int, Any]]:
        return (type(self), (self.limit, self.value, self.used, self.result))


# --- transcripts and tool schemas (juno_bind_trio.transcript / .schema) -------


class TranscriptError(JunoBindError, ValueError):
    """A transcript message [`heal_transcript()`][juno_bind_trio.transcript.heal_transcript] cannot
    read.

    ``index`` is the position of the offending message in the list you passed,
    so a host that loads transcripts from storage can log or quarantine exactly
    that record. Healing repairs a transcript's *shape* (which answers go where);
    it never guesses what a malformed message meant.
    """

    index: int

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index

    def __reduce__(self) -> tuple[type[TranscriptError], tuple[str, int]]:
        return (type(self), (str(self), self.index))


class ToolCallHistoryError(JunoBindError, ValueError):
    """A transcript whose tool-call history OpenAI's Chat Completions API refuses.

    Raised by [check_tool_call_history][juno_bind_trio.testing.check_tool_call_history].
    ``index`` is the message at fault (for calls left unanswered, the assistant
    message that made them), ``tool_call_id`` the id concerned when there is
    one, and ``param`` what the API's error body names (``"messages.[3].role"``).
    """

    index: int
    tool_call_id: str | None
    param: str

    def __init__(
        self, message: str, *, index: int, tool_call_id: str | None = None, param: str = ""
    ) -> None:
        super().__init__(message)
        self.index = index
        self.tool_call_id = tool_call_id
        self.param = param

    def __reduce__(self) -> Any:
        return (_rebuild_history_error, (str(self), self.index, self.tool_call_id, self.param))


def _rebuild_history_error(
    message: str, index: int, tool_call_id: str | None, param: str
) -> ToolCallHistoryError:
    return ToolCallHistoryError(message, index=index, tool_call_id=tool_call_id, param=param)


class SchemaError(JunoBindError, ValueError):
    """A tool schema that is invalid, or valid but impossible to express in the target dialect.

    ``pointer`` is the JSON pointer (RFC 6901) of the offending node **in the
    schema you passed** (``""`` is the root, ``"/properties/tags"`` a
    property), so the fix can be made where the schema is written.
    """

    pointer: str

    def __init__(self, message: str, pointer: str) -> None:
        super().__init__(message)
        self.pointer = pointer

    def __reduce__(self) -> tuple[type[SchemaError], tuple[str, str]]:
        return (type(self), (str(self), self.pointer))


# --- run stores (juno_bind_trio.store) ----------------------------------------


class StoreError(JunoBindError):
    """A run store refused, or could not do, what was asked; ``run_id`` names the run, if any."""

    run_id: str | None

    def __init__(self, message: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id

    def __reduce__(self) -> tuple[type[StoreError], tuple[str, str | None]]:
        return (type(self), (str(self), self.run_id))


class RunNotFoundError(StoreError, KeyError):
    """No run with that id is stored."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class RunExistsError(StoreError):
    """``create_run`` was given an id that is already stored: nothing was overwritten."""


class LeaseLostError(StoreError):
    """This worker's lease on the run expired or was taken: it must write nothing more.

    Raised by every write made with a lease whose fencing token is no longer
    the run's, or whose time ran out. Nothing was written.
    """


class RunLeasedError(StoreError):
    """Another worker holds an unexpired lease on the run."""


class StoreDataError(StoreError, ValueError):
    """Stored data that cannot be read, or a write that does not fit the run.

    A corrupted row, a transcript that does not parse, a receipt for a call the
    run's open turn never made. The message names the run; nothing was written.
    """


class SchemaVersionError(StoreError):
    """The database's schema version is newer than this package knows: upgrade the package.

    Raised on open, before anything is read or written.
    """


class SimulatedCrash(BaseException):
    """Raised by [CrashingStore][juno_bind_trio.testing.CrashingStore] where the process "dies".

    A ``BaseException``, like a real ``SIGKILL`` is beyond any handler: the
    code under test's ``except Exception`` does not catch it. Once it is
    raised, the store refuses every further call the same way, writing
    nothing, as a dead process writes nothing.
    """


# --- MCP servers (juno_bind_trio.mcp) -----------------------------------------


class MCPConnectionError(JunoBindError):
    """An MCP server could not be started, reached, or completed the protocol's greeting.

    Raised when an ``async with`` block of [juno_bind_trio.mcp][] is entered,
    never during a run: a server that cannot be used is a wiring problem to fix
    before any model sees its tools. ``server`` names the server (its command
    line or URL); the underlying error is the ``__cause__``.
    """

    server: str

    def __init__(self, message: str, server: str) -> None:
        super().__init__(message)
        self.server = server

    def __reduce__(self) -> tuple[type[MCPConnectionError], tuple[str, str]]:
        return (type(self), (str(self), self.server))


class MCPToolError(JunoBindError):
    """An MCP tool ran and reported its own failure (a result with ``isError: true``).

    Raised by the tool a [juno_bind_trio.mcp][] toolset builds, so the call is
    answered as a failed call whose ``error`` is the server's text, exactly as
    a local tool's exception is: the model reads what went wrong and may try
    again differently. It has no ``kind``: the server said what failed, not
    which kind of failure it was. ``tool_name`` is the server's name for the
    tool; ``structured`` is the result's structured content, if any.
    """

    tool_name: str
    structured: object

    def __init__(self, message: str, tool_name: str, structured: object = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.structured = structured

    def __reduce__(self) -> tuple[type[MCPToolError], tuple[str, str, object]]:
        return (type(self), (str(self), self.tool_name, self.structured))
