"""What both stores do, written once against a DB-API cursor, run in a worker thread.

Every function here takes ``ex`` (execute one parameterized statement in the
current transaction) and runs inside one transaction the caller opened:
SQLite's ``BEGIN IMMEDIATE`` (the single writer) or a PostgreSQL transaction
whose first statement locks the run's row. No value is ever formatted into
SQL text: every value travels as a parameter.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, cast, final

from juno_bind_trio._errors import (
    LeaseLostError,
    RunExistsError,
    RunLeasedError,
    RunNotFoundError,
    SchemaVersionError,
    StoreDataError,
)
from juno_bind_trio.run import ChainRef, ToolCallReceiptKey, tool_call_receipt_key_string

from ._migrations import MIGRATIONS, SCHEMA_VERSION
from ._records import RUN_STATUSES, Lease, ReceiptRecord, RunRecord, StoredRun

__all__ = ["SETTLED_STATES", "Cursor", "Dialect", "Exec", "Write"]

_RECEIPT_STATES = frozenset({"not_run", "started", "interrupted", "succeeded", "failed"})
SETTLED_STATES = frozenset({"interrupted", "succeeded", "failed"})
_RESUMABILITIES = frozenset({"repeatable", "non_repeatable"})


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


Exec = Callable[[str, Sequence[Any]], Cursor]


class Dialect(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def lock_row(self) -> str:  # appended to a SELECT of one run's row to lock it
        ...

    @property
    def skip_locked(self) -> str:  # appended to the claim query
        ...

    @property
    def guarded(self) -> bool:  # the hot writes also come as one guarded statement
        ...

    @property
    def unreadable_expiry(self) -> str:  # true where lease_expires is not a finite number
        ...


_RUN_COLUMNS = (
    "run_id, status, agent, chain, iteration, pending_iteration, lease_owner, lease_token, "
    "lease_expires, heartbeat_at, progress, created_at, updated_at, detail"
)
_RUN_WIDTH: Final = _RUN_COLUMNS.count(",") + 1
_RECEIPT_COLUMNS = (
    "run_id, iteration, tool_call_id, tool_name, args_hash, receipt_key, resumability, state, "
    "message, updated_at"
)


# --- encoding ------------------------------------------------------------------------


def dumps(where: str, value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} must be JSON-serializable: {exc}") from None


def _loads(run_id: str, what: str, text: object, column: str) -> Any:
    """*text*, a JSON column, parsed; a StoreDataError naming the run and *column* if not."""
    if not isinstance(text, str):
        raise StoreDataError(
            f"run {run_id!r}: stored {what} is not text (got {type(text).__name__}); "
            f"the row is corrupted (column {column})",
            run_id,
        )
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreDataError(
            f"run {run_id!r}: stored {what} does not parse as JSON ({exc}); the row is "
            f"corrupted (column {column})",
            run_id,
        ) from None
    except RecursionError:
        raise StoreDataError(
            f"run {run_id!r}: stored {what} is nested too deeply to read; the row is "
            f"corrupted (column {column})",
            run_id,
        ) from None


def check_messages(where: str, messages: object) -> list[dict[str, Any]]:
    """Refuse a transcript that is not a list of message dicts with a role."""
    if not isinstance(messages, list):
        raise TypeError(f"{where}: messages must be a list of message dicts, got {messages!r:.80}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TypeError(
                f"{where}: messages[{index}] must be a message dict with a string 'role', "
                f"got {message!r:.80}"
            )
    return messages


def _stored_messages(run_id: str, text: object) -> list[dict[str, Any]]:
    value = _loads(run_id, "transcript", text, "messages")
    try:
        return check_messages("stored transcript", value)
    except TypeError as exc:
        raise StoreDataError(
            f"run {run_id!r}: {exc}; the row is corrupted (column messages)", run_id
        ) from None


def _corrupted(run_id: str, column: str, value: object, want: str) -> StoreDataError:
    return StoreDataError(
        f"run {run_id!r}: stored {column} {value!r:.60} is not {want}; the row is corrupted",
        run_id,
    )


def _count(run_id: str, column: str, value: object, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        word = "non-negative" if least == 0 else "positive"
        raise _corrupted(run_id, column, value, f"a {word} integer")
    return value


def _time(run_id: str, column: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _corrupted(run_id, column, value, "a finite time in seconds")
    return float(value)


def _optional_time(run_id: str, column: str, value: object) -> float | None:
    return None if value is None else _time(run_id, column, value)


def _optional_text(run_id: str, column: str, value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or value == ""):
        raise _corrupted(run_id, column, value, "a non-empty text or NULL")
    return value


def _run_record(row: Sequence[Any]) -> RunRecord:
    """The record of one row of ``_RUN_COLUMNS``; every column is checked, and a value
    that is not what this package writes there is a StoreDataError naming the run and
    the column (never a TypeError from comparing it later)."""
    run_id = row[0]
    if not isinstance(run_id, str) or run_id == "":
        raise StoreDataError(
            f"a stored run has a run_id that is not a non-empty text: {run_id!r:.60}; "
            "the row is corrupted"
        )
    status = row[1]
    if status not in RUN_STATUSES:
        raise StoreDataError(
            f"run {run_id!r}: stored status {status!r:.60} is not a run status; "
            "the row is corrupted",
            run_id,
        )
    agent = _optional_text(run_id, "agent", row[2])
    lineage = _loads(run_id, "lineage", row[3], "chain")
    try:
        chain = ChainRef.from_dict(lineage)
    except (TypeError, ValueError) as exc:
        raise StoreDataError(
            f"run {run_id!r}: stored lineage: {exc}; the row is corrupted (column chain)", run_id
        ) from None
    if chain.run_id != run_id:
        raise _corrupted(run_id, "chain", row[3], f"a lineage ending in {run_id!r}")
    iteration = _count(run_id, "iteration", row[4], least=0)
    pending = None if row[5] is None else _count(run_id, "pending_iteration", row[5], least=1)
    owner = _optional_text(run_id, "lease_owner", row[6])
    token = _count(run_id, "lease_token", row[7], least=0)
    expires = _optional_time(run_id, "lease_expires", row[8])
    heartbeat = _optional_time(run_id, "heartbeat_at", row[9])
    progress = None if row[10] is None else _loads(run_id, "progress", row[10], "progress")
    created = _time(run_id, "created_at", row[11])
    updated = _time(run_id, "updated_at", row[12])
    detail = _optional_text(run_id, "detail", row[13])
    return RunRecord(
        run_id=run_id,
        status=status,
        agent=agent,
        chain=chain,
        iteration=iteration,
        pending_iteration=pending,
        lease_owner=owner,
        lease_token=token,
        lease_expires_at=expires,
        heartbeat_at=heartbeat,
        progress=progress,
        created_at=created,
        updated_at=updated,
        detail=detail,
    )


def _receipt(row: Sequence[Any]) -> ReceiptRecord:
    run_id = row[0]
    call_id = row[2]

    def corrupted(column: str, value: object, want: str) -> StoreDataError:
        return StoreDataError(
            f"run {run_id!r}: the receipt of call {call_id!r:.60} has {column} {value!r:.60}, "
            f"which is not {want}; the row is corrupted (column juno_receipts.{column})",
            run_id,
        )

    if not isinstance(call_id, str) or call_id == "":
        raise corrupted("tool_call_id", call_id, "a non-empty text")
    if isinstance(row[1], bool) or not isinstance(row[1], int) or row[1] < 1:
        raise corrupted("iteration", row[1], "a positive integer")
    for index, column in ((3, "tool_name"), (4, "args_hash"), (5, "receipt_key")):
        if not isinstance(row[index], str) or row[index] == "":
            raise corrupted(column, row[index], "a non-empty text")
    if row[7] not in _RECEIPT_STATES:
        raise corrupted("state", row[7], "a receipt state")
    if row[6] not in _RESUMABILITIES:
        raise corrupted("resumability", row[6], "'repeatable' or 'non_repeatable'")
    updated = row[9]
    if (
        isinstance(updated, bool)
        or not isinstance(updated, int | float)
        or not math.isfinite(updated)
    ):
        raise corrupted("updated_at", updated, "a finite time in seconds")
    message = (
        None
        if row[8] is None
        else _loads(run_id, f"answer of call {call_id!r}", row[8], "juno_receipts.message")
    )
    if message is not None and not (
        isinstance(message, dict) and message.get("tool_call_id") == call_id
    ):
        raise StoreDataError(
            f"run {run_id!r}: the stored answer of call {call_id!r} is not a tool "
            "message answering it; the row is corrupted (column juno_receipts.message)",
            run_id,
        )
    return ReceiptRecord(
        run_id=run_id,
        iteration=row[1],
        tool_call_id=call_id,
        tool_name=row[3],
        args_hash=row[4],
        key=row[5],
        resumability=row[6],
        state=row[7],
        message=message,
        updated_at=float(updated),
    )


def _turn_call_ids(run_id: str, turn: object) -> list[str]:
    calls = turn.get("tool_calls") if isinstance(turn, dict) else None
    if not isinstance(calls, list):
        raise StoreDataError(
            f"run {run_id!r}: the stored open turn is not an assistant message with tool "
            "calls; the row is corrupted (column pending_turn)",
            run_id,
        )
    ids: list[str] = []
    for call in calls:
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str):
            raise StoreDataError(
                f"run {run_id!r}: a tool call of the stored open turn has no id; "
                "the row is corrupted (column pending_turn)",
                run_id,
            )
        ids.append(call_id)
    return ids


# --- schema ----------------------------------------------------------------------------


def migrate(ex: Exec, dialect: Dialect) -> int:
    """Create or upgrade the schema; refuse a newer one. Returns the version now in force."""
    ex("CREATE TABLE IF NOT EXISTS juno_schema (version INTEGER NOT NULL)", ())
    row = ex("SELECT MAX(version) FROM juno_schema", ()).fetchone()
    current = 0 if row is None or row[0] is None else int(row[0])
    if current > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the store's database has schema version {current}, newer than the "
            f"{SCHEMA_VERSION} this version of juno_bind_trio knows; upgrade juno_bind_trio "
            "(nothing was read or written)"
        )
    for version, statements in enumerate(MIGRATIONS[dialect.name], start=1):
        if version <= current:
            continue
        for statement in statements:
            ex(statement, ())
        ex("INSERT INTO juno_schema (version) VALUES (?)", (version,))
    return SCHEMA_VERSION


# --- runs --------------------------------------------------------------------------------


def create_run(
    ex: Exec,
    now: float,
    *,
    run_id: str,
    messages: str,
    chain: ChainRef,
    agent: str | None,
) -> RunRecord:
    if ex("SELECT 1 FROM juno_runs WHERE run_id = ?", (run_id,)).fetchone() is not None:
        raise RunExistsError(f"run {run_id!r} is already stored; nothing was overwritten", run_id)
    ex(
        "INSERT INTO juno_runs (run_id, status, agent, chain, root_run_id, parent_run_id, "
        "messages, iteration, lease_token, created_at, updated_at) "
        "VALUES (?, 'pending', ?, ?, ?, ?, ?, 0, 0, ?, ?)",
        (
            run_id,
            agent,
            dumps("chain", chain.to_dict()),
            chain.root_run_id,
            chain.parent_run_id,
            messages,
            now,
            now,
        ),
    )
    return get_run(ex, run_id)


def _run_row(ex: Exec, run_id: str, columns: str, lock: str = "") -> Sequence[Any]:
    row = ex(f"SELECT {columns} FROM juno_runs WHERE run_id = ?{lock}", (run_id,)).fetchone()
    if row is None:
        raise RunNotFoundError(f"no run {run_id!r} is stored", run_id)
    return cast("Sequence[Any]", row)


def get_run(ex: Exec, run_id: str, lock: str = "") -> RunRecord:
    return _run_record(_run_row(ex, run_id, _RUN_COLUMNS, lock))


def list_runs(
    ex: Exec, *, status: str | None, parent_run_id: str | None, limit: int
) -> list[RunRecord]:
    where: list[str] = []
    params: list[Any] = []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if parent_run_id is not None:
        where.append("parent_run_id = ?")
        params.append(parent_run_id)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    params.append(limit)
    rows = ex(
        f"SELECT {_RUN_COLUMNS} FROM juno_runs{clause} ORDER BY created_at, run_id LIMIT ?",
        params,
    ).fetchall()
    return [_run_record(row) for row in rows]


def list_run_rows(ex: Exec, *, status: str | None, limit: int) -> list[RunRecord | StoreDataError]:
    """``list_runs``, with a row that cannot be read given as its error instead of
    raising it: what a listing shows, so one corrupted row does not hide the rest."""
    clause, params = (" WHERE status = ?", [status]) if status is not None else ("", [])
    rows = ex(
        f"SELECT {_RUN_COLUMNS} FROM juno_runs{clause} ORDER BY created_at, run_id LIMIT ?",
        [*params, limit],
    ).fetchall()
    listed: list[RunRecord | StoreDataError] = []
    for row in rows:
        try:
            listed.append(_run_record(row))
        except StoreDataError as exc:
            listed.append(exc)
    return listed


def load(ex: Exec, run_id: str) -> StoredRun:
    # The whole row in one statement, and the receipts in the same transaction,
    # which the store opens as one snapshot (see ThreadedRunStore._transaction):
    # a worker committing meanwhile is seen wholly or not at all.
    row = _run_row(ex, run_id, f"{_RUN_COLUMNS}, messages, pending_turn")
    record = _run_record(row)
    messages = _stored_messages(run_id, row[_RUN_WIDTH])
    pending_turn: dict[str, Any] | None = None
    receipts: tuple[ReceiptRecord, ...] = ()
    if record.pending_iteration is not None:
        turn = _loads(run_id, "open turn", row[_RUN_WIDTH + 1], "pending_turn")
        ids = _turn_call_ids(run_id, turn)
        pending_turn = cast("dict[str, Any]", turn)
        rows = ex(
            f"SELECT {_RECEIPT_COLUMNS} FROM juno_receipts WHERE run_id = ? AND iteration = ? "
            "ORDER BY position",
            (run_id, record.pending_iteration),
        ).fetchall()
        receipts = tuple(_receipt(r) for r in rows)
        unknown = [r.tool_call_id for r in receipts if r.tool_call_id not in ids]
        if unknown:
            raise StoreDataError(
                f"run {run_id!r}: receipts for calls the open turn never made: {unknown}; "
                "the rows are corrupted (column juno_receipts.tool_call_id)",
                run_id,
            )
    return StoredRun(record=record, messages=messages, pending_turn=pending_turn, receipts=receipts)


def _all_receipt_rows(ex: Exec, run_id: str) -> list[ReceiptRecord]:
    rows = ex(
        f"SELECT {_RECEIPT_COLUMNS} FROM juno_receipts WHERE run_id = ? "
        "ORDER BY iteration, position",
        (run_id,),
    ).fetchall()
    return [_receipt(r) for r in rows]


def all_receipts(ex: Exec, run_id: str) -> list[ReceiptRecord]:
    get_run(ex, run_id)
    return _all_receipt_rows(ex, run_id)


def load_with_receipts(ex: Exec, run_id: str) -> tuple[StoredRun, list[ReceiptRecord]]:
    # One transaction, so one snapshot: the receipts are those of the moment the
    # run was read, never one a worker committed between two calls.
    loaded = load(ex, run_id)
    return loaded, _all_receipt_rows(ex, run_id)


# --- leases --------------------------------------------------------------------------------


def _lease(
    ex: Exec, record: RunRecord, owner: str, expires: float, now: float, detail: str | None
) -> Lease:
    token = record.lease_token + 1
    ex(
        "UPDATE juno_runs SET lease_owner = ?, lease_token = ?, lease_expires = ?, "
        "heartbeat_at = ?, updated_at = ?, detail = ?, "
        "status = CASE WHEN status = 'pending' THEN 'running' ELSE status END "
        "WHERE run_id = ?",
        (owner, token, expires, now, now, detail, record.run_id),
    )
    return Lease(run_id=record.run_id, owner=owner, token=token, expires_at=expires)


def _claim_detail(record: RunRecord, owner: str, now: float, take_over: str | None) -> str | None:
    """What a claim records about the hold it ends: a lease never given back, or nothing."""
    holder = record.lease_owner
    if holder is None or holder == owner:
        return None  # free (given back), or this owner's own earlier hold
    if record.lease_expires_at is not None and record.lease_expires_at > now:
        assert holder == take_over
        return (
            f"taken over by {owner!r} from {holder!r}, a process on its host that is no "
            "longer running (it stopped without giving its lease back)"
        )
    return (
        f"taken over by {owner!r} from {holder!r}, whose lease had run out (that worker "
        "stopped renewing it: it crashed, stalled, or lost the run)"
    )


def claim_run(
    ex: Exec,
    dialect: Dialect,
    now: float,
    *,
    run_id: str,
    owner: str,
    ttl: float,
    take_over: str | None = None,
) -> Lease:
    record = get_run(ex, run_id, dialect.lock_row)
    holder = record.lease_owner
    if (
        holder is not None
        and holder != owner
        and holder != take_over
        and record.lease_expires_at is not None
        and record.lease_expires_at > now
    ):
        raise RunLeasedError(
            f"run {run_id!r} is leased by another worker ({holder!r}) for "
            f"{record.lease_expires_at - now:.3g} s more",
            run_id,
        )
    return _lease(ex, record, owner, now + ttl, now, _claim_detail(record, owner, now, take_over))


def claim_next(
    ex: Exec, dialect: Dialect, now: float, *, owner: str, ttl: float
) -> tuple[Lease | None, list[StoreDataError]]:
    """The lease of the oldest runnable run, and the runs passed over on the way
    because their rows cannot be read: each is recorded ``"failed"`` (the error in
    its ``detail``, its data otherwise left as it is), so no worker meets it again."""
    passed: list[StoreDataError] = []
    seen: set[object] = set()
    while True:
        row = ex(
            f"SELECT {_RUN_COLUMNS} FROM juno_runs "
            "WHERE status = 'pending' OR (status = 'running' AND "
            "(lease_expires IS NULL OR lease_expires <= ? OR lease_owner = ? OR "
            # A lease time no clock reaches (text, NaN, infinity): an unreadable row,
            # which must come up here to be recorded failed, not sit unseen for good.
            f"{dialect.unreadable_expiry})) "
            f"ORDER BY created_at, run_id LIMIT 1{dialect.skip_locked}",
            (now, owner),
        ).fetchone()
        if row is None:
            return None, passed
        try:
            record = _run_record(row)
        except StoreDataError as exc:
            if row[0] in seen:  # pragma: no cover - the update below always moves it
                raise
            seen.add(row[0])
            mark_unreadable(ex, now, row[0], exc)
            passed.append(exc)
            continue
        detail = _claim_detail(record, owner, now, None)
        return _lease(ex, record, owner, now + ttl, now, detail), passed


def mark_unreadable(ex: Exec, now: float, run_id: object, error: StoreDataError) -> None:
    """Record a run whose row cannot be read as failed, saying why; nothing else changes."""
    ex(
        "UPDATE juno_runs SET status = 'failed', lease_owner = NULL, lease_expires = NULL, "
        "detail = ?, updated_at = ? WHERE run_id = ?",
        (ended_detail(f"failed: {error}"), now, run_id),
    )


def ended_detail(text: str) -> str:
    """*text*, bounded: a detail is one sentence, not a dump of a corrupted value."""
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


_DETAIL_LIMIT: Final = 400


def check_lease(ex: Exec, dialect: Dialect, now: float, lease: Lease) -> Sequence[Any]:
    """Lock the run's row and prove *lease* still holds it; every write starts here."""
    row = ex(
        "SELECT lease_owner, lease_token, lease_expires, pending_iteration, pending_turn "
        f"FROM juno_runs WHERE run_id = ?{dialect.lock_row}",
        (lease.run_id,),
    ).fetchone()
    if row is None:
        raise RunNotFoundError(f"no run {lease.run_id!r} is stored", lease.run_id)
    if row[0] != lease.owner or row[1] != lease.token:
        raise LeaseLostError(
            f"run {lease.run_id!r}: the lease of {lease.owner!r} (token {lease.token}) was "
            "taken by another worker; nothing was written",
            lease.run_id,
        )
    expires = row[2]
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        raise _corrupted(lease.run_id, "lease_expires", expires, "a time in seconds")
    if expires <= now:
        raise LeaseLostError(
            f"run {lease.run_id!r}: the lease of {lease.owner!r} expired; nothing was written",
            lease.run_id,
        )
    return cast("Sequence[Any]", row)


