"""The hot paths of the run mechanics, each against a bare baseline measured in the same run.

* ``canonical_json`` of a typical tool call's arguments (a dozen keys, a
  nested object, a list, floats, non-ASCII text) against the standard
  library's ``json.dumps(sort_keys=True, separators=(",", ":"),
  ensure_ascii=False)``, which is compact and sorted but neither refuses NaN
  with a path nor writes numbers and key order as JavaScript does.
* ``tool_call_args_hash`` against ``hashlib.sha256(json.dumps(...)).hexdigest()``.
* ``CoalescedHeartbeat.beat`` (called per progress report, so per streamed
  token in a chatty host) against the bare minimum it does: store the value
  and set an ``anyio.Event`` that is already set.
* ``decide_tool_call_receipt`` against a bare dict lookup.

Times are this process's CPU time, best of ``--repeat`` runs.

    python benchmarks/bench_run_mechanics.py [--ops N] [--repeat R]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import anyio

from juno_bind_trio.run import (
    canonical_json,
    decide_tool_call_receipt,
    open_coalesced_heartbeat,
    tool_call_args_hash,
)

ARGS: dict[str, Any] = {
    "to": ["ann@example.com", "bob@example.com"],
    "subject": "Quarterly numbers — draft",
    "body": "Hi both,\nattached are the figures we discussed. Revenue is up 4.5%.",
    "priority": 2,
    "send_at": None,
    "track_opens": True,
    "attachments": [{"name": "q3.xlsx", "size_kb": 182.75, "inline": False}],
    "labels": ["finance", "q3"],
    "retry": {"max": 3, "backoff": 1.5},
    "locale": "de-DE",
    "signature": "— Ann",
    "cc": [],
}


def best_ns_per_op(fn: Callable[[], object], ops: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time_ns()
        for _ in range(ops):
            fn()
        best = min(best, (time.process_time_ns() - start) / ops)
    return best


def report(name: str, ours: float, baseline: float, baseline_name: str) -> None:
    print(
        f"{name:<28} {ours:9.0f} ns/op   {baseline_name:<34} {baseline:9.0f} ns/op"
        f"   ratio {ours / baseline:5.2f}x"
    )


def bench_sync(ops: int, repeat: int) -> None:
    def stdlib_dumps() -> str:
        return json.dumps(ARGS, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def stdlib_hash() -> str:
        return hashlib.sha256(stdlib_dumps().encode()).hexdigest()

    table = {("started", "non_repeatable"): "refuse"}

    def bare_lookup() -> object:
        return table[("started", "non_repeatable")]

    assert json.loads(canonical_json(ARGS)) == ARGS
    report(
        "canonical_json",
        best_ns_per_op(lambda: canonical_json(ARGS), ops, repeat),
        best_ns_per_op(stdlib_dumps, ops, repeat),
        "json.dumps(sort_keys, compact)",
    )
    report(
        "tool_call_args_hash",
        best_ns_per_op(lambda: tool_call_args_hash(ARGS), ops, repeat),
        best_ns_per_op(stdlib_hash, ops, repeat),
        "sha256(json.dumps(...))",
    )
    report(
        "decide_tool_call_receipt",
        best_ns_per_op(lambda: decide_tool_call_receipt("started", "non_repeatable"), ops, repeat),
        best_ns_per_op(bare_lookup, ops, repeat),
        "dict lookup",
    )


async def bench_beat(ops: int, repeat: int) -> None:
    async def write(progress: object) -> None:
        await anyio.lowlevel.checkpoint()

    class Bare:
        value: object = None

    bare = Bare()
    event = anyio.Event()
    event.set()

    def bare_beat(progress: object) -> None:
        bare.value = progress
        event.set()

    async with open_coalesced_heartbeat(write, interval=3600) as heartbeat:
        report(
            "CoalescedHeartbeat.beat",
            best_ns_per_op(lambda: heartbeat.beat(1), ops, repeat),
            best_ns_per_op(lambda: bare_beat(1), ops, repeat),
            "store + Event.set()",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    bench_sync(options.ops, options.repeat)
    anyio.run(bench_beat, options.ops, options.repeat, backend="trio")


if __name__ == "__main__":
    main()
