"""PostgresRunStore: runs shared by many workers, on PostgreSQL (psycopg 3)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar, final

import outcome

from juno_bind_trio._errors import StoreError
from juno_bind_trio._extras import require
from juno_bind_trio._validate import error_kind

from . import _codec, _core
from ._guarded import Write, guarded_statement
from ._store import ThreadedRunStore

__all__ = ["PostgresRunStore"]

T = TypeVar("T")

# Any number: taken, for the length of one transaction, by whoever migrates, so
# eight workers opening one fresh database at once create its tables once.
_MIGRATION_LOCK: Final = 0x6A756E6F


@final
class _PostgresDialect:
    name: Final = "postgresql"
    lock_row: Final = " FOR UPDATE"
    skip_locked: Final = " FOR UPDATE SKIP LOCKED"
    guarded: Final = True  # one statement, one round trip, one commit for a group
    unreadable_expiry: Final = (
        "lease_expires IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"
    )


# libpq parameters that hold a secret: the password, and the passphrase of the
# client certificate's private key.
_SECRET_PARAMETERS: Final = ("password", "sslpassword")


def redact_dsn(dsn: str) -> str:
    """*dsn* with its secrets (password, key passphrase) left out, for a repr or an error."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:  # pragma: no cover - without the extra, the store refuses earlier
        return "<dsn>"
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "<unparseable dsn>"
    for secret in _SECRET_PARAMETERS:
        parts.pop(secret, None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


@final
class PostgresRunStore(ThreadedRunStore):
    """A [RunStore][juno_bind_trio.store.RunStore] on PostgreSQL, for many workers.

    ```python
    async with PostgresRunStore(os.environ["RUNS_DSN"]) as store:
        lease = await store.claim_next(owner="worker-7", ttl=30.0)
    ```

    psycopg 3 with a ``psycopg_pool`` connection pool, its synchronous API in
    anyio worker threads (psycopg's own async API runs only on asyncio). Needs
    the ``postgres`` extra: ``pip install -e '.[postgres]'`` in the checkout.

    Workers claim runs with ``SELECT … FOR UPDATE SKIP LOCKED``, so two
    workers never wait on, or take, the same run; every write locks the run's
    row and checks the writer's lease in the same transaction. The writes a
    loop iteration makes travel as one statement each (a group of them pending
    together as one statement): it locks the run's row, checks the lease and
    the open turn, and writes only if all of that holds, in one round trip
    and one commit. The schema is
    created or upgraded on open, under a transaction-scoped advisory lock.

    *dsn*: a libpq connection string or URL. Its password is never logged,
    stored, or shown in a repr or an error. *max_connections*: the pool's
    size. *clock*: seconds for lease times (default ``time.time``); all
    workers must share one notion of time, so keep their clocks in sync.
    """

    def __init__(
        self,
        dsn: str,
        *,
        max_connections: int = 4,
        connect_timeout: float = 10.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(clock)
        given: object = dsn
        if not isinstance(given, str) or not dsn.strip():
            raise error_kind(given, str)(
                "PostgresRunStore: dsn must be a non-empty connection string"
            )
        if isinstance(max_connections, bool) or not isinstance(max_connections, int):
            raise TypeError(
                f"PostgresRunStore: max_connections must be a positive integer, "
                f"got {max_connections!r}"
            )
        if max_connections < 1:
            raise ValueError(
                f"PostgresRunStore: max_connections must be a positive integer, "
                f"got {max_connections!r}"
            )
        self._connect_timeout = _codec.finite_seconds(
            "PostgresRunStore: connect_timeout", connect_timeout
        )
        require("postgres", "PostgresRunStore (psycopg 3 and psycopg_pool)")
        self._dsn = dsn
        self._safe_dsn = redact_dsn(dsn)
        self._max_connections = max_connections
        self._dialect = _PostgresDialect()
        self._pool: Any = None

    def __repr__(self) -> str:
        return f"<PostgresRunStore {self._safe_dsn!r}>"

    def _open(self) -> None:
        import psycopg_pool

        pool = psycopg_pool.ConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._max_connections,
            kwargs={"autocommit": True},
            open=False,
            name="juno_bind_trio.store",
        )
        try:
            pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            pool.close()
            # The pool's message never holds the password; the DSN shown is redacted.
            raise StoreError(
                f"PostgresRunStore: cannot connect to {self._safe_dsn!r}: {exc}"
            ) from None
        self._pool = pool
        try:
            self._transaction(self._migrate, write=True)
        except BaseException:
            self._pool = None
            pool.close()
            raise

    def _migrate(self, ex: _core.Exec) -> int:
        ex("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
        return _core.migrate(ex, self._dialect)

    def _close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _transaction(self, fn: Callable[[_core.Exec], T], *, write: bool) -> T:
        import psycopg

        pool = self._pool
        if pool is None:
            raise StoreError(f"PostgresRunStore: {self._safe_dsn!r} is closed")
        try:
            with pool.connection() as conn:
                # A read runs REPEATABLE READ: all its statements see the snapshot of
                # its first, where READ COMMITTED would show each one the commits made
                # since the last (a run's status from one write, its open turn from
                # the next). Read only, it never meets a serialization failure. A
                # write keeps READ COMMITTED: it locks the run's row first.
                conn.isolation_level = None if write else psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = None if write else True
                with conn.transaction():

                    def ex(sql: str, params: Any) -> _core.Cursor:
                        cursor: _core.Cursor = conn.execute(sql.replace("?", "%s"), params)
                        return cursor

                    return fn(ex)
        except psycopg.Error as exc:
            raise StoreError(f"PostgresRunStore: {self._safe_dsn!r}: {exc}") from None

    def _commit_group(self, writes: Sequence[Write]) -> list[outcome.Outcome[Any]]:
        # Writes are ordered by run so that two workers' statements lock rows in
        # the same order. A run's own row is written by at most one write of a
        # statement (a statement sees one snapshot); any other write of that run
        # waits for a statement of its own.
        order = sorted(range(len(writes)), key=lambda i: writes[i].run_id)
        together: list[int] = []
        alone: list[int] = []
        seen: set[str] = set()
        row_written: set[str] = set()
        for i in order:
            write = writes[i]
            clash = write.run_id in row_written or (write.touches_run and write.run_id in seen)
            (alone if clash else together).append(i)
            seen.add(write.run_id)
            if write.touches_run:
                row_written.add(write.run_id)
        results: dict[int, outcome.Outcome[Any]] = {}
        wrote = self._guarded([writes[i] for i in together])
        if wrote is None:
            if len(together) > 1:  # the statement failed whole: each on its own
                alone = together + alone
                together = []
            wrote = [False] * len(together)
        for i, done in zip(together, wrote, strict=True):
            results[i] = self._outcome(writes[i], done=done)
        for i in alone:
            one = self._guarded([writes[i]])
            results[i] = self._outcome(writes[i], done=bool(one and one[0]))
        return [results[i] for i in range(len(writes))]

    def _outcome(self, write: Write, *, done: bool) -> outcome.Outcome[Any]:
        if done:
            return outcome.Value(write.result)
        # The guarded statement did not write: the checked body, in a transaction
        # of its own, finds out why and raises the error that says so.
        return outcome.capture(self._transaction, write.checked, write=True)

    def _guarded(self, writes: Sequence[Write]) -> list[bool] | None:
        """Run *writes* as one guarded statement (autocommit: its own transaction).
        Which of them wrote; ``None`` when the statement failed and wrote nothing."""
        import psycopg

        pool = self._pool
        if pool is None:
            return None  # the checked body says the store is closed
        sql, params = guarded_statement(writes)
        try:
            with pool.connection() as conn:
                row = conn.execute(sql.replace("?", "%s"), params).fetchone()
        except psycopg.Error:
            # A value the database cannot read as the statement expects (an open
            # turn that is not JSON), a deadlock, a lost connection: the checked
            # bodies, one transaction each, decide and say what is wrong.
            return None
        return [bool(count) for count in row]