def renew(
    ex: Exec, dialect: Dialect, now: float, lease: Lease, *, ttl: float, progress: str | None
) -> Lease:
    check_lease(ex, dialect, now, lease)
    expires = now + ttl
    ex(
        "UPDATE juno_runs SET lease_expires = ?, heartbeat_at = ?, updated_at = ?, "
        "progress = COALESCE(?, progress) WHERE run_id = ?",
        (expires, now, now, progress, lease.run_id),
    )
    return Lease(run_id=lease.run_id, owner=lease.owner, token=lease.token, expires_at=expires)


def release(
    ex: Exec, dialect: Dialect, now: float, lease: Lease, *, status: str, detail: str | None
) -> None:
    check_lease(ex, dialect, now, lease)
    ex(
        "UPDATE juno_runs SET status = ?, lease_owner = NULL, lease_expires = NULL, "
        "detail = ?, updated_at = ? WHERE run_id = ?",
        (status, detail, now, lease.run_id),
    )


# --- the transcript and the receipts ------------------------------------------------------


def save_transcript(
    ex: Exec, dialect: Dialect, now: float, lease: Lease, *, messages: str, iteration: int
) -> None:
    row = check_lease(ex, dialect, now, lease)
    if row[3] is not None and iteration < row[3]:
        raise StoreDataError(
            f"run {lease.run_id!r}: save_transcript for iteration {iteration} while iteration "
            f"{row[3]} is open; nothing was written",
            lease.run_id,
        )
    ex(
        "UPDATE juno_runs SET messages = ?, iteration = ?, pending_turn = NULL, "
        "pending_iteration = NULL, updated_at = ? WHERE run_id = ?",
        (messages, iteration, now, lease.run_id),
    )


