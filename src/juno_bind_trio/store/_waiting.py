"""The calls a suspended run waits on, in the database: held, decided, listed.

A run that suspends on calls waiting for a person's approval or a host's
result keeps its turn *open* (the assistant message in ``pending_turn``, the
receipts of the calls that ran) and writes one ``juno_pending`` row per
waiting call, in the same transaction that releases its lease
(`suspend`). A decision is written to its row before any worker claims the
run (`decide`), with who decided and when, so it holds from then on: the
resume that reads it may crash, and the next one reads it again. A row
whose decision is empty waits; a row past its deadline and still undecided
reads as expired (at its deadline, by nobody), and takes no decision any
more.

Every function here runs inside one transaction the caller opened (see
``_core``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from juno_bind_trio._errors import RunLeasedError, StoreDataError, UsageError
from juno_bind_trio._pending import DECISION_KINDS, CallDecision, PendingToolCall

from . import _core
from ._codec import RUN_COLUMNS, dumps, loads, run_record, turn_call_ids
from ._core import Dialect, Exec, check_lease, get_run
from ._records import Lease, PendingCallRecord, RunRecord, StoredRun

__all__ = [
    "PENDING_COLUMNS",
    "call_records",
    "decide",
    "list_waiting",
    "load",
    "pending_record",
    "pending_rows",
    "suspend",
    "waiting_calls",
]

PENDING_COLUMNS: Final = (
    "run_id, iteration, position, tool_call_id, tool_name, kind, arguments, expires_at, "
    "created_at, decision, decided_arguments, answer, principal, decided_at"
)

# What a call still waiting has: no decision, and no deadline passed.
_WAITING: Final = "decision IS NULL AND (expires_at IS NULL OR expires_at > ?)"


def _finite(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def pending_record(row: Sequence[Any], now: float) -> PendingCallRecord:
    """A ``juno_pending`` row read back, checked; a StoreDataError naming the column if not."""
    run_id = row[0]
    call_id = row[3]

    def corrupted(column: str, value: object, want: str) -> StoreDataError:
        return StoreDataError(
            f"run {run_id!r}: the waiting call {call_id!r:.60} has {column} {value!r:.60}, "
            f"which is not {want}; the row is corrupted (column juno_pending.{column})",
            run_id,
        )

    for index, column in ((3, "tool_call_id"), (4, "tool_name")):
        if not isinstance(row[index], str) or row[index] == "":
            raise corrupted(column, row[index], "a non-empty text")
    if isinstance(row[1], bool) or not isinstance(row[1], int) or row[1] < 1:
        raise corrupted("iteration", row[1], "a positive integer")
    if row[5] not in ("approval", "external"):
        raise corrupted("kind", row[5], "'approval' or 'external'")
    for index, column in ((7, "expires_at"), (13, "decided_at")):
        if row[index] is not None and not _finite(row[index]):
            raise corrupted(column, row[index], "a finite time in seconds")
    if not _finite(row[8]):
        raise corrupted("created_at", row[8], "a finite time in seconds")
    arguments = loads(run_id, f"arguments of call {call_id!r}", row[6], "juno_pending.arguments")
    if not isinstance(arguments, dict):
        raise corrupted("arguments", arguments, "a JSON object")
    call = PendingToolCall(call_id, row[4], arguments, row[5], row[7])
    decision: CallDecision | None = None
    if row[9] is not None:
        if row[9] not in DECISION_KINDS:
            raise corrupted("decision", row[9], "a decision kind")
        corrected = (
            None
            if row[10] is None
            else loads(run_id, "corrected arguments", row[10], "juno_pending.decided_arguments")
        )
        if corrected is not None and not isinstance(corrected, dict):
            raise corrupted("decided_arguments", corrected, "a JSON object")
        answer = (
            None if row[11] is None else loads(run_id, "answer", row[11], "juno_pending.answer")
        )
        if row[12] is not None and (not isinstance(row[12], str) or not row[12]):
            raise corrupted("principal", row[12], "a non-empty text")
        decision = CallDecision(
            kind=row[9], arguments=corrected, answer=answer, principal=row[12], decided_at=row[13]
        )
    elif call.expires_at is not None and call.expires_at <= now:
        decision = CallDecision(kind="expired", decided_at=call.expires_at)
    return PendingCallRecord(
        run_id=run_id, iteration=row[1], call=call, created_at=float(row[8]), decision=decision
    )


def pending_rows(
    ex: Exec, now: float, run_id: str, iteration: int | None = None
) -> list[PendingCallRecord]:
    """The run's rows (of one *iteration*, or all), by iteration and call order."""
    if iteration is None:
        rows = ex(
            f"SELECT {PENDING_COLUMNS} FROM juno_pending WHERE run_id = ? "
            "ORDER BY iteration, position",
            (run_id,),
        ).fetchall()
    else:
        rows = ex(
            f"SELECT {PENDING_COLUMNS} FROM juno_pending WHERE run_id = ? AND iteration = ? "
            "ORDER BY position",
            (run_id, iteration),
        ).fetchall()
    return [pending_record(row, now) for row in rows]


