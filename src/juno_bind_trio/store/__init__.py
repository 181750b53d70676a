"""Durable runs: a run store, leases for many workers, and resume after a crash.

A [RunStore][juno_bind_trio.store.RunStore] keeps each run's transcript
(saved at the end of every completed iteration), the receipt of every tool
call (written before the call is dispatched and when it settles), the run's
status, lease and heartbeat, and its lineage; a suspended run's calls that
wait for a decision (a person's approval, a host's result), and who decided
what and when.
[SqliteRunStore][juno_bind_trio.store.SqliteRunStore] is the embedded store,
one file and no server; [PostgresRunStore][juno_bind_trio.store.PostgresRunStore]
spreads runs over many workers.
"""

from juno_bind_trio._errors import ConversationBusy as ConversationBusy
from juno_bind_trio._errors import LeaseLostError as LeaseLostError
from juno_bind_trio._errors import RunExistsError as RunExistsError
from juno_bind_trio._errors import RunLeasedError as RunLeasedError
from juno_bind_trio._errors import RunNotFoundError as RunNotFoundError
from juno_bind_trio._errors import SchemaVersionError as SchemaVersionError
from juno_bind_trio._errors import StoreDataError as StoreDataError
from juno_bind_trio._errors import StoreError as StoreError
from juno_bind_trio._pending import CallDecision as CallDecision
from juno_bind_trio._pending import DecisionKind as DecisionKind
from juno_bind_trio._public import publish as _publish
from juno_bind_trio.run import SoftStop as SoftStop
from juno_bind_trio.run import tool_call_idempotency_key as tool_call_idempotency_key
from juno_bind_trio.run import tool_call_receipt_key as tool_call_receipt_key

from ._durable import DurableRun as DurableRun
from ._lease import open_durable_run as open_durable_run
from ._migrations import SCHEMA_VERSION as SCHEMA_VERSION
from ._owner import default_owner as default_owner
from ._postgres import PostgresRunStore as PostgresRunStore
from ._protocol import RunStore as RunStore
from ._records import DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL
from ._records import RESUMABLE_STATUSES as RESUMABLE_STATUSES
from ._records import RUN_STATUSES as RUN_STATUSES
from ._records import ConversationRecord as ConversationRecord
from ._records import Lease as Lease
from ._records import PendingCallRecord as PendingCallRecord
from ._records import ReceiptRecord as ReceiptRecord
from ._records import RunRecord as RunRecord
from ._records import RunStatus as RunStatus
from ._records import StoredRun as StoredRun
from ._resume import WORKER_STOPPED_TOOL_CALL_MESSAGE as WORKER_STOPPED_TOOL_CALL_MESSAGE
from ._resume import OpenTurnAnswer as OpenTurnAnswer
from ._sqlite import SqliteRunStore as SqliteRunStore
from ._worker import serve_runs as serve_runs

__all__ = [
    "DEFAULT_LEASE_TTL",
    "RESUMABLE_STATUSES",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "WORKER_STOPPED_TOOL_CALL_MESSAGE",
    "CallDecision",
    "ConversationBusy",
    "ConversationRecord",
    "DecisionKind",
    "DurableRun",
    "Lease",
    "LeaseLostError",
    "OpenTurnAnswer",
    "PendingCallRecord",
    "PostgresRunStore",
    "ReceiptRecord",
    "RunExistsError",
    "RunLeasedError",
    "RunNotFoundError",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "SchemaVersionError",
    "SoftStop",
    "SqliteRunStore",
    "StoreDataError",
    "StoreError",
    "StoredRun",
    "default_owner",
    "open_durable_run",
    "serve_runs",
    "tool_call_idempotency_key",
    "tool_call_receipt_key",
]

_publish(__name__, globals(), __all__)
