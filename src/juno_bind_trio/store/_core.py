"""What both stores do, written once against a DB-API cursor, run in a worker thread.

Every function here takes ``ex`` (execute one parameterized statement in the
current transaction) and runs inside one transaction the caller opened:
SQLite's ``BEGIN IMMEDIATE`` (the single writer) or a PostgreSQL transaction
whose first statement locks the run's row. No value is ever formatted into
SQL text: every value travels as a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, cast

from juno_bind_trio._errors import (
    ConversationBusy,
    LeaseLostError,
    RunExistsError,
    RunLeasedError,
    RunNotFoundError,
    SchemaVersionError,
    StoreDataError,
)
from juno_bind_trio.run import ChainRef, ToolCallReceiptKey, tool_call_receipt_key_string

from ._codec import (
    RECEIPT_COLUMNS,
    RUN_COLUMNS,
    RUN_WIDTH,
    SETTLED_STATES,
    check_messages,
    corrupted,
    dumps,
    loads,
    receipt_record,
    run_record,
    stored_messages,
    turn_call_ids,
)
from ._migrations import MIGRATIONS, SCHEMA_VERSION, fill_in
from ._records import Lease, ReceiptRecord, RunRecord, StoredRun

__all__ = ["SETTLED_STATES", "Cursor", "Dialect", "Exec", "check_messages", "dumps"]


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
        fill_in(ex, version)
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
    conversation_id: str | None = None,
    agent_in_charge: str | None = None,
) -> RunRecord:
    if ex("SELECT 1 FROM juno_runs WHERE run_id = ?", (run_id,)).fetchone() is not None:
        raise RunExistsError(f"run {run_id!r} is already stored; nothing was overwritten", run_id)
    turns: int | None = None
    if conversation_id is not None:
        turns = _conversation_turns(ex, conversation_id=conversation_id, run_id=run_id)
    ex(
        "INSERT INTO juno_runs (run_id, status, agent, chain, root_run_id, parent_run_id, "
        "messages, iteration, lease_token, created_at, updated_at, conversation_id, "
        "conversation_turns, agent_in_charge) VALUES (?, 'pending', ?, ?, ?, ?, ?, 0, 0, ?, ?, "
        "?, ?, ?)",
        (
            run_id,
            agent,
            dumps("chain", chain.to_dict()),
            chain.root_run_id,
            chain.parent_run_id,
            messages,
            now,
            now,
            conversation_id,
            turns,
            agent_in_charge,
        ),
    )
    return get_run(ex, run_id)


def _conversation_turns(ex: Exec, *, conversation_id: str, run_id: str) -> int:
    """For ``create_run``: the conversation's length when *run_id* took its hold."""
    row = ex(
        "SELECT active_run_id, active_turns FROM juno_conversations WHERE conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None or row[0] != run_id or row[1] is None:
        raise ConversationBusy(
            f"create_run: run {run_id!r} does not hold conversation {conversation_id!r}; "
            "take it with claim_conversation first (nothing was written)",
            conversation_id,
            None if row is None else row[0],
        )
    return cast("int", row[1])


def _run_row(ex: Exec, run_id: str, columns: str, lock: str = "") -> Sequence[Any]:
    row = ex(f"SELECT {columns} FROM juno_runs WHERE run_id = ?{lock}", (run_id,)).fetchone()
    if row is None:
        raise RunNotFoundError(f"no run {run_id!r} is stored", run_id)
    return cast("Sequence[Any]", row)


def get_run(ex: Exec, run_id: str, lock: str = "") -> RunRecord:
    return run_record(_run_row(ex, run_id, RUN_COLUMNS, lock))


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
        f"SELECT {RUN_COLUMNS} FROM juno_runs{clause} ORDER BY created_at, run_id LIMIT ?",
        params,
    ).fetchall()
    return [run_record(row) for row in rows]


def list_run_rows(ex: Exec, *, status: str | None, limit: int) -> list[RunRecord | StoreDataError]:
    """``list_runs``, with a row that cannot be read given as its error instead of
    raising it: what a listing shows, so one corrupted row does not hide the rest."""
    clause, params = (" WHERE status = ?", [status]) if status is not None else ("", [])
    rows = ex(
        f"SELECT {RUN_COLUMNS} FROM juno_runs{clause} ORDER BY created_at, run_id LIMIT ?",
        [*params, limit],
    ).fetchall()
    listed: list[RunRecord | StoreDataError] = []
    for row in rows:
        try:
            listed.append(run_record(row))
        except StoreDataError as exc:
            listed.append(exc)
    return listed


def load(ex: Exec, run_id: str) -> StoredRun:
    # The whole row in one statement, and the receipts in the same transaction,
    # which the store opens as one snapshot (see ThreadedRunStore._transaction):
    # a worker committing meanwhile is seen wholly or not at all.
    row = _run_row(ex, run_id, f"{RUN_COLUMNS}, messages, pending_turn")
    record = run_record(row)
    messages = stored_messages(run_id, row[RUN_WIDTH])
    pending_turn: dict[str, Any] | None = None
    receipts: tuple[ReceiptRecord, ...] = ()
    if record.pending_iteration is not None:
        turn = loads(run_id, "open turn", row[RUN_WIDTH + 1], "pending_turn")
        ids = turn_call_ids(run_id, turn)
        pending_turn = cast("dict[str, Any]", turn)
        rows = ex(
            f"SELECT {RECEIPT_COLUMNS} FROM juno_receipts WHERE run_id = ? AND iteration = ? "
            "ORDER BY position",
            (run_id, record.pending_iteration),
        ).fetchall()
        receipts = tuple(receipt_record(r) for r in rows)
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
        f"SELECT {RECEIPT_COLUMNS} FROM juno_receipts WHERE run_id = ? "
        "ORDER BY iteration, position",
        (run_id,),
    ).fetchall()
    return [receipt_record(r) for r in rows]


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
        # A suspended run claimed (a resume) is running again: were a crash to end this
        # hold, the store must not go on saying it waits (see _waiting), and a worker
        # finds it once the lease runs out, as any run left running.
        "status = CASE WHEN status IN ('pending', 'suspended') THEN 'running' "
        "ELSE status END "
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
            f"SELECT {RUN_COLUMNS} FROM juno_runs "
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
            record = run_record(row)
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
        raise corrupted(lease.run_id, "lease_expires", expires, "a time in seconds")
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
    ex: Exec,
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    messages: str,
    iteration: int,
    agent_in_charge: str | None = None,
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
        "pending_iteration = NULL, updated_at = ?, agent_in_charge = ? WHERE run_id = ?",
        (messages, iteration, now, agent_in_charge, lease.run_id),
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
    ids = turn_call_ids(run_id, loads(run_id, "open turn", row[4], "pending_turn"))
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
            f"INSERT INTO juno_receipts ({RECEIPT_COLUMNS}, position) "
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
    return started_receipt(lease, iteration, key, key_text, resumability, now)


def started_receipt(
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
