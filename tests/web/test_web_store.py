"""The live view on a run store: runs outlive the process's memory, on both backends.

A real Agent (the example's fake provider, the openai SDK) keeps its runs in
a real SQLite file (and, where one is reachable, a real PostgreSQL); the app
reads a run back from the store once it is no longer in memory: after a
restart, or once it was forgotten to bound memory.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from asgi_driver import Client

from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.web import LiveRuns, create_app
from juno_bind_trio.web._live_run import _new_run_id
from module_files import load_file

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


live_view = load_file("example_live_view_store", ROOT / "examples" / "live_view.py")
store_helpers = load_file("web_store_helpers", ROOT / "tests" / "store" / "store_helpers.py")


def data(frames: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(frame["data"]) for frame in frames]


async def start(client: Client, headers: dict[str, str] | None = None) -> str:
    response = await client.request(
        "POST", "/runs", json_body={"prompt": "17 + 25, 6 × 7?"}, headers=headers or {}
    )
    assert response.status == 201, response.body
    run_id: str = response.json()["runId"]
    return run_id


async def run_to_the_end(client: Client, run_id: str) -> list[dict[str, Any]]:
    async with client.stream(f"/runs/{run_id}/events") as stream:
        return data([frame async for frame in stream.frames()])


def turn_texts(snapshot: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(t["turnId"], t["text"], t["final"]) for t in snapshot["turns"]]


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path) -> Any:
    if store_kind == "sqlite":
        path = tmp_path / "runs.db"
        return lambda: SqliteRunStore(path)
    dsn = store_helpers.postgres_dsn()
    return lambda: PostgresRunStore(dsn)


@asynccontextmanager
async def served(store: object, **options: Any) -> AsyncIterator[tuple[LiveRuns, Any]]:
    """The example's agent on *store*, with the app, for one "process lifetime"."""
    async with (
        live_view.open_live_view(pace=0.01, tool_seconds=0.3, store=store, **options) as (
            runs,
            app,
        ),
        runs.running(),
    ):
        yield runs, app


async def test_a_finished_run_is_read_back_from_the_store_after_a_restart(
    make_store: Any,
) -> None:
    async with make_store() as store:
        # First process: the run streams live and ends.
        async with served(store) as (runs, app):
            client = Client(app)
            run_id = await start(client)
            live_events = await run_to_the_end(client, run_id)
            live = (await client.request("GET", f"/runs/{run_id}")).json()
            assert runs.get(run_id) is not None
        assert live["status"] == "ended"
        assert live["reason"] == "completed"
        # Second process: nothing in memory, the same store.
        async with served(store) as (runs, app):
            client = Client(app)
            assert runs.get(run_id) is None
            snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
            async with client.stream(f"/runs/{run_id}/events") as stream:
                assert stream.status == 200
                frames = [frame async for frame in stream.frames()]
            # A browser that was watching in the first process reconnects with its id.
            late = await client.request(
                "GET", f"/runs/{run_id}/events", headers={"last-event-id": str(len(live_events))}
            )
    # The same run id; the store's snapshot has the turns' final texts as shown live.
    assert snapshot["runId"] == run_id
    assert snapshot["status"] == "ended"
    assert snapshot["reason"] == "completed"
    assert snapshot["stored"]["status"] == "completed"
    assert turn_texts(snapshot) == turn_texts(live)
    assert snapshot["turns"][1]["text"].endswith("Thanks for watching the stream.")
    assert snapshot["transcript"] == live["transcript"]
    statuses = {c["toolCallId"]: c["status"] for c in snapshot["toolCalls"]}
    assert statuses == {c["toolCallId"]: c["status"] for c in live["toolCalls"]}
    assert set(statuses.values()) == {"finished"}
    # The stream: the snapshot, the end, and no more.
    events = data(frames)
    assert [e["kind"] for e in events] == ["resync", "run_ended", "run_status"]
    assert events[0]["snapshot"] == snapshot
    assert events[1]["reason"] == "completed"
    assert events[2]["status"] == "ended"
    assert late.status == 200
    late_lines = late.body.decode().splitlines()
    late_kinds = [json.loads(line[6:])["kind"] for line in late_lines if line.startswith("data: ")]
    assert late_kinds == ["resync", "run_ended", "run_status"]


async def test_forgotten_runs_fall_back_to_the_store(make_store: Any) -> None:
    async with make_store() as store, served(store, max_kept_runs=1) as (runs, app):
        client = Client(app)
        first = await start(client)
        await run_to_the_end(client, first)
        live_first = (await client.request("GET", f"/runs/{first}")).json()
        second = await start(client)  # memory keeps one ended run: the first is forgotten
        await run_to_the_end(client, second)
        assert runs.get(first) is None
        assert runs.kept == 1
        from_store = (await client.request("GET", f"/runs/{first}")).json()
        assert from_store["stored"]["status"] == "completed"
        assert turn_texts(from_store) == turn_texts(live_first)
        third = await start(client)
        await run_to_the_end(client, third)
        assert runs.kept == 1
        assert runs.get(second) is None
        assert (await client.request("GET", f"/runs/{second}")).status == 200


