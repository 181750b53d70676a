"""The store's schema, as numbered migrations for each database; run on open.

A database records the versions applied in ``juno_schema``. Opening a store
applies the missing ones, in order, in one transaction; a database whose
version is newer than `SCHEMA_VERSION` is refused before anything is
read or written, because an older package would misread what a newer one
wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from juno_bind_trio._transfers import in_charge

__all__ = ["IN_CHARGE_VERSION", "MIGRATIONS", "SCHEMA_VERSION", "fill_in"]

_RUNS = """
CREATE TABLE juno_runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    agent TEXT,
    chain TEXT NOT NULL,
    root_run_id TEXT NOT NULL,
    parent_run_id TEXT,
    messages TEXT NOT NULL,
    iteration INTEGER NOT NULL DEFAULT 0,
    pending_turn TEXT,
    pending_iteration INTEGER,
    lease_owner TEXT,
    lease_token BIGINT NOT NULL DEFAULT 0,
    lease_expires DOUBLE PRECISION,
    heartbeat_at DOUBLE PRECISION,
    progress TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)
"""

_RECEIPTS = """
CREATE TABLE juno_receipts (
    run_id TEXT NOT NULL REFERENCES juno_runs (run_id) ON DELETE CASCADE,
    iteration INTEGER NOT NULL,
    position INTEGER NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    receipt_key TEXT NOT NULL,
    resumability TEXT NOT NULL,
    state TEXT NOT NULL,
    message TEXT,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, iteration, tool_call_id)
)
"""

_INDEXES = (
    "CREATE INDEX juno_runs_claimable ON juno_runs (status, lease_expires, created_at)",
    "CREATE INDEX juno_runs_parent ON juno_runs (parent_run_id)",
)

# Version 2: how the run's last hold ended, in a sentence, where the status alone
# does not say it (the exception that failed it, the column that could not be
# read, the worker that stopped without giving its lease back).
_DETAIL = "ALTER TABLE juno_runs ADD COLUMN detail TEXT"

# Version 3: the calls a suspended run waits on (a person's approval, a host's
# result), one row per call of the turn that waits, and what was decided for each:
# who (principal), what (decision, its corrected arguments or answer), when. A
# row with no decision waits; the run's open turn (pending_iteration) is the one
# whose rows count.
_PENDING = """
CREATE TABLE juno_pending (
    run_id TEXT NOT NULL REFERENCES juno_runs (run_id) ON DELETE CASCADE,
    iteration INTEGER NOT NULL,
    position INTEGER NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    arguments TEXT NOT NULL,
    expires_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    decision TEXT,
    decided_arguments TEXT,
    answer TEXT,
    principal TEXT,
    decided_at DOUBLE PRECISION,
    PRIMARY KEY (run_id, iteration, tool_call_id)
)
"""

# Version 4: conversations that last (``Agent.run(conversation=...)``). A
# conversation's transcript so far, how many runs it holds, the run whose
# transcript it is, and the run holding it now (``active_run_id``, with the
# conversation's length when it took it and how long the hold lasts before that
# run's own lease does). Each run of one says which, and at which length it began.
_CONVERSATIONS = """
CREATE TABLE juno_conversations (
    conversation_id TEXT PRIMARY KEY,
    messages TEXT NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    last_run_id TEXT,
    active_run_id TEXT,
    active_turns INTEGER,
    held_until DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)
"""
_RUN_CONVERSATION = (
    "ALTER TABLE juno_runs ADD COLUMN conversation_id TEXT",
    "ALTER TABLE juno_runs ADD COLUMN conversation_turns INTEGER",
    "CREATE INDEX juno_runs_conversation ON juno_runs (conversation_id)",
)
_V4 = (_CONVERSATIONS, *_RUN_CONVERSATION)

# Version 5: the agent in charge of the run (the target of the last handoff its saved
# transcript records; NULL: none, the run's own agent speaks), written with every
# transcript. The rows already stored are filled in from their transcripts when the
# database is upgraded (``_core.migrate``).
_IN_CHARGE = "ALTER TABLE juno_runs ADD COLUMN agent_in_charge TEXT"

MIGRATIONS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    # Version 1, 2, 3, 4, then 5, for each dialect. The column types above read the same
    # on both (SQLite takes BIGINT and DOUBLE PRECISION by affinity).
    "sqlite": ((_RUNS, _RECEIPTS, *_INDEXES), (_DETAIL,), (_PENDING,), _V4, (_IN_CHARGE,)),
    "postgresql": ((_RUNS, _RECEIPTS, *_INDEXES), (_DETAIL,), (_PENDING,), _V4, (_IN_CHARGE,)),
}
"""For each dialect, the statements of version 1, 2, ... in order."""

IN_CHARGE_VERSION: Final = 5
"""The version that added ``juno_runs.agent_in_charge`` (filled in for stored runs)."""

SCHEMA_VERSION: Final = 5
"""The newest schema version this package knows."""


def fill_in(ex: Callable[[str, Sequence[Any]], Any], version: int) -> None:
    """After *version*'s statements, in the same transaction: the data they add for the
    rows already stored (version 5: each run's agent in charge, read from its transcript).

    A transcript that cannot be read is left alone (NULL): the run is reported
    unreadable when it is read, as before the upgrade.
    """
    if version != IN_CHARGE_VERSION:
        return
    # A page of transcripts at a time, by run id: a large store is never held in memory.
    after = ""
    while True:
        rows = ex(
            "SELECT run_id, messages FROM juno_runs WHERE messages LIKE ? AND run_id > ? "
            f"ORDER BY run_id LIMIT {_FILL_PAGE}",
            ("%transferred_to%", after),
        ).fetchall()
        for run_id, text in rows:
            _fill_one(ex, run_id, text)
        if len(rows) < _FILL_PAGE:
            return
        after = rows[-1][0]


_FILL_PAGE: Final = 200


def _fill_one(ex: Callable[[str, Sequence[Any]], Any], run_id: str, text: object) -> None:
    try:
        messages = json.loads(text)  # type: ignore[arg-type]  # a TypeError is caught
    except (TypeError, ValueError, RecursionError):
        return
    if not isinstance(messages, list):
        return
    name = in_charge([m for m in messages if isinstance(m, dict)])
    if name is not None:
        ex("UPDATE juno_runs SET agent_in_charge = ? WHERE run_id = ?", (name, run_id))
