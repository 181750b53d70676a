"""ToolCallAccumulator cost per delta and StreamWatchdog cost per chunk, against bare loops.

Accumulator baseline, measured in the same run: a bare loop over the same
wire-dict deltas that appends each argument fragment to a list per index, the
least any assembly can cost. Watchdog baseline: a bare loop over the same
chunks that appends each to a list, inside the same event loop; the watchdog
loop does that plus ``watchdog.answer()``. For scale, the script also times
one ``anyio.lowlevel.checkpoint()`` per chunk, the least a real async stream
pays to deliver one. Prints ns/op and the ratios.

    python benchmarks/bench_completion.py [--deltas N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
from openai.types.chat.chat_completion_chunk import (
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)

from juno_bind_trio.completion import StreamWatchdog, ToolCallAccumulator

PARALLEL_CALLS = 4


def make_deltas(n: int) -> list[dict[str, Any]]:
    """*n* deltas of PARALLEL_CALLS interleaved calls: a header each, then fragments."""
    deltas: list[dict[str, Any]] = [
        {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "search", "arguments": ""},
        }
        for i in range(PARALLEL_CALLS)
    ]
    while len(deltas) < n:
        deltas.append({"index": len(deltas) % PARALLEL_CALLS, "function": {"arguments": "ab"}})
    return deltas


def as_objects(deltas: list[dict[str, Any]]) -> list[ChoiceDeltaToolCall]:
    return [
        ChoiceDeltaToolCall(
            index=d["index"],
            id=d.get("id"),
            type=d.get("type"),
            function=ChoiceDeltaToolCallFunction(**d["function"]),
        )
        for d in deltas
    ]


def bare_assembly(deltas: list[dict[str, Any]]) -> float:
    parts: dict[int, list[str]] = {}
    start = time.perf_counter_ns()
    for d in deltas:
        fragments = parts.get(d["index"])
        if fragments is None:
            fragments = parts[d["index"]] = []
        fragments.append(d["function"]["arguments"])
    return time.perf_counter_ns() - start


def accumulate(deltas: list[Any]) -> float:
    acc = ToolCallAccumulator()
    add = acc.add
    start = time.perf_counter_ns()
    for d in deltas:
        add(d)
    elapsed = time.perf_counter_ns() - start
    assert len(acc.calls()) == PARALLEL_CALLS
    return elapsed


def best(fn: Callable[[], float], repeat: int) -> float:
    gc.collect()
    gc.disable()
    try:
        return min(fn() for _ in range(repeat))
    finally:
        gc.enable()


async def watchdog_timings(chunks: list[str], repeat: int) -> tuple[float, float, float]:
    async def bare() -> float:
        out: list[str] = []
        append = out.append
        start = time.perf_counter_ns()
        for chunk in chunks:
            append(chunk)
        return time.perf_counter_ns() - start

    async def watched() -> float:
        out: list[str] = []
        append = out.append
        start = time.perf_counter_ns()
        with StreamWatchdog() as watchdog:
            answer = watchdog.answer
            for chunk in chunks:
                append(chunk)
                answer()
        return time.perf_counter_ns() - start

    async def checkpointed() -> float:
        out: list[str] = []
        append = out.append
        checkpoint = anyio.lowlevel.checkpoint
        start = time.perf_counter_ns()
        for chunk in chunks:
            await checkpoint()
            append(chunk)
        return time.perf_counter_ns() - start

    base = wd = cp = float("inf")
    gc.collect()
    gc.disable()
    try:
        # Interleaved, so drift in machine load hits all three alike.
        for _ in range(repeat):
            base = min(base, await bare())
            wd = min(wd, await watched())
            cp = min(cp, await checkpointed())
    finally:
        gc.enable()
    return base, wd, cp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    n = args.deltas
    deltas = make_deltas(n)
    objects = as_objects(deltas)

    base = dicts = objs = float("inf")
    for _ in range(args.repeat):
        base = min(base, best(lambda: bare_assembly(deltas), 1))
        dicts = min(dicts, best(lambda: accumulate(deltas), 1))
        objs = min(objs, best(lambda: accumulate(objects), 1))
    print(f"tool-call deltas per run:       {n} ({PARALLEL_CALLS} interleaved calls)")
    print(f"baseline dict-of-lists append   {base / n:8.1f} ns/op")
    print(f"ToolCallAccumulator.add(dict)   {dicts / n:8.1f} ns/op   ratio {dicts / base:.2f}x")
    print(f"ToolCallAccumulator.add(sdk)    {objs / n:8.1f} ns/op   ratio {objs / base:.2f}x")

    chunks = ["tok"] * n
    for backend in ("trio", "asyncio"):
        bare, watched, checkpointed = anyio.run(
            watchdog_timings, chunks, args.repeat, backend=backend
        )
        overhead = (watched - bare) / n
        print(f"[{backend}] chunks per run:          {n}")
        print(f"[{backend}] baseline list append      {bare / n:8.1f} ns/op")
        print(
            f"[{backend}] + StreamWatchdog.answer() {watched / n:8.1f} ns/op   "
            f"ratio {watched / bare:.2f}x"
        )
        print(
            f"[{backend}] one checkpoint per chunk  {checkpointed / n:8.1f} ns/op   "
            f"watchdog overhead = {overhead / (checkpointed / n):.2f} checkpoints"
        )


if __name__ == "__main__":
    main()
