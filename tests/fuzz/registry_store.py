"""Fuzz entries for `juno_bind_trio.store`, its errors, and the crash harness in `testing`.

The stores' constructors only check and keep their arguments (nothing is
opened until ``async with``), so drawing arguments from their signatures
touches no file and no server.
"""

from __future__ import annotations

from typing import Any

from fuzz_support import Call, Entry, auto

from juno_bind_trio import (
    LeaseLostError,
    RunExistsError,
    RunLeasedError,
    RunNotFoundError,
    SchemaVersionError,
    SimulatedCrash,
    StoreDataError,
    StoreError,
)
from juno_bind_trio.store import (
    DurableRun,
    Lease,
    OpenTurnAnswer,
    PostgresRunStore,
    ReceiptRecord,
    RunRecord,
    SqliteRunStore,
    StoredRun,
    open_durable_run,
    serve_runs,
    tool_call_idempotency_key,
    tool_call_receipt_key,
)
from juno_bind_trio.testing import CrashingStore, run_until_crash


def _renders(arguments: Call, error: Any) -> None:
    assert isinstance(error, BaseException)
    assert isinstance(str(error), str)
    assert isinstance(repr(error), str)


def _exception(cls: type[BaseException]) -> Entry:
    return Entry(cls, args=auto(cls, junk=False), check=_renders)


ENTRIES = [
    _exception(LeaseLostError),
    _exception(RunExistsError),
    _exception(RunLeasedError),
    _exception(RunNotFoundError),
    _exception(SchemaVersionError),
    _exception(SimulatedCrash),
    _exception(StoreDataError),
    _exception(StoreError),
    Entry(DurableRun),
    Entry(Lease),
    Entry(OpenTurnAnswer),
    Entry(PostgresRunStore),
    Entry(ReceiptRecord),
    Entry(RunRecord),
    Entry(SqliteRunStore),
    Entry(StoredRun),
    Entry(open_durable_run),
    Entry(serve_runs),
    Entry(tool_call_idempotency_key),
    Entry(tool_call_receipt_key),
    Entry(CrashingStore),
    Entry(run_until_crash),
]
