"""One bad row never kills a worker or a listing: every column of a run, corrupted.

Each column of ``juno_runs`` (and each of a receipt's values) of one run is
set to something this package never writes there: text where a number goes,
a blob where text goes, JSON that does not parse, NaN and infinity on
PostgreSQL, whose columns are typed. A good run is queued after each bad
one. ``serve_runs`` must serve every good run, record every unreadable one
``"failed"`` with the run and the column named (in its ``detail`` and in the
log), and never die; the CLI's ``list`` must list every run, marking the
unreadable ones.

Two kinds of column are not "unreadable" when changed: those the package
never reads back (``root_run_id`` and ``parent_run_id`` only select runs; the
run is served as usual), and a ``status`` that is no run status at all,
which no worker takes as work (the row is left as it is, and listed as
unreadable). A receipt's ``run_id``, ``iteration`` and ``position`` are its
identity and order, not values: a receipt whose identity changed is another
receipt, not a corrupted one, so they are not in the table.
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import run_on
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.store import DurableRun, RunStore, SqliteRunStore, serve_runs
from juno_bind_trio.store.__main__ import main

from .durable_world import call
from .store_helpers import DSN_ENV, raw_execute, raw_query

USER = [{"role": "user", "content": "look it up"}]
CALL = call("c1", "look", page=1)
TURN: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [CALL]}
NAN, INF = float("nan"), float("inf")

# column, its bad value on SQLite, on PostgreSQL (None: the type cannot hold one), what happens
CORRUPTIONS: list[tuple[str, object, object, str]] = [
    ("run_id", b"\x00", None, "failed"),
    ("status", "exploded", "exploded", "left"),
    ("agent", b"\x01", "", "failed"),
    ("chain", "{not json", '{"links": []}', "failed"),
    ("root_run_id", b"\x02", "elsewhere", "served"),
    ("parent_run_id", b"\x03", "nobody", "served"),
    ("messages", "[{not json", '{"role": "user"}', "failed"),
    ("iteration", "many", -3, "failed"),
    ("pending_turn", "{not json", '{"role": "assistant"}', "failed"),
    ("pending_iteration", "one", 0, "failed"),
    ("lease_owner", b"\x04", "", "failed"),
    ("lease_token", "abc", -1, "failed"),
    ("lease_expires", "soon", NAN, "failed"),
    ("heartbeat_at", "later", INF, "failed"),
    ("progress", "{not json", "[1, 2", "failed"),
    ("created_at", "yesterday", NAN, "failed"),
    ("updated_at", "today", -INF, "failed"),
    ("detail", b"\x05", "", "failed"),
    ("juno_receipts.tool_call_id", "zz", "zz", "failed"),
    ("juno_receipts.tool_name", b"\x06", "", "failed"),
    ("juno_receipts.args_hash", b"\x07", "", "failed"),
    ("juno_receipts.receipt_key", b"\x08", "", "failed"),
    ("juno_receipts.resumability", "maybe", "maybe", "failed"),
    ("juno_receipts.state", "maybe", "maybe", "failed"),
    ("juno_receipts.message", "{not json", "{not json", "failed"),
    ("juno_receipts.updated_at", "then", NAN, "failed"),
]


def test_the_table_covers_every_column() -> None:
    from juno_bind_trio.store._migrations import MIGRATIONS

    schema = "\n".join(statement for version in MIGRATIONS["sqlite"] for statement in version)
    runs = schema.split("CREATE TABLE juno_runs")[1].split(")\n")[0]
    columns = {line.split()[0] for line in runs.splitlines()[1:] if line.strip()}
    columns.add("detail")  # added by ALTER TABLE in version 2
    assert columns == {c for c, *_ in CORRUPTIONS if "." not in c}


async def seed(store: RunStore, run_id: str) -> None:
    """A run with an open turn whose call started, handed back: claimable at once."""
    from juno_bind_trio.store import tool_call_receipt_key

    await store.create_run(run_id, messages=USER)
    lease = await store.claim_run(run_id, owner="w0", ttl=30)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    await store.start_call(
        lease,
        iteration=1,
        key=tool_call_receipt_key(run_id, CALL),
        resumability="repeatable",
    )
    await store.renew_lease(lease, ttl=30, progress={"iteration": 1})
    await store.release(lease, status="running")


def corrupt(store: RunStore, column: str, run_id: str, value: object) -> object:
    """Set *column* of *run_id* to *value* behind the store's back; the run's id after."""
    if column.startswith("juno_receipts."):
        raw_execute(
            store,
            f"UPDATE juno_receipts SET {column.split('.')[1]} = ? WHERE run_id = ?",
            (value, run_id),
        )
        return run_id
    raw_execute(store, f"UPDATE juno_runs SET {column} = ? WHERE run_id = ?", (value, run_id))
    return value if column == "run_id" else run_id


async def drain(store_factory: Any, handled: list[str]) -> None:
    async def handle(run: DurableRun) -> None:
        handled.append(run.run_id)

        async def look(tool_call: Any) -> ToolCallOutcome:
            return ToolCallOutcome(
                tool_message={"role": "tool", "tool_call_id": tool_call["id"], "content": "p1"}
            )

        await run.finish_open_turn(look)
        await run.finish("completed")

    async with store_factory() as store:
        await serve_runs(store, handle, owner="w1", stop_when_idle=True)


async def seed_all(store_factory: Any, corruptions: list[tuple[str, object, str]]) -> None:
    async with store_factory() as store:
        for column, _, _ in corruptions:
            await seed(store, f"{column}-bad")
            await store.create_run(f"{column}-good", messages=USER)


def test_every_unreadable_column_fails_its_run_alone(
    backend: str,
    store_factory: Any,
    store_kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    column_at = 1 if store_kind == "sqlite" else 2
    corruptions = [(c[0], c[column_at], c[3]) for c in CORRUPTIONS if c[column_at] is not None]
    run_on(backend, seed_all, store_factory, corruptions)
    probe = store_factory()  # unopened: only its path, for the raw SQL
    ids = {
        column: corrupt(probe, column, f"{column}-bad", value) for column, value, _ in corruptions
    }
    database = probe.path if isinstance(probe, SqliteRunStore) else os.environ[DSN_ENV]
    # The listing shows every run; the unreadable ones are marked, not fatal. It reads
    # the runs' records, not their transcripts, open turns or receipts.
    elsewhere = ("messages", "pending_turn", "juno_receipts.")
    in_record = [
        c for c, _, expected in corruptions if expected != "served" and not c.startswith(elsewhere)
    ]
    lines = listing(database)
    assert len(lines) == 2 * len(corruptions)
    marked = [line for line in lines if line.split("\t")[1] == "unreadable"]
    assert len(marked) == len(in_record)
    for column in in_record:
        if column != "run_id":
            line = next(line for line in marked if line.startswith(f"{column}-bad\t"))
            assert column in line, line
    handled: list[str] = []
    with caplog.at_level(logging.ERROR, logger="juno_bind_trio.store"):
        run_on(backend, drain, store_factory, handled)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for column, _, expected in corruptions:
        good = raw_query(
            probe, "SELECT status FROM juno_runs WHERE run_id = ?", (f"{column}-good",)
        )
        assert good == [("completed",)], f"{column}: the good run after the bad one"
        status, detail = raw_query(
            probe, "SELECT status, detail FROM juno_runs WHERE run_id = ?", (ids[column],)
        )[0]
        name = column.split(".")[-1]
        if expected == "failed":
            assert status == "failed", column
            assert isinstance(detail, str), column
            assert detail.startswith("failed: "), (column, detail)
            assert name in detail, (column, detail)
            if column != "run_id":
                assert f"'{column}-bad'" in detail, (column, detail)
                assert f"'{column}-bad'" in logged, column
            assert f"{column}-bad" not in handled, column
        elif expected == "served":
            assert (status, f"{column}-bad" in handled) == ("completed", True), column
        else:  # a status that is no status: no worker takes it, nothing is written
            assert (status, f"{column}-bad" in handled) == ("exploded", False), column
    # Afterwards too; a run failed for what the listing does not read says why.
    lines = listing(database)
    assert len(lines) == 2 * len(corruptions)
    for column in (c for c, *_ in corruptions if c.startswith(elsewhere)):
        line = next(line for line in lines if line.startswith(f"{column}-bad\t"))
        assert line.split("\t")[1] == "failed", line
        assert column.split(".")[-1] in line.split("\t")[4], line


def listing(database: str) -> list[str]:
    out = io.StringIO()
    assert main([database, "list", "--limit", "1000"], out=out) == 0
    return out.getvalue().splitlines()


def test_the_listing_goes_on_past_a_corrupted_row(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"

    async def make() -> None:
        async with SqliteRunStore(path) as store:
            for run_id in ("a", "b", "c"):
                await store.create_run(run_id, messages=USER)

    run_on("trio", make)
    raw_execute(SqliteRunStore(path), "UPDATE juno_runs SET lease_token = 'x' WHERE run_id = 'b'")
    out = io.StringIO()
    assert main([str(path), "list"], out=out) == 0
    a, b, c = out.getvalue().splitlines()
    assert a == "a\tpending\titeration 0\tlease -\t-\tagent -"
    assert b.startswith("b\tunreadable\trun 'b': stored lease_token 'x' is not a non-negative")
    assert c == "c\tpending\titeration 0\tlease -\t-\tagent -"
