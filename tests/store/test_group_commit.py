"""Group commit: a run's writes that are pending together share one commit, on both stores.

Each store has one write lane: the first writer to find it idle leads, takes
every write queued after one scheduler turn, and applies them in one
worker-thread hop and one commit. These tests hold that commit in its worker
thread (a ``threading.Event``, never a timer) to put writers exactly where
they need to be: queued behind it, or carried by it.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import outcome
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.loop import ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import tool_call_id
from juno_bind_trio.store import (
    DurableRun,
    LeaseLostError,
    PostgresRunStore,
    RunStore,
    SqliteRunStore,
    StoreDataError,
    StoreError,
    _core,
    _guarded,
    open_durable_run,
)

from .store_helpers import FakeClock, postgres_dsn, raw_execute
from .test_store import TURN, USER, answer, key, started_run

pytestmark = pytest.mark.anyio


class Lane:
    """Records every group commit of *store* (how many writes, of what) and can hold one."""

    def __init__(self, store: RunStore, *, hold: Callable[[list[Any]], bool] | None = None) -> None:
        self.store = store
        self.groups: list[list[str]] = []
        self.entered = threading.Event()
        self.go = threading.Event()
        self._hold = hold
        self._inner = store._commit_group  # type: ignore[attr-defined]
        store._commit_group = self._commit  # type: ignore[attr-defined]

    def _commit(self, writes: list[_guarded.Write]) -> Any:
        kinds = [w.checked.func.__name__ for w in writes]  # type: ignore[attr-defined]
        self.groups.append(kinds)
        if self._hold is not None and self._hold(kinds) and not self.go.is_set():
            self.entered.set()
            self.go.wait(30)
        return self._inner(writes)

    async def held(self) -> None:
        """Return once a commit is held in its worker thread."""
        await anyio.to_thread.run_sync(self.entered.wait)

    def release(self) -> None:
        self.go.set()

    def queued(self) -> int:
        return len(self.store._queue)  # type: ignore[attr-defined]


def hold_all(kinds: list[str]) -> bool:
    return True


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the scheduler until *condition* holds (no clock involved)."""
    for _ in range(10_000):
        if condition():
            return
        await anyio.lowlevel.checkpoint()
    raise AssertionError("the condition never held")


async def capture(box: dict[Any, Any], name: object, fn: Callable[[], Awaitable[Any]]) -> None:
    box[name] = await outcome.acapture(fn)


def start(store: RunStore, lease: Any, call_id: str, run_id: str = "r1") -> Callable[[], Any]:
    name, args = ("book", None) if call_id == "c1" else ("look", dict[str, Any]())

    def go() -> Awaitable[Any]:
        return store.start_call(
            lease, iteration=1, key=key(run_id, call_id, name, args), resumability="repeatable"
        )

    return go


def settle(store: RunStore, lease: Any, call_id: str) -> Callable[[], Any]:
    def go() -> Awaitable[None]:
        return store.settle_call(
            lease, iteration=1, tool_call_id=call_id, state="succeeded", message=answer(call_id)
        )

    return go


async def test_writes_pending_together_share_one_commit(store: RunStore) -> None:
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    lane = Lane(store)
    commits = store._commits  # type: ignore[attr-defined]
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture, box, "c1", start(store, lease, "c1"))
        tg.start_soon(capture, box, "c2", start(store, lease, "c2"))
    assert lane.groups == [["start_call", "start_call"]]
    assert [box["c1"].unwrap().tool_call_id, box["c2"].unwrap().tool_call_id] == ["c1", "c2"]
    async with anyio.create_task_group() as tg:
        tg.start_soon(settle(store, lease, "c1"))
        tg.start_soon(settle(store, lease, "c2"))
    assert lane.groups[1:] == [["settle_call", "settle_call"]]
    # A write alone is a group of one, and the data is what one-by-one writes leave.
    await store.save_transcript(lease, [*USER, TURN, answer("c1"), answer("c2")], iteration=1)
    assert lane.groups[2:] == [["save_transcript"]]
    assert store._commits == commits + 3  # type: ignore[attr-defined]
    assert [(r.tool_call_id, r.state, r.message) for r in await store.receipts("r1")] == [
        ("c1", "succeeded", answer("c1")),
        ("c2", "succeeded", answer("c2")),
    ]


