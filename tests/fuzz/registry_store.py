"""Fuzz entries for `juno_bind_trio.store` and the crash harness in `juno_bind_trio.testing`.

The stores' constructors check their arguments without touching a database,
so they are fuzzed as they are. The async entry points are given junk (no
real store can be drawn): each must refuse it with an error naming itself.
The database-facing methods are exercised against real databases in
``tests/store``.
"""

from __future__ import annotations

from typing import Any

from fuzz_support import Call, Entry, auto

from juno_bind_trio import (
    ConversationBusy,
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
    CallDecision,
    ConversationRecord,
    DurableRun,
    Lease,
    OpenTurnAnswer,
    PendingCallRecord,
    PostgresRunStore,
    ReceiptRecord,
    RunRecord,
    SqliteRunStore,
    StoredRun,
    default_owner,
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


def _key_is_hex(arguments: Call, key: Any) -> None:
    assert isinstance(key, str)
    assert len(key) == 64


ENTRIES = [
    _exception(ConversationBusy),
    _exception(LeaseLostError),
    _exception(RunExistsError),
    _exception(RunLeasedError),
    _exception(RunNotFoundError),
    _exception(SchemaVersionError),
    _exception(SimulatedCrash),
    _exception(StoreDataError),
    _exception(StoreError),
    Entry(SqliteRunStore),
    Entry(PostgresRunStore),
    Entry(Lease, args=auto(Lease, junk=False)),
    Entry(ReceiptRecord, args=auto(ReceiptRecord, junk=False)),
    Entry(RunRecord, args=auto(RunRecord, junk=False)),
    Entry(ConversationRecord, args=auto(ConversationRecord, junk=False)),
    Entry(StoredRun, args=auto(StoredRun, junk=False)),
    Entry(OpenTurnAnswer, args=auto(OpenTurnAnswer, junk=False)),
    Entry(CallDecision),
    Entry(PendingCallRecord, args=auto(PendingCallRecord, junk=False)),
    Entry(DurableRun),
    Entry(default_owner),
    Entry(open_durable_run),
    Entry(serve_runs),
    Entry(tool_call_idempotency_key, check=_key_is_hex),
    Entry(tool_call_receipt_key),
    Entry(CrashingStore),
    Entry(run_until_crash),
]