def save_turn(
    ex: Exec,
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    iteration: int,
    assistant: str,
) -> None:
    check_lease(ex, dialect, now, lease)
    ex(
        "UPDATE juno_runs SET pending_turn = ?, pending_iteration = ?, updated_at = ? "
        "WHERE run_id = ?",
        (assistant, iteration, now, lease.run_id),
    )


def _open_call(
    run_id: str, row: Sequence[Any], iteration: int, tool_call_id: str
) -> tuple[int, list[str]]:
    if row[3] != iteration or row[4] is None:
        raise StoreDataError(
            f"run {run_id!r}: a receipt for call {tool_call_id!r} of iteration {iteration}, "
            f"which is not the run's open turn (open: {row[3]!r}); nothing was written",
            run_id,
        )
    ids = _turn_call_ids(run_id, _loads(run_id, "open turn", row[4], "pending_turn"))
    if tool_call_id not in ids:
        raise StoreDataError(
            f"run {run_id!r}: a receipt for call {tool_call_id!r}, which the open turn never "
            f"made (its calls: {ids}); nothing was written",
            run_id,
        )
    return ids.index(tool_call_id), ids


def start_call(
    ex: Exec,
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    iteration: int,
    key: ToolCallReceiptKey,
    resumability: str,
) -> ReceiptRecord:
    row = check_lease(ex, dialect, now, lease)
    position, _ = _open_call(lease.run_id, row, iteration, key.tool_call_id)
    existing = ex(
        "SELECT state, args_hash FROM juno_receipts WHERE run_id = ? AND iteration = ? "
        "AND tool_call_id = ?",
        (lease.run_id, iteration, key.tool_call_id),
    ).fetchone()
    key_text = tool_call_receipt_key_string(key)
    if existing is None:
        ex(
            f"INSERT INTO juno_receipts ({_RECEIPT_COLUMNS}, position) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'started', NULL, ?, ?)",
            (
                lease.run_id,
                iteration,
                key.tool_call_id,
                key.tool_name,
                key.args_hash,
                key_text,
                resumability,
                now,
                position,
            ),
        )
    else:
        if existing[0] in ("succeeded", "failed") or existing[1] != key.args_hash:
            raise StoreDataError(
                f"run {lease.run_id!r}: call {key.tool_call_id!r} already has a receipt "
                f"({existing[0]}, arguments hash {existing[1]!r}); starting it again would "
                "overwrite it, so nothing was written",
                lease.run_id,
            )
        ex(
            "UPDATE juno_receipts SET state = 'started', updated_at = ? WHERE run_id = ? "
            "AND iteration = ? AND tool_call_id = ?",
            (now, lease.run_id, iteration, key.tool_call_id),
        )
    return _started_receipt(lease, iteration, key, key_text, resumability, now)


