"""A run that lives in a store: claimed under a lease, persisted as it goes, resumable.

[open_durable_run][juno_bind_trio.store.open_durable_run] claims a stored run,
loads and heals its transcript, keeps the lease alive with a coalesced
heartbeat, and yields a [DurableRun][juno_bind_trio.store.DurableRun] whose
wrappers plug the store into a [ToolLoop][juno_bind_trio.loop.ToolLoop]'s
ports:

* ``call_model``: when the model asks for tools, the assistant message is
  recorded (the run's *open turn*) before any of them is dispatched;
* ``run_tool_call``: each call's receipt is written ``"started"`` before the
  tool runs and settled (``"succeeded"``, ``"failed"``, ``"interrupted"``)
  when it ends;
* ``save_session``: the transcript, written whole at the end of every
  completed iteration, closing the open turn.

What a resume does with each call of the open turn
---------------------------------------------------

A run that stopped between recording its open turn and saving the iteration
(a crash, a SIGKILL, a soft stop, a hard cancel) has calls in every state.
[DurableRun.finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn]
answers each, by its receipt, through
[decide_tool_call_receipt][juno_bind_trio.run.decide_tool_call_receipt]:

* it finished (``"succeeded"``/``"failed"``): its recorded answer is used,
  and the tool is not run again;
* it never started (no receipt; the loop's ``not_run`` refusals are never
  saved, so they arrive here the same way): it is dispatched now;
* it started and did not finish: a repeatable tool runs again; a
  non-repeatable one is answered ``kind: "interrupted"`` and never re-run
  (with [WORKER_STOPPED_TOOL_CALL_MESSAGE][juno_bind_trio.store.WORKER_STOPPED_TOOL_CALL_MESSAGE]
  when its worker stopped while it ran, receipt ``"started"``; with
  [INTERRUPTED_TOOL_CALL_MESSAGE][juno_bind_trio.INTERRUPTED_TOOL_CALL_MESSAGE]
  when a cancel cut it off, receipt ``"interrupted"``), unless the tool
  honours the call's idempotency key, in which case it is dispatched again
  with the same key and the effect's own service drops the duplicate.

The never-started calls run as the loop would have run them: calls
``runs_serially`` picks first, one at a time, in order, then the rest
through the pool at ``per_tool_limit`` calls a tool at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any, Final, final

import anyio
import attrs
import outcome

from juno_bind_trio._cancel import cancelled_now, checkpoint_if_cancelled
from juno_bind_trio._errors import (
    INTERRUPTED_TOOL_CALL_MESSAGE,
    LeaseLostError,
    RunLeasedError,
    StoreDataError,
    TranscriptError,
    UsageError,
)
from juno_bind_trio._validate import is_async_callable
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.plugins import kind_for_error, tool_error_text, tool_failure_message
from juno_bind_trio.run import (
    ChainRef,
    EffectResumability,
    ReceiptState,
    SoftStop,
    ToolBatch,
    ToolCall,
    ToolCallLike,
    assistant_message,
    decide_tool_call_receipt,
    open_coalesced_heartbeat,
    tool_call_args_hash,
    tool_call_idempotency_key,
    tool_call_receipt_key,
)
from juno_bind_trio.transcript import HealChange, HealResult, heal_transcript

from ._owner import holder_is_gone
from ._records import (
    DEFAULT_LEASE_TTL,
    RESUMABLE_STATUSES,
    Lease,
    ReceiptRecord,
    RunStatus,
    StoredRun,
)
from ._store import RunStore

__all__ = [
    "WORKER_STOPPED_TOOL_CALL_MESSAGE",
    "DurableRun",
    "OpenTurnAnswer",
    "open_durable_run",
    "tool_call_idempotency_key",
    "tool_call_receipt_key",
]

WORKER_STOPPED_TOOL_CALL_MESSAGE: Final = (
    "This call was started, but the worker running it stopped before it finished "
    "(its process ended, or it lost the run), so it is unknown whether it took "
    "effect. Check its effect before repeating it."
)
"""What a resume answers for a non-repeatable call whose receipt says ``"started"``.