def waiting_calls(ex: Exec, now: float, run_id: str) -> list[PendingToolCall]:
    """The calls the run waits on now: undecided, in time, of its open turn."""
    record = get_run(ex, run_id)
    if record.status != "suspended" or record.pending_iteration is None:
        return []
    rows = pending_rows(ex, now, run_id, record.pending_iteration)
    return [r.call for r in rows if r.decision is None]


def call_records(ex: Exec, now: float, run_id: str) -> list[PendingCallRecord]:
    """Every call the run waited on, with its decision: the audit."""
    get_run(ex, run_id)
    return pending_rows(ex, now, run_id)


def list_waiting(ex: Exec, now: float, *, limit: int) -> list[RunRecord]:
    """Suspended runs with at least one call waiting for a decision, oldest first."""
    rows = ex(
        f"SELECT {RUN_COLUMNS} FROM juno_runs WHERE status = 'suspended' AND EXISTS ("
        "SELECT 1 FROM juno_pending WHERE juno_pending.run_id = juno_runs.run_id "
        f"AND juno_pending.iteration = juno_runs.pending_iteration AND {_WAITING}) "
        "ORDER BY created_at, run_id LIMIT ?",
        (now, limit),
    ).fetchall()
    return [run_record(row) for row in rows]


def suspend(
    ex: Exec,
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    iteration: int,
    calls: Sequence[PendingToolCall],
) -> None:
    """Keep the open turn *iteration*, hold its waiting *calls*, and release the run
    ``"suspended"``: one transaction. A call already held keeps its row (and any
    decision it has)."""
    row = check_lease(ex, dialect, now, lease)
    if row[3] != iteration or row[4] is None:
        raise StoreDataError(
            f"run {lease.run_id!r}: suspended on calls of iteration {iteration}, which is not "
            f"the run's open turn (open: {row[3]!r}); nothing was written",
            lease.run_id,
        )
    ids = turn_call_ids(lease.run_id, loads(lease.run_id, "open turn", row[4], "pending_turn"))
    for call in calls:
        if call.id not in ids:
            raise StoreDataError(
                f"run {lease.run_id!r}: suspended on call {call.id!r}, which the open turn "
                f"never made (its calls: {ids}); nothing was written",
                lease.run_id,
            )
        ex(
            f"INSERT INTO juno_pending ({PENDING_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL, NULL) "
            "ON CONFLICT (run_id, iteration, tool_call_id) DO NOTHING",
            (
                lease.run_id,
                iteration,
                ids.index(call.id),
                call.id,
                call.name,
                call.kind,
                dumps("suspend: arguments", call.arguments),
                call.expires_at,
                now,
            ),
        )
    ex(
        "UPDATE juno_runs SET status = 'suspended', lease_owner = NULL, lease_expires = NULL, "
        "detail = NULL, updated_at = ? WHERE run_id = ?",
        (now, lease.run_id),
    )


