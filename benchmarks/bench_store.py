"""The run store's cost per loop iteration, and runs per second, against a bare loop.

One iteration here is a model turn asking for two tool calls, both run, and
the iteration saved: with a store that is six writes (the open turn, two
"started" receipts, two settled receipts, the transcript), which group commit
makes four commits (the two receipts of each kind pending together share
one); the commits per iteration are printed. Baseline,
measured in the same run: the same ``ToolLoop`` with no store (a scripted
model and tools that return at once, so the loop's own cost is all there is).
The store's cost per iteration is the difference, divided by the iterations.
Rounds are interleaved (bare, SQLite, PostgreSQL, bare, ...); the median is
reported. PostgreSQL runs only when JUNO_TEST_POSTGRES_DSN is set; it is
measured with ``synchronous_commit`` on (every commit waits for its WAL
flush) and off.

    python benchmarks/bench_store.py [--iterations N] [--rounds R] [--runs K]
                                     [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from typing import Any

import anyio

from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import tool_call_id
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore, open_durable_run


def script(iterations: int) -> Any:
    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > iterations:
            return ModelTurnResult(content="done")
        i = turn.iteration
        calls = [
            {"id": f"c{i}a", "type": "function", "function": {"name": "look", "arguments": "{}"}},
            {"id": f"c{i}b", "type": "function", "function": {"name": "send", "arguments": "{}"}},
        ]
        return ModelTurnResult(tool_calls=calls)

    async def run_tool_call(call: Any) -> ToolCallOutcome:
        return ToolCallOutcome(
            tool_message={"role": "tool", "tool_call_id": tool_call_id(call), "content": "ok"}
        )

    return call_model, run_tool_call


async def bare(iterations: int) -> float:
    call_model, run_tool_call = script(iterations)
    loop = ToolLoop(
        state=LoopState([{"role": "user", "content": "go"}]),
        max_iterations=iterations + 1,
        call_model=call_model,
        run_tool_call=run_tool_call,
    )
    start = time.perf_counter()
    await loop.run()
    return time.perf_counter() - start


async def stored(store: RunStore, iterations: int) -> float:
    call_model, run_tool_call = script(iterations)
    run_id = uuid.uuid4().hex
    await store.create_run(run_id, messages=[{"role": "user", "content": "go"}])
    async with open_durable_run(store, run_id, owner="bench") as run:
        loop = ToolLoop(
            state=run.state,
            max_iterations=iterations + 1,
            call_model=run.wrap_call_model(call_model),
            run_tool_call=run.wrap_tool_call(run_tool_call),
            save_session=run.save_session,
            stop=run.stop,
        )
        start = time.perf_counter()
        await loop.run()
        elapsed = time.perf_counter() - start
        await run.finish("completed")
    return elapsed


async def whole_runs(store: RunStore, runs: int) -> float:
    """Runs per second on one worker: create, claim, three iterations, release."""
    start = time.perf_counter()
    for _ in range(runs):
        await stored(store, 2)
    return runs / (time.perf_counter() - start)


def reset_postgres(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("juno_receipts", "juno_runs", "juno_schema"):
            conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")


async def main(iterations: int, rounds: int, runs: int) -> None:
    stores: dict[str, RunStore] = {}
    tmp = tempfile.mkdtemp()
    stores["sqlite"] = SqliteRunStore(os.path.join(tmp, "bench.db"))
    dsn = os.environ.get("JUNO_TEST_POSTGRES_DSN")
    if dsn:
        reset_postgres(dsn)
        sep = "&" if "?" in dsn else "?"
        stores["postgres (synchronous_commit=on)"] = PostgresRunStore(
            f"{dsn}{sep}options=-c%20synchronous_commit%3Don"
        )
        stores["postgres (synchronous_commit=off)"] = PostgresRunStore(
            f"{dsn}{sep}options=-c%20synchronous_commit%3Doff"
        )
    for store in stores.values():
        await store.__aenter__()
    try:
        times: dict[str, list[float]] = {"bare": [], **{name: [] for name in stores}}
        commits: dict[str, int] = dict.fromkeys(stores, 0)
        for _ in range(rounds):
            times["bare"].append(await bare(iterations))
            for name, store in stores.items():
                before = store._commits  # type: ignore[attr-defined]
                times[name].append(await stored(store, iterations))
                commits[name] += store._commits - before  # type: ignore[attr-defined]
        base = statistics.median(times["bare"])
        print(f"{iterations} iterations per run, {rounds} interleaved rounds, medians:")
        print(f"  bare loop                         {base / iterations * 1e6:9.1f} us/iteration")
        for name in stores:
            med = statistics.median(times[name])
            cost = (med - base) / iterations
            print(
                f"  {name:<33} {med / iterations * 1e6:9.1f} us/iteration, "
                f"store {cost * 1e3:6.3f} ms/iteration, ratio {med / base:6.1f}x, "
                f"{commits[name] / (rounds * iterations):.2f} commits/iteration"
            )
        for name, store in stores.items():
            print(f"  {name:<33} {await whole_runs(store, runs):7.1f} runs/s (one worker)")
    finally:
        for store in stores.values():
            await store.__aexit__(None, None, None)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args()
    anyio.run(main, args.iterations, args.rounds, args.runs, backend=args.backend)