The worker that dispatched the call stopped while it ran, without a word (a
crash, a ``SIGKILL``, a lost lease): nothing cancelled it, so the answer says
so. A call a cancel cut off (receipt ``"interrupted"``) is answered with
[INTERRUPTED_TOOL_CALL_MESSAGE][juno_bind_trio.INTERRUPTED_TOOL_CALL_MESSAGE].
Both are ``kind: "interrupted"``: the effect is unknown, check it first.
"""


def _earlier_args_hash(raw: str) -> str:
    """The arguments' hash as versions before the one arguments rule wrote it.

    They hashed ``json.loads`` of the text, or the text where that failed, so
    ``""``, ``"null"`` and a bare JSON value hashed apart from ``"{}"``. A run
    stored by such a version and resumed by this one keeps its receipts: a
    call that finished is still answered from its receipt, never run again.
    """
    try:
        return tool_call_args_hash(json.loads(raw))
    except (TypeError, ValueError, RecursionError):
        return tool_call_args_hash(raw)


@final
@attrs.frozen
class OpenTurnAnswer:
    """How a resume answered one call of the open turn.

    ``action`` is [decide_tool_call_receipt][juno_bind_trio.run.decide_tool_call_receipt]'s:
    ``"reuse"`` (its receipt's answer), ``"run"`` (dispatched now) or
    ``"refuse"`` (answered as interrupted, not run). ``state`` is what the
    receipt said (``"absent"`` for none); ``reason`` says why in a sentence.
    """

    tool_call_id: str
    tool_name: str
    state: str
    action: str
    reason: str


# The ToolLoop arguments that are the run's own: tool_loop gives them, the host never.
# Another state is a transcript the store never sees; another save_session (or none)
# saves no iteration; another stop lets a worker that lost its lease run on.
_RUN_OWNED: Final = ("state", "save_session", "stop")


def _non_repeatable(_name: str) -> EffectResumability:
    return "non_repeatable"


def _never(_name: str) -> bool:
    return False


@final
@attrs.define(eq=False, repr=False)
class DurableRun:
    """A claimed run: its transcript, its lease, and the ports that persist it.

    Made by [open_durable_run][juno_bind_trio.store.open_durable_run]. Answer
    the open turn a crash left
    ([finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn]),
    build the run's loop with
    [tool_loop][juno_bind_trio.store.DurableRun.tool_loop], run it, then
    ``await run.finish(result.reason)``.

    ``tool_loop`` wires the five ports a durable loop needs. Wiring a
    [ToolLoop][juno_bind_trio.loop.ToolLoop] by hand stays supported (a host
    that combines the run's stop with its own, say): give it
    ``state=run.state``, ``call_model=run.wrap_call_model(...)``,
    ``run_tool_call=run.wrap_tool_call(...)``, ``save_session=run.save_session``,
    ``stop=run.stop`` and ``first_iteration=run.first_iteration``. Leave out
    ``save_session`` or ``stop`` and nothing refuses it, but the run is no
    longer durable: no iteration is saved, or a worker that lost its lease runs
    on. Leave out ``first_iteration`` and the run's iterations still count on
    from the stored ones, but the loop's turn ids restart at 1.
    """

    _store: RunStore = attrs.field(alias="store")
    _lease: Lease = attrs.field(alias="lease")
    _loaded: StoredRun = attrs.field(alias="loaded")
    _resumability: Callable[[str], EffectResumability] = attrs.field(alias="resumability")
    _uses_key: Callable[[str], bool] = attrs.field(alias="uses_idempotency_key")
    state: LoopState = attrs.field(alias="state")
    heal_changes: tuple[HealChange, ...] = attrs.field(alias="heal_changes")
    stop: SoftStop = attrs.field(factory=lambda: SoftStop(), init=False)
    _iteration: int = attrs.field(default=0, init=False)
    _lost: bool = attrs.field(default=False, init=False)
    _finished: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        # Made by open_durable_run; a host building one by hand gets told what is wrong.
        checks: tuple[tuple[str, object, type | tuple[type, ...]], ...] = (
            ("store", self._store, RunStore),
            ("lease", self._lease, Lease),
            ("loaded", self._loaded, StoredRun),
            ("state", self.state, LoopState),
            ("heal_changes", self.heal_changes, tuple),
        )
        for name, value, kind in checks:
            if not isinstance(value, kind):
                raise TypeError(f"DurableRun: {name} is not what it must be: {value!r:.80}")
        ports: tuple[object, ...] = (self._resumability, self._uses_key)
        if not all(callable(port) for port in ports):
            raise TypeError("DurableRun: resumability and uses_idempotency_key must be callable")
        self._iteration = self._loaded.record.iteration

    def __repr__(self) -> str:
        return (
            f"<DurableRun {self.run_id!r} iteration={self._iteration} "
            f"token={self._lease.token} lost={self._lost}>"
        )

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._lease.run_id

    @property
    def lease(self) -> Lease:
        """The lease as last renewed."""
        return self._lease

    @property
    def chain(self) -> ChainRef:
        """The run's lineage, as stored."""
        return self._loaded.record.chain

    @property
    def lost(self) -> bool:
        """Whether the lease was lost: the run stopped softly and writes nothing more."""
        return self._lost

    @property
    def iteration(self) -> int:
        """The run's iteration count so far, across every worker that ran it."""
        return self._iteration

    @property
    def first_iteration(self) -> int:
        """The run's number for its next model call: one past its iteration so far.

        Give it to the run's loop (``ToolLoop(first_iteration=run.first_iteration)``;
        [tool_loop][juno_bind_trio.store.DurableRun.tool_loop] does): the loop
        then numbers its turns as the run does, so turn ids, events, receipts
        and ``ModelTurn.iteration`` continue where the stored run was, in
        every process that runs it, and no turn id repeats.
        """
        return self._iteration + 1

    @property
    def open_turn_iteration(self) -> int | None:
        """The iteration of the turn a crash left open, which
        [finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn] answers;
        ``None`` when no turn is open (or it was answered already).

        Its calls' receipts are recorded under this iteration; a loop run after
        it starts at [first_iteration][juno_bind_trio.store.DurableRun.first_iteration].
        """
        if self._loaded.pending_turn is None:
            return None
        return self._loaded.record.pending_iteration

    @property
    def answered(self) -> bool:
        """Whether the run had already ended with the model's answer.

        True when the transcript ends with an assistant message that called
        no tool and no turn is open: the last iteration was saved, and only
        the run's status was lost (the worker died between that save and
        [finish][juno_bind_trio.store.DurableRun.finish]). Finish it as
        ``"completed"`` instead of asking the model again.
        """
        messages = self.state.messages
        if self._loaded.pending_turn is not None or not messages:
            return False
        last = messages[-1]
        return last.get("role") == "assistant" and not last.get("tool_calls")

    @property
    def open_turn(self) -> dict[str, Any] | None:
        """The assistant message whose calls a crash left unanswered, until
        [finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn] answers them."""
        return self._loaded.pending_turn

    def idempotency_key(self, call: ToolCallLike) -> str:
        """*call*'s idempotency key: the same in this process and in every resume."""
        return tool_call_idempotency_key(tool_call_receipt_key(self.run_id, call))

    # --- the lease -------------------------------------------------------------------

    def _lose(self) -> None:
        self._lost = True
        self.stop.cancel()

    async def _write(self, work: Awaitable[None]) -> None:
        # A write refused because the lease is gone: the run stops softly (the
        # loop's stop fires) and this worker writes nothing more. What the loop
        # holds in memory goes on being right; it is just no longer saved.
        try:
            await work
        except LeaseLostError:
            self._lose()

    async def renew(self, progress: object = None, *, ttl: float) -> None:
        """Renew the lease now (the heartbeat calls this); a lost lease stops the run softly.

        Once the run is finished its lease is given up: there is nothing to
        renew, and a renewal that was already under way and is refused
        because of it does not make the run lost."""
        if self._lost or self._finished:
            return
        try:
            renewed = await self._store.renew_lease(self._lease, ttl=ttl, progress=progress)
        except LeaseLostError:
            if not self._finished:
                self._lose()
            return
        if not self._finished:
            self._lease = renewed

    # --- the ports ---------------------------------------------------------------------

    def wrap_call_model(
        self, call_model: Callable[[ModelTurn], Awaitable[ModelTurnResult]]
    ) -> Callable[[ModelTurn], Awaitable[ModelTurnResult]]:
        """*call_model*, recording the assistant message before any of its calls runs."""
        if not callable(call_model):
            raise TypeError(f"DurableRun.wrap_call_model: expected a callable, got {call_model!r}")

        # What the loop's turn numbers add to the run's: nothing for a loop built with
        # first_iteration=run.first_iteration (tool_loop's); for a loop wired by hand
        # that counts from 1, the iterations the run had before it. Read from the
        # first turn: a loop that continues the run starts past them.
        offset: list[int] = []

        async def durable_call_model(turn: ModelTurn) -> ModelTurnResult:
            result = await call_model(turn)
            if not offset:
                offset.append(0 if turn.iteration > self._iteration else self._iteration)
            self._iteration = offset[0] + turn.iteration
            given: object = result
            if isinstance(given, ModelTurnResult) and result.tool_calls:
                # The message the loop appends, by the same builder.
                assistant = assistant_message(result.content, result.tool_calls, **result.extra)
                await self._write(
                    self._store.save_turn(
                        self._lease, iteration=self._iteration, assistant=assistant
                    )
                )
            return result

        return durable_call_model

    def wrap_tool_call(
        self, run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]
    ) -> Callable[[ToolCallLike], Awaitable[ToolCallOutcome]]:
        """*run_tool_call*, with its receipt written before it runs and when it settles."""
        if not callable(run_tool_call):
            raise TypeError(
                f"DurableRun.wrap_tool_call: expected a callable, got {run_tool_call!r}"
            )

        async def durable_tool_call(call: ToolCallLike) -> ToolCallOutcome:
            return await self._dispatch(run_tool_call, call, self._iteration)

        return durable_tool_call

    def tool_loop(
        self,
        *,
        call_model: Callable[[ModelTurn], Awaitable[ModelTurnResult]],
        run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]],
        **loop_options: Any,
    ) -> ToolLoop:
        """A [ToolLoop][juno_bind_trio.loop.ToolLoop] on this run, its durable ports wired.

        The loop gets the run's ``state``; *call_model* and *run_tool_call*
        wrapped by [wrap_call_model][juno_bind_trio.store.DurableRun.wrap_call_model]
        and [wrap_tool_call][juno_bind_trio.store.DurableRun.wrap_tool_call]
        (both must be async functions, as the loop requires of its ports);
        ``save_session`` the run's; ``stop`` the run's
        [SoftStop][juno_bind_trio.run.SoftStop], fired when the lease is lost;
        ``run_id`` the run's id; and ``first_iteration`` the run's next
        ([first_iteration][juno_bind_trio.store.DurableRun.first_iteration]),
        so the loop's turns are numbered as the run's. Every other ToolLoop keyword
        (``max_iterations``, which the loop requires, ``text_sink``, ``events``,
        ``per_tool_limit``, ...) is passed on as given.

        ``state``, ``save_session`` and ``stop`` belong to the run and are
        refused: with another of them the loop would not be durable. To stop
        the run softly yourself, call ``run.stop.cancel()``. A ``run_id`` or a
        ``first_iteration`` is accepted only if it is the run's.

        Call it after [finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn]:
        a loop started on a run whose open turn is unanswered would ask the
        model again with those calls missing from the transcript.

        :raises TypeError: ``state``, ``save_session`` or ``stop`` was given, a
            port is not an async function, or ToolLoop refused an option.
        :raises ValueError: *run_id* is not this run's id, or *first_iteration*
            not its next.
        :raises UsageError: the open turn is not answered yet, or the run was
            already finished.
        """
        for name in _RUN_OWNED:
            if name in loop_options:
                raise TypeError(
                    f"DurableRun.tool_loop: {name} is the run's own and cannot be given "
                    f"(the loop gets run.{name}; wire a ToolLoop by hand to replace it)"
                )
        ports: tuple[tuple[str, object], ...] = (
            ("call_model", call_model),
            ("run_tool_call", run_tool_call),
        )
        for name, port in ports:
            if not is_async_callable(port):
                raise TypeError(
                    f"DurableRun.tool_loop: {name} must be an async function, got {port!r}"
                )
        first = loop_options.pop("first_iteration", self.first_iteration)
        if first != self.first_iteration:
            raise ValueError(
                f"DurableRun.tool_loop: first_iteration {first!r} is not the run's next "
                f"({self.first_iteration}); leave it out"
            )
        run_id = loop_options.pop("run_id", self.run_id)
        if run_id != self.run_id:
            raise ValueError(
                f"DurableRun.tool_loop: run_id {run_id!r} is not this run's ({self.run_id!r}); "
                "leave it out"
            )
        if self._finished:
            raise UsageError("DurableRun.tool_loop: the run was already finished")
        if self._loaded.pending_turn is not None:
            raise UsageError(
                f"DurableRun.tool_loop: run {self.run_id!r} has an open turn; "
                "await run.finish_open_turn(run_tool_call) before building its loop"
            )
        return ToolLoop(
            state=self.state,
            call_model=self.wrap_call_model(call_model),
            run_tool_call=self.wrap_tool_call(run_tool_call),
            save_session=self.save_session,
            stop=self.stop,
            run_id=self.run_id,
            first_iteration=first,
            **loop_options,
        )

    async def _dispatch(
        self,
        run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]],
        call: ToolCallLike,
        iteration: int,
    ) -> ToolCallOutcome:
        if self._lost:
            raise LeaseLostError(
                f"run {self.run_id!r}: the lease was lost; the call was not started", self.run_id
            )
        key = tool_call_receipt_key(self.run_id, call)
        call_id = key.tool_call_id
        try:
            await self._store.start_call(
                self._lease,
                iteration=iteration,
                key=key,
                resumability=self._resumability(key.tool_name),
            )
        except LeaseLostError:
            self._lose()  # no receipt, so no dispatch: another worker owns the run now
            raise
        try:
            result = await run_tool_call(call)
        except Exception as exc:
            if cancelled_now():
                await self._settle_interrupted(iteration, call_id)
                raise
            message = tool_failure_message(call_id, tool_error_text(exc), kind_for_error(exc))
            await self._settle(iteration, call_id, "failed", message)
            raise
        except BaseException:
            await self._settle_interrupted(iteration, call_id)
            raise
        given: object = result
        if (
            isinstance(given, ToolCallOutcome)
            and result.tool_message.get("tool_call_id") == call_id
        ):
            await self._settle(iteration, call_id, "succeeded", result.tool_message)
        return result

    async def _settle(
        self, iteration: int, call_id: str, state: str, message: dict[str, Any]
    ) -> None:
        # The call ran and its answer is known: record it even if a cancel just
        # arrived (shielded), or a resume would read a finished call as
        # one that may have run and refuse it. The cancel is raised right after.
        with anyio.CancelScope(shield=True):
            await self._write(
                self._store.settle_call(
                    self._lease,
                    iteration=iteration,
                    tool_call_id=call_id,
                    state=state,
                    message=message,
                )
            )
        await checkpoint_if_cancelled()

    async def _settle_interrupted(self, iteration: int, call_id: str) -> None:
        # The cancel is already under way: shielded, bounded, and never in its way.
        with anyio.CancelScope(shield=True):
            try:
                await self._store.settle_call(
                    self._lease, iteration=iteration, tool_call_id=call_id, state="interrupted"
                )
            except Exception:
                return

    async def save_session(self) -> None:
        """The loop's persist port: save the whole transcript as of this iteration."""
        await self._write(
            self._store.save_transcript(self._lease, self.state.messages, iteration=self._iteration)
        )

    # --- resume ------------------------------------------------------------------------

    async def finish_open_turn(
        self,
        run_tool_call: Callable[[ToolCallLike], Awaitable[ToolCallOutcome]],
        *,
        per_tool_limit: int = 5,
        runs_serially: Callable[[ToolCallLike], bool] | None = None,
    ) -> tuple[OpenTurnAnswer, ...]:
        """Answer every call of the open turn a crash left behind, by its receipt, and save.

        Does nothing (returns ``()``) when there is no open turn. Otherwise
        appends the assistant message and one answer per call to the
        transcript (see the module's table), dispatching through
        *run_tool_call*, with receipts, the calls that may run; then saves
        the iteration, closing the turn. Call it before running the loop.

        Give it the concurrency the run's loop has (the same options as
        [ToolLoop][juno_bind_trio.loop.ToolLoop]): *per_tool_limit* calls of
        one tool at once (default 5), and *runs_serially* ``(call) -> bool``,
        the calls that must run one at a time, before the rest, in order.
        """
        if isinstance(per_tool_limit, bool) or not isinstance(per_tool_limit, int):
            raise TypeError(
                "DurableRun.finish_open_turn: per_tool_limit must be a positive integer, "
                f"got {per_tool_limit!r}"
            )
        if per_tool_limit < 1:
            raise ValueError(
                "DurableRun.finish_open_turn: per_tool_limit must be a positive integer, "
                f"got {per_tool_limit!r}"
            )
        if runs_serially is not None and not callable(runs_serially):
            raise TypeError(
                "DurableRun.finish_open_turn: runs_serially must be callable or None, "
                f"got {runs_serially!r}"
            )
        turn = self._loaded.pending_turn
        if turn is None:
            return ()
        iteration = self._loaded.record.pending_iteration
        assert iteration is not None
        receipts: dict[str, ReceiptRecord] = {r.tool_call_id: r for r in self._loaded.receipts}
        # Each call read once: its receipt key, its dispatch and its tool read the same value.
        calls = [ToolCall.of(call) for call in turn["tool_calls"]]
        answers: list[dict[str, Any] | None] = [None] * len(calls)
        decisions: list[OpenTurnAnswer] = []
        to_run: list[int] = []
        for index, call in enumerate(calls):
            key = tool_call_receipt_key(self.run_id, call)
            receipt = receipts.get(key.tool_call_id)
            state: ReceiptState = "absent" if receipt is None else receipt.state
            if receipt is not None and receipt.args_hash not in (
                key.args_hash,
                _earlier_args_hash(call.arguments),
            ):
                state = "absent"  # a receipt for other arguments is no receipt of this call
            resumability = self._resumability(key.tool_name)
            if resumability == "non_repeatable" and self._uses_key(key.tool_name):
                resumability = "repeatable"  # the service drops a repeat of the same key
            decision = decide_tool_call_receipt(state, resumability)
            decisions.append(
                OpenTurnAnswer(
                    key.tool_call_id, key.tool_name, state, decision.action, decision.reason
                )
            )
            if decision.action == "reuse":
                assert receipt is not None
                answers[index] = receipt.message
            elif decision.action == "refuse":
                # "started": the worker stopped while the call ran (nothing cancelled
                # it); "interrupted": a cancel cut it off. Either way, unknown.
                why = (
                    WORKER_STOPPED_TOOL_CALL_MESSAGE
                    if state == "started"
                    else INTERRUPTED_TOOL_CALL_MESSAGE
                )
                answers[index] = tool_failure_message(key.tool_call_id, why, "interrupted")
            else:
                to_run.append(index)

        async def run(call: ToolCallLike) -> ToolCallOutcome:
            return await self._dispatch(run_tool_call, call, iteration)

        # As the loop runs a batch: the serial calls first, one at a time, in call
        # order; then the rest through the pool, at the run's per-tool limit.
        serial = [i for i in to_run if runs_serially is not None and runs_serially(calls[i])]
        pooled = [i for i in to_run if i not in serial]
        results: list[outcome.Outcome[ToolCallOutcome]] = []
        for index in serial:
            try:  # a call that raised is answered as failed, as the pool answers it
                results.append(outcome.Value(await run(calls[index])))
            except Exception as exc:
                results.append(outcome.Error(exc))
        if pooled:
            batch: ToolBatch[ToolCallOutcome] = ToolBatch([calls[i] for i in pooled])
            results.extend(await batch.run(run, per_tool_limit=per_tool_limit))
        if to_run:
            for index, result in zip(serial + pooled, results, strict=True):
                call_id = calls[index]["id"]
                if isinstance(result, outcome.Value) and isinstance(result.value, ToolCallOutcome):
                    answers[index] = result.value.tool_message
                else:
                    error = (
                        result.error
                        if isinstance(result, outcome.Error)
                        else TypeError(
                            f"run_tool_call must return a ToolCallOutcome, got {result!r}"
                        )
                    )
                    answers[index] = tool_failure_message(
                        call_id, tool_error_text(error), kind_for_error(error)
                    )
        self.state.messages.append(dict(turn))
        self.state.messages.extend(a for a in answers if a is not None)
        self._iteration = iteration
        await self.save_session()
        self._loaded = attrs.evolve(self._loaded, pending_turn=None, receipts=())
        return tuple(decisions)

    async def finish(self, status: RunStatus) -> None:
        """End the run's hold: save a suspended run's transcript, record *status*, release.

        A stopped run's last batch is not saved (the loop's rule: refused calls
        are not facts); its open turn stays for the resume. With the lease
        lost, nothing is written.
        """
        if self._finished:
            raise UsageError("DurableRun.finish: the run was already finished")
        self._finished = True
        if self._lost:
            return
        try:
            if status == "suspended":
                await self.save_session()
            await self._store.release(self._lease, status=status)
        except LeaseLostError:
            self._lose()