async def test_stored_runs_pass_the_same_gate(tmp_path: Path) -> None:
    calls: list[tuple[str, str | None]] = []

    def authorize(request: Any, action: str, owner: str | None) -> str | None:
        calls.append((action, owner))
        user: str | None = request.headers.get("x-user")
        return user

    path = tmp_path / "runs.db"
    async with served(path, max_kept_runs=1) as (runs, _app):
        app = create_app(runs, authorize=authorize)
        client = Client(app, client=("203.0.113.9", 1))
        alice = await start(client, {"x-user": "alice"})
        async with client.stream(f"/runs/{alice}/events", headers={"x-user": "alice"}) as s:
            [frame async for frame in s.frames()]
    async with served(path) as (runs, _app):
        app = create_app(runs, authorize=authorize)
        client = Client(app, client=("203.0.113.9", 1))
        assert runs.get(alice) is None
        loads: list[str] = []
        store = runs._store
        assert store is not None
        real_load = store.load

        async def counting_load(run_id: str) -> Any:
            loads.append(run_id)
            return await real_load(run_id)

        store.load = counting_load  # type: ignore[method-assign]
        calls.clear()
        mine = await client.request("GET", f"/runs/{alice}", headers={"x-user": "alice"})
        assert mine.status == 200
        assert mine.json()["stored"]["status"] == "completed"
        # The hook is consulted for a stored run (owner unknown to the store: None) ...
        assert calls == [("watch", None)]
        for method, path_ in [
            ("GET", f"/runs/{alice}"),
            ("GET", f"/runs/{alice}/events"),
            ("POST", f"/runs/{alice}/stop"),
            ("POST", f"/runs/{alice}/cancel"),
        ]:
            # ... another principal finds nothing ...
            response = await client.request(method, path_, headers={"x-user": "bob"})
            assert response.status == 404, path_
            assert b"Thanks" not in response.body
            # ... and a refusal by the hook is a refusal, before the store is read.
            before = len(loads)
            assert (await client.request(method, path_)).status == 403, path_
            assert len(loads) == before
        # A forged id naming bob's digest with alice's random part is no run at all.
        token = alice.partition(".")[0]
        forged = _new_run_id("bob").partition(".")[2]
        assert (
            await client.request("GET", f"/runs/{token}.{forged}", headers={"x-user": "bob"})
        ).status == 404
        # Ids this app never makes are not even looked up.
        for junk in ("x", f"{token}", f"{token}.{'A' * 22}", "a" * 200):
            response = await client.request("GET", f"/runs/{junk}", headers={"x-user": "alice"})
            assert response.status == 404, junk
        stopped = await client.request("POST", f"/runs/{alice}/stop", headers={"x-user": "alice"})
        assert stopped.json() == {"runId": alice, "status": "ended", "changed": False}


async def test_a_run_whose_worker_died_shows_detached_and_is_not_run_here(
    tmp_path: Path,
) -> None:
    now = [1_000_000.0]
    path = tmp_path / "runs.db"
    run_id = _new_run_id("local")
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Looking it up.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    async with SqliteRunStore(path, clock=lambda: now[0]) as store:
        await store.create_run(run_id, messages=messages)
        lease = await store.claim_run(run_id, owner="worker-that-dies", ttl=30.0)
        await store.save_transcript(lease, messages, iteration=1)
        runs = LiveRuns(_NoAgent(), store=store)
        app = create_app(runs)
        async with runs.running():
            client = Client(app)
            held = (await client.request("GET", f"/runs/{run_id}")).json()
            now[0] += 31.0  # the worker died: its lease expires
            expired = (await client.request("GET", f"/runs/{run_id}")).json()
            async with client.stream(f"/runs/{run_id}/events") as stream:
                events = data([frame async for frame in stream.frames()])
            stop = await client.request("POST", f"/runs/{run_id}/stop")
            cancel = await client.request("POST", f"/runs/{run_id}/cancel")
        assert (await store.get_run(run_id)).status == "running"  # untouched by the web app
    assert held["status"] == "detached"
    assert held["stored"] == {"status": "running", "iteration": 1, "leaseExpired": False}
    assert expired["stored"]["leaseExpired"] is True
    assert expired["reason"] is None
    assert turn_texts(expired) == [(f"{run_id}:1", "Looking it up.", True)]
    assert expired["toolCalls"] == [
        {
            "toolCallId": "c1",
            "toolName": "add",
            "arguments": "{}",
            "status": "finished",
            "content": "42",
        }
    ]
    assert [e["kind"] for e in events] == ["resync", "run_status"]
    assert events[1]["status"] == "detached"
    assert stop.status == 409
    assert cancel.status == 409


class _NoAgent:
    """A run source that must never be asked to run: the web app does not resume."""

    def open_run(self, prompt: str, *, run_id: str | None = None) -> Any:
        raise AssertionError("the web app started a run")


def test_construction_takes_the_agents_store_or_refuses_a_bad_one(tmp_path: Path) -> None:
    class WithStore(_NoAgent):
        store = tmp_path / "runs.db"

    assert LiveRuns(WithStore())._store_spec == tmp_path / "runs.db"
    assert LiveRuns(_NoAgent())._store_spec is None
    with pytest.raises(TypeError, match="LiveRuns: store must be"):
        LiveRuns(_NoAgent(), store=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="LiveRuns: store must be"):
        LiveRuns(_NoAgent(), store="")
    assert isinstance(SqliteRunStore(tmp_path / "x.db"), RunStore)


async def test_find_refuses_a_non_string_id() -> None:
    runs = LiveRuns(_NoAgent())
    with pytest.raises(TypeError, match=r"LiveRuns\.find: run_id must be a str"):
        await runs.find(42)  # type: ignore[arg-type]
    async with runs.running():
        assert await runs.find("nothing") is None
    await anyio.lowlevel.checkpoint()
