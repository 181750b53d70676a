"""The hot writes as units a group commit carries: each checked, and on PostgreSQL guarded.

A loop iteration writes the open turn, each call's receipt twice and the
transcript. Each of those is a `Write`: its *checked* body (``_core``'s
transactions: lock the run's row, check the lease, check the turn, write, or raise
the precise error) and, where the dialect offers it, the same write as one
*guarded* statement that locks the run's row, checks everything the checked
body checks, and writes only when all of it holds. A guarded statement that
did not write is followed by the checked body, which then raises the error
that says why (or writes, if what stopped the statement was only a value the
database could not read as JSON: the checked body decides, as it always did).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, final

from juno_bind_trio.run import ToolCallReceiptKey, tool_call_receipt_key_string

from ._codec import RECEIPT_COLUMNS, dumps
from ._core import (
    Dialect,
    Exec,
    save_transcript,
    save_turn,
    settle_call,
    start_call,
    started_receipt,
)
from ._records import Lease

__all__ = ["HotWrite", "Write", "guarded_statement", "hot_write"]


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
# objects each with a string id (what turn_call_ids insists on).
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
        f"pending_iteration = NULL, updated_at = ?, agent_in_charge = ? WHERE {_LEASE_HOLDS} "
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
        f"INSERT INTO juno_receipts ({RECEIPT_COLUMNS}, position) "
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


def _save_turn(now: float, lease: Lease, f: Mapping[str, Any]) -> tuple[list[Any], Any]:
    return [f["assistant"], f["iteration"], now, *_lease_params(now, lease)], None


def _save_transcript(now: float, lease: Lease, f: Mapping[str, Any]) -> tuple[list[Any], Any]:
    iteration = f["iteration"]
    in_charge = f.get("agent_in_charge")
    return [f["messages"], iteration, now, in_charge, *_lease_params(now, lease), iteration], None


def _start_call(now: float, lease: Lease, f: Mapping[str, Any]) -> tuple[list[Any], Any]:
    key: ToolCallReceiptKey = f["key"]
    iteration, resumability = f["iteration"], f["resumability"]
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
    return params, started_receipt(lease, iteration, key, key_text, resumability, now)


def _settle_call(now: float, lease: Lease, f: Mapping[str, Any]) -> tuple[list[Any], Any]:
    message = f["message"]
    text = None if message is None else dumps("settle_call: message", dict(message))
    iteration, call_id = f["iteration"], f["tool_call_id"]
    params = [*_lease_params(now, lease), iteration, call_id, f["state"], text, now, iteration]
    return [*params, call_id], None


@final
class _Shape:
    """One kind of hot write: its checked body, its guarded SQL and what fills it in."""

    __slots__ = ("checked", "fill", "sql", "touches_run")

    def __init__(
        self,
        checked: Callable[..., Any],
        sql: Sequence[tuple[str, str]],
        fill: Callable[[float, Lease, Mapping[str, Any]], tuple[list[Any], Any]],
        *,
        touches_run: bool,
    ) -> None:
        self.checked = checked
        self.sql = sql
        self.fill = fill
        self.touches_run = touches_run


HotWrite: TypeAlias = Literal["save_turn", "save_transcript", "start_call", "settle_call"]
"""The four writes of a loop iteration."""

# The whole of the hot writes, one row each: everything else is the one builder below.
_SHAPES: Final[Mapping[str, _Shape]] = {
    "save_turn": _Shape(save_turn, _SAVE_TURN_SQL, _save_turn, touches_run=True),
    "save_transcript": _Shape(
        save_transcript, _SAVE_TRANSCRIPT_SQL, _save_transcript, touches_run=True
    ),
    "start_call": _Shape(start_call, _START_CALL_SQL, _start_call, touches_run=False),
    "settle_call": _Shape(settle_call, _SETTLE_CALL_SQL, _settle_call, touches_run=False),
}


def hot_write(kind: HotWrite, dialect: Dialect, now: float, lease: Lease, **fields: Any) -> Write:
    """The *kind* write of *lease*'s run, with *fields* (the checked body's keywords):
    its checked body, and on a dialect that has them its guarded statement and result."""
    shape = _SHAPES[kind]
    checked = functools.partial(shape.checked, dialect=dialect, now=now, lease=lease, **fields)
    if not dialect.guarded:
        return Write(
            lease.run_id,
            checked,
            guarded=None,
            params=(),
            result=None,
            touches_run=shape.touches_run,
        )
    params, result = shape.fill(now, lease, fields)
    return Write(
        lease.run_id,
        checked,
        guarded=shape.sql,
        params=params,
        result=result,
        touches_run=shape.touches_run,
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