def _started_receipt(
    lease: Lease,
    iteration: int,
    key: ToolCallReceiptKey,
    key_text: str,
    resumability: str,
    now: float,
) -> ReceiptRecord:
    """The ``"started"`` receipt a start_call wrote (checked or guarded)."""
    return ReceiptRecord(
        run_id=lease.run_id,
        iteration=iteration,
        tool_call_id=key.tool_call_id,
        tool_name=key.tool_name,
        args_hash=key.args_hash,
        key=key_text,
        resumability=resumability,  # type: ignore[arg-type]
        state="started",
        message=None,
        updated_at=now,
    )


def settle_call(
    ex: Exec,
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    iteration: int,
    tool_call_id: str,
    state: str,
    message: Mapping[str, Any] | None,
) -> None:
    row = check_lease(ex, dialect, now, lease)
    _open_call(lease.run_id, row, iteration, tool_call_id)
    existing = ex(
        "SELECT state FROM juno_receipts WHERE run_id = ? AND iteration = ? AND tool_call_id = ?",
        (lease.run_id, iteration, tool_call_id),
    ).fetchone()
    if existing is None:
        raise StoreDataError(
            f"run {lease.run_id!r}: call {tool_call_id!r} settled as {state!r} with no "
            "'started' receipt; nothing was written",
            lease.run_id,
        )
    if existing[0] in ("succeeded", "failed"):
        raise StoreDataError(
            f"run {lease.run_id!r}: call {tool_call_id!r} already settled as {existing[0]!r}; "
            "nothing was overwritten",
            lease.run_id,
        )
    text = None if message is None else dumps("settle_call: message", dict(message))
    ex(
        "UPDATE juno_receipts SET state = ?, message = ?, updated_at = ? WHERE run_id = ? "
        "AND iteration = ? AND tool_call_id = ?",
        (state, text, now, lease.run_id, iteration, tool_call_id),
    )


