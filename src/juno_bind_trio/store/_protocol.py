"""The run store protocol: what durable runs ask of a database, whichever it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self, runtime_checkable

from juno_bind_trio._pending import CallDecision, PendingToolCall
from juno_bind_trio.run import ChainRef, EffectResumability, ToolCallReceiptKey

from ._records import (
    ConversationRecord,
    Lease,
    PendingCallRecord,
    ReceiptRecord,
    RunRecord,
    RunStatus,
    StoredRun,
)

__all__ = ["RunStore"]


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
