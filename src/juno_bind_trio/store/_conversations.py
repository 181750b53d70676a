"""Conversations that last: one history, answered by one run at a time, written once per answer.

A conversation is a row of its own: the transcript so far, how many runs
have answered in it (``turns``), the run whose transcript that is, and the
run *holding* it now. A run on a conversation takes the hold before it is
created (refused with [ConversationBusy][juno_bind_trio.ConversationBusy]
while another run holds it: two runs answering one history would each
lose the other's answer), starts from the history, and at its end writes
its whole transcript back in the transaction that gives the hold up,
fenced by its lease: a worker that lost the run cannot write.

A hold lasts while its run does: ``held_until`` covers the moment between
taking it and the run's first lease, then the run's own lease (renewed by
its heartbeat) keeps it. A run that crashed holding the conversation holds
it until its lease runs out; the next run then takes it. The crashed run,
resumed later, may still write its answer if the conversation has not
moved on since it began (``turns`` as it was, or its own earlier answer
the last one, as after a suspension); otherwise its resume is refused,
because its transcript would drop the answers given since.

Every function takes ``ex`` and runs in one transaction the store opened,
as ``_core``'s do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from juno_bind_trio._errors import ConversationBusy, StoreDataError

from ._codec import check_messages, loads
from ._core import Dialect, Exec, check_lease
from ._records import ConversationRecord, Lease

__all__ = [
    "append",
    "claim",
    "delete",
    "get",
    "list_conversations",
    "messages",
    "release",
]

_COLUMNS = "conversation_id, turns, last_run_id, active_run_id, created_at, updated_at"


def _stored(conversation_id: str, text: object) -> list[dict[str, Any]]:
    where = f"conversation {conversation_id!r}"
    value = loads(conversation_id, f"transcript of {where}", text, "juno_conversations.messages")
    try:
        return check_messages(where, value)
    except TypeError as exc:
        raise StoreDataError(
            f"{exc}; the row is corrupted (column juno_conversations.messages)"
        ) from None


def _live(ex: Exec, now: float, holder: str, held_until: object) -> bool:
    """Whether *holder* still holds its conversation: within the hold's own time, or
    its run going under a lease that has not run out."""
    if isinstance(held_until, int | float) and math.isfinite(held_until) and held_until > now:
        return True
    row = ex("SELECT status, lease_expires FROM juno_runs WHERE run_id = ?", (holder,)).fetchone()
    if row is None or row[0] not in ("pending", "running"):
        return False
    expires = row[1]
    return isinstance(expires, int | float) and expires > now


def _busy(conversation_id: str, holder: str, doing: str) -> ConversationBusy:
    return ConversationBusy(
        f"conversation {conversation_id!r} is held by run {holder!r}, which is still going; "
        f"{doing} after it ends (two runs answering one history would lose one answer)",
        conversation_id,
        holder,
    )


def claim(
    ex: Exec, dialect: Dialect, now: float, *, conversation_id: str, run_id: str, ttl: float
) -> list[dict[str, Any]]:
    """Hold the conversation for *run_id* (created if new) and return its transcript."""
    ex(
        "INSERT INTO juno_conversations (conversation_id, messages, turns, created_at, "
        "updated_at) VALUES (?, '[]', 0, ?, ?) ON CONFLICT (conversation_id) DO NOTHING",
        (conversation_id, now, now),
    )
    row = ex(
        "SELECT messages, turns, last_run_id, active_run_id, held_until FROM juno_conversations "
        f"WHERE conversation_id = ?{dialect.lock_row}",
        (conversation_id,),
    ).fetchone()
    text, turns, last, holder, held_until = row
    if holder is not None and holder != run_id and _live(ex, now, holder, held_until):
        raise _busy(conversation_id, holder, "send the message")
    base = turns
    stored = ex(
        "SELECT conversation_id, conversation_turns FROM juno_runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if stored is not None:  # a stored run of it, resumed
        if stored[0] != conversation_id:
            raise ValueError(
                f"run {run_id!r} is not a run of conversation {conversation_id!r} "
                f"(it belongs to {stored[0]!r})"
            )
        if not (turns == stored[1] or last == run_id):
            raise ConversationBusy(
                f"conversation {conversation_id!r} has moved on since run {run_id!r} began "
                f"(it has {turns} answers; the run began after {stored[1]}): its transcript "
                "would drop the answers given since, so it cannot be resumed into the "
                "conversation",
                conversation_id,
                last,
            )
        base = stored[1]
    ex(
        "UPDATE juno_conversations SET active_run_id = ?, active_turns = ?, held_until = ?, "
        "updated_at = ? WHERE conversation_id = ?",
        (run_id, base, now + ttl, now, conversation_id),
    )
    return _stored(conversation_id, text)


def append(
    ex: Exec,
    dialect: Dialect,
    now: float,
    lease: Lease,
    *,
    conversation_id: str,
    messages: str,
) -> None:
    """The run's transcript becomes the conversation's, and the hold is given up."""
    check_lease(ex, dialect, now, lease)
    row = ex(
        "SELECT turns, last_run_id, active_run_id FROM juno_conversations "
        f"WHERE conversation_id = ?{dialect.lock_row}",
        (conversation_id,),
    ).fetchone()
    if row is None or row[2] != lease.run_id:
        raise ConversationBusy(
            f"run {lease.run_id!r} no longer holds conversation {conversation_id!r} "
            f"({'it was deleted' if row is None else f'held by {row[2]!r}'}); its answer was "
            "not added (the run itself is stored)",
            conversation_id,
            None if row is None else row[2],
        )
    turns = row[0] if row[1] == lease.run_id else row[0] + 1
    ex(
        "UPDATE juno_conversations SET messages = ?, turns = ?, last_run_id = ?, "
        "active_run_id = NULL, active_turns = NULL, held_until = NULL, updated_at = ? "
        "WHERE conversation_id = ?",
        (messages, turns, lease.run_id, now, conversation_id),
    )


def release(ex: Exec, now: float, *, conversation_id: str, run_id: str) -> None:
    """Give *run_id*'s hold up, the conversation unchanged (a run that failed or was cancelled)."""
    ex(
        "UPDATE juno_conversations SET active_run_id = NULL, active_turns = NULL, "
        "held_until = NULL, updated_at = ? WHERE conversation_id = ? AND active_run_id = ?",
        (now, conversation_id, run_id),
    )