async def _give_back(
    store: RunStore, lease: Lease, status: RunStatus, detail: str | None = None
) -> None:
    """Release *lease*, recording *status*, on the way out of a block.

    Shielded: this runs on the way out of a cancel too. Quiet: the error or
    cancel on its way out is the one the caller must see, and a lease that
    cannot be given back expires. Not bounded by a timer: a store call is one
    transaction, bounded by the database's own timeouts.
    """
    with anyio.CancelScope(shield=True), suppress(Exception):
        await store.release(lease, status=status, detail=detail)


def _only_cancels(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_cancels(e) for e in exc.exceptions)
    return isinstance(exc, anyio.get_cancelled_exc_class())


def _ending(exc: BaseException | None, *, worker: bool) -> tuple[RunStatus, str]:
    """The status and detail of a run whose block was left without ``finish``.

    A cancel of the run's own scope ended it: ``"cancelled"``, continued only
    when asked for by id. A cancel of a worker (``serve_runs``), an interrupt
    (``KeyboardInterrupt``) or a plain exit hands it back, ``"running"`` with
    no lease: any worker's ``claim_next`` takes it at once. An exception
    failed it, and the detail names the exception's type (its message may
    hold what the store must not: the worker's log has it).
    """
    if exc is None:
        return "running", "handed back: its worker left the run without an ending"
    if _only_cancels(exc):
        if worker:
            return "running", "handed back: its worker was stopped while it ran"
        return "cancelled", "cancelled: a hard cancel (or a deadline) ended the run"
    if isinstance(exc, Exception):
        return "failed", f"failed: {type(exc).__name__} was raised while it ran"
    return "running", f"handed back: {type(exc).__name__} stopped its worker"


