"""Both stores, against a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest

from juno_bind_trio import UsageError
from juno_bind_trio.run import ToolCallReceiptKey, descend_chain, root_chain, tool_call_args_hash
from juno_bind_trio.store import (
    SCHEMA_VERSION,
    Lease,
    LeaseLostError,
    PostgresRunStore,
    RunExistsError,
    RunLeasedError,
    RunNotFoundError,
    RunStore,
    SchemaVersionError,
    SqliteRunStore,
    StoreDataError,
    StoreError,
)
from juno_bind_trio.store._migrations import MIGRATIONS

from .store_helpers import FakeClock, raw_execute, raw_query

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "book a table"}]
TURN: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "book", "arguments": '{"n":2}'}},
        {"id": "c2", "type": "function", "function": {"name": "look", "arguments": "{}"}},
    ],
}


def key(run_id: str, call_id: str, name: str = "book", args: object = None) -> ToolCallReceiptKey:
    return ToolCallReceiptKey(
        run_id=run_id,
        tool_call_id=call_id,
        tool_name=name,
        args_hash=tool_call_args_hash({"n": 2} if args is None else args),
    )


def answer(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


async def started_run(store: RunStore, run_id: str = "r1") -> Lease:
    await store.create_run(run_id, messages=USER)
    return await store.claim_run(run_id, owner="w1", ttl=30)


async def test_create_get_and_list(store: RunStore) -> None:
    record = await store.create_run("r1", messages=USER, agent="booker")
    assert (record.run_id, record.status, record.iteration, record.agent) == (
        "r1",
        "pending",
        0,
        "booker",
    )
    assert record.chain == root_chain("r1", agent="booker")
    child = descend_chain(record.chain, "r2", agent="reader")
    await store.create_run("r2", messages=USER, chain=child, agent="reader")
    assert (await store.get_run("r2")).chain.parent_run_id == "r1"
    assert [r.run_id for r in await store.list_runs()] == ["r1", "r2"]
    assert [r.run_id for r in await store.list_runs(parent_run_id="r1")] == ["r2"]
    assert await store.list_runs(status="completed") == []
    assert (await store.load("r1")).messages == USER


async def test_create_refuses_an_existing_id_and_overwrites_nothing(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    with pytest.raises(RunExistsError, match=r"'r1'"):
        await store.create_run("r1", messages=[{"role": "user", "content": "other"}])
    assert (await store.load("r1")).messages == USER


async def test_unknown_run(store: RunStore) -> None:
    with pytest.raises(RunNotFoundError, match="'nope'") as info:
        await store.get_run("nope")
    assert info.value.run_id == "nope"
    with pytest.raises(RunNotFoundError):
        await store.claim_run("nope", owner="w", ttl=1)
    with pytest.raises(RunNotFoundError, match="'nope'"):
        await store.load_with_receipts("nope")
    with pytest.raises(TypeError, match=r"load_with_receipts: run_id must be a non-empty string"):
        await store.load_with_receipts("")


async def test_values_travel_as_parameters(store: RunStore) -> None:
    nasty = "r'); DROP TABLE juno_runs; --"
    text = 'it\'s "quoted" \\ and ? and %s and \u00e9\u2603'
    await store.create_run(nasty, messages=[{"role": "user", "content": text}])
    loaded = await store.load(nasty)
    assert loaded.record.run_id == nasty
    assert loaded.messages[0]["content"] == text


async def test_lease_is_exclusive_until_it_expires(store: RunStore, clock: FakeClock) -> None:
    first = await started_run(store)
    assert first.token == 1
    with pytest.raises(RunLeasedError, match=r"'r1'"):
        await store.claim_run("r1", owner="w2", ttl=30)
    clock.advance(31)
    second = await store.claim_run("r1", owner="w2", ttl=30)
    assert second.token == 2
    # The first worker's lease is gone: every write it tries is refused, and nothing lands.
    with pytest.raises(LeaseLostError, match=r"'r1'"):
        await store.save_transcript(first, [*USER, {"role": "user", "content": "x"}], iteration=1)
    with pytest.raises(LeaseLostError):
        await store.renew_lease(first, ttl=30)
    with pytest.raises(LeaseLostError):
        await store.save_turn(first, iteration=1, assistant=TURN)
    with pytest.raises(LeaseLostError):
        await store.release(first, status="completed")
    loaded = await store.load("r1")
    assert loaded.messages == USER
    assert loaded.pending_turn is None
    assert loaded.record.status == "running"
    assert loaded.record.lease_owner == "w2"


async def test_an_expired_lease_writes_nothing_even_if_nobody_took_it(
    store: RunStore, clock: FakeClock
) -> None:
    lease = await started_run(store)
    clock.advance(30)
    with pytest.raises(LeaseLostError, match="expired"):
        await store.save_transcript(lease, USER * 2, iteration=1)
    assert (await store.load("r1")).record.iteration == 0


async def test_renew_extends_and_records_progress(store: RunStore, clock: FakeClock) -> None:
    lease = await started_run(store)
    clock.advance(20)
    renewed = await store.renew_lease(lease, ttl=30, progress={"tool": "book"})
    assert renewed.expires_at == clock.now + 30
    clock.advance(20)  # past the first expiry, within the renewed one
    await store.save_transcript(renewed, USER, iteration=1)
    record = await store.get_run("r1")
    assert record.progress == {"tool": "book"}
    assert record.heartbeat_at == clock.now - 20


async def test_claim_next_takes_pending_then_expired_runs(
    store: RunStore, clock: FakeClock
) -> None:
    for run_id in ("a", "b"):
        await store.create_run(run_id, messages=USER)
        clock.advance(1)
    got_a = await store.claim_next(owner="w1", ttl=10)
    got_b = await store.claim_next(owner="w2", ttl=10)
    assert got_a is not None
    assert got_b is not None
    assert (got_a.run_id, got_b.run_id) == ("a", "b")
    assert await store.claim_next(owner="w3", ttl=10) is None
    await store.release(got_b, status="completed")
    clock.advance(11)  # w1 died: its lease on "a" ran out
    again = await store.claim_next(owner="w3", ttl=10)
    assert again is not None
    assert (again.run_id, again.owner, again.token) == ("a", "w3", got_a.token + 1)
    assert await store.claim_next(owner="w4", ttl=10) is None  # "b" completed: never again


async def test_a_worker_restarted_under_its_name_takes_its_runs_back(store: RunStore) -> None:
    await store.create_run("a", messages=USER)
    first = await store.claim_next(owner="w1", ttl=30)
    assert first is not None
    assert await store.claim_next(owner="w2", ttl=30) is None  # leased, unexpired
    again = await store.claim_next(owner="w1", ttl=30)  # w1 restarted
    assert again is not None
    assert (again.run_id, again.token) == ("a", first.token + 1)
    with pytest.raises(LeaseLostError):  # the old incarnation is fenced off
        await store.renew_lease(first, ttl=30)


async def test_receipts_before_dispatch_and_when_settled(store: RunStore) -> None:
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    receipt = await store.start_call(
        lease, iteration=1, key=key("r1", "c1"), resumability="non_repeatable"
    )
    assert receipt.state == "started"
    await store.start_call(
        lease, iteration=1, key=key("r1", "c2", "look", {}), resumability="repeatable"
    )
    await store.settle_call(
        lease, iteration=1, tool_call_id="c2", state="succeeded", message=answer("c2")
    )
    loaded = await store.load("r1")
    assert loaded.pending_turn == TURN
    assert loaded.record.pending_iteration == 1
    assert [(r.tool_call_id, r.state, r.resumability) for r in loaded.receipts] == [
        ("c1", "started", "non_repeatable"),
        ("c2", "succeeded", "repeatable"),
    ]
    assert loaded.receipts[1].message == answer("c2")
    assert loaded.receipts[0].key.startswith("v1:r1:c1:book:")
    # A settled call cannot be started or settled again: the first answer stands.
    with pytest.raises(StoreDataError, match=r"'r1'.*'c2'"):
        await store.start_call(
            lease, iteration=1, key=key("r1", "c2", "look", {}), resumability="repeatable"
        )
    with pytest.raises(StoreDataError, match="already settled"):
        await store.settle_call(
            lease, iteration=1, tool_call_id="c2", state="failed", message=answer("c2", "no")
        )
    # The iteration ends: its transcript is saved and the open turn closed, atomically.
    full = [*USER, TURN, answer("c1"), answer("c2")]
    await store.save_transcript(lease, full, iteration=1)
    loaded = await store.load("r1")
    assert (loaded.messages, loaded.pending_turn, loaded.receipts) == (full, None, ())
    assert [r.state for r in await store.receipts("r1")] == ["started", "succeeded"]


async def test_a_receipt_for_an_unknown_call_is_refused(store: RunStore) -> None:
    lease = await started_run(store)
    with pytest.raises(StoreDataError, match=r"'r1'.*not the run's open turn"):
        await store.start_call(lease, iteration=1, key=key("r1", "c1"), resumability="repeatable")
    await store.save_turn(lease, iteration=1, assistant=TURN)
    with pytest.raises(StoreDataError, match=r"'r1'.*'c9', which the open turn never made"):
        await store.start_call(lease, iteration=1, key=key("r1", "c9"), resumability="repeatable")
    with pytest.raises(StoreDataError, match="no 'started' receipt"):
        await store.settle_call(
            lease, iteration=1, tool_call_id="c1", state="succeeded", message=answer("c1")
        )
    assert await store.receipts("r1") == []


async def test_a_call_started_again_must_have_the_same_arguments(store: RunStore) -> None:
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    await store.start_call(lease, iteration=1, key=key("r1", "c1"), resumability="repeatable")
    await store.settle_call(lease, iteration=1, tool_call_id="c1", state="interrupted")
    # Re-dispatched on resume: allowed, and the receipt says started again.
    await store.start_call(lease, iteration=1, key=key("r1", "c1"), resumability="repeatable")
    with pytest.raises(StoreDataError, match="arguments hash"):
        await store.start_call(
            lease, iteration=1, key=key("r1", "c1", args={"n": 3}), resumability="repeatable"
        )
    assert [r.state for r in (await store.load("r1")).receipts] == ["started"]


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("messages", "[{not json", "transcript does not parse"),
        ("messages", '{"role": "user"}', "must be a list"),
        ("messages", '[{"content": "no role"}]', r"messages\[0\]"),
        ("status", "exploded", "status 'exploded'"),
        ("chain", '{"links": []}', "lineage"),
        ("iteration", -3, "not a non-negative integer"),
    ],
)
async def test_a_corrupted_row_names_the_run_and_nothing_is_overwritten(
    store: RunStore, column: str, value: str, match: str
) -> None:
    lease = await started_run(store)
    raw_execute(store, f"UPDATE juno_runs SET {column} = ? WHERE run_id = ?", (value, "r1"))
    with pytest.raises(StoreDataError, match=match) as info:
        await store.load("r1")
    assert info.value.run_id == "r1"
    assert "'r1'" in str(info.value)
    assert raw_query(store, f"SELECT {column} FROM juno_runs WHERE run_id = ?", ("r1",)) == [
        (value,)
    ]
    del lease


async def test_a_corrupted_receipt_names_the_run(store: RunStore) -> None:
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    await store.start_call(lease, iteration=1, key=key("r1", "c1"), resumability="repeatable")
    raw_execute(store, "UPDATE juno_receipts SET state = 'maybe' WHERE run_id = ?", ("r1",))
    with pytest.raises(StoreDataError, match=r"'r1'.*'c1'.*'maybe'"):
        await store.load("r1")
    raw_execute(
        store,
        "UPDATE juno_receipts SET state = 'succeeded', message = ? WHERE run_id = ?",
        ('{"role": "tool", "tool_call_id": "c2", "content": "x"}', "r1"),
    )
    with pytest.raises(StoreDataError, match="not a tool message answering it"):
        await store.load("r1")


async def test_a_statement_the_database_fails_is_a_store_error(store: RunStore) -> None:
    # Both stores report a failure of the database itself as StoreError, never as
    # their driver's own exception (which a caller could not catch without it).
    await started_run(store)
    raw_execute(store, "DROP TABLE juno_receipts")
    with pytest.raises(StoreError, match=f"{type(store).__name__}: .*juno_receipts"):
        await store.receipts("r1")


async def test_a_newer_schema_is_refused_on_open(store_factory: Any, store: RunStore) -> None:
    raw_execute(store, "INSERT INTO juno_schema (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}"):
        async with store_factory():
            pass
    # Reopening at the current version migrates nothing and keeps the data.
    raw_execute(store, "DELETE FROM juno_schema WHERE version > ?", (SCHEMA_VERSION,))
    await store.create_run("kept", messages=USER)
    async with store_factory() as again:
        assert (await again.get_run("kept")).status == "pending"
    versions = raw_query(store, "SELECT version FROM juno_schema ORDER BY version")
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


async def test_a_version_1_database_is_upgraded_on_open_and_keeps_its_runs(
    store_factory: Any, store: RunStore, store_kind: str
) -> None:
    # A database as version 1 of the package left it: no detail column.
    for table in (
        "juno_pending",
        "juno_receipts",
        "juno_runs",
        "juno_conversations",
        "juno_schema",
    ):
        raw_execute(store, f"DROP TABLE {table}")
    raw_execute(store, "CREATE TABLE juno_schema (version INTEGER NOT NULL)")
    dialect = "sqlite" if store_kind == "sqlite" else "postgresql"
    for statement in MIGRATIONS[dialect][0]:
        raw_execute(store, statement)
    raw_execute(store, "INSERT INTO juno_schema (version) VALUES (1)")
    raw_execute(
        store,
        "INSERT INTO juno_runs (run_id, status, chain, root_run_id, messages, iteration, "
        "lease_token, created_at, updated_at) VALUES (?, 'stopped', ?, ?, ?, 2, 3, 1.0, 2.0)",
        ("old", '{"links": [{"run_id": "old", "agent": null}]}', "old", json.dumps(USER)),
    )
    async with store_factory() as upgraded:
        record = await upgraded.get_run("old")
        assert (record.status, record.iteration, record.lease_token) == ("stopped", 2, 3)
        assert record.detail is None
        lease = await upgraded.claim_run("old", owner="w1", ttl=30)
        await upgraded.release(lease, status="cancelled", detail="cancelled: by a test")
        assert (await upgraded.get_run("old")).detail == "cancelled: by a test"
        assert await upgraded.call_decisions("old") == []  # version 3's table, empty
        assert (await upgraded.get_run("old")).conversation_id is None
        assert await upgraded.list_conversations() == []
    versions = raw_query(store, "SELECT version FROM juno_schema ORDER BY version")
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


async def test_bad_arguments_are_refused_at_the_boundary(store: RunStore) -> None:
    name = type(store).__name__
    with pytest.raises(TypeError, match=f"{name}.create_run: run_id"):
        await store.create_run("", messages=USER)
    with pytest.raises(TypeError, match=rf"{name}.create_run: messages\[0\]"):
        await store.create_run("r", messages=[{"content": "x"}])
    with pytest.raises(TypeError, match="JSON-serializable"):
        await store.create_run("r", messages=[{"role": "user", "content": {1, 2}}])
    with pytest.raises(ValueError, match=f"{name}.claim_run: ttl"):
        await store.claim_run("r", owner="w", ttl=0)
    with pytest.raises(TypeError, match=f"{name}.save_transcript: lease"):
        await store.save_transcript("lease", USER, iteration=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"{name}.release: status"):
        await store.release(Lease(run_id="r", owner="w", token=1, expires_at=0), status="pending")
    assert await store.list_runs() == []


async def test_a_cancel_during_a_write_waits_for_it_to_land_whole(store: RunStore) -> None:
    """A thread cannot be stopped: the caller's cancel is raised after the commit."""
    lease = await started_run(store)
    entered, release_thread = threading.Event(), threading.Event()
    inner = store._commit_group  # type: ignore[attr-defined]

    def slow_commit(writes: Any) -> Any:
        entered.set()
        release_thread.wait(10)
        return inner(writes)

    store._commit_group = slow_commit  # type: ignore[attr-defined]
    saved = [*USER, {"role": "assistant", "content": "done"}]
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def save() -> None:
                await store.save_transcript(lease, saved, iteration=1)
                pytest.fail("the cancel must reach the caller")

            tg.start_soon(save)
            await anyio.to_thread.run_sync(entered.wait)
            scope.cancel()
            release_thread.set()
    assert scope.cancelled_caught
    store._commit_group = inner  # type: ignore[attr-defined]
    loaded = await store.load("r1")
    assert (loaded.messages, loaded.record.iteration) == (saved, 1)