def finite_seconds(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where} must be a positive finite number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} must be a positive finite number of seconds, got {value!r}")
    return float(value)


# --- the hot writes, as units a group commit can carry -------------------------------------
#
# A loop iteration writes the open turn, each call's receipt twice and the
# transcript. Each of those is a `Write`: its *checked* body (the functions
# above: lock the run's row, check the lease, check the turn, write, or raise
# the precise error) and, where the dialect offers it, the same write as one
# *guarded* statement that locks the run's row, checks everything the checked
# body checks, and writes only when all of it holds. A guarded statement that
# did not write is followed by the checked body, which then raises the error
# that says why (or writes, if what stopped the statement was only a value the
# database could not read as JSON: the checked body decides, as it always did).


@final
class Write:
    """One lease-checked write of a run, ready for a worker thread to apply.

    ``checked(ex)`` runs inside a transaction. ``guarded`` (dialects with
    ``guarded`` only) is a list of ``(name, sql)`` common table expressions,
    the last of which writes and returns one row when it wrote, and their
    parameters in order; ``{n}`` in a name or its SQL stands for the write's
    place in its statement. ``result`` is what the write returns when the
    guarded statement wrote. ``touches_run`` says whether it writes the run's
    own row (the open turn, the transcript), not only a receipt.
    """

    __slots__ = ("checked", "guarded", "params", "result", "run_id", "touches_run")

    def __init__(
        self,
        run_id: str,
        checked: Callable[[Exec], Any],
        *,
        guarded: Sequence[tuple[str, str]] | None,
        params: Sequence[Any],
        result: Any,
        touches_run: bool,
    ) -> None:
        self.run_id = run_id
        self.checked = checked
        self.guarded = guarded
        self.params = params
        self.result = result
        self.touches_run = touches_run


