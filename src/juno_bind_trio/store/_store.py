"""The base both database stores share: each call checked, then run as one transaction.

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

The write lane that group-commits a run's hot writes is in ``_lane.py``,
the protocol the stores implement in ``_protocol.py``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from juno_bind_trio._errors import StoreDataError, UsageError
from juno_bind_trio._pending import CallDecision, PendingToolCall
from juno_bind_trio._transfers import in_charge
from juno_bind_trio._validate import error_kind
from juno_bind_trio.run import ChainRef, EffectResumability, ToolCallReceiptKey, root_chain

from . import _codec, _conversations, _core, _guarded, _waiting
from ._lane import WriteLane, _Queued
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

__all__ = ["ThreadedRunStore"]

T = TypeVar("T")

_log = logging.getLogger("juno_bind_trio.store")


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


class ThreadedRunStore(WriteLane):
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