async def test_a_cancel_before_a_write_writes_nothing(store: RunStore) -> None:
    lease = await started_run(store)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await store.save_transcript(lease, USER * 2, iteration=1)
    assert (await store.load("r1")).record.iteration == 0


async def test_a_closed_store_refuses(store_factory: Any) -> None:
    # Reads and the lane's writes alike: each refuses before touching the database.
    made = store_factory()
    lease = Lease(run_id="r", owner="w", token=1, expires_at=0)
    name = type(made).__name__
    with pytest.raises(UsageError, match=f"{name}: the store is not open"):
        await made.get_run("r")
    with pytest.raises(UsageError, match=f"{name}: the store is not open"):
        await made.save_transcript(lease, USER, iteration=1)
    async with made:
        pass
    with pytest.raises(UsageError, match=f"{name}: the store is closed"):
        await made.get_run("r")
    with pytest.raises(UsageError, match=f"{name}: the store is closed"):
        await made.save_transcript(lease, USER, iteration=1)


def test_postgres_repr_and_errors_hide_the_password() -> None:
    store = PostgresRunStore("postgresql://me:s3cr3t-pw@127.0.0.1:1/db")
    assert "s3cr3t-pw" not in repr(store)
    assert "me" in repr(store)


async def test_postgres_connection_error_hides_the_password() -> None:
    store = PostgresRunStore("postgresql://me:s3cr3t-pw@127.0.0.1:1/db", connect_timeout=0.5)
    with pytest.raises(StoreError) as info:
        async with store:
            pass
    assert "s3cr3t-pw" not in str(info.value)
    assert info.value.__cause__ is None or "s3cr3t-pw" not in str(info.value.__cause__)


def test_sqlite_store_refuses_a_bad_path() -> None:
    with pytest.raises(TypeError, match="SqliteRunStore: path"):
        SqliteRunStore("")


async def test_a_full_sqlite_database_says_it_is_full(tmp_path: Any) -> None:
    # A full disk ends the transaction inside SQLite itself; the store must
    # report that, not the "no transaction is active" of a ROLLBACK after it.
    async with SqliteRunStore(str(tmp_path / "full.db")) as store:
        await store.create_run("r0", messages=USER)
        conn = store._conn  # the store's own connection
        assert conn is not None
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count={pages + 2}")
        with pytest.raises(StoreError, match="full") as caught:
            await store.create_run("r1", messages=[{"role": "user", "content": "x" * 200_000}])
        assert "no transaction is active" not in str(caught.value)
        conn.execute("PRAGMA max_page_count=1073741823")
        # Nothing of the failed write landed, and the store still works.
        assert [record.run_id for record in await store.list_runs()] == ["r0"]
        await store.create_run("r2", messages=USER)
