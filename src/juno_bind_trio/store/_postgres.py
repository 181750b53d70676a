"""PostgresRunStore: runs shared by many workers, on PostgreSQL (psycopg 3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, final

from juno_bind_trio._errors import StoreError

from . import _core
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
    the ``postgres`` extra: ``pip install 'juno-bind-trio[postgres]'``.

    Workers claim runs with ``SELECT … FOR UPDATE SKIP LOCKED``, so two
    workers never wait on, or take, the same run; every write locks the run's
    row and checks the writer's lease in the same transaction. The schema is
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
            raise TypeError("PostgresRunStore: dsn must be a non-empty connection string")
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
        self._connect_timeout = _core.finite_seconds(
            "PostgresRunStore: connect_timeout", connect_timeout
        )
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "PostgresRunStore needs psycopg 3 and psycopg_pool: "
                "pip install 'juno-bind-trio[postgres]'"
            ) from exc
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
            with pool.connection() as conn, conn.transaction():

                def ex(sql: str, params: Any) -> _core.Cursor:
                    cursor: _core.Cursor = conn.execute(sql.replace("?", "%s"), params)
                    return cursor

                return fn(ex)
        except psycopg.Error as exc:
            raise StoreError(f"PostgresRunStore: {self._safe_dsn!r}: {exc}") from None