# The lease check every guarded statement makes on the run's row (alias r).
_LEASE_HOLDS = "r.run_id = ? AND r.lease_owner = ? AND r.lease_token = ? AND r.lease_expires > ?"

# PostgreSQL: the open turn is an object whose tool_calls is an array of
# objects each with a string id (what _turn_call_ids insists on).
_PG_TURN_WELL_FORMED = (
    "jsonb_typeof(r.pending_turn::jsonb -> 'tool_calls') = 'array' AND NOT EXISTS ("
    "SELECT 1 FROM jsonb_array_elements(r.pending_turn::jsonb -> 'tool_calls') AS t(call) "
    "WHERE jsonb_typeof(t.call -> 'id') IS DISTINCT FROM 'string')"
)
_PG_CALL_POSITION = (
    "(SELECT t.ord - 1 FROM jsonb_array_elements(r.pending_turn::jsonb -> 'tool_calls') "
    "WITH ORDINALITY AS t(call, ord) WHERE t.call ->> 'id' = ? ORDER BY t.ord LIMIT 1)"
)


def _lease_params(now: float, lease: Lease) -> list[Any]:
    return [lease.run_id, lease.owner, lease.token, now]


_SAVE_TURN_SQL: Final = (
    (
        "w{n}",
        "UPDATE juno_runs AS r SET pending_turn = ?, pending_iteration = ?, updated_at = ? "
        f"WHERE {_LEASE_HOLDS} RETURNING 1",
    ),
)

