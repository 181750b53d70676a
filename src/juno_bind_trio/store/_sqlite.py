"""SqliteRunStore: the embedded store, one file, the standard library's sqlite3."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar, final

import outcome

from juno_bind_trio._errors import StoreError
from juno_bind_trio._validate import error_kind

from . import _codec, _core, _guarded
from ._store import ThreadedRunStore

__all__ = ["SqliteRunStore"]

T = TypeVar("T")


@final
class _SqliteDialect:
    name: Final = "sqlite"
    lock_row: Final = ""  # BEGIN IMMEDIATE already holds the database's one write lock
    skip_locked: Final = ""
    guarded: Final = False  # statements cost microseconds in-process; the checked bodies do
    # 9e999 is how SQLite writes an infinite REAL; it cannot hold a NaN (that is NULL).
    unreadable_expiry: Final = (
        "typeof(lease_expires) NOT IN ('integer', 'real', 'null') "
        "OR lease_expires IN (9e999, -9e999)"
    )


@final
class SqliteRunStore(ThreadedRunStore):
    """A [RunStore][juno_bind_trio.store.RunStore] in one SQLite file (WAL mode).

    ```python
    async with SqliteRunStore("runs.db") as store:
        record = await store.create_run("run-1", messages=[{"role": "user", "content": "hi"}])
    ```

    Every call runs one transaction in an anyio worker thread; the writes a
    loop iteration makes that are pending together (a batch's receipts) share
    one transaction, each in its own savepoint. Writes take
    SQLite's single write lock up front (``BEGIN IMMEDIATE``), so two
    processes sharing the file never interleave inside one store call, and a
    lease is checked and used in the same transaction. Reads see the last
    commit (WAL readers never wait for the writer). ``synchronous=NORMAL``:
    a process that dies, even by SIGKILL, loses no committed write; a power
    cut may lose the last few, but never leaves a half-written one. A failure
    of SQLite itself (a file that is not a database, a full disk) is a
    [StoreError][juno_bind_trio.store.StoreError].

    *path*: the database file (created if missing; ``":memory:"`` for a store
    that lives as long as this object). *busy_timeout*: seconds a write waits
    for another process's write lock before failing. *clock*: seconds for
    lease times (default ``time.time``; a test passes its own).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(clock)
        given: object = path
        if not isinstance(given, str | os.PathLike) or os.fspath(path) == "":
            raise error_kind(given, (str, os.PathLike))(
                f"SqliteRunStore: path must be a non-empty path, got {path!r}"
            )
        self._path = os.fspath(path)
        self._busy_timeout = _codec.finite_seconds("SqliteRunStore: busy_timeout", busy_timeout)
        self._dialect = _SqliteDialect()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"<SqliteRunStore {self._path!r}>"

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def _open(self) -> None:
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,  # transactions are begun and ended here, explicitly
                check_same_thread=False,  # worker threads take turns under self._lock
            )
        except sqlite3.Error as exc:
            raise StoreError(f"SqliteRunStore: cannot open {self._path!r}: {exc}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._conn = conn
            self._transaction(lambda ex: _core.migrate(ex, self._dialect), write=True)
        except BaseException as exc:
            self._conn = None
            conn.close()
            if isinstance(exc, sqlite3.Error):  # a file that is not a SQLite database, say
                raise StoreError(f"SqliteRunStore: cannot open {self._path!r}: {exc}") from exc
            raise

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _transaction(self, fn: Callable[[_core.Exec], T], *, write: bool) -> T:
        try:
            return self._raw_transaction(fn, write=write)
        except sqlite3.Error as exc:  # a statement failed in SQLite itself
            raise StoreError(f"SqliteRunStore: {self._path!r}: {exc}") from exc

    def _raw_transaction(self, fn: Callable[[_core.Exec], T], *, write: bool) -> T:
        """The transaction, letting a statement's sqlite3.Error through as it is."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"SqliteRunStore: {self._path!r} is closed")

            def ex(sql: str, params: Any) -> _core.Cursor:
                cursor: _core.Cursor = conn.execute(sql, params)
                return cursor

            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise StoreError(f"SqliteRunStore: {self._path!r}: {exc}") from exc
            try:
                result = fn(ex)
            except BaseException:
                # Some failures (a full disk, an I/O error) end the transaction
                # inside SQLite already; a ROLLBACK then would raise "no
                # transaction is active" and hide the real error.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"SqliteRunStore: {self._path!r}: commit failed: {exc}") from exc
            return result

    def _commit_group(self, writes: Sequence[_guarded.Write]) -> list[outcome.Outcome[Any]]:
        if len(writes) == 1:
            return [outcome.capture(self._transaction, writes[0].checked, write=True)]
        try:
            return self._raw_transaction(lambda ex: self._each(ex, writes), write=True)
        except sqlite3.Error:
            # A statement of one write failed in the database itself (``_each``
            # lets sqlite3.Error through: after some, SQLite has already rolled
            # the whole transaction back, so no savepoint is left to return
            # to), and the group's transaction was rolled back: none of it
            # landed. Apply each write alone, so only the one at fault gets the
            # error (a StoreError). A BEGIN or COMMIT that fails is not caught
            # here: it is a StoreError already, and every write of the group gets it.
            return [outcome.capture(self._transaction, w.checked, write=True) for w in writes]

    @staticmethod
    def _each(ex: _core.Exec, writes: Sequence[_guarded.Write]) -> list[outcome.Outcome[Any]]:
        results: list[outcome.Outcome[Any]] = []
        for write in writes:
            # A savepoint per write: one refused (its lease lost, its data wrong)
            # leaves no trace, and the others still commit.
            ex("SAVEPOINT juno_write", ())
            try:
                results.append(outcome.Value(write.checked(ex)))
            except sqlite3.Error:
                raise
            except Exception as exc:
                ex("ROLLBACK TO juno_write", ())
                results.append(outcome.Error(exc))
            ex("RELEASE juno_write", ())
        return results