async def test_a_lost_lease_in_a_group_fails_that_write_alone(
    store: RunStore, clock: FakeClock
) -> None:
    await store.create_run("r1", messages=USER)
    await store.create_run("r2", messages=USER)
    kept = await store.claim_run("r1", owner="w1", ttl=100)
    stale = await store.claim_run("r2", owner="w1", ttl=10)
    await store.save_turn(kept, iteration=1, assistant=TURN)
    await store.save_turn(stale, iteration=1, assistant=TURN)
    clock.advance(20)
    taken = await store.claim_run("r2", owner="w2", ttl=30)  # w1's lease on r2 is gone
    lane = Lane(store)
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture, box, "r1", start(store, kept, "c1", "r1"))
        tg.start_soon(capture, box, "r2", start(store, stale, "c1", "r2"))
        tg.start_soon(capture, box, "r2-new", start(store, taken, "c2", "r2"))
    assert lane.groups == [["start_call"] * 3]
    assert box["r1"].unwrap().state == "started"
    assert box["r2-new"].unwrap().state == "started"
    with pytest.raises(LeaseLostError, match=r"'r2'.*taken by another worker") as info:
        box["r2"].unwrap()
    assert info.value.run_id == "r2"
    assert [r.tool_call_id for r in await store.receipts("r1")] == ["c1"]
    assert [r.tool_call_id for r in await store.receipts("r2")] == ["c2"]  # not the stale c1


async def test_a_corrupted_run_in_a_group_fails_alone_and_the_others_land(
    store: RunStore,
) -> None:
    good = await started_run(store, "r1")
    bad = await started_run(store, "r2")
    await store.save_turn(good, iteration=1, assistant=TURN)
    await store.save_turn(bad, iteration=1, assistant=TURN)
    corrupt = "UPDATE juno_runs SET pending_turn = ? WHERE run_id = ?"
    raw_execute(store, corrupt, ("{not json", "r2"))
    lane = Lane(store)
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture, box, "r1", start(store, good, "c1", "r1"))
        tg.start_soon(capture, box, "r2", start(store, bad, "c1", "r2"))
    assert lane.groups[0] == ["start_call", "start_call"]
    assert box["r1"].unwrap().state == "started"
    with pytest.raises(StoreDataError, match=r"'r2'.*open turn does not parse"):
        box["r2"].unwrap()
    assert [r.tool_call_id for r in await store.receipts("r1")] == ["c1"]
    assert await store.receipts("r2") == []


async def test_sqlite_a_database_error_in_one_write_retries_the_group_write_by_write(
    tmp_path: Path, clock: FakeClock
) -> None:
    # A statement failing in SQLite itself (not a refusal a checked body raises)
    # rolls the group's transaction back whole; each write is then applied alone,
    # so the others land and only the one at fault gets the error.
    async with SqliteRunStore(tmp_path / "runs.db", clock=clock) as store:
        leases = [await started_run(store, "r1"), await started_run(store, "r2")]
        saved = json.dumps([*USER, {"role": "assistant", "content": "done"}])

        def save(lease: Any) -> _guarded.Write:
            return _guarded.hot_write(
                "save_transcript", store._dialect, clock(), lease, messages=saved, iteration=1
            )

        def broken_statement(ex: _core.Exec) -> None:
            ex("INSERT INTO no_such_table VALUES (1)", ())

        broken = _guarded.Write(
            "r1", broken_statement, guarded=None, params=(), result=None, touches_run=False
        )
        transactions: list[bool] = []
        inner = store._raw_transaction

        def counted(fn: Any, *, write: bool) -> Any:
            transactions.append(write)
            return inner(fn, write=write)

        store._raw_transaction = counted  # type: ignore[method-assign]
        results = await anyio.to_thread.run_sync(
            store._commit_group, [save(leases[0]), broken, save(leases[1])]
        )
        store._raw_transaction = inner  # type: ignore[method-assign]
        assert transactions == [True] * 4  # the group, then each write alone
        assert isinstance(results[0], outcome.Value)
        assert isinstance(results[2], outcome.Value)
        with pytest.raises(StoreError, match=r"SqliteRunStore: .*no_such_table") as info:
            results[1].unwrap()
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        for run_id in ("r1", "r2"):
            assert (await store.load(run_id)).record.iteration == 1


