"""A claimed run and the ports that persist it: the open turn, each call's receipt, the save.

[open_durable_run][juno_bind_trio.store.open_durable_run] (in ``_lease``)
claims a stored run, loads and heals its transcript, keeps the lease alive
with a coalesced heartbeat, and yields a
[DurableRun][juno_bind_trio.store.DurableRun] whose wrappers plug the store
into a [ToolLoop][juno_bind_trio.loop.ToolLoop]'s ports:

* ``call_model``: when the model asks for tools, the assistant message is
  recorded (the run's *open turn*) before any of them is dispatched;
* ``run_tool_call``: each call's receipt is written ``"started"`` before the
  tool runs and settled (``"succeeded"``, ``"failed"``, ``"interrupted"``)
  when it ends;
* ``save_session``: the transcript, written whole at the end of every
  completed iteration, closing the open turn.

What a resume does with the open turn a crash left is ``_resume``'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, final

import anyio
import attrs

from juno_bind_trio._cancel import cancelled_now, checkpoint_if_cancelled
from juno_bind_trio._errors import (
    LeaseLostError,
    UsageError,
)
from juno_bind_trio._pending import PendingToolCall
from juno_bind_trio._validate import is_async_callable
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.plugins import kind_for_error, tool_error_text, tool_failure_message
from juno_bind_trio.run import (
    ChainRef,
    EffectResumability,
    SoftStop,
    ToolCallLike,
    assistant_message,
    tool_call_idempotency_key,
    tool_call_receipt_key,
)
from juno_bind_trio.transcript import HealChange

from ._protocol import RunStore
from ._records import (
    Lease,
    PendingCallRecord,
    RunStatus,
    StoredRun,
)
from ._resume import OpenTurnAnswer, Screen, answer_open_turn

__all__ = ["DurableRun"]

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
    _held: bool = attrs.field(default=False, init=False)
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
    def conversation_id(self) -> str | None:
        """The conversation the run answers in (``Agent.run(conversation=...)``), or ``None``."""
        return self._loaded.record.conversation_id

    @property
    def status_before(self) -> RunStatus:
        """The run's status as stored when it was claimed (before this hold)."""
        return self._loaded.record.status

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
    def waiting_calls(self) -> tuple[PendingCallRecord, ...]:
        """The calls of the open turn that waited for a decision (a suspended run's),
        in call order, each with its decision so far (``None``: it still waits)."""
        return self._loaded.calls

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
        screen: Screen | None = None,
    ) -> tuple[OpenTurnAnswer, ...]:
        """Answer every call of the open turn a crash left behind, by its receipt, and save.

        Does nothing (returns ``()``) when there is no open turn. Otherwise
        appends the assistant message and one answer per call to the
        transcript (``_resume`` says the answer for each receipt), dispatching
        through *run_tool_call*, with receipts, the calls that may run; then saves
        the iteration, closing the turn. Call it before running the loop.

        Give it the concurrency the run's loop has (the same options as
        [ToolLoop][juno_bind_trio.loop.ToolLoop]): *per_tool_limit* calls of
        one tool at once (default 5), and *runs_serially* ``(call) -> bool``,
        the calls that must run one at a time, before the rest, in order.

        *screen* (the agent's approval gate): ``async (call) -> ToolCallOutcome
        | None``, shown each call that never started before it is dispatched;
        its outcome answers the call instead. When it holds a call (an outcome
        with a suspend directive: the call still waits for a decision), the turn
        stays open and nothing is saved: the calls that ran have their receipts,
        and the run is to be finished ``"suspended"`` (``held`` says so); the
        transcript in memory shows the turn with its answers so far. A turn
        with such calls and no *screen* is refused (``UsageError``): nothing
        else knows which of them may run.
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
        if screen is not None and not is_async_callable(screen):
            raise TypeError(
                "DurableRun.finish_open_turn: screen must be an async function or None, "
                f"got {screen!r}"
            )
        turn = self._loaded.pending_turn
        if turn is None:
            return ()
        if screen is None and self._loaded.calls:
            # Without the gate, a call that waits for a person would simply run.
            raise UsageError(
                f"DurableRun.finish_open_turn: run {self.run_id!r}'s open turn has calls "
                f"that waited for a decision ({[r.call.id for r in self._loaded.calls]}); "
                "continue it with Agent.resume, whose approval gate answers them, or pass "
                "screen="
            )
        iteration = self._loaded.record.pending_iteration
        assert iteration is not None

        async def run(call: ToolCallLike) -> ToolCallOutcome:
            return await self._dispatch(run_tool_call, call, iteration)

        answers, decisions = await answer_open_turn(
            self.run_id,
            turn,
            self._loaded.receipts,
            resumability=self._resumability,
            uses_idempotency_key=self._uses_key,
            run_tool_call=run,
            per_tool_limit=per_tool_limit,
            runs_serially=runs_serially,
            screen=screen,
        )
        self.state.messages.append(dict(turn))
        self.state.messages.extend(answers)
        self._iteration = iteration
        if any(d.action == "hold" for d in decisions):
            self._held = True  # the turn stays open: finish("suspended", pending=...)
            return decisions
        await self.save_session()
        self._loaded = attrs.evolve(self._loaded, pending_turn=None, receipts=())
        return decisions

    @property
    def held(self) -> bool:
        """Whether [finish_open_turn][juno_bind_trio.store.DurableRun.finish_open_turn]
        left the turn open because a call still waits for a decision."""
        return self._held

    async def finish(self, status: RunStatus, *, pending: Sequence[PendingToolCall] = ()) -> None:
        """End the run's hold: save a suspended run's transcript, record *status*, release.

        A stopped run's last batch is not saved (the loop's rule: refused calls
        are not facts); its open turn stays for the resume. With the lease
        lost, nothing is written.

        *pending*: the calls a ``"suspended"`` run waits on for a decision (a
        person's approval, a host's result). Then the transcript is *not*
        saved: the turn stays open, with the receipts of the calls that ran,
        and the store holds each waiting call
        ([RunStore.suspend_run][juno_bind_trio.store.RunStore.suspend_run]), all
        in one write; a resume answers the turn by receipt and by decision.
        """
        if self._finished:
            raise UsageError("DurableRun.finish: the run was already finished")
        if pending and status != "suspended":
            raise ValueError(
                f"DurableRun.finish: pending calls are for a 'suspended' run, not {status!r}"
            )
        self._finished = True
        if self._lost:
            return
        try:
            if pending:
                # The turn that waits: the loaded one while it is still open (a resume
                # that held a call again), else the one this loop recorded last.
                loaded = self._loaded
                open_turn = loaded.record.pending_iteration
                iteration = (
                    open_turn
                    if loaded.pending_turn is not None and open_turn is not None
                    else self._iteration
                )
                await self._store.suspend_run(self._lease, iteration=iteration, calls=list(pending))
                return
            if status == "suspended":
                await self.save_session()
            await self._store.release(self._lease, status=status)
        except LeaseLostError:
            self._lose()
