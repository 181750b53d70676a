"""The tool-calling turn kernel: call the model, run the tools it asks for, repeat.

One iteration
-------------

1. **Before the model call**: end the run if the soft stop fired
   (``"stopped"``), if ``max_iterations`` model calls were made, or if the
   host's ``should_stop`` says so. Otherwise drain the interrupts channel into
   the transcript, so the turn about to start sees what the user just said.
2. **The model call**: ``call_model(ModelTurn)``, with a fresh
   [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream] when the loop has a
   sink, finished by the loop however the call ended. The assistant message
   is appended as soon as it returns.
3. **No tool calls**: the turn would end. ``on_turn_would_end`` may ask for
   another (it usually appended a nudge); otherwise the iteration is
   persisted and the run is ``"completed"``.
4. **The batch**: calls ``runs_serially`` picks run first, one at a time, in
   order, each checking the stop when it is claimed; the rest go through the
   pool ([`ToolBatch`][juno_bind_trio.run.ToolBatch]), which checks it too. Every
   call is answered, in call order, in one synchronous append.
5. **The arms**, in this order: activations; the stop (``"stopped"``, before
   anything below); a suspension (``"suspended"``); compaction (a tool asked,
   or ``needs_compaction`` says the context is too big); persist
   (``save_session``).

Three ways to end early, one meaning each
------------------------------------------

*Hard cancel* (the scope around ``run()``): whatever is awaiting stops at its
next checkpoint and ``Cancelled`` propagates. Before it leaves, with no
checkpoint, every call of the last assistant message is answered: from its
real result if it finished, ``kind: "not_run"`` if it never started,
``kind: "interrupted"`` if it was cut off. No call starts and nothing is
persisted after the cancel. *Soft stop*: see step 5; nothing in flight is
touched. *Suspension*: a tool's directive, after the whole batch.

The same "every call answered" rule holds for any other exception leaving
``run()`` (a fatal tool error, a host port that raised): the transcript an
exception leaves behind is always one a provider accepts, so a host can keep
or discard it but never has to heal it.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio
import anyio.lowlevel
import attrs
import outcome
import sniffio
import trio

from juno_bind_trio import _tracing
from juno_bind_trio._calls import ToolCall, assistant_message
from juno_bind_trio._cancel import (
    cancelled_now,
    checkpoint_if_cancelled,
    is_foreign_cancellation,
    one_failure,
    raise_task_cancellation,
    split_cancellations,
    task_cancellation,
)
from juno_bind_trio._errors import (
    AbortedToolCallError,
    InterruptedToolCallError,
    ToolFailureError,
    UsageError,
)
from juno_bind_trio._validate import is_async_callable
from juno_bind_trio.completion import TurnTextStream
from juno_bind_trio.plugins import (
    SuspendDirective,
    kind_for_error,
    tool_error_text,
    tool_failure_message,
)
from juno_bind_trio.run import DEFAULT_PER_TOOL_LIMIT, ToolBatch
from juno_bind_trio.run._pool import never_started

from ._events import (
    AssistantMessageEvent,
    Interrupt,
    InterruptReceivedEvent,
    StatusEvent,
    TextSinkErrorsEvent,
    ThinkingEvent,
    ToolCallRejectedEvent,
)
from ._results import LoopEndReason, LoopResult, ModelTurnResult, RunStats, ToolCallOutcome
from ._turn import ModelTurn

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from juno_bind_trio.completion import TurnOutcome, TurnStreamSink
    from juno_bind_trio.run import StopSignal, ToolCallLike

    from ._events import LoopEvent
    from ._results import SupportsMessages

__all__ = ["ToolLoop", "ToolLoopStatistics"]

_Value: Final = outcome.Value
_Error: Final = outcome.Error

# An interrupts channel is empty (or done) when receive_nowait raises one of these.
# Both libraries' classes: a trio host may hand the loop a trio channel.
_EMPTY: Final = (anyio.WouldBlock, trio.WouldBlock)
_DONE: Final = (
    anyio.EndOfStream,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    trio.EndOfChannel,
    trio.ClosedResourceError,
    trio.BrokenResourceError,
)


# --- construction-time checks ----------------------------------------------------------


def _required_async(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if not is_async_callable(value):
            raise TypeError(f"ToolLoop: {name} must be an async function, got {value!r}")

    return check


def _optional_async(name: str) -> Any:
    # The ports the loop awaits. A plain function (or one returning a coroutine
    # it made itself) is refused here, as ToolDef refuses a sync handler: left
    # in, it fails on its first call, mid-run, far from the wiring that is wrong.
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None and not is_async_callable(value):
            raise TypeError(f"ToolLoop: {name} must be an async function or None, got {value!r}")

    return check


def _awaitable(port: str, pending: object) -> Awaitable[Any]:
    """*pending*, what an async port's call returned, if it can be awaited; else UsageError.

    Only a function marked as a coroutine function that is not one gets past
    the construction check; without this, ``await`` would raise a TypeError
    that reads as if the loop were broken.
    """
    if inspect.isawaitable(pending):
        return pending
    raise UsageError(
        f"ToolLoop: {port} must be an async function; calling it returned {pending!r}, "
        "which cannot be awaited"
    )


async def _no_tools(call: ToolCall) -> ToolCallOutcome:
    # The run_tool_call of a loop built without one (a text-only run). A model
    # that calls a tool anyway made the mistake, not the host, so it reads the
    # answer a tool that does not exist gets, and the run goes on.
    await anyio.lowlevel.checkpoint()
    raise ToolFailureError(
        "not_found", f"There is no tool named {call.name!r}: this run offers no tools."
    )


def _wiring_mistake(call_id: str, value: object) -> UsageError:
    if isinstance(value, _NotAwaitable):
        return UsageError(
            "ToolLoop: run_tool_call must be an async function returning a ToolCallOutcome; "
            f"calling it returned {value.returned!r}, which cannot be awaited"
        )
    if isinstance(value, ToolCallOutcome):
        return UsageError(
            f"ToolLoop: run_tool_call answered {value.tool_call_id!r} when called for {call_id!r}"
        )
    return UsageError(f"ToolLoop: run_tool_call must return a ToolCallOutcome, got {value!r}")


class _NotAwaitable:
    """What the loop's tool wrapper settles when ``run_tool_call`` returned a non-awaitable."""

    __slots__ = ("returned",)

    def __init__(self, returned: object) -> None:
        self.returned = returned


