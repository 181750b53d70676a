"""A reader next to a working worker sees the run as of one moment, never a mix.

The CLI and the web view read a run while its worker writes it. Each read
call is one transaction; the test puts a worker's commit *between the
statements* of every read transaction (a hook on the reader's statements
commits the worker's next write from the reader's own thread, through a
second store on the same database), so a read that is not one snapshot
shows it at once: a run whose status says an open turn and whose open turn is
gone reads as corrupted, or its receipts come from a later moment than its row.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import anyio.from_thread
import pytest

from juno_bind_trio.run import ToolCallReceiptKey, tool_call_args_hash
from juno_bind_trio.store import Lease, ReceiptRecord, RunStore, StoredRun
from juno_bind_trio.store.__main__ import _show
from juno_bind_trio.testing import CrashingStore, SimulatedCrash, run_until_crash
from juno_bind_trio.web import LiveRuns
from juno_bind_trio.web._live_run import _new_run_id

pytestmark = pytest.mark.anyio

USER: list[dict[str, Any]] = [{"role": "user", "content": "book a table"}]
STEPS_PER_ITERATION = 4  # save_turn, start_call, settle_call, save_transcript


def turn(i: int) -> dict[str, Any]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "book", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def answer(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": f"booked {i}"}


def transcript(iterations: int) -> list[dict[str, Any]]:
    messages = list(USER)
    for i in range(1, iterations + 1):
        messages += [turn(i), answer(i)]
    return messages


def receipts_after(steps: int) -> list[tuple[int, str, str]]:
    """Every receipt (iteration, call, state) once the worker made *steps* writes."""
    done, phase = divmod(steps, STEPS_PER_ITERATION)
    found = [(i, f"c{i}", "succeeded") for i in range(1, done + 1)]
    if phase >= 2:
        found.append((done + 1, f"c{done + 1}", "started" if phase == 2 else "succeeded"))
    return found


def expected_load(steps: int) -> tuple[int, int | None, Any, list[Any], list[Any]]:
    """What ``load`` must give once the worker made *steps* writes, and nothing else."""
    done, phase = divmod(steps, STEPS_PER_ITERATION)
    if phase == 0:
        return (done, None, None, transcript(done), [])
    return (
        done,
        done + 1,
        turn(done + 1),
        transcript(done),
        [r for r in receipts_after(steps) if r[0] == done + 1],
    )


def seen(loaded: StoredRun) -> tuple[int, int | None, Any, list[Any], list[Any]]:
    return (
        loaded.record.iteration,
        loaded.record.pending_iteration,
        loaded.pending_turn,
        loaded.messages,
        [(r.iteration, r.tool_call_id, r.state) for r in loaded.receipts],
    )


class Worker:
    """The run's worker: each ``step()`` commits the next write of its loop."""

    def __init__(self, store: RunStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease
        self.steps = 0

    async def step(self) -> None:
        i, phase = divmod(self.steps, STEPS_PER_ITERATION)
        i += 1
        if phase == 0:
            await self.store.save_turn(self.lease, iteration=i, assistant=turn(i))
        elif phase == 1:
            key = ToolCallReceiptKey(
                run_id=self.lease.run_id,
                tool_call_id=f"c{i}",
                tool_name="book",
                args_hash=tool_call_args_hash({}),
            )
            await self.store.start_call(self.lease, iteration=i, key=key, resumability="repeatable")
        elif phase == 2:
            await self.store.settle_call(
                self.lease, iteration=i, tool_call_id=f"c{i}", state="succeeded", message=answer(i)
            )
        else:
            await self.store.save_transcript(self.lease, transcript(i), iteration=i)
        self.steps += 1


def interleave_worker(reader: RunStore, worker: Worker, starts: list[int]) -> None:
    """After every statement of each of *reader*'s read transactions, the worker commits
    its next write. *starts* collects how many writes were committed when each read
    transaction ran its first statement: the moment it must show."""
    inner: Callable[..., Any] = reader._transaction  # type: ignore[attr-defined]

    def transaction(fn: Callable[[Any], Any], *, write: bool) -> Any:
        if write:
            return inner(fn, write=write)

        def body(ex: Callable[[str, Any], Any]) -> Any:
            starts.append(worker.steps)

            def ex_then_worker_writes(sql: str, params: Any) -> Any:
                cursor = ex(sql, params)
                anyio.from_thread.run(worker.step)  # committed before the next statement
                return cursor

            return fn(ex_then_worker_writes)

        return inner(body, write=write)

    reader._transaction = transaction  # type: ignore[attr-defined]


async def test_a_read_next_to_a_working_worker_sees_one_moment(
    store: RunStore, store_factory: Callable[[], RunStore]
) -> None:
    await store.create_run("r1", messages=USER)
    async with store_factory() as worker_store:
        lease = await worker_store.claim_run("r1", owner="w1", ttl=300)
        worker = Worker(worker_store, lease)
        starts: list[int] = []
        interleave_worker(store, worker, starts)
        loads: list[tuple[int, StoredRun]] = []
        receipt_reads: list[tuple[int, list[tuple[int, str, str]]]] = []
        for n in range(32):
            await steps_to_phase(worker, n)
            if n % 3 == 2:
                found = receipts_seen(await store.receipts("r1"))  # the read sets starts[-1]
                receipt_reads.append((starts[-1], found))
            else:
                loaded = await store.load("r1")  # never StoreDataError
                loads.append((starts[-1], loaded))
        assert worker.steps > len(starts)  # the worker wrote inside the reads
    for steps, loaded in loads:
        assert seen(loaded) == expected_load(steps), f"load after {steps} writes"
    for steps, found_receipts in receipt_reads:
        assert found_receipts == receipts_after(steps), f"receipts after {steps} writes"
    # Every point of the worker's loop came up under a load: with the turn open
    # and not, with its receipt absent, started and settled.
    phases = {steps % STEPS_PER_ITERATION for steps, _ in loads}
    assert phases == set(range(STEPS_PER_ITERATION)), phases


async def steps_to_phase(worker: Worker, n: int) -> None:
    while worker.steps % STEPS_PER_ITERATION != n % STEPS_PER_ITERATION:
        await worker.step()  # each read starts at each point of the loop in turn


def receipts_seen(receipts: list[ReceiptRecord]) -> list[tuple[int, str, str]]:
    return [(r.iteration, r.tool_call_id, r.state) for r in receipts]


async def test_a_run_and_all_its_receipts_are_read_as_of_one_moment(
    store: RunStore, store_factory: Callable[[], RunStore]
) -> None:
    await store.create_run("r1", messages=USER)
    async with store_factory() as worker_store:
        lease = await worker_store.claim_run("r1", owner="w1", ttl=300)
        worker = Worker(worker_store, lease)
        starts: list[int] = []
        interleave_worker(store, worker, starts)
        together: list[tuple[int, StoredRun, list[ReceiptRecord]]] = []
        apart: list[tuple[int, StoredRun, list[ReceiptRecord]]] = []
        for n in range(16):
            await steps_to_phase(worker, n)
            loaded, receipts = await store.load_with_receipts("r1")
            together.append((starts[-1], loaded, receipts))
            # The same, read as two calls: the receipts come from a later moment.
            await steps_to_phase(worker, n)
            loaded = await store.load("r1")
            apart.append((starts[-1], loaded, await store.receipts("r1")))
    for steps, loaded, receipts in together:
        assert seen(loaded) == expected_load(steps), f"load after {steps} writes"
        assert receipts_seen(receipts) == receipts_after(steps), f"receipts after {steps} writes"
    assert {steps % STEPS_PER_ITERATION for steps, _, _ in together} == set(
        range(STEPS_PER_ITERATION)
    )
    # What this test would catch: two reads let receipts newer than the run through.
    assert any(receipts_seen(receipts) != receipts_after(steps) for steps, _, receipts in apart)


def calls_after(steps: int) -> list[tuple[str, str]]:
    """The web view's tool calls (id, status) once the worker made *steps* writes."""
    done, phase = divmod(steps, STEPS_PER_ITERATION)
    calls = [(f"c{i}", "finished") for i in range(1, done + 1)]
    if phase:  # the open turn's call: no receipt yet, started, settled
        calls.append((f"c{done + 1}", ("not_run", "running", "finished")[phase - 1]))
    return calls


class NoAgent:
    """A run source that must never be asked to run: these views only read the store."""

    def open_run(self, prompt: str, *, run_id: str | None = None) -> Any:
        raise AssertionError("a run was started")


async def test_the_cli_and_the_web_view_show_a_run_as_of_one_moment(
    store: RunStore, store_factory: Callable[[], RunStore]
) -> None:
    run_id = _new_run_id("w1")  # an id the web view looks up in the store
    await store.create_run(run_id, messages=USER)
    async with store_factory() as worker_store:
        lease = await worker_store.claim_run(run_id, owner="w1", ttl=300)
        worker = Worker(worker_store, lease)
        starts: list[int] = []
        interleave_worker(store, worker, starts)
        shown: list[tuple[int, dict[str, Any]]] = []
        views: list[tuple[int, dict[str, Any]]] = []
        live_runs = LiveRuns(NoAgent(), store=store)
        async with live_runs.running():
            for n in range(8):
                await steps_to_phase(worker, n)
                out = io.StringIO()
                await _show(store, run_id, out)
                shown.append((starts[-1], json.loads(out.getvalue())))
                await steps_to_phase(worker, n)
                found = await live_runs.find(run_id)
                assert found is not None
                views.append((starts[-1], found.snapshot()))
    for steps, document in shown:
        done, phase = divmod(steps, STEPS_PER_ITERATION)
        assert (document["run"]["iteration"], document["open_turn"]) == (
            done,
            turn(done + 1) if phase else None,
        ), f"show after {steps} writes"
        assert [
            (r["iteration"], r["tool_call_id"], r["state"]) for r in document["receipts"]
        ] == receipts_after(steps), f"show after {steps} writes"
    for steps, snapshot in views:
        assert snapshot["stored"]["iteration"] == steps // STEPS_PER_ITERATION
        assert [(c["toolCallId"], c["status"]) for c in snapshot["toolCalls"]] == calls_after(
            steps
        ), f"web view after {steps} writes"
    assert {steps % STEPS_PER_ITERATION for steps, _ in views} == set(range(STEPS_PER_ITERATION))


async def test_the_crashing_store_reads_through_until_it_crashes(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    crashing = CrashingStore(store, "after_model_answer")
    assert await crashing.load_with_receipts("r1") == await store.load_with_receipts("r1")
    lease = await crashing.claim_run("r1", owner="w1", ttl=300)
    assert await run_until_crash(lambda: crashing.save_turn(lease, iteration=1, assistant=turn(1)))
    with pytest.raises(SimulatedCrash):
        await crashing.load_with_receipts("r1")
