"""The values a run store reads and writes: runs, leases, receipts, a loaded run."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias, final

import attrs

from juno_bind_trio._pending import CallDecision, PendingToolCall
from juno_bind_trio.run import ChainRef, EffectResumability, ReceiptState

__all__ = [
    "DEFAULT_LEASE_TTL",
    "RESUMABLE_STATUSES",
    "RUN_STATUSES",
    "ConversationRecord",
    "Lease",
    "PendingCallRecord",
    "ReceiptRecord",
    "RunRecord",
    "RunStatus",
    "StoredRun",
]

RunStatus: TypeAlias = Literal[
    "pending",
    "running",
    "completed",
    "max_iterations",
    "should_stop",
    "stopped",
    "suspended",
    "failed",
    "cancelled",
]
"""Where a stored run stands.

``"pending"``: created, not yet claimed by a worker. ``"running"``: a worker
holds (or held, if its lease expired) the run. The rest are how the run's
last worker left it: a [LoopEndReason][juno_bind_trio.loop.LoopEndReason]
(``"completed"``, ``"max_iterations"``, ``"should_stop"``, ``"stopped"``,
``"suspended"``), ``"failed"`` (an exception ended it, or a worker could
not read its row) or ``"cancelled"`` (a hard cancel of the run ended it).
[RunRecord.detail][juno_bind_trio.store.RunRecord] says more where the
status does not.

A worker's ``claim_next`` takes ``"pending"`` runs and ``"running"`` ones
whose lease expired or was given back; a run that ended (``"cancelled"``
included) is continued only when asked for by id (``Agent.resume``,
``open_durable_run``), if its status is one of
[RESUMABLE_STATUSES][juno_bind_trio.store.RESUMABLE_STATUSES].
"""

RUN_STATUSES: Final[frozenset[str]] = frozenset(RunStatus.__args__)  # type: ignore[attr-defined]
"""Every [RunStatus][juno_bind_trio.store.RunStatus]."""

RESUMABLE_STATUSES: Final[frozenset[str]] = frozenset(
    {"pending", "running", "stopped", "suspended", "failed", "cancelled"}
)
"""The statuses a resume continues from; the others ended the run for good."""

DEFAULT_LEASE_TTL: Final = 30.0
"""Seconds a lease lasts unrenewed, unless a worker says otherwise: how soon another
worker takes over a run whose worker died (``open_durable_run``, ``serve_runs`` and
``Agent(store=...)`` all default to it)."""


@final
@attrs.frozen(kw_only=True)
class Lease:
    """A worker's hold on one run, proven by its fencing ``token``.

    Every claim of a run increments the run's token, so a worker whose lease
    expired and was claimed by another holds a token that no longer matches:
    each of its writes is refused with
    [LeaseLostError][juno_bind_trio.store.LeaseLostError] in the same
    transaction that would have written. ``expires_at`` is in the store's
    clock (seconds since the epoch, by default).
    """

    run_id: str
    owner: str
    token: int
    expires_at: float


@final
@attrs.frozen(kw_only=True)
class RunRecord:
    """One stored run, without its transcript.

    ``iteration``: the last iteration whose transcript was saved (0: none yet).
    ``pending_iteration``: the iteration whose tool calls were recorded but
    whose transcript was not saved yet (a crash, or a stop, came between), or
    ``None``. ``progress`` is the last value the heartbeat wrote.

    ``detail``: how the run's last hold ended, in a sentence, where ``status``
    alone does not say it, or ``None``: the exception that failed it
    (``"failed: KeyError was raised while it ran"``), the column a worker
    could not read, a run handed back when its worker was stopped, or a lease
    taken over from a worker that stopped without giving it back.

    ``conversation_id``: the conversation the run belongs to
    (``Agent.run(conversation=...)``), or ``None``.

    ``agent_in_charge``: the agent speaking as of the run's last saved
    transcript: the target of the last handoff it records once the target took
    over (the agent that handed off while that handoff's batch is still open),
    else ``agent``, the agent that started the run. Written with every
    transcript, so a handoff shows once its iteration is saved.
    """

    run_id: str
    status: RunStatus
    agent: str | None
    chain: ChainRef
    iteration: int
    pending_iteration: int | None
    lease_owner: str | None
    lease_token: int
    lease_expires_at: float | None
    heartbeat_at: float | None
    progress: Any
    created_at: float
    updated_at: float
    detail: str | None = None
    conversation_id: str | None = None
    agent_in_charge: str | None = None


@final
@attrs.frozen(kw_only=True)
class ReceiptRecord:
    """One tool call's receipt: how far the call got, and its answer once it settled.

    ``key`` is [tool_call_receipt_key_string][juno_bind_trio.run.tool_call_receipt_key_string]
    of the call; ``message`` is the tool message the call was answered with
    (``None`` until it settled as ``"succeeded"`` or ``"failed"``).
    """

    run_id: str
    iteration: int
    tool_call_id: str
    tool_name: str
    args_hash: str
    key: str
    resumability: EffectResumability
    state: ReceiptState
    message: dict[str, Any] | None
    updated_at: float


@final
@attrs.frozen(kw_only=True)
class PendingCallRecord:
    """One call a suspended run waited (or waits) on, and what was decided for it.

    ``call``: the call as the run held it (its id, tool, validated arguments,
    kind and deadline). ``iteration``: the run's turn it belongs to.
    ``created_at``: when the run suspended on it. ``decision``: who decided
    what and when ([CallDecision][juno_bind_trio.store.CallDecision]), or
    ``None`` while it waits; a call whose deadline passed undecided reads as
    a decision of kind ``"expired"`` at its deadline, by nobody.
    """

    run_id: str
    iteration: int
    call: PendingToolCall
    created_at: float
    decision: CallDecision | None

    @property
    def waiting(self) -> bool:
        """Whether the call still waits for a decision."""
        return self.decision is None


@final
@attrs.frozen(kw_only=True)
class StoredRun:
    """A run as [RunStore.load][juno_bind_trio.store.RunStore.load] reads it.

    ``messages``: the transcript as of the last saved iteration.
    ``pending_turn``: the assistant message of the iteration after it, if
    its tool calls were recorded before the run stopped (else ``None``), and
    ``receipts`` those calls' receipts, in call order. ``calls``: the calls of
    that turn that waited for a decision (a suspended run's), in call order,
    each with its decision so far.
    """

    record: RunRecord
    messages: list[dict[str, Any]]
    pending_turn: dict[str, Any] | None
    receipts: tuple[ReceiptRecord, ...]
    calls: tuple[PendingCallRecord, ...] = ()


@final
@attrs.frozen(kw_only=True)
class ConversationRecord:
    """One stored conversation, without its messages
    ([RunStore.list_conversations][juno_bind_trio.store.RunStore.list_conversations]).

    ``turns``: how many runs have answered in it. ``last_run_id``: the run
    whose transcript the conversation's messages are (``None`` before the
    first answer). ``active_run_id``: the run holding it now, or ``None``:
    a run that crashed holding it keeps the name until its lease runs out
    and the next run takes the conversation.
    """

    conversation_id: str
    turns: int
    last_run_id: str | None
    active_run_id: str | None
    created_at: float
    updated_at: float