def decide(
    ex: Exec,
    dialect: Dialect,
    now: float,
    run_id: str,
    decisions: Mapping[str, CallDecision],
    *,
    owner: str | None = None,
) -> list[PendingCallRecord]:
    """Record *decisions* (by call id) on the run's waiting calls, stamped *now*.

    All or nothing: an id that waits for nothing (unknown, decided, expired),
    a decision of the wrong sort for its call, or a run cancelled meanwhile
    raises [UsageError][juno_bind_trio.UsageError] naming it, and nothing is
    written; a run another worker holds (a live lease: it is mid-resume)
    raises [RunLeasedError][juno_bind_trio.RunLeasedError], checked under the
    same row lock as the write (*owner*'s own lease, left by its crash, does
    not count: it resumes next). Returns the decided rows as written.
    """
    record = get_run(ex, run_id, dialect.lock_row)
    if record.status == "cancelled":
        raise UsageError(
            f"run {run_id!r} was cancelled while its calls waited for a decision, so "
            f"there is nothing to decide (calls {sorted(decisions)}); nothing was written. "
            f"Resume it without decisions (agent.resume({run_id!r})) if it should go on"
        )
    holder = record.lease_owner
    expires = record.lease_expires_at
    if holder is not None and holder != owner and expires is not None and expires > now:
        # A worker is mid-resume on the run: it read the waiting calls when it
        # claimed, so a decision written now would never be applied by it, yet
        # its next suspension keeps the row (decided), and the run would drop
        # out of list_waiting with the call unanswered. Refuse before writing.
        raise RunLeasedError(
            f"run {run_id!r} is leased by another worker ({holder!r}) for "
            f"{expires - now:.3g} s more, which is resuming it; the decision for calls "
            f"{', '.join(sorted(decisions))} was not written. Decide again once the run "
            "waits (it is listed by list_waiting)",
            run_id,
        )
    rows: dict[str, PendingCallRecord] = {}
    if record.pending_iteration is not None:
        for held in pending_rows(ex, now, run_id, record.pending_iteration):
            rows[held.call.id] = held
    waiting = sorted(i for i, r in rows.items() if r.decision is None)
    for call_id, decision in decisions.items():
        found = rows.get(call_id)
        if found is None:
            raise UsageError(
                f"run {run_id!r}: no call {call_id!r} is waiting for a decision (unknown, or "
                "already settled); the waiting calls are: "
                + (", ".join(waiting) or "none")
                + "; nothing was written"
            )
        if found.decision is not None:
            done = found.decision
            who = "" if done.principal is None else f" by {done.principal!r}"
            raise UsageError(
                f"run {run_id!r}: call {call_id!r} ({found.call.name}) is already settled "
                f"({done.kind}{who}); nothing was written"
            )
        kind = found.call.kind
        if kind == "approval" and decision.kind not in ("approved", "denied"):
            raise UsageError(
                f"run {run_id!r}: call {call_id!r} ({found.call.name}) waits for an "
                "approval; answer it with approvals=, not results= or errors=; nothing was "
                "written"
            )
        if kind == "external" and decision.kind not in ("result", "error"):
            raise UsageError(
                f"run {run_id!r}: call {call_id!r} ({found.call.name}) is run by the host; "
                "answer it with results= or errors=, not approvals=; nothing was written"
            )
    written: list[PendingCallRecord] = []
    for call_id, decision in decisions.items():
        ex(
            "UPDATE juno_pending SET decision = ?, decided_arguments = ?, answer = ?, "
            "principal = ?, decided_at = ? WHERE run_id = ? AND iteration = ? "
            "AND tool_call_id = ?",
            (
                decision.kind,
                None
                if decision.arguments is None
                else dumps("decide: arguments", decision.arguments),
                None if decision.answer is None else dumps("decide: answer", decision.answer),
                decision.principal,
                now,
                run_id,
                record.pending_iteration,
                call_id,
            ),
        )
        held = rows[call_id]
        stamped = CallDecision(
            kind=decision.kind,
            arguments=decision.arguments,
            answer=decision.answer,
            principal=decision.principal,
            decided_at=now,
        )
        written.append(
            PendingCallRecord(
                run_id=run_id,
                iteration=held.iteration,
                call=held.call,
                created_at=held.created_at,
                decision=stamped,
            )
        )
    return written


def load(ex: Exec, now: float, run_id: str) -> StoredRun:
    """``_core.load``, with the calls of its open turn that waited for a decision."""
    loaded = _core.load(ex, run_id)
    iteration = loaded.record.pending_iteration
    if iteration is None or loaded.pending_turn is None:
        return loaded
    calls = tuple(pending_rows(ex, now, run_id, iteration))
    return attrs.evolve(loaded, calls=calls) if calls else loaded
