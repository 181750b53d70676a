"""What a resume with decisions costs the store, against a plain resume of the same run.

A run suspends on two calls: a refund that needs an approval and a date the
host picks (an external tool), next to a lookup that ran. Three ways to go on,
each from a fresh copy of that suspended run:

* **plain**: the decisions were recorded earlier (by another process, say, or
  a resume that crashed); ``agent.resume(run_id)`` finds them with the run;
* **decided**: ``agent.resume(run_id, approvals={"c1": True}, results={"c3": ...})``;
* **corrected**: the same with ``Approve(arguments=...)``, whose arguments are
  validated against the tool, which needs the call's tool: one read first.

The store is SQLite with every transaction and statement it runs counted
(``BEGIN`` and ``COMMIT`` not included; a group commit's savepoints are). The
counts are exact and the same on every machine. The times are medians over
interleaved rounds (plain, decided, corrected, plain, ...), each a whole resume
(the store opened by the host, the model and tools scripted and instant), and
the ratio is against plain in the same round.

    python benchmarks/bench_approvals.py [--rounds R] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from juno_bind_trio import Approve, ExternalTool
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import CallDecision, SqliteRunStore

T = TypeVar("T")


class Counter:
    """Counts a SQLite store's transactions (reads, writes) and statements while on.

    It wraps the store's one transaction path (every read, write and group
    commit goes through it) on the instance: the store class itself is final.
    """

    def __init__(self, store: SqliteRunStore) -> None:
        self.on = False
        self.reads = self.writes = self.statements = 0
        inner = store._raw_transaction

        def counted_transaction(fn: Callable[[Any], T], *, write: bool) -> T:
            if not self.on:
                return inner(fn, write=write)
            if write:
                self.writes += 1
            else:
                self.reads += 1

            def counted(ex: Any) -> T:
                def each(sql: str, params: Any) -> Any:
                    self.statements += 1
                    return ex(sql, params)

                return fn(each)

            return inner(counted, write=write)

        store._raw_transaction = counted_transaction  # type: ignore[method-assign]

    def start(self) -> None:
        self.reads = self.writes = self.statements = 0
        self.on = True

    def stop(self) -> tuple[int, int, int]:
        self.on = False
        return self.reads, self.writes, self.statements


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


async def model(turn: ModelTurn) -> ModelTurnResult:
    if not any(m.get("role") == "assistant" for m in turn.messages):
        return ModelTurnResult(
            tool_calls=(
                call("c1", "refund", amount=500),
                call("c2", "lookup", order="17"),
                call("c3", "pick", day="mon"),
            )
        )
    return ModelTurnResult(content="done")


@tool(requires_approval=True)
async def refund(amount: int) -> str:
    """Refund money."""
    return f"refunded {amount}"


@tool
async def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}"


TOOLS = [refund, lookup, ExternalTool("pick", {"type": "object"})]


async def one(
    store: SqliteRunStore, counter: Counter, how: str
) -> tuple[float, tuple[int, int, int]]:
    agent = Agent(model, tools=TOOLS, store=store, store_owner="bench")
    run_id = uuid.uuid4().hex
    first = await agent.run("refund order 17", run_id=run_id)
    assert first.reason == "suspended"
    if how == "plain":
        await store.decide_calls(
            run_id,
            {"c1": CallDecision(kind="approved"), "c3": CallDecision(kind="result", answer="tue")},
        )
    approvals: dict[str, Any] = {}
    if how == "decided":
        approvals = {"c1": True}
    elif how == "corrected":
        approvals = {"c1": Approve(arguments={"amount": 100})}
    results = {} if how == "plain" else {"c3": "tue"}
    counter.start()
    began = time.perf_counter()
    done = await agent.resume(run_id, approvals=approvals or None, results=results or None)
    elapsed = time.perf_counter() - began
    counts = counter.stop()
    assert done.reason == "completed", done.reason
    return elapsed, counts


async def main(rounds: int) -> None:
    ways = ("plain", "decided", "corrected")
    times: dict[str, list[float]] = {w: [] for w in ways}
    ratios: dict[str, list[float]] = {w: [] for w in ways}
    counts: dict[str, set[tuple[int, int, int]]] = {w: set() for w in ways}
    with tempfile.TemporaryDirectory() as directory:
        async with SqliteRunStore(Path(directory) / "runs.db") as store:
            counter = Counter(store)
            await one(store, counter, "plain")  # warm up
            for _ in range(rounds):
                measured = {w: await one(store, counter, w) for w in ways}
                for w in ways:
                    times[w].append(measured[w][0])
                    ratios[w].append(measured[w][0] / measured["plain"][0])
                    counts[w].add(measured[w][1])
    print(f"{rounds} interleaved rounds; SQLite; per resume:")
    print("| resume | reads | writes | statements | median time | ratio to plain |")
    print("|---|---|---|---|---|---|")
    for w in ways:
        (reads, writes, statements), *others = sorted(counts[w])
        assert not others, f"{w}: counts differ between rounds: {counts[w]}"
        median = statistics.median(times[w]) * 1000
        ratio = statistics.median(ratios[w])
        print(f"| {w} | {reads} | {writes} | {statements} | {median:.2f} ms | {ratio:.2f} |")
    plain = min(counts["plain"])
    for w in ("decided", "corrected"):
        extra = tuple(a - b for a, b in zip(min(counts[w]), plain, strict=True))
        print(
            f"{w}: {extra[0]} read(s), {extra[1]} write(s), {extra[2]} statement(s) more than plain"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="trio")
    args = parser.parse_args()
    anyio.run(main, args.rounds, backend=args.backend)