async def _release_on_exit(
    store: RunStore, run: DurableRun, exc: BaseException | None, *, worker: bool
) -> None:
    if run._finished or run.lost:
        return
    run._finished = True
    status, detail = _ending(exc, worker=worker)
    await _give_back(store, run.lease, status, detail)


async def _claim(store: RunStore, run_id: str, owner: str, ttl: float) -> Lease:
    """Claim *run_id*, taking it from a holder known to be dead (see ``_owner``)."""
    try:
        return await store.claim_run(run_id, owner=owner, ttl=ttl)
    except RunLeasedError:
        holder = (await store.get_run(run_id)).lease_owner
        if holder is None or not holder_is_gone(holder):
            raise
    # Its process is gone: the lease would only hold the run for the rest of its
    # TTL. Taken in one transaction that checks it is still that holder's lease
    # (another worker may have claimed it meanwhile: RunLeasedError again).
    return await store.claim_run(run_id, owner=owner, ttl=ttl, take_over=holder)


def _heal_for_resume(loaded: StoredRun, run_id: str) -> HealResult:
    if loaded.record.status not in RESUMABLE_STATUSES:
        raise ValueError(
            f"open_durable_run: run {run_id!r} ended {loaded.record.status!r}; "
            "there is nothing to resume"
        )
    try:
        return heal_transcript(loaded.messages)
    except TranscriptError as exc:
        # A stored transcript healing cannot read is a corrupted row, like one that
        # does not parse: it names the run, and a worker records the run failed
        # instead of claiming it again and again.
        raise StoreDataError(
            f"run {run_id!r}: the stored transcript cannot be read ({exc}); the row is "
            "corrupted (column messages)",
            run_id,
        ) from None