_SAVE_TRANSCRIPT_SQL: Final = (
    (
        "w{n}",
        "UPDATE juno_runs AS r SET messages = ?, iteration = ?, pending_turn = NULL, "
        f"pending_iteration = NULL, updated_at = ? WHERE {_LEASE_HOLDS} "
        "AND (r.pending_iteration IS NULL OR r.pending_iteration <= ?) RETURNING 1",
    ),
)

_START_CALL_SQL: Final = (
    (
        "r{n}",
        f"SELECT r.run_id, {_PG_CALL_POSITION} AS position FROM juno_runs AS r "
        f"WHERE {_LEASE_HOLDS} AND r.pending_iteration = ? AND {_PG_TURN_WELL_FORMED} "
        "FOR UPDATE OF r",
    ),
    (
        "w{n}",
        f"INSERT INTO juno_receipts ({_RECEIPT_COLUMNS}, position) "
        "SELECT r{n}.run_id, ?, ?, ?, ?, ?, ?, 'started', NULL, ?, r{n}.position FROM r{n} "
        "WHERE r{n}.position IS NOT NULL "
        "ON CONFLICT (run_id, iteration, tool_call_id) DO UPDATE SET state = 'started', "
        "updated_at = EXCLUDED.updated_at WHERE juno_receipts.state NOT IN "
        "('succeeded', 'failed') AND juno_receipts.args_hash = EXCLUDED.args_hash "
        "RETURNING 1",
    ),
)

