"""Store test helpers: the lease clock, the PostgreSQL DSN, raw SQL behind a store's back.

PostgreSQL comes from ``JUNO_TEST_POSTGRES_DSN`` (``.ci/run`` starts a server and
sets it). Without it, or with a server that does not answer, the PostgreSQL
tests skip with the reason on a developer's machine and FAIL under ``CI=true``:
a CI run that silently tested only SQLite would be a green lie.

Under pytest-xdist each worker has a schema of its own in that database
(``juno_gw0``, ``juno_gw1``, …, made here on first use; the DSN's role may
create schemas in a database it owns): ``tests/conftest.py`` names it as the
``search_path`` in the worker's ``JUNO_TEST_POSTGRES_DSN`` itself, so the
store's unqualified tables land there for every connection the worker makes
(and its subprocesses, which inherit the variable), and one worker never
empties another's runs. A serial run (``-n 0``) uses the database's default
schema.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import pytest

from conftest import worker_schema
from juno_bind_trio.store import SCHEMA_VERSION, RunStore, SqliteRunStore

DSN_ENV = "JUNO_TEST_POSTGRES_DSN"
TABLES = ("juno_pending", "juno_receipts", "juno_runs", "juno_conversations", "juno_schema")


class FakeClock:
    """The stores' lease clock, moved by hand: lease expiry without a wall-clock wait."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is required under CI=true: {reason}")
    pytest.skip(reason)


_schema_made: set[str] = set()
_housekeeper: list[Any] = []  # this process's one connection for emptying the tables


def _empty_tables(dsn: str) -> None:
    """Empty the store's tables over a connection kept for the whole session.

    ``DELETE``, not ``TRUNCATE``: a test leaves a few rows, and a ``TRUNCATE``
    makes new files for every table and index (some 60 ms a call here, against
    1 ms), which the hundreds of PostgreSQL tests paid each time. A schema left
    newer or broken by a test is dropped whole, and the next store recreates it.
    """
    import psycopg

    if _housekeeper and _housekeeper[0].closed:
        _housekeeper.clear()
    if not _housekeeper:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5, prepare_threshold=None)
        atexit.register(conn.close)
        _housekeeper.append(conn)
    conn = _housekeeper[0]
    try:
        conn.execute("DELETE FROM juno_pending")
        conn.execute("DELETE FROM juno_receipts")
        conn.execute("DELETE FROM juno_runs")
        conn.execute("DELETE FROM juno_conversations")
        conn.execute("DELETE FROM juno_schema WHERE version > %s", (SCHEMA_VERSION,))
    except psycopg.OperationalError:
        conn.close()  # the connection itself failed: the next call makes a new one
        raise
    except psycopg.Error:
        for table in TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")


def postgres_dsn() -> str:
    """The test server's DSN, with a fresh schema (the store's tables emptied).

    Skips (or fails under CI) when there is no reachable server.
    """
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        _unavailable(f"{DSN_ENV} is not set; .ci/run starts PostgreSQL and sets it")
    assert dsn is not None
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed (the [postgres] extra)")
    schema = worker_schema()
    try:
        if schema is not None and schema not in _schema_made:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            _schema_made.add(schema)
        _empty_tables(dsn)
    except psycopg.Error as exc:
        _unavailable(f"PostgreSQL at {DSN_ENV} is not reachable: {type(exc).__name__}")
    return dsn


def raw_execute(store: RunStore, sql: str, params: tuple[object, ...] = ()) -> None:
    """Run SQL on the store's database behind its back (to corrupt a row, say)."""
    if isinstance(store, SqliteRunStore):
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            conn.execute(sql, params)
    else:
        import psycopg

        with psycopg.connect(os.environ[DSN_ENV], autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)


def raw_query(
    store: RunStore, sql: str, params: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    if isinstance(store, SqliteRunStore):
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            return list(conn.execute(sql, params).fetchall())
    import psycopg

    with psycopg.connect(os.environ[DSN_ENV], autocommit=True) as conn:
        return list(conn.execute(sql.replace("?", "%s"), params).fetchall())
