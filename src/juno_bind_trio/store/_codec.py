"""The row codec: a run's and a receipt's rows read back checked, and JSON in and out of columns.

A row that cannot be read is a corrupted one: each reader raises
[StoreDataError][juno_bind_trio.store.StoreDataError] naming the run and the column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Final

from juno_bind_trio._errors import StoreDataError
from juno_bind_trio.run import ChainRef

from ._records import RUN_STATUSES, ReceiptRecord, RunRecord

__all__ = [
    "RECEIPT_COLUMNS",
    "RECEIPT_STATES",
    "RESUMABILITIES",
    "RUN_COLUMNS",
    "RUN_WIDTH",
    "SETTLED_STATES",
    "check_messages",
    "corrupted",
    "dumps",
    "finite_seconds",
    "loads",
    "receipt_record",
    "run_record",
    "stored_messages",
    "turn_call_ids",
]

RECEIPT_STATES = frozenset({"not_run", "started", "interrupted", "succeeded", "failed"})
SETTLED_STATES = frozenset({"interrupted", "succeeded", "failed"})
RESUMABILITIES = frozenset({"repeatable", "non_repeatable"})

RUN_COLUMNS = (
    "run_id, status, agent, chain, iteration, pending_iteration, lease_owner, lease_token, "
    "lease_expires, heartbeat_at, progress, created_at, updated_at, detail, conversation_id, "
    "agent_in_charge"
)
RUN_WIDTH: Final = RUN_COLUMNS.count(",") + 1
RECEIPT_COLUMNS = (
    "run_id, iteration, tool_call_id, tool_name, args_hash, receipt_key, resumability, state, "
    "message, updated_at"
)


def dumps(where: str, value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} must be JSON-serializable: {exc}") from None


def loads(run_id: str, what: str, text: object, column: str) -> Any:
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


def stored_messages(run_id: str, text: object) -> list[dict[str, Any]]:
    value = loads(run_id, "transcript", text, "messages")
    try:
        return check_messages("stored transcript", value)
    except TypeError as exc:
        raise StoreDataError(
            f"run {run_id!r}: {exc}; the row is corrupted (column messages)", run_id
        ) from None


def corrupted(run_id: str, column: str, value: object, want: str) -> StoreDataError:
    return StoreDataError(
        f"run {run_id!r}: stored {column} {value!r:.60} is not {want}; the row is corrupted",
        run_id,
    )


def _count(run_id: str, column: str, value: object, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        word = "non-negative" if least == 0 else "positive"
        raise corrupted(run_id, column, value, f"a {word} integer")
    return value


def _time(run_id: str, column: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise corrupted(run_id, column, value, "a finite time in seconds")
    return float(value)


def _optional_time(run_id: str, column: str, value: object) -> float | None:
    return None if value is None else _time(run_id, column, value)


def _optional_text(run_id: str, column: str, value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or value == ""):
        raise corrupted(run_id, column, value, "a non-empty text or NULL")
    return value


def run_record(row: Sequence[Any]) -> RunRecord:
    """The record of one row of ``RUN_COLUMNS``; every column is checked, and a value
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
    lineage = loads(run_id, "lineage", row[3], "chain")
    try:
        chain = ChainRef.from_dict(lineage)
    except (TypeError, ValueError) as exc:
        raise StoreDataError(
            f"run {run_id!r}: stored lineage: {exc}; the row is corrupted (column chain)", run_id
        ) from None
    if chain.run_id != run_id:
        raise corrupted(run_id, "chain", row[3], f"a lineage ending in {run_id!r}")
    iteration = _count(run_id, "iteration", row[4], least=0)
    pending = None if row[5] is None else _count(run_id, "pending_iteration", row[5], least=1)
    owner = _optional_text(run_id, "lease_owner", row[6])
    token = _count(run_id, "lease_token", row[7], least=0)
    expires = _optional_time(run_id, "lease_expires", row[8])
    heartbeat = _optional_time(run_id, "heartbeat_at", row[9])
    progress = None if row[10] is None else loads(run_id, "progress", row[10], "progress")
    created = _time(run_id, "created_at", row[11])
    updated = _time(run_id, "updated_at", row[12])
    detail = _optional_text(run_id, "detail", row[13])
    conversation = _optional_text(run_id, "conversation_id", row[14])
    in_charge = _optional_text(run_id, "agent_in_charge", row[15])
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
        conversation_id=conversation,
        agent_in_charge=agent if in_charge is None else in_charge,
    )


def receipt_record(row: Sequence[Any]) -> ReceiptRecord:
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
    if row[7] not in RECEIPT_STATES:
        raise corrupted("state", row[7], "a receipt state")
    if row[6] not in RESUMABILITIES:
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
        else loads(run_id, f"answer of call {call_id!r}", row[8], "juno_receipts.message")
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


def turn_call_ids(run_id: str, turn: object) -> list[str]:
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


def finite_seconds(where: str, value: object) -> float:
    """*value*, a positive finite number of seconds (a ttl, a timeout), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where} must be a positive finite number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} must be a positive finite number of seconds, got {value!r}")
    return float(value)