_SETTLE_CALL_SQL: Final = (
    (
        "r{n}",
        "SELECT r.run_id FROM juno_runs AS r "
        f"WHERE {_LEASE_HOLDS} AND r.pending_iteration = ? AND {_PG_TURN_WELL_FORMED} "
        "AND EXISTS (SELECT 1 FROM jsonb_array_elements(r.pending_turn::jsonb -> "
        "'tool_calls') AS t(call) WHERE t.call ->> 'id' = ?) FOR UPDATE OF r",
    ),
    (
        "w{n}",
        "UPDATE juno_receipts SET state = ?, message = ?, updated_at = ? "
        "WHERE run_id = (SELECT run_id FROM r{n}) AND iteration = ? AND tool_call_id = ? "
        "AND state NOT IN ('succeeded', 'failed') RETURNING 1",
    ),
)


def save_turn_write(
    dialect: Dialect, now: float, lease: Lease, *, iteration: int, assistant: str
) -> Write:
    checked = functools.partial(
        save_turn, dialect=dialect, now=now, lease=lease, iteration=iteration, assistant=assistant
    )
    if not dialect.guarded:
        return Write(lease.run_id, checked, guarded=None, params=(), result=None, touches_run=True)
    return Write(
        lease.run_id,
        checked,
        guarded=_SAVE_TURN_SQL,
        params=[assistant, iteration, now, *_lease_params(now, lease)],
        result=None,
        touches_run=True,
    )


def save_transcript_write(
    dialect: Dialect, now: float, lease: Lease, *, messages: str, iteration: int
) -> Write:
    checked = functools.partial(
        save_transcript,
        dialect=dialect,
        now=now,
        lease=lease,
        messages=messages,
        iteration=iteration,
    )
    if not dialect.guarded:
        return Write(lease.run_id, checked, guarded=None, params=(), result=None, touches_run=True)
    return Write(
        lease.run_id,
        checked,
        guarded=_SAVE_TRANSCRIPT_SQL,
        params=[messages, iteration, now, *_lease_params(now, lease), iteration],
        result=None,
        touches_run=True,
    )


def start_call_write(
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    iteration: int,
    key: ToolCallReceiptKey,
    resumability: str,
) -> Write:
    checked = functools.partial(
        start_call,
        dialect=dialect,
        now=now,
        lease=lease,
        iteration=iteration,
        key=key,
        resumability=resumability,
    )
    if not dialect.guarded:
        return Write(lease.run_id, checked, guarded=None, params=(), result=None, touches_run=False)
    key_text = tool_call_receipt_key_string(key)
    params = [
        key.tool_call_id,
        *_lease_params(now, lease),
        iteration,
        iteration,
        key.tool_call_id,
        key.tool_name,
        key.args_hash,
        key_text,
        resumability,
        now,
    ]
    record = _started_receipt(lease, iteration, key, key_text, resumability, now)
    return Write(
        lease.run_id,
        checked,
        guarded=_START_CALL_SQL,
        params=params,
        result=record,
        touches_run=False,
    )


def settle_call_write(
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    iteration: int,
    tool_call_id: str,
    state: str,
    message: Mapping[str, Any] | None,
) -> Write:
    checked = functools.partial(
        settle_call,
        dialect=dialect,
        now=now,
        lease=lease,
        iteration=iteration,
        tool_call_id=tool_call_id,
        state=state,
        message=message,
    )
    if not dialect.guarded:
        return Write(lease.run_id, checked, guarded=None, params=(), result=None, touches_run=False)
    text = None if message is None else dumps("settle_call: message", dict(message))
    params = [
        *_lease_params(now, lease),
        iteration,
        tool_call_id,
        state,
        text,
        now,
        iteration,
        tool_call_id,
    ]
    return Write(
        lease.run_id,
        checked,
        guarded=_SETTLE_CALL_SQL,
        params=params,
        result=None,
        touches_run=False,
    )


def guarded_statement(writes: Sequence[Write]) -> tuple[str, list[Any]]:
    """One statement carrying every guarded write of *writes*: a row of how many
    rows each wrote (0: it did not write, and its checked body must say why)."""
    ctes: list[str] = []
    params: list[Any] = []
    counts: list[str] = []
    for n, write in enumerate(writes):
        assert write.guarded is not None
        for name, sql in write.guarded:
            materialized = "" if sql.startswith(("UPDATE", "INSERT")) else "MATERIALIZED "
            ctes.append(f"{name.format(n=n)} AS {materialized}({sql.format(n=n)})")
        params.extend(write.params)
        counts.append(f"(SELECT count(*) FROM w{n})")
    return f"WITH {', '.join(ctes)} SELECT {', '.join(counts)}", params
