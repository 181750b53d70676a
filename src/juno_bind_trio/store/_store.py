"""The run store protocol, and the base both database stores share.

Every call of a store runs its database work in an anyio worker thread
(``anyio.to_thread.run_sync``), so the event loop never blocks on disk or
network I/O, and trio and asyncio hosts use it alike.

What a cancel does to a store call
----------------------------------

A thread cannot be interrupted. A cancel that arrives while a store call's
thread is working waits for that thread to finish its transaction, then is
raised to the caller. Every call is **one transaction**: when the caller sees
the cancel, the write has either committed whole or rolled back whole, never
half. Which one, the caller does not learn; a write that matters to a resume
(a receipt, a transcript) is therefore always made *before* the step it
guards, so that either outcome is safe: a ``started`` receipt that committed
for a call whose dispatch the cancel then prevented reads, on resume, as a
call that may have run, which is the cautious reading.

Group commit
------------

The writes a loop iteration makes (the open turn, the receipts, the
transcript) go through one *write lane* per store. A writer that finds the
lane idle leads: it lets the tasks already runnable reach the lane (a
scheduler turn or two, shielded), takes every write queued by then, and applies them
in **one** worker-thread hop and one commit; writes that arrive while that
commit is under way wait, and the first of them to run leads the next. Each
write keeps its own lease check and its own outcome (a write refused for a
lost lease raises `LeaseLostError` to its caller alone), and each caller is
released only after the commit that holds its write. A caller cancelled
while its write is still queued takes it out: nothing of it is written, and
the cancel is raised. Once a commit has taken the write, the caller waits for
that commit (shielded) and then sees the cancel, as with any store call.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

import anyio
import anyio.lowlevel
import anyio.to_thread
import outcome
import sniffio

from juno_bind_trio._errors import StoreDataError, StoreError, UsageError
from juno_bind_trio._pending import CallDecision, PendingToolCall
from juno_bind_trio._transfers import in_charge
from juno_bind_trio._validate import error_kind
from juno_bind_trio.run import ChainRef, EffectResumability, ToolCallReceiptKey, root_chain

from . import _codec, _conversations, _core, _guarded, _waiting
from ._records import (
    RUN_STATUSES,
    ConversationRecord,
    Lease,
    PendingCallRecord,
    ReceiptRecord,
    RunRecord,
    RunStatus,
    StoredRun,
)

__all__ = ["RunStore"]

T = TypeVar("T")

_log = logging.getLogger("juno_bind_trio.store")


@runtime_checkable
class RunStore(Protocol):
    """Where runs, their transcripts, receipts, leases and lineage live.

    [SqliteRunStore][juno_bind_trio.store.SqliteRunStore] and
    [PostgresRunStore][juno_bind_trio.store.PostgresRunStore] implement it.
    Open a store with ``async with``; every write that belongs to a run's
    worker takes the worker's [Lease][juno_bind_trio.store.Lease] and is
    refused with [LeaseLostError][juno_bind_trio.store.LeaseLostError], in
    the same transaction, when the lease no longer holds.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc_info: object) -> None: ...

    def now(self) -> float:
        """The store's clock, which lease times are in (seconds)."""
        ...

    async def create_run(
        self,
        run_id: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        chain: ChainRef | None = None,
        agent: str | None = None,
        conversation_id: str | None = None,
    ) -> RunRecord:
        """Store a new run, ``"pending"``, with its first transcript and its lineage.

        *conversation_id*: the conversation the run answers in, whose hold the
        run took with [claim_conversation][juno_bind_trio.store.RunStore.claim_conversation]
        (refused with [ConversationBusy][juno_bind_trio.ConversationBusy] if it
        did not)."""
        ...

    async def get_run(self, run_id: str) -> RunRecord:
        """The run's record. Raises ``RunNotFoundError``."""
        ...

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        parent_run_id: str | None = None,
        limit: int = 100,
    ) -> list[RunRecord]:
        """Runs, oldest first, optionally only those with *status* or children of a run."""
        ...

    async def load(self, run_id: str) -> StoredRun:
        """The run's transcript, its open turn and that turn's receipts, checked."""
        ...

    async def receipts(self, run_id: str) -> list[ReceiptRecord]:
        """Every receipt of the run, by iteration and call order."""
        ...

    async def load_with_receipts(self, run_id: str) -> tuple[StoredRun, list[ReceiptRecord]]:
        """``load(run_id)`` and ``receipts(run_id)`` as of one moment, in one read.

        Two calls are two transactions: a worker's commit between them gives
        receipts newer than the run (a call settled that the transcript does not
        answer yet). A reader showing a run whole (the CLI's ``show``, the web
        view) reads it with this instead."""
        ...

    async def claim_run(
        self, run_id: str, *, owner: str, ttl: float, take_over: str | None = None
    ) -> Lease:
        """Take the run's lease for *ttl* seconds, unless another worker holds it.

        *take_over*: the owner of a lease known to be dead (a process of this
        host that is no longer running): the lease is taken from it even
        before it expires. Its fencing token moves on, so if that holder was
        alive after all, each of its writes is refused."""
        ...

    async def claim_next(self, *, owner: str, ttl: float) -> Lease | None:
        """Take the lease of the oldest runnable run: pending, running with an expired
        lease, or running under *owner*'s own name (a worker restarted under the same
        name takes its runs back at once). ``None`` when there is none.

        So *owner* must name one worker: two workers sharing a name would take
        each other's runs (safely, by the fencing token, but for nothing).

        A run whose row cannot be read is not handed out: it is recorded
        ``"failed"`` (why, naming the column, in its ``detail``; its data
        otherwise left as it is), logged on the ``juno_bind_trio.store``
        logger, and passed over for the next."""
        ...

    async def renew_lease(self, lease: Lease, *, ttl: float, progress: object = None) -> Lease:
        """Extend the lease by *ttl* from now; record the heartbeat and *progress*."""
        ...

    async def release(self, lease: Lease, *, status: RunStatus, detail: str | None = None) -> None:
        """Set the run's status and give its lease up; *detail* says how the hold ended
        where the status does not (``RunRecord.detail``)."""
        ...

    async def save_turn(
        self, lease: Lease, *, iteration: int, assistant: Mapping[str, Any]
    ) -> None:
        """Record the assistant message whose tool calls are about to run."""
        ...

    async def start_call(
        self,
        lease: Lease,
        *,
        iteration: int,
        key: ToolCallReceiptKey,
        resumability: EffectResumability,
    ) -> ReceiptRecord:
        """Write the call's ``"started"`` receipt; call it before dispatching the call."""
        ...

    async def settle_call(
        self,
        lease: Lease,
        *,
        iteration: int,
        tool_call_id: str,
        state: str,
        message: Mapping[str, Any] | None = None,
    ) -> None:
        """Record how a started call ended: ``"succeeded"``/``"failed"`` with its answer,
        or ``"interrupted"``."""
        ...

    async def save_transcript(
        self, lease: Lease, messages: Sequence[Mapping[str, Any]], *, iteration: int
    ) -> None:
        """Replace the run's transcript, atomically, as of the end of *iteration*."""
        ...

    # --- calls waiting for a decision (a person's approval, a host's result) ---

    async def suspend_run(
        self, lease: Lease, *, iteration: int, calls: Sequence[PendingToolCall]
    ) -> None:
        """Release the run ``"suspended"`` on *calls* of its open turn *iteration*, which
        stays open (its receipts kept), in one transaction; a call already held keeps
        its row and any decision it has."""
        ...

    async def pending_calls(self, run_id: str) -> list[PendingToolCall]:
        """The calls the suspended run waits on now (undecided, their deadline not
        passed), in call order; ``[]`` for a run that waits on nothing."""
        ...

    async def list_waiting(self, *, limit: int = 100) -> list[RunRecord]:
        """Suspended runs with at least one call waiting for a decision, oldest first."""
        ...

    async def decide_calls(
        self, run_id: str, decisions: Mapping[str, CallDecision], *, owner: str | None = None
    ) -> list[PendingCallRecord]:
        """Record *decisions* by call id, stamped with the store's time: all or nothing.

        A decision holds from then on, whichever worker resumes the run. An id
        that waits for nothing (unknown, already decided, past its deadline), a
        decision of the wrong sort (``"approved"``/``"denied"`` for an approval,
        ``"result"``/``"error"`` for an external call), or a run cancelled while
        it waited raises [UsageError][juno_bind_trio.UsageError] naming it, and
        nothing is written. A run another worker is resuming (its lease live)
        raises [RunLeasedError][juno_bind_trio.RunLeasedError] and nothing is
        written: decide again once the run waits. *owner*, the worker about to
        resume the run, is not refused by its own lease (one left live by a
        crash of a worker under the same name, which takes its runs back)."""
        ...

    async def call_decisions(self, run_id: str) -> list[PendingCallRecord]:
        """Every call the run waited on, with who decided what and when (the audit),
        by iteration and call order."""
        ...

    # --- conversations (Agent.run(conversation=...)) ---

    async def claim_conversation(
        self, conversation_id: str, *, run_id: str, ttl: float
    ) -> list[dict[str, Any]]:
        """Hold the conversation (created if new) for *run_id* and return its transcript.

        The hold lasts *ttl* seconds, then as long as the run's own lease. Refused
        with [ConversationBusy][juno_bind_trio.ConversationBusy] while another run
        holds it, or, for a stored run of it being resumed, when the conversation
        has moved on since that run began."""
        ...

    async def append_conversation(
        self, lease: Lease, *, conversation_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> None:
        """Make *messages* (the run's whole transcript) the conversation's, and give the
        hold up: one transaction, under the run's *lease*."""
        ...

    async def release_conversation(self, conversation_id: str, *, run_id: str) -> None:
        """Give *run_id*'s hold on the conversation up, the conversation unchanged."""
        ...

    async def list_conversations(self, *, limit: int = 100) -> list[ConversationRecord]:
        """The stored conversations, oldest first."""
        ...

    async def conversation_messages(self, conversation_id: str) -> list[dict[str, Any]]:
        """The conversation's transcript so far (``[]`` for one never answered, or unknown)."""
        ...

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Delete the conversation and every run of it (receipts included); ``False`` when
        there was none. Refused with [ConversationBusy][juno_bind_trio.ConversationBusy]
        while a run holds it."""
        ...


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or value == "":
        raise error_kind(value, str)(f"{where} must be a non-empty string, got {value!r}")
    return value


def _iteration(where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def _list(where: str, messages: object) -> list[Any]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise TypeError(f"{where}: messages must be a list of message dicts, got {messages!r:.80}")
    return list(messages)


def _lease(where: str, value: object) -> Lease:
    if not isinstance(value, Lease):
        raise TypeError(f"{where}: lease must be a Lease, got {value!r}")
    return value


class _Queued:
    """A write waiting in the lane, and, once a commit has taken it, how it ended."""

    __slots__ = ("flight", "result", "write")

    def __init__(self, write: _guarded.Write) -> None:
        self.write = write
        self.flight: anyio.Event | None = None  # the commit that took it
        self.result: outcome.Outcome[Any] | None = None


class ThreadedRunStore:
    """The public methods of both stores: check the arguments, then run one transaction
    in a worker thread. Subclasses supply ``_open``, ``_close``, ``_transaction`` and
    ``_commit_group``."""

    _dialect: _core.Dialect
    _clock: Callable[[], float]
    _opened: bool
    _closed: bool

    def __init__(self, clock: Callable[[], float] | None) -> None:
        if clock is not None and not callable(clock):
            raise TypeError(f"{type(self).__name__}: clock must be callable, got {clock!r}")
        self._clock = time.time if clock is None else clock
        self._opened = False
        self._closed = False
        self._queue: deque[_Queued] = deque()
        self._flight: anyio.Event | None = None  # set when the commit under way ends
        self._commits = 0  # group commits made (tests and the benchmark read it)

    # --- subclass hooks (run in a worker thread) ---

    def _open(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    def _transaction(self, fn: Callable[[_core.Exec], T], *, write: bool) -> T:
        """Run *fn* in one transaction. A read (``write=False``) sees one snapshot of
        the database across all its statements, whatever other connections commit
        meanwhile, so a reader next to a working worker never sees a mixed run."""
        raise NotImplementedError

    def _commit_group(self, writes: Sequence[_guarded.Write]) -> list[outcome.Outcome[Any]]:
        """Apply *writes* with one commit where possible; one outcome per write, in order.

        A write that fails (its lease lost, its data refused) fails alone: the
        others still commit."""
        raise NotImplementedError

    def now(self) -> float:
        """The store's clock, which lease times are in (seconds)."""
        return self._clock()

    # --- lifetime ---

    async def __aenter__(self) -> Self:
        if self._opened:
            raise UsageError(f"{type(self).__name__}: a store is opened once")
        self._opened = True
        await anyio.to_thread.run_sync(self._open)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the database connections. Idempotent."""
        if self._closed or not self._opened:
            self._closed = True
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close)

    def _check_open(self) -> None:
        """Refuse a call on a store that is not open yet, or closed."""
        if not self._opened or self._closed:
            state = "closed" if self._closed else "not open (use `async with`)"
            raise UsageError(f"{type(self).__name__}: the store is {state}")

    async def _run(self, fn: Callable[..., T], *args: Any, write: bool, **kwargs: Any) -> T:
        self._check_open()

        def work(ex: _core.Exec) -> T:
            return fn(ex, *args, **kwargs)

        result = await anyio.to_thread.run_sync(
            functools.partial(self._transaction, work, write=write)
        )
        # A cancel that arrived while the thread worked was held until it
        # finished; the caller sees it now, with the transaction already whole.
        await anyio.lowlevel.checkpoint_if_cancelled()
        return result

    async def _write(self, write: _guarded.Write) -> Any:
        """Apply one of a run's hot writes through the lane (see "Group commit" above)."""
        self._check_open()
        await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled already: nothing written
        item = _Queued(write)
        self._queue.append(item)
        try:
            while item.result is None:
                if self._flight is None:
                    await self._fly()
                else:
                    await self._flight.wait()
        except BaseException:
            if item.result is None:
                if item.flight is None:  # still queued: out it goes, nothing written
                    self._queue.remove(item)
                    raise
                with anyio.CancelScope(shield=True):  # taken: wait for its commit
                    await item.flight.wait()
            if item.result is None or isinstance(item.result, outcome.Value):
                raise
            # It failed in the database: that error says more than the cancel,
            # which stays pending and reaches the caller at its next checkpoint.
            return item.result.unwrap()
        # A cancel that arrived while the commit was under way was held until it
        # ended; the caller sees it now, with the write already whole.
        await anyio.lowlevel.checkpoint_if_cancelled()
        return item.result.unwrap()

    async def _fly(self) -> None:
        flight = self._flight = anyio.Event()
        taken: list[_Queued] = []
        try:
            # Scheduler turns, shielded, so writers already runnable (a batch's calls
            # starting together, results arriving together) join this commit. One
            # on asyncio, whose ready queue is first in, first out. Two on trio: it
            # orders each turn's tasks at random, so a writer woken in the same turn
            # as the leader may run after it in the next, and is queued by the one
            # after.
            await anyio.lowlevel.cancel_shielded_checkpoint()
            if sniffio.current_async_library() == "trio":
                await anyio.lowlevel.cancel_shielded_checkpoint()
            taken = list(self._queue)  # the leader's own write is among them
            self._queue.clear()
            for item in taken:
                item.flight = flight
            writes = [item.write for item in taken]
            try:
                # Shielded whole: the thread cannot be stopped, and once it is asked
                # for, the writers it carries wait for what it did.
                with anyio.CancelScope(shield=True):
                    results = await anyio.to_thread.run_sync(self._commit_group, writes)
            except Exception as exc:  # the lane itself failed: every write in it fails
                results = [outcome.Error(exc) for _ in taken]
            self._commits += 1
            for item, result in zip(taken, results, strict=True):
                item.result = result
        finally:
            for item in taken:
                if item.result is None:  # pragma: no cover - a BaseException in the lane
                    item.result = outcome.Error(
                        StoreError(
                            f"{type(self).__name__}: the write's commit was interrupted; "
                            "whether it landed is not known"
                        )
                    )
            self._flight = None
            flight.set()

    # --- runs ---

    async def create_run(
        self,
        run_id: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        chain: ChainRef | None = None,
        agent: str | None = None,
        conversation_id: str | None = None,
    ) -> RunRecord:
        where = f"{type(self).__name__}.create_run"
        _text(f"{where}: run_id", run_id)
        if agent is not None:
            _text(f"{where}: agent", agent)
        if conversation_id is not None:
            _text(f"{where}: conversation_id", conversation_id)
        if chain is None:
            chain = root_chain(run_id, agent=agent)
        elif not isinstance(chain, ChainRef):
            raise TypeError(f"{where}: chain must be a ChainRef or None, got {chain!r}")
        elif chain.run_id != run_id:
            raise ValueError(f"{where}: chain ends in run {chain.run_id!r}, not {run_id!r}")
        checked = _core.check_messages(where, _list(where, messages))
        text = _core.dumps(f"{where}: messages", checked)
        return await self._run(
            _core.create_run,
            now=self._clock(),
            run_id=run_id,
            messages=text,
            chain=chain,
            agent=agent,
            conversation_id=conversation_id,
            agent_in_charge=in_charge(checked),
            write=True,
        )

    async def get_run(self, run_id: str) -> RunRecord:
        _text(f"{type(self).__name__}.get_run: run_id", run_id)
        return await self._run(_core.get_run, run_id, write=False)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        parent_run_id: str | None = None,
        limit: int = 100,
    ) -> list[RunRecord]:
        where = f"{type(self).__name__}.list_runs"
        if status is not None and status not in RUN_STATUSES:
            raise ValueError(f"{where}: status must be a RunStatus or None, got {status!r}")
        if parent_run_id is not None:
            _text(f"{where}: parent_run_id", parent_run_id)
        if _iteration(f"{where}: limit", limit) < 1:
            raise ValueError(f"{where}: limit must be a positive integer, got {limit!r}")
        return await self._run(
            _core.list_runs, status=status, parent_run_id=parent_run_id, limit=limit, write=False
        )

    async def load(self, run_id: str) -> StoredRun:
        _text(f"{type(self).__name__}.load: run_id", run_id)
        return await self._run(_waiting.load, self._clock(), run_id, write=False)

    async def receipts(self, run_id: str) -> list[ReceiptRecord]:
        _text(f"{type(self).__name__}.receipts: run_id", run_id)
        return await self._run(_core.all_receipts, run_id, write=False)

    async def load_with_receipts(self, run_id: str) -> tuple[StoredRun, list[ReceiptRecord]]:
        _text(f"{type(self).__name__}.load_with_receipts: run_id", run_id)
        return await self._run(_core.load_with_receipts, run_id, write=False)

    # --- leases ---

    async def claim_run(
        self, run_id: str, *, owner: str, ttl: float, take_over: str | None = None
    ) -> Lease:
        where = f"{type(self).__name__}.claim_run"
        _text(f"{where}: run_id", run_id)
        _text(f"{where}: owner", owner)
        if take_over is not None:
            _text(f"{where}: take_over", take_over)
        seconds = _codec.finite_seconds(f"{where}: ttl", ttl)
        return await self._run(
            _core.claim_run,
            self._dialect,
            self._clock(),
            run_id=run_id,
            owner=owner,
            ttl=seconds,
            take_over=take_over,
            write=True,
        )

    async def claim_next(self, *, owner: str, ttl: float) -> Lease | None:
        where = f"{type(self).__name__}.claim_next"
        _text(f"{where}: owner", owner)
        seconds = _codec.finite_seconds(f"{where}: ttl", ttl)
        lease, passed = await self._run(
            _core.claim_next, self._dialect, self._clock(), owner=owner, ttl=seconds, write=True
        )
        for error in passed:
            _log.error("run %r cannot be read, recorded as failed: %s", error.run_id, error)
        return lease

    async def renew_lease(self, lease: Lease, *, ttl: float, progress: object = None) -> Lease:
        where = f"{type(self).__name__}.renew_lease"
        _lease(where, lease)
        seconds = _codec.finite_seconds(f"{where}: ttl", ttl)
        text = None if progress is None else _core.dumps(f"{where}: progress", progress)
        return await self._run(
            _core.renew, self._dialect, self._clock(), lease, ttl=seconds, progress=text, write=True
        )

    async def release(self, lease: Lease, *, status: RunStatus, detail: str | None = None) -> None:
        where = f"{type(self).__name__}.release"
        _lease(where, lease)
        if status not in RUN_STATUSES or status == "pending":
            raise ValueError(
                f"{where}: status must be a RunStatus other than 'pending', got {status!r}"
            )
        if detail is not None:
            detail = _core.ended_detail(_text(f"{where}: detail", detail))
        await self._run(
            _core.release,
            self._dialect,
            self._clock(),
            lease,
            status=status,
            detail=detail,
            write=True,
        )

    async def _list_rows(
        self, *, status: RunStatus | None = None, limit: int = 100
    ) -> list[RunRecord | StoreDataError]:
        """``list_runs``, a row that cannot be read given as its error (the CLI's listing)."""
        return await self._run(_core.list_run_rows, status=status, limit=limit, write=False)

    # --- transcript and receipts ---

    async def save_turn(
        self, lease: Lease, *, iteration: int, assistant: Mapping[str, Any]
    ) -> None:
        where = f"{type(self).__name__}.save_turn"
        _lease(where, lease)
        _iteration(f"{where}: iteration", iteration)
        given: object = assistant
        if not isinstance(given, Mapping) or not isinstance(given.get("tool_calls"), list):
            raise TypeError(
                f"{where}: assistant must be an assistant message with a 'tool_calls' list, "
                f"got {assistant!r:.80}"
            )
        text = _core.dumps(f"{where}: assistant", dict(assistant))
        await self._write(
            _guarded.hot_write(
                "save_turn",
                self._dialect,
                self._clock(),
                lease,
                iteration=iteration,
                assistant=text,
            )
        )

    async def start_call(
        self,
        lease: Lease,
        *,
        iteration: int,
        key: ToolCallReceiptKey,
        resumability: EffectResumability,
    ) -> ReceiptRecord:
        where = f"{type(self).__name__}.start_call"
        _lease(where, lease)
        _iteration(f"{where}: iteration", iteration)
        if not isinstance(key, ToolCallReceiptKey):
            raise TypeError(f"{where}: key must be a ToolCallReceiptKey, got {key!r}")
        if key.run_id != lease.run_id:
            raise ValueError(f"{where}: key is for run {key.run_id!r}, lease for {lease.run_id!r}")
        if resumability not in ("repeatable", "non_repeatable"):
            raise ValueError(
                f"{where}: resumability must be 'repeatable' or 'non_repeatable', "
                f"got {resumability!r}"
            )
        record: ReceiptRecord = await self._write(
            _guarded.hot_write(
                "start_call",
                self._dialect,
                self._clock(),
                lease,
                iteration=iteration,
                key=key,
                resumability=resumability,
            )
        )
        return record

    async def settle_call(
        self,
        lease: Lease,
        *,
        iteration: int,
        tool_call_id: str,
        state: str,
        message: Mapping[str, Any] | None = None,
    ) -> None:
        where = f"{type(self).__name__}.settle_call"
        _lease(where, lease)
        _iteration(f"{where}: iteration", iteration)
        _text(f"{where}: tool_call_id", tool_call_id)
        if state not in _core.SETTLED_STATES:
            raise ValueError(
                f"{where}: state must be one of {sorted(_core.SETTLED_STATES)}, got {state!r}"
            )
        if state == "interrupted":
            if message is not None:
                raise ValueError(f"{where}: an interrupted call has no answer to record")
        elif not isinstance(message, Mapping) or message.get("tool_call_id") != tool_call_id:
            raise TypeError(
                f"{where}: a {state} call needs its tool message answering {tool_call_id!r}, "
                f"got {message!r:.80}"
            )
        await self._write(
            _guarded.hot_write(
                "settle_call",
                self._dialect,
                self._clock(),
                lease,
                iteration=iteration,
                tool_call_id=tool_call_id,
                state=state,
                message=message,
            )
        )

    async def save_transcript(
        self, lease: Lease, messages: Sequence[Mapping[str, Any]], *, iteration: int
    ) -> None:
        where = f"{type(self).__name__}.save_transcript"
        _lease(where, lease)
        _iteration(f"{where}: iteration", iteration)
        checked = _core.check_messages(where, _list(where, messages))
        text = _core.dumps(f"{where}: messages", checked)
        await self._write(
            _guarded.hot_write(
                "save_transcript",
                self._dialect,
                self._clock(),
                lease,
                messages=text,
                iteration=iteration,
                agent_in_charge=in_charge(checked),  # the record names who speaks
            )
        )

    # --- calls waiting for a decision ---

    async def suspend_run(
        self, lease: Lease, *, iteration: int, calls: Sequence[PendingToolCall]
    ) -> None:
        where = f"{type(self).__name__}.suspend_run"
        _lease(where, lease)
        _iteration(f"{where}: iteration", iteration)
        given: object = calls
        held: list[object] = list(given) if isinstance(given, list | tuple) else []
        if not isinstance(given, list | tuple) or not all(
            isinstance(c, PendingToolCall) for c in held
        ):
            raise TypeError(f"{where}: calls must be a list of PendingToolCall, got {calls!r:.80}")
        await self._run(
            _waiting.suspend,
            self._dialect,
            self._clock(),
            lease,
            iteration=iteration,
            calls=list(calls),
            write=True,
        )

    async def pending_calls(self, run_id: str) -> list[PendingToolCall]:
        _text(f"{type(self).__name__}.pending_calls: run_id", run_id)
        return await self._run(_waiting.waiting_calls, self._clock(), run_id, write=False)

    async def list_waiting(self, *, limit: int = 100) -> list[RunRecord]:
        where = f"{type(self).__name__}.list_waiting"
        if _iteration(f"{where}: limit", limit) < 1:
            raise ValueError(f"{where}: limit must be a positive integer, got {limit!r}")
        return await self._run(_waiting.list_waiting, self._clock(), limit=limit, write=False)

    async def decide_calls(
        self, run_id: str, decisions: Mapping[str, CallDecision], *, owner: str | None = None
    ) -> list[PendingCallRecord]:
        where = f"{type(self).__name__}.decide_calls"
        _text(f"{where}: run_id", run_id)
        given: object = decisions
        if not isinstance(given, Mapping) or not given:
            raise error_kind(given, Mapping)(
                f"{where}: decisions must be a non-empty dict of CallDecision by call id, "
                f"got {decisions!r:.80}"
            )
        for call_id, each in decisions.items():
            _text(f"{where}: a call id", call_id)
            decision: object = each
            if not isinstance(decision, CallDecision) or decision.kind == "expired":
                raise TypeError(
                    f"{where}: decisions[{call_id!r}] must be a CallDecision of kind "
                    f"'approved', 'denied', 'result' or 'error', got {decision!r:.80}"
                )
            _core.dumps(f"{where}: decisions[{call_id!r}].answer", decision.answer)
        if owner is not None:
            _text(f"{where}: owner", owner)
        return await self._run(
            _waiting.decide,
            self._dialect,
            self._clock(),
            run_id,
            dict(decisions),
            owner=owner,
            write=True,
        )

    async def call_decisions(self, run_id: str) -> list[PendingCallRecord]:
        _text(f"{type(self).__name__}.call_decisions: run_id", run_id)
        return await self._run(_waiting.call_records, self._clock(), run_id, write=False)

    # --- conversations ---

    async def claim_conversation(
        self, conversation_id: str, *, run_id: str, ttl: float
    ) -> list[dict[str, Any]]:
        where = f"{type(self).__name__}.claim_conversation"
        _text(f"{where}: conversation_id", conversation_id)
        _text(f"{where}: run_id", run_id)
        seconds = _codec.finite_seconds(f"{where}: ttl", ttl)
        return await self._run(
            _conversations.claim,
            self._dialect,
            self._clock(),
            conversation_id=conversation_id,
            run_id=run_id,
            ttl=seconds,
            write=True,
        )

    async def append_conversation(
        self, lease: Lease, *, conversation_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> None:
        where = f"{type(self).__name__}.append_conversation"
        _lease(where, lease)
        _text(f"{where}: conversation_id", conversation_id)
        text = _core.dumps(
            f"{where}: messages", _core.check_messages(where, _list(where, messages))
        )
        await self._run(
            _conversations.append,
            self._dialect,
            self._clock(),
            lease,
            conversation_id=conversation_id,
            messages=text,
            write=True,
        )

    async def release_conversation(self, conversation_id: str, *, run_id: str) -> None:
        where = f"{type(self).__name__}.release_conversation"
        _text(f"{where}: conversation_id", conversation_id)
        _text(f"{where}: run_id", run_id)
        await self._run(
            _conversations.release,
            self._clock(),
            conversation_id=conversation_id,
            run_id=run_id,
            write=True,
        )

    async def list_conversations(self, *, limit: int = 100) -> list[ConversationRecord]:
        where = f"{type(self).__name__}.list_conversations"
        if _iteration(f"{where}: limit", limit) < 1:
            raise ValueError(f"{where}: limit must be a positive integer, got {limit!r}")
        return await self._run(_conversations.list_conversations, limit=limit, write=False)

    async def _get_conversation(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's record, or ``None`` (the CLI's ``conversation`` command)."""
        return await self._run(_conversations.get, conversation_id, write=False)

    async def conversation_messages(self, conversation_id: str) -> list[dict[str, Any]]:
        _text(f"{type(self).__name__}.conversation_messages: conversation_id", conversation_id)
        return await self._run(_conversations.messages, conversation_id, write=False)

    async def delete_conversation(self, conversation_id: str) -> bool:
        _text(f"{type(self).__name__}.delete_conversation: conversation_id", conversation_id)
        return await self._run(
            _conversations.delete, self._dialect, self._clock(), conversation_id, write=True
        )