def _corrupted(conversation_id: str, column: str, value: object, want: str) -> StoreDataError:
    return StoreDataError(
        f"conversation {conversation_id!r}: stored {column} {value!r:.60} is not {want}; "
        "the row is corrupted"
    )


def _record(row: Sequence[Any]) -> ConversationRecord:
    conversation_id = row[0]
    if not isinstance(conversation_id, str) or not conversation_id:
        raise StoreDataError(
            f"a stored conversation has an id that is not a non-empty text: "
            f"{conversation_id!r:.60}; the row is corrupted"
        )
    turns = row[1]
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
        raise _corrupted(conversation_id, "turns", turns, "a non-negative integer")
    for index, column in ((2, "last_run_id"), (3, "active_run_id")):
        if row[index] is not None and not isinstance(row[index], str):
            raise _corrupted(conversation_id, column, row[index], "a text or NULL")
    for index, column in ((4, "created_at"), (5, "updated_at")):
        if isinstance(row[index], bool) or not isinstance(row[index], int | float):
            raise _corrupted(conversation_id, column, row[index], "a time in seconds")
    return ConversationRecord(
        conversation_id=conversation_id,
        turns=turns,
        last_run_id=row[2],
        active_run_id=row[3],
        created_at=float(row[4]),
        updated_at=float(row[5]),
    )


def list_conversations(ex: Exec, *, limit: int) -> list[ConversationRecord]:
    rows = ex(
        f"SELECT {_COLUMNS} FROM juno_conversations ORDER BY created_at, conversation_id LIMIT ?",
        (limit,),
    ).fetchall()
    return [_record(row) for row in rows]


def get(ex: Exec, conversation_id: str) -> ConversationRecord | None:
    """The conversation's record, or ``None`` when there is none by that id."""
    row = ex(
        f"SELECT {_COLUMNS} FROM juno_conversations WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return None if row is None else _record(row)


def messages(ex: Exec, conversation_id: str) -> list[dict[str, Any]]:
    row = ex(
        "SELECT messages FROM juno_conversations WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return [] if row is None else _stored(conversation_id, row[0])


def delete(ex: Exec, dialect: Dialect, now: float, conversation_id: str) -> bool:
    """Delete the conversation and its runs (their receipts and waiting calls with them);
    False if none."""
    row = ex(
        "SELECT active_run_id, held_until FROM juno_conversations "
        f"WHERE conversation_id = ?{dialect.lock_row}",
        (conversation_id,),
    ).fetchone()
    if row is None:
        return False
    if row[0] is not None and _live(ex, now, row[0], row[1]):
        raise _busy(conversation_id, row[0], "delete it")
    for table in ("juno_receipts", "juno_pending"):
        ex(
            f"DELETE FROM {table} WHERE run_id IN "
            "(SELECT run_id FROM juno_runs WHERE conversation_id = ?)",
            (conversation_id,),
        )
    ex("DELETE FROM juno_runs WHERE conversation_id = ?", (conversation_id,))
    ex("DELETE FROM juno_conversations WHERE conversation_id = ?", (conversation_id,))
    return True
