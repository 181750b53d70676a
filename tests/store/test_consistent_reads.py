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

from collections.abc import Callable
from typing import Any

import anyio.from_thread
import pytest

from juno_bind_trio.run import ToolCallReceiptKey, tool_call_args_hash
from juno_bind_trio.store import Lease, RunStore, StoredRun

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
            while worker.steps % STEPS_PER_ITERATION != n % STEPS_PER_ITERATION:
                await worker.step()  # each read starts at each point of the loop in turn
            if n % 3 == 2:
                found = await store.receipts("r1")
                receipt_reads.append(
                    (starts[-1], [(r.iteration, r.tool_call_id, r.state) for r in found])
                )
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
