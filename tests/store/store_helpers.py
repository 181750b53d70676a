"""Store test helpers: the lease clock, the PostgreSQL DSN, raw SQL behind a store's back.

PostgreSQL comes from ``JUNO_TEST_POSTGRES_DSN`` (``.ci/run`` starts a server and
sets it). Without it, or with a server that does not answer, the PostgreSQL
tests skip with the reason on a developer's machine and FAIL under ``CI=true``:
a CI run that silently tested only SQLite would be a green lie.
"""

from __future__ import annotations

import os

import pytest

from juno_bind_trio.store import SCHEMA_VERSION, RunStore, SqliteRunStore

DSN_ENV = "JUNO_TEST_POSTGRES_DSN"
TABLES = ("juno_receipts", "juno_runs", "juno_schema")


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


_checked: dict[str, str | None] = {}


def postgres_dsn() -> str:
    """The test server's DSN, with a fresh schema (the store's tables dropped).

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
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            # Emptied, not dropped: cheaper per test. A schema left newer or broken
            # by a test is dropped whole, and the next store recreates it.
            try:
                conn.execute("TRUNCATE juno_receipts, juno_runs")
                conn.execute("DELETE FROM juno_schema WHERE version > %s", (SCHEMA_VERSION,))
            except psycopg.Error:
                for table in TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
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