def _check_seconds(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"open_durable_run: {what} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"open_durable_run: {what} must be a positive number, got {value!r}")
    return float(value)


def open_durable_run(
    store: RunStore,
    run_id: str,
    *,
    owner: str,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    renew_interval: float | None = None,
    resumability: Callable[[str], EffectResumability] | None = None,
    uses_idempotency_key: Callable[[str], bool] | None = None,
    lease: Lease | None = None,
) -> AbstractAsyncContextManager[DurableRun]:
    """Claim *run_id* (or take over *lease*, from ``claim_next``), load it, keep the lease alive.

    ```python
    async with open_durable_run(store, "order-17", owner="worker-1") as run:
        ...
        await run.finish(result.reason)
    ```

    *owner* names this worker in the lease. *lease_ttl*: seconds a lease
    lasts unrenewed, so how soon another worker takes over after this one
    dies. *renew_interval*: how often the heartbeat renews it (default a
    third of the TTL). *resumability*: ``(tool_name) -> "repeatable" |
    "non_repeatable"`` (default: every tool non-repeatable, the safe reading).
    *uses_idempotency_key*: ``(tool_name) -> bool``, tools whose interrupted
    calls may be dispatched again because they pass the key on.

    A run leased to a process of this machine that is no longer running (its
    owner of the default ``host:pid:machine`` shape, its pid gone: it was
    killed) is taken over at once rather than after its lease runs out; any
    other holder's lease is waited out (``RunLeasedError``).

    The transcript is healed on load (``run.heal_changes`` lists what was
    repaired). Leaving the block without
    [finish][juno_bind_trio.store.DurableRun.finish] gives the lease up
    (shielded) and records how the run ended: after an exception it is
    ``"failed"``; after a hard cancel, ``"cancelled"`` (continued only when
    asked for by id: ``open_durable_run`` again, or ``Agent.resume``); after
    an interrupt (``KeyboardInterrupt``) or a plain exit it is handed back,
    ``"running"`` with no lease, so any worker's ``claim_next`` takes it at
    once. [RunRecord.detail][juno_bind_trio.store.RunRecord] says which. A lost
    lease writes nothing.

    :raises RunLeasedError: another worker holds the run.
    :raises StoreDataError: the stored run cannot be read; nothing is written
        but giving back the lease this call took.
    :raises ValueError: the run already ended for good (``"completed"``, ...);
        the lease this call took is given back and the status left as it was.
    """
    return _open_durable_run(
        store,
        run_id,
        owner=owner,
        lease_ttl=lease_ttl,
        renew_interval=renew_interval,
        resumability=resumability,
        uses_idempotency_key=uses_idempotency_key,
        lease=lease,
        worker=False,
    )


@asynccontextmanager
async def _open_durable_run(
    store: RunStore,
    run_id: str,
    *,
    owner: str,
    lease_ttl: float,
    renew_interval: float | None,
    resumability: Callable[[str], EffectResumability] | None,
    uses_idempotency_key: Callable[[str], bool] | None,
    lease: Lease | None,
    worker: bool,
) -> AsyncIterator[DurableRun]:
    """``open_durable_run``; *worker*: a cancel stops the worker (``serve_runs``), not the
    run, which is handed back instead of recorded ``"cancelled"``."""
    given: object = store
    if not isinstance(given, RunStore):
        raise TypeError(f"open_durable_run: store must be a RunStore, got {store!r}")
    texts: tuple[tuple[str, object], ...] = (("run_id", run_id), ("owner", owner))
    for name, text in texts:
        if not isinstance(text, str) or not text:
            raise TypeError(f"open_durable_run: {name} must be a non-empty string, got {text!r}")
    if lease is not None and not isinstance(lease, Lease):
        raise TypeError(f"open_durable_run: lease must be a Lease or None, got {lease!r}")
    ttl = _check_seconds("lease_ttl", lease_ttl)
    interval = (
        ttl / 3 if renew_interval is None else _check_seconds("renew_interval", renew_interval)
    )
    if interval >= ttl:
        raise ValueError(
            f"open_durable_run: renew_interval ({interval:g}) must be below lease_ttl ({ttl:g})"
        )
    for name, fn in (
        ("resumability", resumability),
        ("uses_idempotency_key", uses_idempotency_key),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(f"open_durable_run: {name} must be callable or None, got {fn!r}")
    claimed_here = lease is None
    if lease is None:
        lease = await _claim(store, run_id, owner, ttl)
    elif lease.run_id != run_id:
        raise ValueError(f"open_durable_run: the lease is on {lease.run_id!r}, not {run_id!r}")
    loaded: StoredRun | None = None
    try:
        loaded = await store.load(run_id)
        healed = _heal_for_resume(loaded, run_id)
    except BaseException:
        if claimed_here:
            # Claimed here and not handed out: give the lease back, so the run does
            # not sit leased to a worker that refused it until the lease expires.
            # Its status stays what it was; nothing else is written.
            status: RunStatus = "running" if loaded is None else loaded.record.status
            await _give_back(store, lease, status)
        raise
    run = DurableRun(
        store=store,
        lease=lease,
        loaded=loaded,
        resumability=_non_repeatable if resumability is None else resumability,
        uses_idempotency_key=_never if uses_idempotency_key is None else uses_idempotency_key,
        state=LoopState(messages=healed.messages),
        heal_changes=healed.changes,
    )

    async def write(progress: object) -> None:
        await run.renew(progress, ttl=ttl)

    body_error: BaseException | None = None
    try:
        async with (
            open_coalesced_heartbeat(write, interval=interval, flush_timeout=0) as heartbeat,
            anyio.create_task_group() as tg,
        ):

            async def tick() -> None:
                # Renew once a renew_interval of the lease has been used up, read in
                # the store's clock (the one lease times are in), so a lease is
                # renewed as time really passes, however the event loop's runs.
                while True:
                    await anyio.sleep(interval)
                    if run.lease.expires_at - store.now() <= ttl - interval:
                        heartbeat.beat({"iteration": run.iteration})

            tg.start_soon(tick)
            try:
                yield run
            except BaseException as exc:  # re-raised below, not inside the task group
                body_error = exc
            tg.cancel_scope.cancel()
    except BaseException as exc:
        await _release_on_exit(store, run, exc, worker=worker)
        raise
    if body_error is not None:
        await _release_on_exit(store, run, body_error, worker=worker)
        raise body_error
    await _release_on_exit(store, run, None, worker=worker)
