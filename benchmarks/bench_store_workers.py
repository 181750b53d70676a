"""The run store's throughput with 1, 2, 4 and 8 ``serve_runs`` workers on PostgreSQL.

Each sample creates *R* pending runs, then starts *W* workers
(``serve_runs(..., stop_when_idle=True)``) in one process, sharing one
``PostgresRunStore`` (a pool of 8 connections, so the pool is not what
limits 8 workers), and times them until every run is done. A run is two
iterations of a scripted model asking for two tool calls each, then an
answer: six store writes an iteration, grouped into fewer commits. Two kinds
of tools:

* **I/O-bound**: each call sleeps 50 ms (``anyio.sleep``), as a tool waiting
  on a network service does; a run spends at least 100 ms in its tools.
* **no-op**: each call returns at once; the store and the loop are all there
  is.

Printed per worker count: runs per second (median of the rounds), its ratio
to one worker's, the store's commits per run (counted by the store), and
the share of the wall time this process spent on the CPU (near 100 %: the
one process is the limit, not the database).
Rounds are interleaved across the worker counts. Needs
``JUNO_TEST_POSTGRES_DSN``; its tables are dropped and made again.

    python benchmarks/bench_store_workers.py [--runs R] [--rounds N] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from typing import Any

import anyio

from juno_bind_trio.loop import ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import tool_call_id
from juno_bind_trio.store import DurableRun, PostgresRunStore, serve_runs

WORKERS = (1, 2, 4, 8)
ITERATIONS = 2
TOOL_SECONDS = 0.05


def script(tool_seconds: float) -> Any:
    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > ITERATIONS:
            return ModelTurnResult(content="done")
        i = turn.iteration
        calls = [
            {"id": f"c{i}a", "type": "function", "function": {"name": "look", "arguments": "{}"}},
            {"id": f"c{i}b", "type": "function", "function": {"name": "send", "arguments": "{}"}},
        ]
        return ModelTurnResult(tool_calls=calls)

    async def run_tool_call(call: Any) -> ToolCallOutcome:
        if tool_seconds:
            await anyio.sleep(tool_seconds)
        return ToolCallOutcome(
            tool_message={"role": "tool", "tool_call_id": tool_call_id(call), "content": "ok"}
        )

    return call_model, run_tool_call


async def sample(
    store: PostgresRunStore, workers: int, runs: int, tool_seconds: float
) -> tuple[float, float]:
    """Runs per second for *runs* runs over *workers* workers, and this process's CPU share."""
    call_model, run_tool_call = script(tool_seconds)

    async def handle(run: DurableRun) -> None:
        await run.finish_open_turn(run_tool_call)
        loop = ToolLoop(
            state=run.state,
            max_iterations=ITERATIONS + 1,
            call_model=run.wrap_call_model(call_model),
            run_tool_call=run.wrap_tool_call(run_tool_call),
            save_session=run.save_session,
            stop=run.stop,
        )
        await loop.run()
        await run.finish("completed")

    for _ in range(runs):
        await store.create_run(uuid.uuid4().hex, messages=[{"role": "user", "content": "go"}])
    handled: list[int] = []

    async def worker(index: int) -> None:
        handled.append(
            await serve_runs(
                store, handle, owner=f"w{index}", poll_interval=0.01, stop_when_idle=True
            )
        )

    start, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for index in range(workers):
            tg.start_soon(worker, index)
    elapsed = time.perf_counter() - start
    assert sum(handled) == runs, handled
    return runs / elapsed, (time.process_time() - cpu) / elapsed


def reset_postgres(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("juno_receipts", "juno_runs", "juno_schema"):
            conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")


async def main(runs: int, rounds: int) -> None:
    dsn = os.environ.get("JUNO_TEST_POSTGRES_DSN")
    if not dsn:
        sys.exit("set JUNO_TEST_POSTGRES_DSN")
    reset_postgres(dsn)
    async with PostgresRunStore(dsn, max_connections=8) as store:
        for label, seconds in (
            ("I/O-bound tools (50 ms each)", TOOL_SECONDS),
            ("no-op tools", 0.0),
        ):
            await sample(store, 2, runs, seconds)  # warm-up: pool filled, statements prepared
            rates: dict[int, list[float]] = {w: [] for w in WORKERS}
            busy: dict[int, list[float]] = {w: [] for w in WORKERS}
            commits: dict[int, int] = dict.fromkeys(WORKERS, 0)
            for index in range(rounds):
                order = list(WORKERS) if index % 2 == 0 else list(reversed(WORKERS))
                for workers in order:
                    before = store._commits  # the store's own count (private, read-only here)
                    rate, share = await sample(store, workers, runs, seconds)
                    rates[workers].append(rate)
                    busy[workers].append(share)
                    commits[workers] += store._commits - before
            one = statistics.median(rates[1])
            print(f"{label}, {runs} runs per sample, median of {rounds} interleaved rounds:")
            for workers in WORKERS:
                rate = statistics.median(rates[workers])
                print(
                    f"  {workers} worker(s): {rate:7.1f} runs/s  ({rate / one:4.2f}x one worker), "
                    f"{commits[workers] / (rounds * runs):5.1f} commits/run, "
                    f"this process on the CPU {statistics.median(busy[workers]):4.0%} of the time"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args()
    anyio.run(main, args.runs, args.rounds, backend=args.backend)
