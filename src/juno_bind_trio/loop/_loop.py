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

This module is the iteration itself. What it leans on lives beside it: the
ports' checks (``_ports``), the calls of the open batch and their answers
(``_batch``, on the pool of ``juno_bind_trio.run``), each turn's text stream
(``_turn_sinks``), the observers' channels (``_observers``) and the counts
(``_counters``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, final

import anyio
import attrs

from juno_bind_trio import _tracing
from juno_bind_trio._calls import ToolCall, assistant_message
from juno_bind_trio._cancel import (
    cancelled_now,
    checkpoint_if_cancelled,
    raise_task_cancellation,
    task_cancellation,
)
from juno_bind_trio._errors import UsageError
from juno_bind_trio.run import DEFAULT_PER_TOOL_LIMIT

from . import _ports as ports
from ._batch import BatchRequests, OpenBatch
from ._counters import Counters, ToolLoopStatistics
from ._events import (
    AssistantMessageEvent,
    Interrupt,
    StatusEvent,
    ThinkingEvent,
)
from ._observers import Observers
from ._results import LoopEndReason, LoopResult, ModelTurnResult, RunStats, ToolCallOutcome
from ._turn import ModelTurn
from ._turn_sinks import TurnSinks

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from juno_bind_trio.completion import TurnStreamSink
    from juno_bind_trio.plugins import SuspendDirective
    from juno_bind_trio.run import StopSignal

    from ._events import LoopEvent
    from ._results import SupportsMessages

__all__ = ["ToolLoop"]


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

    _state: SupportsMessages = attrs.field(alias="state", validator=ports.check_state)
    _max_iterations: int = attrs.field(alias="max_iterations", converter=ports.check_max_iterations)
    _call_model: Callable[[ModelTurn], Awaitable[ModelTurnResult]] = attrs.field(
        alias="call_model", validator=ports.required_async("call_model")
    )
    _run_tool_call: Callable[[ToolCall], Awaitable[ToolCallOutcome]] | None = attrs.field(
        default=None, alias="run_tool_call", validator=ports.optional_async("run_tool_call")
    )
    _build_tools: Callable[[], Sequence[Any]] | None = attrs.field(
        default=None, alias="build_tools", validator=ports.optional_callable("build_tools")
    )
    _runs_serially: Callable[[ToolCall], bool] | None = attrs.field(
        default=None, alias="runs_serially", validator=ports.optional_callable("runs_serially")
    )
    _is_fatal_tool_error: Callable[[BaseException], bool] | None = attrs.field(
        default=None,
        alias="is_fatal_tool_error",
        validator=ports.optional_callable("is_fatal_tool_error"),
    )
    _activate_plugins: Callable[[tuple[str, ...]], Awaitable[None]] | None = attrs.field(
        default=None, alias="activate_plugins", validator=ports.optional_async("activate_plugins")
    )
    _activate_skills: Callable[[tuple[str, ...]], Awaitable[None]] | None = attrs.field(
        default=None, alias="activate_skills", validator=ports.optional_async("activate_skills")
    )
    _should_stop: Callable[[], bool] | None = attrs.field(
        default=None, alias="should_stop", validator=ports.optional_callable("should_stop")
    )
    _on_turn_would_end: Callable[[ModelTurnResult], Awaitable[bool]] | None = attrs.field(
        default=None, alias="on_turn_would_end", validator=ports.optional_async("on_turn_would_end")
    )
    _needs_compaction: Callable[[int], bool] | None = attrs.field(
        default=None,
        alias="needs_compaction",
        validator=ports.optional_callable("needs_compaction"),
    )
    _apply_compaction: Callable[[], Awaitable[None]] | None = attrs.field(
        default=None, alias="apply_compaction", validator=ports.optional_async("apply_compaction")
    )
    _save_session: Callable[[], Awaitable[None]] | None = attrs.field(
        default=None, alias="save_session", validator=ports.optional_async("save_session")
    )
    _stop: StopSignal | None = attrs.field(default=None, alias="stop", validator=ports.check_stop)
    _events: MemoryObjectSendStream[LoopEvent] | None = attrs.field(
        default=None, alias="events", validator=ports.check_events
    )
    _interrupts: MemoryObjectReceiveStream[Interrupt] | None = attrs.field(
        default=None, alias="interrupts", validator=ports.check_interrupts
    )
    _text_sink: TurnStreamSink | Callable[[str], TurnStreamSink] | None = attrs.field(
        default=None, alias="text_sink", validator=ports.check_text_sink
    )
    _max_text_resets: int | None = attrs.field(
        default=None, alias="max_text_resets", converter=ports.check_max_text_resets
    )
    _owns_text_sink: bool = attrs.field(
        default=False, alias="owns_text_sink", validator=ports.check_owns_text_sink
    )
    _run_id: str = attrs.field(
        factory=ports.new_run_id, alias="run_id", converter=ports.check_run_id
    )
    _first_iteration: int = attrs.field(
        default=1, alias="first_iteration", converter=ports.check_first_iteration
    )
    _per_tool_limit: int = attrs.field(
        default=DEFAULT_PER_TOOL_LIMIT, alias="per_tool_limit", converter=ports.check_per_tool_limit
    )

    # --- run-time state ------------------------------------------------------------
    _started: bool = attrs.field(default=False, init=False)
    # The run's iteration of the turn now (or last) running.
    _iteration: int = attrs.field(default=0, init=False)
    _open: OpenBatch | None = attrs.field(default=None, init=False)
    _last_content: str | None = attrs.field(default=None, init=False)
    _counts: Counters = attrs.field(factory=Counters, init=False)
    _observers: Observers = attrs.field(init=False)
    _sinks: TurnSinks = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if self._needs_compaction is not None and self._apply_compaction is None:
            # Asking "is the context too big?" with nothing that could shrink it
            # is a wiring mistake, and silently never compacting is how it shows.
            raise TypeError("ToolLoop: needs_compaction was given without apply_compaction")
        if self._run_tool_call is None:
            self._run_tool_call = ports.no_tools
        self._iteration = self._first_iteration - 1
        self._observers = observers = Observers(
            None if self._events is None else self._events.send_nowait,
            None if self._interrupts is None else self._interrupts.receive_nowait,
            self._counts,
        )
        self._sinks = TurnSinks(
            self._text_sink,
            owns=self._owns_text_sink,
            max_resets=self._max_text_resets,
            run_id=self._run_id,
            counters=self._counts,
            emit=None if observers.send is None else observers.emit,
        )

    def __repr__(self) -> str:
        return (
            f"<ToolLoop run_id={self._run_id!r} iteration={self._counts.turns}/"
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
        return self._counts.turns

    @property
    def stats(self) -> RunStats:
        """What the run has cost so far.

        Readable after a hard cancel too, when ``run()`` returned nothing.
        """
        return self._counts.stats()

    def statistics(self) -> ToolLoopStatistics:
        """Observer traffic so far: events sent and dropped, interrupts received."""
        return self._counts.statistics()

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
            open_batch = self._open
            if open_batch is not None:
                self._open = None
                self._state.messages.extend(open_batch.answer_the_rest())
            self._sinks.close_owned(leaving=True)
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
        self._sinks.close_owned(leaving=False)
        return result

    async def _loop(self) -> LoopResult:
        stop = self._stop
        counts = self._counts
        observers = self._observers
        while True:
            # The soft stop ends the run before another model call: a stop that
            # fired during the last iteration's compaction or persist must not
            # buy a turn nobody wants.
            if stop is not None and stop.cancel_called:
                return self._result("stopped")
            if counts.turns >= self._max_iterations:
                return self._result("max_iterations")
            if self._should_stop is not None and self._should_stop():
                return self._result("should_stop")
            counts.turns += 1
            self._iteration += 1
            iteration = self._iteration
            observers.drain_interrupts(iteration, self._state.messages)

            result = await self._model_turn(iteration)
            calls = result.tool_calls
            # (The list is re-read every time: apply_compaction may have replaced it.)
            self._state.messages.append(assistant_message(result.content, calls, **result.extra))
            if calls:
                # Opened in the same synchronous step as the append: from here on
                # any exit answers these calls. ModelTurnResult built each ToolCall.
                self._open = OpenBatch(
                    iteration,
                    calls,
                    run_tool_call=self._run_tool_call,  # type: ignore[arg-type]  # set above
                    is_fatal=self._is_fatal_tool_error,
                    counters=counts,
                    emit=None if observers.send is None else observers.emit,
                )
            self._last_content = result.content
            if result.content and observers.send is not None:
                observers.emit(AssistantMessageEvent(iteration, result.content, bool(calls)))

            if not calls:
                if self._on_turn_would_end is not None:
                    await checkpoint_if_cancelled()
                    would_end = self._on_turn_would_end(result)
                    go_on = await ports.awaitable("on_turn_would_end", would_end)
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
            asked = BatchRequests(await self._run_batch(open_batch))
            if asked.plugins and self._activate_plugins is not None:
                await checkpoint_if_cancelled()
                plugins = self._activate_plugins(tuple(asked.plugins))
                await ports.awaitable("activate_plugins", plugins)
            if asked.skills and self._activate_skills is not None:
                await checkpoint_if_cancelled()
                skills = self._activate_skills(tuple(asked.skills))
                await ports.awaitable("activate_skills", skills)

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
            if asked.suspensions:
                return self._result("suspended", tuple(asked.suspensions))
            await self._end_iteration(iteration, result, asked.compaction)

    # --- one model turn ------------------------------------------------------------------

    async def _model_turn(self, iteration: int) -> ModelTurnResult:
        # No model call is paid for under a pending cancel (see _end_iteration).
        await checkpoint_if_cancelled()
        counts = self._counts
        observers = self._observers
        tools: Sequence[Any] = () if self._build_tools is None else self._build_tools()
        turn_id = f"{self._run_id}:{iteration}"
        sinks = self._sinks
        stream = sinks.open(turn_id)
        turn = ModelTurn(
            iteration=iteration,
            turn_id=turn_id,
            messages=self._state.messages,
            tools=tools,
            text_stream=stream,
            emit=observers.emit,
        )
        if observers.send is not None:
            observers.emit(StatusEvent(iteration, "calling_model"))
        started = anyio.current_time()
        counts.model_calls += 1
        try:
            result: ModelTurnResult = await ports.awaitable("call_model", self._call_model(turn))
        except BaseException:
            # However the turn ended, its stream is finished: "failed" drops an
            # armed reset, so the partial text of the last attempt stays in front
            # of the reader rather than a blank space. finish() is synchronous,
            # so it is safe on the way out of a cancel.
            if stream is not None:
                sinks.finish(stream, iteration, "failed", leaving=True)
            counts.model_seconds += anyio.current_time() - started
            raise
        finally:
            turn._end()  # committed or failed: no re-ask after this
        counts.model_seconds += anyio.current_time() - started
        returned: object = result
        if not isinstance(returned, ModelTurnResult):
            if stream is not None:
                sinks.finish(stream, iteration, "failed", leaving=True)
            raise UsageError(
                f"ToolLoop: call_model must return a ModelTurnResult, got {returned!r}"
            )
        if stream is not None:
            sinks.finish(stream, iteration, "succeeded", leaving=False)
        counts.input_tokens += result.input_tokens
        counts.output_tokens += result.output_tokens
        counts.cached_tokens += result.cached_tokens
        counts.reasoning_tokens += result.reasoning_tokens
        counts.cost += result.cost
        if result.reasoning and observers.send is not None:
            observers.emit(ThinkingEvent(iteration, result.reasoning))
        return result

    # --- one batch ------------------------------------------------------------------------

    async def _run_batch(self, open_batch: OpenBatch) -> list[ToolCallOutcome | None]:
        """Run every call and answer each, in call order.

        Calls ``runs_serially`` picks run first, one at a time, in order, each
        in a pool batch of its own (so a stop or a cancel ends it as it ends
        any call, and a fatal failure ends the run before the next starts);
        the rest run through one pooled batch. Returns the outcomes aligned
        with the calls (``None`` for a call that failed).
        """
        calls = open_batch.calls
        stop = self._stop
        limit = self._per_tool_limit
        values: list[ToolCallOutcome | None] = [None] * len(calls)
        if self._observers.send is not None:
            self._observers.emit(StatusEvent(open_batch.iteration, "running_tools"))
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
                    (alone,) = await open_batch.run([index], stop=stop, per_tool_limit=1)
                    values[index] = open_batch.settle(index, alone, fatal=True)
            if pooled:
                results = await open_batch.run(pooled, stop=stop, per_tool_limit=limit)
                for position, index in enumerate(pooled):
                    values[index] = open_batch.settle(index, results[position], fatal=True)
        finally:
            self._counts.tool_seconds += anyio.current_time() - started
        # Every call settled: answer them all in one synchronous step.
        self._open = None
        self._state.messages.extend(open_batch.answer_the_rest())
        return values

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
            if self._observers.send is not None:
                self._observers.emit(StatusEvent(iteration, "compacting"))
            await ports.awaitable("apply_compaction", self._apply_compaction())
            self._counts.compactions += 1
        await self._persist(iteration)

    async def _persist(self, iteration: int) -> None:
        if self._save_session is None:
            return
        # Above all never persist under a pending cancel (see _end_iteration).
        await checkpoint_if_cancelled()
        if self._observers.send is not None:
            self._observers.emit(StatusEvent(iteration, "saving_session"))
        await ports.awaitable("save_session", self._save_session())

    def _result(
        self, reason: LoopEndReason, suspensions: tuple[SuspendDirective, ...] = ()
    ) -> LoopResult:
        if reason == "stopped":
            _tracing.logger.info("run %s: soft stop", self._run_id)
            _tracing.run_event("juno.run.stopped", {"juno.run.id": self._run_id})
        return LoopResult(
            reason=reason,
            iterations=self._counts.turns,
            stats=self.stats,
            content=self._last_content,
            suspensions=suspensions,
        )
