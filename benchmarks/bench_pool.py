"""The tool pool's cost per call, against two bare Trio pools written here.

20,000 no-op calls (each awaits one ``trio.lowlevel.checkpoint()``) spread
over 20 tools, five workers a tool, all under ``trio.run``. Measured in the
same run:

* **bare worker pool**: a Trio nursery with five worker tasks per tool that
  claim from a shared per-tool iterator and settle each call as an
  ``outcome.Value`` / ``outcome.Error``: the same grouping, the same result
  type, and nothing else (no validation, no states, no stop, no cancel
  bookkeeping). The target is the pool at most 1.3x this.
* **bare worker pool, raw values**: the same without ``outcome``, the floor.
* **task per call + CapacityLimiter**: one task per call, each holding its
  tool's ``trio.CapacityLimiter(5)`` around the call, the other obvious way.

Every variant includes grouping the calls by tool name in its time, and
``run_tool_calls_pooled_by_tool`` includes building and checking the batch.
Times are this process's CPU time (the work is single-threaded and never
blocks), so other load on the machine does not land in one variant's figure.

    python benchmarks/bench_pool.py [--calls N] [--tools K] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import outcome
import trio

from juno_bind_trio.run import run_tool_calls_pooled_by_tool

LIMIT = 5
Call = dict[str, Any]


async def noop_tool(call: Any) -> object:
    await trio.lowlevel.checkpoint()
    return None


def group_by_tool(calls: list[Call]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for index, call in enumerate(calls):
        groups.setdefault(call["function"]["name"], []).append(index)
    return groups


async def bare_worker_pool(calls: list[Call]) -> list[Any]:
    results: list[Any] = [None] * len(calls)

    async def work(claims: Iterator[int]) -> None:
        for index in claims:
            try:
                results[index] = outcome.Value(await noop_tool(calls[index]))
            except Exception as exc:
                results[index] = outcome.Error(exc)

    async with trio.open_nursery() as nursery:
        for indices in group_by_tool(calls).values():
            claims = iter(indices)
            for _ in range(min(LIMIT, len(indices))):
                nursery.start_soon(work, claims)
    return results


async def bare_worker_pool_raw(calls: list[Call]) -> list[Any]:
    results: list[Any] = [None] * len(calls)

    async def work(claims: Iterator[int]) -> None:
        for index in claims:
            try:
                results[index] = await noop_tool(calls[index])
            except Exception as exc:
                results[index] = exc

    async with trio.open_nursery() as nursery:
        for indices in group_by_tool(calls).values():
            claims = iter(indices)
            for _ in range(min(LIMIT, len(indices))):
                nursery.start_soon(work, claims)
    return results


async def task_per_call(calls: list[Call]) -> list[Any]:
    results: list[Any] = [None] * len(calls)
    groups = group_by_tool(calls)
    limiters = {name: trio.CapacityLimiter(LIMIT) for name in groups}

    async def one(index: int, limiter: trio.CapacityLimiter) -> None:
        async with limiter:
            try:
                results[index] = outcome.Value(await noop_tool(calls[index]))
            except Exception as exc:
                results[index] = outcome.Error(exc)

    async with trio.open_nursery() as nursery:
        for name, indices in groups.items():
            limiter = limiters[name]
            for index in indices:
                nursery.start_soon(one, index, limiter)
    return results


async def pooled(calls: list[Call]) -> list[Any]:
    return await run_tool_calls_pooled_by_tool(calls, noop_tool)


def make_calls(n: int, tools: int) -> list[Call]:
    return [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": f"tool_{i % tools}", "arguments": "{}"},
        }
        for i in range(n)
    ]


def measure(fn: Callable[[list[Call]], Awaitable[list[Any]]], calls: list[Call]) -> int:
    async def main() -> int:
        start = time.process_time_ns()
        results = await fn(calls)
        elapsed = time.process_time_ns() - start
        assert len(results) == len(calls)
        return elapsed

    return trio.run(main)


def best(fn: Callable[[list[Call]], Awaitable[list[Any]]], calls: list[Call], repeat: int) -> int:
    gc.collect()
    gc.disable()
    try:
        return min(measure(fn, calls) for _ in range(repeat))
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    calls = make_calls(args.calls, args.tools)
    variants: list[tuple[str, Callable[[list[Call]], Awaitable[list[Any]]]]] = [
        ("bare worker pool (outcome results)", bare_worker_pool),
        ("bare worker pool (raw values)", bare_worker_pool_raw),
        ("task per call + CapacityLimiter", task_per_call),
        ("run_tool_calls_pooled_by_tool", pooled),
    ]
    # Interleaved rounds, best of each: a machine that slows down mid-run
    # slows every variant alike instead of whichever happened to run last.
    totals = {name: float("inf") for name, _ in variants}
    for _ in range(args.repeat):
        for name, fn in variants:
            totals[name] = min(totals[name], best(fn, calls, 1))
    base = totals["bare worker pool (outcome results)"]
    print(f"{args.calls} no-op calls over {args.tools} tools, {LIMIT} workers a tool, trio.run")
    for name, _ in variants:
        per_call = totals[name] / args.calls
        print(f"{name:38} {per_call:8.0f} ns/call  {totals[name] / base:5.2f}x")
    ratio = totals["run_tool_calls_pooled_by_tool"] / base
    print(f"pool / bare worker pool: {ratio:.2f}x (target <= 1.30)")


if __name__ == "__main__":
    main()