async def test_a_cancel_while_queued_writes_nothing_and_frees_the_lane(store: RunStore) -> None:
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    lane = Lane(store, hold=hold_all)
    box: dict[str, Any] = {}
    scopes: list[anyio.CancelScope] = []

    async def second() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await start(store, lease, "c2")()
            box["c2"] = "written"
        box["cancelled"] = scope.cancelled_caught

    async with anyio.create_task_group() as tg:
        tg.start_soon(capture, box, "c1", start(store, lease, "c1"))
        await lane.held()  # c1's commit is in its thread; c2 now queues behind it
        tg.start_soon(second)
        await until(lambda: lane.queued() == 1)
        scopes[0].cancel()
        await until(lambda: "cancelled" in box)
        assert lane.queued() == 0  # out of the lane, before c1's commit even ended
        assert "c1" not in box  # c1 still waits for its commit
        lane.release()
    assert box == {"cancelled": True, "c1": box["c1"]}
    assert box["c1"].unwrap().state == "started"
    assert lane.groups == [["start_call"]]
    assert [r.tool_call_id for r in await store.receipts("r1")] == ["c1"]
    # The lane is free: the next write leads a commit of its own.
    await start(store, lease, "c2")()
    assert lane.groups == [["start_call"], ["start_call"]]


async def test_a_cancel_after_the_commit_took_the_write_waits_for_it(store: RunStore) -> None:
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    lane = Lane(store, hold=hold_all)
    returned: list[str] = []

    async def write(call_id: str) -> None:
        await start(store, lease, call_id)()
        returned.append(call_id)  # not reached: the cancel comes first

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as writers:
            writers.start_soon(write, "c1")
            writers.start_soon(write, "c2")
            await lane.held()  # both writes are in the held commit
            scope.cancel()
            for _ in range(50):
                await anyio.lowlevel.cancel_shielded_checkpoint()
            assert lane.queued() == 0
            lane.release()
    assert scope.cancelled_caught
    assert returned == []
    assert lane.groups == [["start_call", "start_call"]]
    # Both landed whole before their writers saw the cancel.
    assert [r.state for r in await store.receipts("r1")] == ["started", "started"]


async def test_closing_the_store_with_writes_waiting_does_not_hang(store_factory: Any) -> None:
    store = store_factory()
    async with store:
        lease = await started_run(store)
        await store.save_turn(lease, iteration=1, assistant=TURN)
        lane = Lane(store, hold=hold_all)
        box: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(capture, box, "c1", start(store, lease, "c1"))
            await lane.held()
            tg.start_soon(capture, box, "c2", start(store, lease, "c2"))
            await until(lambda: lane.queued() == 1)
            await store.aclose()
            lane.release()
    for name in ("c1", "c2"):
        with pytest.raises(StoreError, match="closed"):
            box[name].unwrap()


def scripted(dispatched: list[str]) -> tuple[Any, Any]:
    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(tool_calls=[TURN["tool_calls"][0], TURN["tool_calls"][1]])

    async def run_tool_call(call: Any) -> ToolCallOutcome:
        dispatched.append(tool_call_id(call))
        return ToolCallOutcome(tool_message=answer(tool_call_id(call)))

    return call_model, run_tool_call


def durable_loop(run: DurableRun, call_model: Any, run_tool_call: Any) -> ToolLoop:
    """A three-iteration loop wired to *run* the documented way."""
    return run.tool_loop(call_model=call_model, run_tool_call=run_tool_call, max_iterations=3)