def _optional_callable(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None and not callable(value):
            raise TypeError(f"ToolLoop: {name} must be callable or None, got {value!r}")

    return check


def _check_state(_instance: Any, _attribute: Any, value: Any) -> None:
    if not isinstance(getattr(value, "messages", None), list):
        raise TypeError(f"ToolLoop: state must have a `messages` list, got {value!r}")


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"ToolLoop: {name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"ToolLoop: {name} must be a positive integer, got {value!r}")
    return value


def _check_max_iterations(value: int) -> int:
    return _positive_int("max_iterations", value)


def _check_first_iteration(value: int) -> int:
    return _positive_int("first_iteration", value)


def _check_per_tool_limit(value: int) -> int:
    return _positive_int("per_tool_limit", value)


def _check_stop(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(getattr(value, "cancel_called", None), bool):
        raise TypeError(
            "ToolLoop: stop must be None or have a bool `cancel_called` "
            f"(a trio or anyio CancelScope), got {value!r}"
        )


def _check_events(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is not None and not callable(getattr(value, "send_nowait", None)):
        raise TypeError(
            f"ToolLoop: events must be None or a memory object send stream, got {value!r}"
        )


def _check_interrupts(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is not None and not callable(getattr(value, "receive_nowait", None)):
        raise TypeError(
            f"ToolLoop: interrupts must be None or a memory object receive stream, got {value!r}"
        )


def _check_text_sink(_instance: Any, _attribute: Any, value: Any) -> None:
    if value is None or callable(getattr(value, "emit", None)) or callable(value):
        return
    raise TypeError(
        "ToolLoop: text_sink must be None, a TurnStreamSink, or a factory "
        f"`(turn_id) -> TurnStreamSink`, got {value!r}"
    )


def _check_owns_text_sink(instance: Any, _attribute: Any, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"ToolLoop: owns_text_sink must be a bool, got {value!r}")
    if not value:
        return
    sink = instance._text_sink
    if sink is None:
        raise TypeError("ToolLoop: owns_text_sink=True needs a text_sink to own")
    if callable(getattr(sink, "emit", None)) and not callable(getattr(sink, "close", None)):
        raise TypeError(
            f"ToolLoop: owns_text_sink=True, but the text_sink has no close(): {sink!r}"
        )


def _check_max_text_resets(given: int | None) -> int | None:
    value: object = given  # checked at run time, whatever the type says
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(
            f"ToolLoop: max_text_resets must be None or a non-negative integer, got {value!r}"
        )
    return value


def _check_run_id(given: str) -> str:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, str) or not value:
        raise TypeError(f"ToolLoop: run_id must be a non-empty string, got {value!r}")
    return value


def _new_run_id() -> str:
    return uuid.uuid4().hex


@attrs.frozen
class ToolLoopStatistics:
    """A snapshot of a [`ToolLoop`][juno_bind_trio.loop.ToolLoop]'s observer traffic, from
    [`ToolLoop.statistics()`][juno_bind_trio.loop.ToolLoop.statistics].

    ``events_dropped`` counts events ``send_nowait`` refused (the channel was
    full, or closed at either end): they are lost, and the loop went on.
    """

    iterations: int
    events_sent: int
    events_dropped: int
    interrupts_received: int


class _OpenBatch:
    """The calls of the assistant message just appended, until every one is answered."""

    __slots__ = (
        "answers",
        "batch",
        "calls",
        "ids",
        "iteration",
        "names",
        "pooled",
        "running",
        "running_raised",
        "spans",
    )

    def __init__(
        self, iteration: int, calls: tuple[ToolCall, ...], ids: list[str], names: list[str]
    ) -> None:
        self.iteration = iteration
        self.calls = calls
        self.ids = ids
        self.names = names
        self.answers: list[dict[str, Any] | None] = [None] * len(calls)
        # The serial call being awaited: the one a hard cancel interrupts.
        self.running: int | None = None
        # What that call raised when the cancel cut it off, if it turned the
        # cancellation into an error: kept as the interruption's cause, as the pool does.
        self.running_raised: Exception | None = None
        # Positions (in `calls`) of the pooled calls, aligned with `batch.calls`.
        self.pooled: list[int] = []
        self.batch: ToolBatch[ToolCallOutcome] | None = None
        # The calls' execute_tool spans; None while no tracer provider is installed.
        found = _tracing.tracer()
        self.spans: _tracing.ToolSpans | None = None if found is None else _tracing.ToolSpans(found)


@final
@attrs.define(eq=False, kw_only=True, repr=False, on_setattr=attrs.setters.NO_OP)
class ToolLoop:
    """Repeatedly call the model and run the tools it asks for, until the run ends.

    Build one per run and ``await loop.run()`` once; it returns a
    [`LoopResult`][juno_bind_trio.loop.LoopResult]. Every parameter is keyword-only.

    Required:

    * ``state``: the run state; its ``messages`` list is the transcript
      (OpenAI chat-format dicts) the loop appends to.
    * ``max_iterations``: the most model calls the run may make.
    * ``call_model``: ``async (ModelTurn) -> ModelTurnResult``, one model turn.

    Every port the loop awaits must be an async function (an ``async def``
    function or method, an object whose ``__call__`` is one, or a
    ``functools.partial`` of either): anything else is a ``TypeError`` here.
    A port that returns what it must not (something that cannot be awaited,
    the wrong type) raises [UsageError][juno_bind_trio.UsageError] from
    [run][juno_bind_trio.loop.ToolLoop.run], naming the port and the value,
    after every call is answered: a wiring mistake is the host's bug, never
    a tool message the model reads.

    Optional ports (``None`` leaves the step out):

    * ``run_tool_call``: ``async (call) -> ToolCallOutcome``, one tool call.
      A tool that fails raises; the exception becomes the tool message
      ``{"success":false,"kind":...,"error":...}`` the model sees, its text
      from [tool_error_text][juno_bind_trio.plugins.tool_error_text]. Left
      out (a text-only run), a tool call the model makes anyway is answered
      as a ``"not_found"`` failure and the run goes on.

    * ``build_tools``: ``() -> Sequence``: the tools offered to the next
      turn, rebuilt every turn (activations change it).
    * ``runs_serially``: ``(call) -> bool``: calls that must run one at a
      time before the pool (plugin activations, typically).
    * ``is_fatal_tool_error``: ``(exc) -> bool``: an error that must end the
      run at once. Raised as itself, never in an exception group.
    * ``activate_plugins`` / ``activate_skills``: ``async (names) -> None``,
      after a batch whose outcomes named ``activated_plugin`` /
      ``activated_skill``.
    * ``should_stop``: ``() -> bool``, asked before every model call.
    * ``on_turn_would_end``: ``async (ModelTurnResult) -> bool``: the model
      answered without tools; return ``True`` to go on (after appending what
      the model should see next).
    * ``needs_compaction``: ``(context_tokens) -> bool`` and
      ``apply_compaction``: ``async () -> None``, which rewrites the
      transcript. Run before persisting when a tool asked for it or
      ``needs_compaction`` says so.
    * ``save_session``: ``async () -> None``, the persist port: awaited at the
      end of every completed iteration; never for a batch the stop fired in,
      a suspension, or after a hard cancel.
    * ``stop``: the soft stop, a ``trio.CancelScope`` or ``anyio.CancelScope``
      the loop only reads (``cancel_called``): once cancelled, no call is
      claimed, nothing in flight is touched, and the run ends ``"stopped"``
      after the batch or before the next model call.
    * ``events``: a memory object send stream for
      [`LoopEvent`][juno_bind_trio.loop.LoopEvent], sent with ``send_nowait``;
      when it is full or closed the event is dropped and counted, and the
      loop goes on. The loop never closes it.
    * ``interrupts``: a memory object receive stream of
      [`Interrupt`][juno_bind_trio.loop.Interrupt], drained with
      ``receive_nowait`` before every model call.
    * ``text_sink``: a [`TurnStreamSink`][juno_bind_trio.completion.TurnStreamSink],
      or a factory ``(turn_id) -> TurnStreamSink``: the loop makes one
      ``TurnTextStream`` per turn for ``call_model`` and finishes it. A
      turn whose sink raised is reported: a ``TextSinkErrorsEvent`` and
      ``RunStats.text_sink_errors``.
    * ``owns_text_sink``: the loop closes ``text_sink`` (its ``close()``)
      when ``run()`` ends, however it ends, so a reader looping over the
      sink's events ends with the run; with a factory, each turn's sink is
      closed once its turn's stream is finished. A ``close()`` that raises
      while an exception is already leaving the run (a cancellation, a
      failed turn) is logged on the ``juno_bind_trio`` logger and that
      exception leaves as it was: a cancel is never replaced by a close
      error. Otherwise the close error propagates from ``run()``.
    * ``max_text_resets``: the streams' ``max_resets``.
    * ``run_id``: prefixes every turn id (``"<run_id>:<iteration>"``);
      random by default.
    * ``first_iteration``: the run's own number for this loop's first model
      call (1, the default, for a new run). A run continued in another loop
      (resumed from a store, say) passes the iteration it continues at, and
      every turn id, event, ``ModelTurn.iteration`` and receipt of this
      loop carries the run's count: no caller adds an offset.
      ``max_iterations`` still counts this loop's model calls.
    * ``per_tool_limit``: the pool's workers per tool name (5).
    """

    _state: SupportsMessages = attrs.field(alias="state", validator=_check_state)
    _max_iterations: int = attrs.field(alias="max_iterations", converter=_check_max_iterations)
    _call_model: Callable[[ModelTurn], Awaitable[ModelTurnResult]] = attrs.field(
        alias="call_model", validator=_required_async("call_model")
    )
    _run_tool_call: Callable[[ToolCall], Awaitable[ToolCallOutcome]] | None = attrs.field(
        default=None, alias="run_tool_call", validator=_optional_async("run_tool_call")
    )
    _build_tools: Callable[[], Sequence[Any]] | None = attrs.field(
        default=None, alias="build_tools", validator=_optional_callable("build_tools")
    )
    _runs_serially: Callable[[ToolCall], bool] | None = attrs.field(
        default=None, alias="runs_serially", validator=_optional_callable("runs_serially")
    )
    _is_fatal_tool_error: Callable[[BaseException], bool] | None = attrs.field(
        default=None,
        alias="is_fatal_tool_error",
        validator=_optional_callable("is_fatal_tool_error"),
    )
    _activate_plugins: Callable[[tuple[str, ...]], Awaitable[None]] | None = attrs.field(
        default=None, alias="activate_plugins", validator=_optional_async("activate_plugins")
    )
    _activate_skills: Callable[[tuple[str, ...]], Awaitable[None]] | None = attrs.field(
        default=None, alias="activate_skills", validator=_optional_async("activate_skills")
    )
    _should_stop: Callable[[], bool] | None = attrs.field(
        default=None, alias="should_stop", validator=_optional_callable("should_stop")
    )
    _on_turn_would_end: Callable[[ModelTurnResult], Awaitable[bool]] | None = attrs.field(
        default=None, alias="on_turn_would_end", validator=_optional_async("on_turn_would_end")
    )
    _needs_compaction: Callable[[int], bool] | None = attrs.field(
        default=None, alias="needs_compaction", validator=_optional_callable("needs_compaction")
    )
    _apply_compaction: Callable[[], Awaitable[None]] | None = attrs.field(
        default=None, alias="apply_compaction", validator=_optional_async("apply_compaction")
    )
    _save_session: Callable[[], Awaitable[None]] | None = attrs.field(
        default=None, alias="save_session", validator=_optional_async("save_session")
    )
    _stop: StopSignal | None = attrs.field(default=None, alias="stop", validator=_check_stop)
    _events: MemoryObjectSendStream[LoopEvent] | None = attrs.field(
        default=None, alias="events", validator=_check_events
    )
    _interrupts: MemoryObjectReceiveStream[Interrupt] | None = attrs.field(
        default=None, alias="interrupts", validator=_check_interrupts
    )
    _text_sink: TurnStreamSink | Callable[[str], TurnStreamSink] | None = attrs.field(
        default=None, alias="text_sink", validator=_check_text_sink
    )
    _max_text_resets: int | None = attrs.field(
        default=None, alias="max_text_resets", converter=_check_max_text_resets
    )
    _owns_text_sink: bool = attrs.field(
        default=False, alias="owns_text_sink", validator=_check_owns_text_sink
    )
    _run_id: str = attrs.field(factory=_new_run_id, alias="run_id", converter=_check_run_id)
    _first_iteration: int = attrs.field(
        default=1, alias="first_iteration", converter=_check_first_iteration
    )
    _per_tool_limit: int = attrs.field(
        default=DEFAULT_PER_TOOL_LIMIT, alias="per_tool_limit", converter=_check_per_tool_limit
    )

    # --- run-time state ------------------------------------------------------------
    _started: bool = attrs.field(default=False, init=False)
    # Model calls this loop started, and the run's iteration of the last of them.
    _turns: int = attrs.field(default=0, init=False)
    _iteration: int = attrs.field(default=0, init=False)
    _open: _OpenBatch | None = attrs.field(default=None, init=False)
    _last_content: str | None = attrs.field(default=None, init=False)
    _send_event: Callable[[LoopEvent], None] | None = attrs.field(default=None, init=False)
    _receive_interrupt: Callable[[], Interrupt] | None = attrs.field(default=None, init=False)
    _events_sent: int = attrs.field(default=0, init=False)
    _events_dropped: int = attrs.field(default=0, init=False)
    _interrupts_received: int = attrs.field(default=0, init=False)
    # RunStats, kept as plain counters: the hot path adds to ints, and the frozen
    # record is built only when someone asks.
    _model_calls: int = attrs.field(default=0, init=False)
    _input_tokens: int = attrs.field(default=0, init=False)
    _output_tokens: int = attrs.field(default=0, init=False)
    _cost: float = attrs.field(default=0.0, init=False)
    _model_seconds: float = attrs.field(default=0.0, init=False)
    _tool_seconds: float = attrs.field(default=0.0, init=False)
    _tool_calls: int = attrs.field(default=0, init=False)
    _tool_failures: int = attrs.field(default=0, init=False)
    _tool_calls_not_run: int = attrs.field(default=0, init=False)
    _tool_calls_interrupted: int = attrs.field(default=0, init=False)
    _compactions: int = attrs.field(default=0, init=False)
    _text_sink_errors: int = attrs.field(default=0, init=False)
    # The sink a factory made for the turn streaming now, when the loop owns it.
    _turn_sink: Any = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self._needs_compaction is not None and self._apply_compaction is None:
            # Asking "is the context too big?" with nothing that could shrink it
            # is a wiring mistake, and silently never compacting is how it shows.
            raise TypeError("ToolLoop: needs_compaction was given without apply_compaction")
        if self._run_tool_call is None:
            self._run_tool_call = _no_tools
        self._iteration = self._first_iteration - 1
        if self._events is not None:
            self._send_event = self._events.send_nowait
        if self._interrupts is not None:
            self._receive_interrupt = self._interrupts.receive_nowait

    def __repr__(self) -> str:
        return (
            f"<ToolLoop run_id={self._run_id!r} iteration={self._turns}/"
            f"{self._max_iterations} started={self._started}>"
        )

    # --- read-only state ----------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The prefix of every turn id of this run."""
        return self._run_id

    @property
    def first_iteration(self) -> int:
        """The run's iteration of this loop's first model call."""
        return self._first_iteration

    @property
    def iterations(self) -> int:
        """Model calls this loop started so far."""
        return self._turns

    @property
    def stats(self) -> RunStats:
        """What the run has cost so far.

        Readable after a hard cancel too, when ``run()`` returned nothing.
        """
        return RunStats(
            model_calls=self._model_calls,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            cost=self._cost,
            model_seconds=self._model_seconds,
            tool_seconds=self._tool_seconds,
            tool_calls=self._tool_calls,
            tool_failures=self._tool_failures,
            tool_calls_not_run=self._tool_calls_not_run,
            tool_calls_interrupted=self._tool_calls_interrupted,
            compactions=self._compactions,
            text_sink_errors=self._text_sink_errors,
        )

    def statistics(self) -> ToolLoopStatistics:
        """Observer traffic so far: events sent and dropped, interrupts received."""
        return ToolLoopStatistics(
            iterations=self._turns,
            events_sent=self._events_sent,
            events_dropped=self._events_dropped,
            interrupts_received=self._interrupts_received,
        )

    # --- the run --------------------------------------------------------------------------

    async def run(self) -> LoopResult:
        """Run the loop to its end and say why it ended.

        :raises UsageError: the loop was already run (a loop runs once).
        :raises Exception: a fatal tool error, as itself; or whatever a port
            (``call_model``, ``save_session``, ...) raised.

        Cancellation propagates. Whatever leaves, every tool call of the last
        assistant message has exactly one answer in ``state.messages`` first.
        """
        if self._started:
            raise UsageError("ToolLoop.run: a loop runs once; build a new ToolLoop for another run")
        self._started = True
        if _tracing.tracer() is None:
            return await self._run()
        # The run's invoke_agent span (or the one its Agent opened), current for the run.
        with _tracing.run_span(self._run_id):
            return await self._run()

    async def _run(self) -> LoopResult:
        try:
            result = await self._loop()
            # A hard cancel outranks every soft ending: with both pending (a
            # shielded tool or port ran across the cancel), the caller gets the
            # cancellation, not a result that reads as "stopped" or "completed".
            await checkpoint_if_cancelled()
        except BaseException as exc:
            # Synchronous, no checkpoint: this must finish before the
            # cancellation (or error) leaves, or a caller's `finally` reads a
            # transcript the provider would reject on the next call.
            self._answer_open_calls()
            self._close_owned_sink(leaving=True)
            if cancelled_now():
                _tracing.logger.info("run %s: cancelled (hard cancel)", self._run_id)
                _tracing.run_event("juno.run.cancelled", {"juno.run.id": self._run_id})
            elif not isinstance(exc, Exception):
                _tracing.logger.info("run %s: ended by %s", self._run_id, type(exc).__name__)
            fresh = task_cancellation(exc)
            if fresh is not None:
                # The task's own cancellation (asyncio): raised so that no cancel
                # scope above can take it for its own and swallow it.
                raise_task_cancellation(fresh)
            raise
        self._close_owned_sink(leaving=False)
        return result

    async def _loop(self) -> LoopResult:
        stop = self._stop
        while True:
            # The soft stop ends the run before another model call: a stop that
            # fired during the last iteration's compaction or persist must not
            # buy a turn nobody wants.
            if stop is not None and stop.cancel_called:
                return self._result("stopped")
            if self._turns >= self._max_iterations:
                return self._result("max_iterations")
            if self._should_stop is not None and self._should_stop():
                return self._result("should_stop")
            self._turns += 1
            self._iteration += 1
            iteration = self._iteration
            if self._receive_interrupt is not None:
                self._drain_interrupts(iteration)

            result = await self._model_turn(iteration)
            calls = result.tool_calls
            assistant = assistant_message(result.content, calls, **result.extra)
            # (The list is re-read every time: apply_compaction may have replaced it.)
            self._state.messages.append(assistant)
            if calls:
                # Opened in the same synchronous step as the append: from here on
                # any exit answers these calls. ModelTurnResult built each ToolCall.
                ids = [call.id for call in calls]
                names = [call.name for call in calls]
                self._open = _OpenBatch(iteration, calls, ids, names)
            self._last_content = result.content
            if result.content and self._send_event is not None:
                self._emit(AssistantMessageEvent(iteration, result.content, bool(calls)))

            if not calls:
                if self._on_turn_would_end is not None:
                    await checkpoint_if_cancelled()
                    go_on = await _awaitable("on_turn_would_end", self._on_turn_would_end(result))
                    if not isinstance(go_on, bool):
                        raise UsageError(
                            f"ToolLoop: on_turn_would_end must return a bool, got {go_on!r}"
                        )
                    if go_on:
                        await self._end_iteration(iteration, result, compaction_requested=False)
                        continue
                await self._persist(iteration)
                return self._result("completed")

            open_batch = self._open
            assert open_batch is not None
            outcomes = await self._run_batch(open_batch)

            suspensions: list[SuspendDirective] = []
            plugins: list[str] = []
            skills: list[str] = []
            compaction_requested = False
            for value in outcomes:
                if value is None:
                    continue
                if value.suspend is not None:
                    suspensions.append(value.suspend)
                if value.activated_plugin is not None and value.activated_plugin not in plugins:
                    plugins.append(value.activated_plugin)
                if value.activated_skill is not None and value.activated_skill not in skills:
                    skills.append(value.activated_skill)
                if value.request_compaction:
                    compaction_requested = True
            if plugins and self._activate_plugins is not None:
                await checkpoint_if_cancelled()
                await _awaitable("activate_plugins", self._activate_plugins(tuple(plugins)))
            if skills and self._activate_skills is not None:
                await checkpoint_if_cancelled()
                await _awaitable("activate_skills", self._activate_skills(tuple(skills)))

            # A stopped batch ends the run HERE: every refused call is already
            # answered (nothing dangles), and this comes before the suspend,
            # compaction and persist arms. Persisting would durably record
            # "these tools failed" for work that was never dispatched, and a
            # resumed run would read that as fact; going on would pay for
            # another model call only to refuse its batch too.
            if stop is not None and stop.cancel_called:
                return self._result("stopped")
            # A tool asked to end the run (a human must answer first). Its results
            # are recorded above; the host records the suspension and persists.
            if suspensions:
                return self._result("suspended", tuple(suspensions))
            await self._end_iteration(iteration, result, compaction_requested)

    # --- one model turn ------------------------------------------------------------------

    async def _model_turn(self, iteration: int) -> ModelTurnResult:
        # No model call is paid for under a pending cancel (see _end_iteration).
        await checkpoint_if_cancelled()
        tools: Sequence[Any] = () if self._build_tools is None else self._build_tools()
        turn_id = f"{self._run_id}:{iteration}"
        stream = self._open_text_stream(turn_id)
        turn = ModelTurn(
            iteration=iteration,
            turn_id=turn_id,
            messages=self._state.messages,
            tools=tools,
            text_stream=stream,
            emit=self._emit,
        )
        if self._send_event is not None:
            self._emit(StatusEvent(iteration, "calling_model"))
        started = anyio.current_time()
        self._model_calls += 1
        try:
            result: ModelTurnResult = await _awaitable("call_model", self._call_model(turn))
        except BaseException:
            # However the turn ended, its stream is finished: "failed" drops an
            # armed reset, so the partial text of the last attempt stays in front
            # of the reader rather than a blank space. finish() is synchronous,
            # so it is safe on the way out of a cancel.
            if stream is not None:
                self._finish_text_stream(stream, iteration, "failed", leaving=True)
            self._model_seconds += anyio.current_time() - started
            raise
        finally:
            turn._end()  # committed or failed: no re-ask after this
        self._model_seconds += anyio.current_time() - started
        returned: object = result
        if not isinstance(returned, ModelTurnResult):
            if stream is not None:
                self._finish_text_stream(stream, iteration, "failed", leaving=True)
            raise UsageError(
                f"ToolLoop: call_model must return a ModelTurnResult, got {returned!r}"
            )
        if stream is not None:
            self._finish_text_stream(stream, iteration, "succeeded", leaving=False)
        self._input_tokens += result.input_tokens
        self._output_tokens += result.output_tokens
        self._cost += result.cost
        if result.reasoning and self._send_event is not None:
            self._emit(ThinkingEvent(iteration, result.reasoning))
        return result

    def _finish_text_stream(
        self, stream: TurnTextStream, iteration: int, outcome: TurnOutcome, *, leaving: bool
    ) -> None:
        # Synchronous, no checkpoint: runs on the way out of a cancel too. A
        # turn whose sink raised has a reader out of step; say so, with the
        # text to resync it from, rather than leave the count on a stream
        # nobody else holds.
        stream.finish(outcome)
        errors = stream.sink_errors
        if errors:
            self._text_sink_errors += errors
            if self._send_event is not None:
                self._emit(TextSinkErrorsEvent(iteration, stream.turn_id, errors, stream.text))
        # Last: a close() that raises must not lose the report above.
        turn_sink = self._turn_sink
        if turn_sink is not None:
            self._turn_sink = None
            self._close_sink(turn_sink, leaving=leaving)

    def _close_owned_sink(self, *, leaving: bool) -> None:
        # Synchronous: runs on the way out of a cancel too.
        given = self._text_sink
        if self._owns_text_sink and callable(getattr(given, "emit", None)):
            self._close_sink(given, leaving=leaving)

    def _close_sink(self, sink: Any, *, leaving: bool) -> None:
        """Close a sink the loop owns; *leaving*: an exception is already leaving the run.

        Then what ``close()`` raises is logged and the exception leaving stays
        the one that leaves: a cancellation above all, which a close error
        raised here would replace (the scope around the run would never see
        it). Otherwise ``close()``'s error propagates.
        """
        if not leaving:
            sink.close()
            return
        try:
            sink.close()
        except Exception:
            _tracing.logger.exception(
                "run %s: the text sink's close() raised while the run was ending on an "
                "exception; that exception is kept",
                self._run_id,
            )

    def _open_text_stream(self, turn_id: str) -> TurnTextStream | None:
        given = self._text_sink
        if given is None:
            return None
        sink: TurnStreamSink
        if callable(getattr(given, "emit", None)):
            sink = cast("TurnStreamSink", given)
        else:
            sink = cast("Callable[[str], TurnStreamSink]", given)(turn_id)
            if self._owns_text_sink:
                if not callable(getattr(sink, "close", None)):
                    raise UsageError(
                        "ToolLoop: owns_text_sink=True, but the text_sink factory made a sink "
                        f"with no close() for turn {turn_id!r}: {sink!r}"
                    )
                self._turn_sink = sink
        return TurnTextStream(sink=sink, turn_id=turn_id, max_resets=self._max_text_resets)

    # --- one batch ------------------------------------------------------------------------

    async def _run_batch(self, open_batch: _OpenBatch) -> list[ToolCallOutcome | None]:
        """Run every call and answer each, in call order.

        Returns the outcomes aligned with the calls (``None`` for a call that failed).
        """
        calls = open_batch.calls
        stop = self._stop
        values: list[ToolCallOutcome | None] = [None] * len(calls)
        if self._send_event is not None:
            self._emit(StatusEvent(open_batch.iteration, "running_tools"))
        started = anyio.current_time()
        try:
            runs_serially = self._runs_serially
            if runs_serially is None:
                pooled = list(range(len(calls)))
            else:
                pooled = []
                for index, call in enumerate(calls):
                    if not runs_serially(call):
                        pooled.append(index)
                        continue
                    values[index] = await self._run_serially(open_batch, index, stop)
            open_batch.pooled = pooled
            if pooled:
                batch: ToolBatch[ToolCallOutcome] = ToolBatch(
                    calls if len(pooled) == len(calls) else [calls[i] for i in pooled]
                )
                open_batch.batch = batch
                results = await batch.run(
                    # The batch holds the loop's ToolCalls, so each call it runs is one.
                    cast("Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]", self._call_tool),
                    stop=stop,
                    per_tool_limit=self._per_tool_limit,
                )
                for position, index in enumerate(pooled):
                    values[index] = self._settle(open_batch, index, results[position], fatal=True)
        finally:
            self._tool_seconds += anyio.current_time() - started
        # Every call settled: answer them all in one synchronous step.
        self._open = None
        answers = open_batch.answers
        self._state.messages.extend(answers)  # type: ignore[arg-type]
        return values

    async def _run_serially(
        self, open_batch: _OpenBatch, index: int, stop: StopSignal | None
    ) -> ToolCallOutcome | None:
        call_id = open_batch.ids[index]
        # A cancel can be pending without this task having seen it (the previous
        # tool swallowed it, or ran shielded): no call may start after one. Checked
        # before the stop, as the pool's workers do: when both fired, the hard
        # cancel wins in either half of the batch, rather than a refusal here
        # (which is_fatal_tool_error may raise) standing in for the Cancelled.
        await checkpoint_if_cancelled()
        # The serial phase is a loop of its own, so it needs the same claim-time
        # check as the pool, through the same three seams (fatal classification,
        # the rejection event, the synthesized answer); otherwise a stopped batch
        # still runs every activation call ahead of the pool that refuses to.
        if stop is not None and stop.cancel_called:
            return self._settle(
                open_batch, index, _Error(AbortedToolCallError(call_id)), fatal=True
            )
        open_batch.running = index
        failed: outcome.Outcome[ToolCallOutcome] | None = None
        try:
            if sniffio.current_async_library() != "asyncio":
                # Trio: Cancelled only ever comes from a cancelled scope, so there
                # is no stray to tell apart and no count to mislead. The call runs
                # here, in this task, with no task spawned for it.
                value = await self._call_tool(open_batch.calls[index])
            else:
                ran = await self._call_tool_in_own_task(open_batch, index, stop)
                if ran is None:
                    # The cancel or the stop came before the call could start.
                    open_batch.running = None
                    await checkpoint_if_cancelled()
                    return self._settle(
                        open_batch, index, _Error(AbortedToolCallError(call_id)), fatal=True
                    )
                how, stray, cut_off = ran
                if stray or (
                    not cut_off
                    and isinstance(how, outcome.Error)
                    and isinstance(how.error, Exception)
                ):
                    # It failed on its own, judged in its task when it raised: a
                    # cancel that arrived since does not make it "interrupted".
                    failed = how
                else:
                    value = how.unwrap()
        except Exception as exc:
            if cancelled_now():
                if never_started(exc, call_id):
                    # The dispatcher says its work never began: the exit path
                    # answers it not_run, as a call never claimed.
                    open_batch.running = None
                    await checkpoint_if_cancelled()
                # The tool turned the cancellation into an ordinary error. It was
                # cut off, whatever it says: leave it "running", so the exit path
                # answers it as interrupted, and let the cancellation through.
                open_batch.running_raised = exc
                await checkpoint_if_cancelled()
            open_batch.running = None
            return self._settle(open_batch, index, _Error(exc), fatal=True)
        except BaseException as exc:
            # The same three cases as the pool's workers (see ToolBatch._work).
            cancels, failures = split_cancellations(exc)
            if cancelled_now():
                if isinstance(failures, Exception):
                    # Its own task group failed while the cancel cut it off: it is
                    # interrupted, and the cancellation leaves alone, not in a group.
                    open_batch.running_raised = failures
                if failures is None or isinstance(failures, Exception):
                    # Left "running": the exit path answers it as interrupted. The
                    # cancellation is raised afresh by the backend rather than
                    # re-raised: on asyncio, the one caught may be a stray
                    # CancelledError, which the caller's scope would not absorb.
                    await checkpoint_if_cancelled()
                if failures is not None and cancels is not None:
                    # A BaseException that outranks the cancel: that one, as itself.
                    raise one_failure(failures) from exc
                raise
            # Not a stray (on asyncio the call's own task judged that; on trio
            # there are none): this task's own cancellation, or a BaseException
            # that outranks every answer.
            failure = one_failure(exc)
            if failure is not exc:
                raise failure from exc
            raise
        open_batch.running = None
        if failed is not None:
            # Its own failure; or asyncio's CancelledError from a future somebody
            # else cancelled, while nobody cancelled the run: a failure too.
            return self._settle(open_batch, index, failed, fatal=True)
        return self._settle(open_batch, index, _Value(value), fatal=True)

    async def _call_tool_in_own_task(
        self, open_batch: _OpenBatch, index: int, stop: StopSignal | None
    ) -> tuple[outcome.Outcome[ToolCallOutcome], bool, bool] | None:
        """Run one serial call in a task of its own: how it ended, as a stray?, cut off?

        On asyncio only: on trio the call runs in the loop's task (see
        ``_run_serially``), since ``Cancelled`` there only ever comes from a
        cancelled scope and nothing below applies.

        ``None`` if it never started: the task starts a step after it is
        spawned, and a cancel or a stop in between finds the call not yet
        started, as the pool's claim-time checks do.

        The call runs alone, as a serial call must, but not in this task,
        because "is this ``CancelledError`` a stray?" cannot be answered
        reliably here. It is answered by ``Task.cancelling()``, and anyio
        (4.16) can bring this task's count back to zero while a host's
        ``task.cancel()`` is in flight: a task group inside the tool, cancelled
        while a scope in one of its tasks had cancelled itself (a deadline, a
        connection race), calls ``uncancel()`` on this task for that scope too.
        The host's cancel would then read as a stray and be answered as the
        tool's failure, and the run would go on. In a task of its own the
        question is asked where no ``task.cancel()`` ever lands, so the count
        cannot mislead; a cancellation of this task comes out of the task group
        below as itself. Everything the call raises is captured there and raised
        by the caller, so it never reaches the task group (nor an exception
        group).
        """
        # (how it ended, a stray?, cut off by a cancel?)
        settled: list[tuple[outcome.Outcome[ToolCallOutcome], bool, bool]] = []
        call = open_batch.calls[index]

        async def call_it() -> None:
            if cancelled_now() or (stop is not None and stop.cancel_called):
                return
            try:
                value = await self._call_tool(call)
            except BaseException as exc:
                settled.append((_Error(exc), is_foreign_cancellation(exc), cancelled_now()))
            else:
                settled.append((_Value(value), False, False))

        outranks: BaseException | None = None
        raised: BaseException | None = None
        try:
            async with anyio.create_task_group() as own:
                own.start_soon(call_it)
        except BaseException:
            # This task's cancellation came out of the task group. If the call
            # had already ended on its own, that is its answer, as it would be
            # had it run here: not "interrupted". If the cancel cut it off, it is
            # left running for the exit path, with what it raised as the
            # interruption's cause; a BaseException it raised besides the
            # cancellation outranks it, as in the pool.
            if not settled:
                open_batch.running = None  # never started: the exit path says not_run
            else:
                how, stray, cut_off = settled[0]
                if isinstance(how, outcome.Error) and never_started(
                    how.error, open_batch.ids[index]
                ):
                    open_batch.running = None  # its dispatcher says it never began
                elif not cut_off or stray:
                    open_batch.running = None
                    self._settle(open_batch, index, how, fatal=False)
                elif isinstance(how, outcome.Error):
                    raised = how.error
                    _, failures = split_cancellations(raised)
                    if isinstance(failures, Exception):
                        open_batch.running_raised = failures
                    elif failures is not None:
                        outranks = one_failure(failures)
            if outranks is None:
                raise
        if outranks is not None:
            # Raised here, past the except: as it was raised, with no context added.
            if outranks is not raised:
                outranks.__cause__ = raised
            raise outranks
        return settled[0] if settled else None

    async def _call_tool(self, call: ToolCall) -> ToolCallOutcome:
        """``run_tool_call``, with what it returned checked where the loop can still say so.

        One coroutine per call, traced or not: the tool's own awaitable is
        awaited here, inside the call's span when a tracer is installed.
        """
        open_batch = self._open
        spans = None if open_batch is None else open_batch.spans
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
                # message the model reads. _settle raises the UsageError instead.
                return cast("ToolCallOutcome", _NotAwaitable(pending))
            return cast("ToolCallOutcome", await pending)
        finally:
            if spans is not None:
                spans.stop(call_id, token)

    def _settle(
        self,
        open_batch: _OpenBatch,
        index: int,
        result: outcome.Outcome[Any],
        *,
        fatal: bool,
    ) -> ToolCallOutcome | None:
        """Turn one call's result into its answer, synchronously.

        Returns the outcome if the call ran well, ``None`` if it failed.
        """
        call_id = open_batch.ids[index]
        if type(result) is _Value:
            value = result.value
            if isinstance(value, ToolCallOutcome) and value.tool_message["tool_call_id"] == call_id:
                open_batch.answers[index] = value.tool_message
                self._tool_calls += 1
                if open_batch.spans is not None:
                    open_batch.spans.settle(
                        call_id,
                        open_batch.names[index],
                        "finished",
                        None,
                        value.tool_message.get("content"),
                    )
                return value
            # The host's run_tool_call is miswired: a UsageError for the host,
            # never a tool message for the model. The call did run, and what it
            # did cannot be read, so its answer is the one for "started, effect
            # unknown"; the exit path answers the rest of the batch.
            mistake = _wiring_mistake(call_id, value)
            self._settle(open_batch, index, _Error(InterruptedToolCallError(call_id)), fatal=False)
            if fatal:
                raise mistake
            return None
        assert isinstance(result, outcome.Error)
        error = result.error
        text = tool_error_text(error)
        open_batch.answers[index] = tool_failure_message(call_id, text, kind_for_error(error))
        self._tool_calls += 1
        if open_batch.spans is not None:
            kind = kind_for_error(error)
            state = kind if kind in ("not_run", "interrupted") else "failed"
            open_batch.spans.settle(
                call_id,
                open_batch.names[index],
                state,
                kind or type(error).__qualname__,
                text,
            )
        if isinstance(error, AbortedToolCallError):
            self._tool_calls_not_run += 1
        elif isinstance(error, InterruptedToolCallError):
            self._tool_calls_interrupted += 1
        else:
            self._tool_failures += 1
        # A fatal error ends the run at once and propagates as itself. It is
        # asked before the rejection event, as the seed asks before its
        # observer: an error that ends the run is not a rejected call.
        if fatal and self._is_fatal_tool_error is not None and self._is_fatal_tool_error(error):
            raise error
        if self._send_event is not None:
            self._emit(
                ToolCallRejectedEvent(
                    iteration=open_batch.iteration,
                    tool_call_id=call_id,
                    tool_name=open_batch.names[index],
                    kind=kind_for_error(error),
                    message=text,
                    error=error,
                )
            )
        return None

    def _answer_open_calls(self) -> None:
        """Answer every unanswered call of the open batch and append the answers. No checkpoint.

        Runs on the way out of ``run()`` for any exception. A call with a real
        result (it finished, or a fatal error was raised after the pool
        returned) gets that; the serial call being awaited is interrupted; a
        pooled call gets what the batch settled it as (refused or
        interrupted); anything else never started and is ``not_run``.
        """
        open_batch = self._open
        if open_batch is None:
            return
        self._open = None
        batch = open_batch.batch
        pooled_position = {index: position for position, index in enumerate(open_batch.pooled)}
        for index, call_id in enumerate(open_batch.ids):
            if open_batch.answers[index] is not None:
                continue
            result: outcome.Outcome[Any] | None = None
            if index == open_batch.running:
                interrupted = InterruptedToolCallError(call_id)
                interrupted.__cause__ = open_batch.running_raised
                result = _Error(interrupted)
            elif batch is not None and index in pooled_position:
                result = batch.result(pooled_position[index])
            if result is None:
                result = _Error(AbortedToolCallError(call_id))
            self._settle(open_batch, index, result, fatal=False)
        # _settle(fatal=False) cannot raise: tool_error_text and kind_for_error
        # never do, whatever the tool raised. This runs on the way out of a
        # cancel, and an exception here would leave calls unanswered.
        self._state.messages.extend(open_batch.answers)  # type: ignore[arg-type]

    # --- the end of an iteration ----------------------------------------------------------

    async def _end_iteration(
        self, iteration: int, result: ModelTurnResult, compaction_requested: bool
    ) -> None:
        # Each port is entered only past a cancellation check: a cancel that landed
        # while this task was not at a checkpoint (a port that shielded itself, a
        # tool that swallowed it) would otherwise let the next port start its
        # work, and its first await would raise only after that work began.
        await checkpoint_if_cancelled()
        if self._apply_compaction is not None and (
            compaction_requested
            or (
                self._needs_compaction is not None and self._needs_compaction(result.context_tokens)
            )
        ):
            if self._send_event is not None:
                self._emit(StatusEvent(iteration, "compacting"))
            await _awaitable("apply_compaction", self._apply_compaction())
            self._compactions += 1
        await self._persist(iteration)

    async def _persist(self, iteration: int) -> None:
        if self._save_session is None:
            return
        # Above all never persist under a pending cancel (see _end_iteration).
        await checkpoint_if_cancelled()
        if self._send_event is not None:
            self._emit(StatusEvent(iteration, "saving_session"))
        await _awaitable("save_session", self._save_session())

    # --- observers in, observers out ---------------------------------------------------

    def _emit(self, event: LoopEvent) -> None:
        send = self._send_event
        if send is None:
            return
        # Full, closed or broken: the event is dropped and counted, never raised.
        # An observer that cannot keep up must not slow the run, and one that
        # went away must not end it; the count is how a host notices either.
        try:
            send(event)
        except Exception:
            self._events_dropped += 1
        else:
            self._events_sent += 1

    def _drain_interrupts(self, iteration: int) -> None:
        receive = self._receive_interrupt
        assert receive is not None
        messages = self._state.messages
        while True:
            try:
                item = receive()
            except _EMPTY:
                return
            except _DONE:
                # The host closed its end: nothing more will come, stop asking.
                self._receive_interrupt = None
                return
            if not isinstance(item, Interrupt):
                raise TypeError(f"ToolLoop: interrupts must carry Interrupt items, got {item!r}")
            messages.append({"role": "user", "content": item.content})
            self._interrupts_received += 1
            if self._send_event is not None:
                self._emit(InterruptReceivedEvent(iteration, item))

    def _result(
        self, reason: LoopEndReason, suspensions: tuple[SuspendDirective, ...] = ()
    ) -> LoopResult:
        if reason == "stopped":
            _tracing.logger.info("run %s: soft stop", self._run_id)
            _tracing.run_event("juno.run.stopped", {"juno.run.id": self._run_id})
        return LoopResult(
            reason=reason,
            iterations=self._turns,
            stats=self.stats,
            content=self._last_content,
            suspensions=suspensions,
        )
