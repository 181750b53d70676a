"""The calls of the assistant message just appended, from their dispatch to their answers.

From the moment the loop appends an assistant message that asks for tools,
every one of its calls must be answered in the transcript before anything
leaves ``run()``, however it leaves. An [`OpenBatch`][] is that promise kept:
it sends each call through the host's ``run_tool_call`` (inside the call's
span, when a tracer is installed), turns each result into its tool message
and its counts as it settles (a failure into the ``{"success": false, ...}``
envelope and a rejection event; a fatal one raised as itself), and on the way
out answers whatever is left, with no checkpoint: from the pool's record of
it if the pool ran it (cut off: ``interrupted``), ``not_run`` if nothing did.

How a call ends under a cancel or a stop is never decided here: every call
runs through [`ToolBatch`][juno_bind_trio.run.ToolBatch], the pooled calls in
one batch and each serial call in a batch of its own, and the pool's record
is what the answers are read from.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast, final

import outcome

from juno_bind_trio import _tracing
from juno_bind_trio._calls import ToolCall
from juno_bind_trio._errors import AbortedToolCallError, InterruptedToolCallError
from juno_bind_trio.plugins import (
    SuspendDirective,
    kind_for_error,
    tool_error_text,
    tool_failure_message,
)
from juno_bind_trio.run import ToolBatch

from ._events import ToolCallRejectedEvent
from ._ports import NotAwaitable, wiring_mistake
from ._results import ToolCallOutcome

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from juno_bind_trio.run import StopSignal, ToolCallLike

    from ._counters import Counters
    from ._events import LoopEvent

__all__ = ["BatchRequests", "OpenBatch"]

_Value: Final = outcome.Value
_Error: Final = outcome.Error


@final
class OpenBatch:
    """The calls of one assistant message, until every one of them is answered."""

    __slots__ = (
        "_counters",
        "_emit",
        "_is_fatal",
        "_run_tool_call",
        "answers",
        "batches",
        "calls",
        "ids",
        "iteration",
        "names",
        "spans",
    )

    def __init__(
        self,
        iteration: int,
        calls: tuple[ToolCall, ...],
        *,
        run_tool_call: Callable[[ToolCall], Awaitable[ToolCallOutcome]],
        is_fatal: Callable[[BaseException], bool] | None,
        counters: Counters,
        emit: Callable[[LoopEvent], None] | None,
    ) -> None:
        self.iteration = iteration
        self.calls = calls
        self.ids = [call.id for call in calls]
        self.names = [call.name for call in calls]
        self.answers: list[dict[str, Any] | None] = [None] * len(calls)
        # Every ToolBatch run so far, with the positions (in `calls`) of its calls.
        self.batches: list[tuple[ToolBatch[ToolCallOutcome], list[int]]] = []
        self._run_tool_call = run_tool_call
        self._is_fatal = is_fatal
        self._counters = counters
        self._emit = emit
        # The calls' execute_tool spans; None while no tracer provider is installed.
        found = _tracing.tracer()
        self.spans: _tracing.ToolSpans | None = None if found is None else _tracing.ToolSpans(found)

    async def run(
        self, indices: list[int], *, stop: StopSignal | None, per_tool_limit: int
    ) -> list[outcome.Outcome[ToolCallOutcome]]:
        """Run the calls at *indices* through the pool; their results, aligned with *indices*.

        The batch is recorded before it runs, so the exit path reads from it
        how each call ended if this is cut off.
        """
        calls = self.calls
        chosen = calls if len(indices) == len(calls) else [calls[i] for i in indices]
        batch: ToolBatch[ToolCallOutcome] = ToolBatch(chosen)
        self.batches.append((batch, indices))
        # The batch holds this batch's ToolCalls, so each call it runs is one.
        run = cast("Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]", self.call)
        return await batch.run(run, stop=stop, per_tool_limit=per_tool_limit)

    async def call(self, call: ToolCall) -> ToolCallOutcome:
        """``run_tool_call``, with what it returned checked where the loop can still say so.

        One coroutine per call, traced or not: the tool's own awaitable is
        awaited here, inside the call's span when a tracer is installed.
        """
        spans = self.spans
        call_id = ""
        token: object = None
        if spans is not None:
            # Current for this call only, detached in this task: a pool worker's
            # next call parents under the batch's context, never this span.
            call_id = call.id
            token = spans.start(call_id, call.name, call.arguments)
        try:
            pending: object = cast("Callable[[ToolCall], object]", self._run_tool_call)(call)
            if not inspect.isawaitable(pending):
                # Settled as a value, not raised: raised, it would become the tool
                # message the model reads. settle() raises the UsageError instead.
                return cast("ToolCallOutcome", NotAwaitable(pending))
            return cast("ToolCallOutcome", await pending)
        finally:
            if spans is not None:
                spans.stop(call_id, token)

    def settle(
        self, index: int, result: outcome.Outcome[Any], *, fatal: bool
    ) -> ToolCallOutcome | None:
        """Turn one call's result into its answer, synchronously.

        Returns the outcome if the call ran well, ``None`` if it failed.
        *fatal*: an error ``is_fatal_tool_error`` names, or a miswired
        ``run_tool_call``, is raised (never on the way out, where every
        remaining call must still be answered).
        """
        call_id = self.ids[index]
        counters = self._counters
        if type(result) is _Value:
            value = result.value
            if isinstance(value, ToolCallOutcome) and value.tool_message["tool_call_id"] == call_id:
                self.answers[index] = value.tool_message
                counters.tool_calls += 1
                if self.spans is not None:
                    self.spans.settle(
                        call_id,
                        self.names[index],
                        "finished",
                        None,
                        value.tool_message.get("content"),
                    )
                return value
            # The host's run_tool_call is miswired: a UsageError for the host,
            # never a tool message for the model. The call did run, and what it
            # did cannot be read, so its answer is the one for "started, effect
            # unknown"; the exit path answers the rest of the batch.
            mistake = wiring_mistake(call_id, value)
            self.settle(index, _Error(InterruptedToolCallError(call_id)), fatal=False)
            if fatal:
                raise mistake
            return None
        assert isinstance(result, outcome.Error)
        error = result.error
        text = tool_error_text(error)
        kind = kind_for_error(error)
        self.answers[index] = tool_failure_message(call_id, text, kind)
        counters.tool_calls += 1
        if self.spans is not None:
            state = kind if kind in ("not_run", "interrupted") else "failed"
            self.spans.settle(
                call_id, self.names[index], state, kind or type(error).__qualname__, text
            )
        if isinstance(error, AbortedToolCallError):
            counters.tool_calls_not_run += 1
        elif isinstance(error, InterruptedToolCallError):
            counters.tool_calls_interrupted += 1
        else:
            counters.tool_failures += 1
        # A fatal error ends the run at once and propagates as itself. It is
        # asked before the rejection event, as the seed asks before its
        # observer: an error that ends the run is not a rejected call.
        if fatal and self._is_fatal is not None and self._is_fatal(error):
            raise error
        if self._emit is not None:
            self._emit(
                ToolCallRejectedEvent(
                    iteration=self.iteration,
                    tool_call_id=call_id,
                    tool_name=self.names[index],
                    kind=kind,
                    message=text,
                    error=error,
                )
            )
        return None

    def answer_the_rest(self) -> list[dict[str, Any]]:
        """Answer every call not answered yet; return all the answers, in call order.

        No checkpoint: this runs on the way out of ``run()`` for any exception.
        A call with a real result (it finished, or a fatal error was raised
        after its batch returned) has that already; a call a batch ran gets
        what the pool settled it as (refused, interrupted); a call no batch
        reached never started and is ``not_run``.
        """
        ran: dict[int, tuple[ToolBatch[ToolCallOutcome], int]] = {}
        for batch, indices in self.batches:
            for position, index in enumerate(indices):
                ran[index] = (batch, position)
        for index, call_id in enumerate(self.ids):
            if self.answers[index] is not None:
                continue
            found = ran.get(index)
            result = None if found is None else found[0].result(found[1])
            if result is None:
                result = _Error(AbortedToolCallError(call_id))
            self.settle(index, result, fatal=False)
        # settle(fatal=False) cannot raise: tool_error_text and kind_for_error
        # never do, whatever the tool raised. This runs on the way out of a
        # cancel, and an exception here would leave calls unanswered.
        return cast("list[dict[str, Any]]", self.answers)


@final
class BatchRequests:
    """What a settled batch's outcomes ask of the run, gathered in call order."""

    __slots__ = ("compaction", "plugins", "skills", "suspensions")

    def __init__(self, outcomes: list[ToolCallOutcome | None]) -> None:
        self.suspensions: list[SuspendDirective] = []
        self.plugins: list[str] = []
        self.skills: list[str] = []
        self.compaction = False
        for value in outcomes:
            if value is None:
                continue
            if value.suspend is not None:
                self.suspensions.append(value.suspend)
            if value.activated_plugin is not None and value.activated_plugin not in self.plugins:
                self.plugins.append(value.activated_plugin)
            if value.activated_skill is not None and value.activated_skill not in self.skills:
                self.skills.append(value.activated_skill)
            if value.request_compaction:
                self.compaction = True
