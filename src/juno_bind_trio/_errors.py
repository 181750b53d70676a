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
    ├── GuardrailTripped               an agent's guardrail tripped: the run ended there
    │                                  (carries the guardrail's name, info and the result so far)
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

from typing import Any

from juno_bind_trio._errors_base import (
    ABORTED_TOOL_CALL_MESSAGE,
    INTERRUPTED_TOOL_CALL_MESSAGE,
    AbortedToolCallError,
    AllRoutesFailedError,
    CompletionDefectError,
    ConversationBusy,
    InterruptedToolCallError,
    JunoBindError,
    NoViableEndpointError,
    RoutingError,
    RunLimitError,
    StreamStallError,
    StructuredOutputError,
    ToolCallArgumentsError,
    ToolCallAssemblyError,
    ToolCallError,
    ToolFailureError,
    TurnStreamUsageError,
    UsageError,
    WireFormatError,
)
from juno_bind_trio._errors_base import TOOL_FAILURE_KINDS as TOOL_FAILURE_KINDS
from juno_bind_trio._errors_base import ModelRetry as ModelRetry
from juno_bind_trio._errors_base import ToolFailureKind as ToolFailureKind

__all__ = [
    "ABORTED_TOOL_CALL_MESSAGE",
    "INTERRUPTED_TOOL_CALL_MESSAGE",
    "AbortedToolCallError",
    "AllRoutesFailedError",
    "CompletionDefectError",
    "ConversationBusy",
    "GuardrailTripped",
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


class GuardrailTripped(JunoBindError):
    """An agent's guardrail tripped, and the run ended there.

    Raised as itself (never inside an exception group) by ``Agent.run``,
    ``run_sync`` and ``open_run``. An input guardrail that trips cancels the
    first model request at once, and no tool starts; an output guardrail that
    trips withdraws the streamed answer (a reset, reason ``"guardrail"``)
    before this leaves ``open_run``. *guardrail* is the guardrail's name,
    *kind* ``"input"`` or ``"output"``, *info* what its
    ``GuardrailResult.info`` held, *message* its ``GuardrailResult.message``.
    *result* is the [AgentResult][juno_bind_trio.agent.AgentResult] so far
    (reason ``"stopped"``; its transcript holds no withdrawn answer and
    answers every call); ``None`` only when the error was made by hand.
    """

    guardrail: str
    kind: str
    info: Any
    message: str | None
    result: Any

    def __init__(
        self,
        guardrail: str,
        kind: str = "input",
        info: Any = None,
        message: str | None = None,
        result: Any = None,
    ) -> None:
        said = f": {message}" if message else ""
        super().__init__(f"the {kind} guardrail {guardrail!r} tripped{said}")
        self.guardrail = guardrail
        self.kind = kind
        self.info = info
        self.message = message
        self.result = result

    def __reduce__(
        self,
    ) -> tuple[type[GuardrailTripped], tuple[str, str, Any, str | None, Any]]:
        return (type(self), (self.guardrail, self.kind, self.info, self.message, self.result))


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