async def test_a_run_writes_four_commits_per_iteration(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    dispatched: list[str] = []
    call_model, run_tool_call = scripted(dispatched)
    lane = Lane(store)
    async with open_durable_run(store, "r1", owner="w1") as run:
        result = await durable_loop(run, call_model, run_tool_call).run()
        await run.finish("completed")
    assert result.reason == "completed"
    assert sorted(dispatched) == ["c1", "c2"]
    assert lane.groups == [
        ["save_turn"],
        ["start_call", "start_call"],
        ["settle_call", "settle_call"],
        ["save_transcript"],
        ["save_transcript"],
    ]


async def test_a_cancel_while_the_batch_receipts_wait_dispatches_nothing(
    store: RunStore,
) -> None:
    await store.create_run("r1", messages=USER)
    dispatched: list[str] = []
    call_model, run_tool_call = scripted(dispatched)
    lane = Lane(store, hold=lambda kinds: "start_call" in kinds)
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            async with open_durable_run(store, "r1", owner="w1") as run:
                loop = durable_loop(run, call_model, run_tool_call)

                async def cancel_when_held() -> None:
                    await lane.held()
                    scope.cancel()
                    lane.release()

                tg.start_soon(cancel_when_held)
                await loop.run()
    assert scope.cancelled_caught
    # The receipts committed (the cautious reading: they may have run), and no
    # tool ran: none was dispatched without its receipt, none after the cancel.
    assert dispatched == []
    assert lane.groups[:2] == [["save_turn"], ["start_call", "start_call"]]
    assert [(r.tool_call_id, r.state) for r in await store.receipts("r1")] == [
        ("c1", "started"),
        ("c2", "started"),
    ]


@pytest.mark.parametrize("loss", ["restarted", "taken", "expired"])
@pytest.mark.parametrize("write", ["save_turn", "start_call", "settle_call", "save_transcript"])
async def test_every_hot_write_is_fenced(
    store: RunStore, clock: FakeClock, write: str, loss: str
) -> None:
    """Each write's one-statement form checks owner, token and expiry, as the checked one."""
    old = await started_run(store)
    await store.save_turn(old, iteration=1, assistant=TURN)
    await store.start_call(old, iteration=1, key=key("r1", "c1"), resumability="repeatable")
    if loss == "restarted":  # the same worker name, restarted: a new token, same owner
        await store.claim_run("r1", owner="w1", ttl=30)
    elif loss == "taken":
        clock.advance(31)
        await store.claim_run("r1", owner="w2", ttl=30)
    else:
        clock.advance(30)
    before = (await store.load("r1"), await store.receipts("r1"))
    attempts: dict[str, Callable[[], Awaitable[Any]]] = {
        "save_turn": lambda: store.save_turn(old, iteration=2, assistant=TURN),
        "start_call": start(store, old, "c2"),
        "settle_call": settle(store, old, "c1"),
        "save_transcript": lambda: store.save_transcript(old, USER * 2, iteration=1),
    }
    with pytest.raises(LeaseLostError, match="expired" if loss == "expired" else "taken"):
        await attempts[write]()
    after = (await store.load("r1"), await store.receipts("r1"))
    assert after == before  # nothing written


async def test_postgres_writes_each_group_in_one_statement(store: RunStore) -> None:
    """No silent fallback: on PostgreSQL the guarded statements themselves write."""
    if not isinstance(store, PostgresRunStore):
        pytest.skip("PostgreSQL writes a group as one guarded statement; SQLite does not")
    decided: list[bool] = []
    inner = store._outcome

    def record(write: _guarded.Write, *, done: bool) -> Any:
        decided.append(done)
        return inner(write, done=done)

    store._outcome = record  # type: ignore[method-assign]
    lease = await started_run(store)
    await store.save_turn(lease, iteration=1, assistant=TURN)
    async with anyio.create_task_group() as tg:
        tg.start_soon(start(store, lease, "c1"))
        tg.start_soon(start(store, lease, "c2"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(settle(store, lease, "c1"))
        tg.start_soon(settle(store, lease, "c2"))
    # A refused write falls back to the checked transaction, which says why.
    with pytest.raises(StoreDataError, match="already settled"):
        await settle(store, lease, "c1")()
    await store.save_transcript(lease, [*USER, TURN, answer("c1"), answer("c2")], iteration=1)
    assert decided == [True] * 5 + [False, True]


# --- a property: a group leaves what the same writes one by one leave ------------------

_CALLS = ("c1", "c2", "c9")  # c9: a call the open turn never made
_LEASES = ("held", "taken", "expired")


@st.composite
def scenarios(draw: st.DrawFn) -> list[tuple[str, str, str, str]]:
    """(run, lease, call, action) writes, each (run, call) at most once, so their
    order cannot matter; 'settle' writes go to calls started beforehand."""
    writes: list[tuple[str, str, str, str]] = []
    for run in ("r0", "r1", "r2"):
        lease = draw(st.sampled_from(_LEASES))
        for call in draw(st.lists(st.sampled_from(_CALLS), unique=True, max_size=3)):
            writes.append((run, lease, call, draw(st.sampled_from(("start", "settle")))))
    return draw(st.permutations(writes))


async def _apply(
    make: Callable[[FakeClock], RunStore],
    writes: list[tuple[str, str, str, str]],
    *,
    together: bool,
) -> tuple[list[str], list[Any], list[int]]:
    clock = FakeClock()
    async with make(clock) as store:
        leases: dict[str, Any] = {}
        for run in ("r0", "r1", "r2"):
            policy = next((w[1] for w in writes if w[0] == run), "held")
            lease = await started_run(store, run)
            await store.save_turn(lease, iteration=1, assistant=TURN)
            for call_id in ("c1", "c2"):  # started already, so a settle has a receipt
                if (run, policy, call_id, "settle") in writes:
                    await start(store, lease, call_id, run)()
            leases[run] = (lease, policy)
        for run, (lease, policy) in leases.items():
            if policy == "held":
                leases[run] = (await store.renew_lease(lease, ttl=100), policy)
        clock.advance(31)  # the others' leases expire
        for run, (_, policy) in leases.items():
            if policy == "taken":
                await store.claim_run(run, owner="w2", ttl=30)
        lane = Lane(store)
        box: dict[int, Any] = {}

        def write(i: int) -> Callable[[], Awaitable[Any]]:
            run, _, call_id, action = writes[i]
            lease = leases[run][0]
            if action == "start":
                return start(store, lease, call_id, run)
            return settle(store, lease, call_id)

        if together:
            async with anyio.create_task_group() as tg:
                for i in range(len(writes)):
                    tg.start_soon(capture, box, i, write(i))
        else:
            for i in range(len(writes)):
                await capture(box, i, write(i))
        kinds = [
            "ok" if isinstance(box[i], outcome.Value) else type(box[i].error).__name__
            for i in range(len(writes))
        ]
        state = [
            [(r.tool_call_id, r.state, r.message) for r in await store.receipts(run)]
            for run in ("r0", "r1", "r2")
        ]
        return kinds, state, [len(group) for group in lane.groups]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=scenarios())
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_group_leaves_what_the_same_writes_one_by_one_leave(
    kind: str, backend: str, tmp_path_factory: pytest.TempPathFactory, writes: Any
) -> None:
    if kind == "postgres":
        dsn = postgres_dsn()

        def make(clock: FakeClock) -> RunStore:
            postgres_dsn()  # emptied for each store
            return PostgresRunStore(dsn, clock=clock)
    else:

        def make(clock: FakeClock) -> RunStore:
            return SqliteRunStore(tmp_path_factory.mktemp("group") / "runs.db", clock=clock)

    grouped = run_on(backend, functools.partial(_apply, make, writes, together=True))
    alone = run_on(backend, functools.partial(_apply, make, writes, together=False))
    assert grouped[:2] == alone[:2]
    assert alone[2] == [1] * len(writes)
    if writes:
        assert grouped[2] == [len(writes)]  # all of them, in one commit
