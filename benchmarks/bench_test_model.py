"""What ``testing.TestModel`` costs over a hand-written model function, in the same run.

The run: an ``Agent`` with 10 typed tools; the model asks for all 10 in one
turn (arguments made from each tool's schema), then answers with the tools'
results as JSON. ``TestModel`` calls tools only at a run's first turn, so the
"10 turns x 10 calls" of the issue is measured as 10 runs of one 10-call
turn each per sample (100 tool calls, 20 model calls). The baseline is a
plain ``async`` function doing the same by hand: prebuilt arguments, the
same call ids, the same JSON answer built from the transcript.

Variants are interleaved round by round under one ``anyio.run`` per sample,
on each backend (Trio, asyncio); the figure is the median of the per-round
ratios, in process CPU time.

    python benchmarks/bench_test_model.py [--rounds N] [--runs R] [--backend trio|asyncio]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

import anyio
import trio

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import TestModel

TOOLS = 10


def _make(index: int) -> Any:
    async def body(path: str, offset: int = 0) -> dict[str, Any]:
        return {"path": path, "offset": offset}

    return tool(body, name=f"read_{index}", description="Read a file.")


TOOL_LIST = [_make(i) for i in range(TOOLS)]
ARGUMENTS = json.dumps({"path": "a", "offset": 0})


async def by_hand(turn: ModelTurn) -> ModelTurnResult:
    messages = turn.messages
    if turn.iteration == 1 and messages[-1].get("role") != "tool":
        calls = [
            {
                "id": f"test_1_{i}",
                "type": "function",
                "function": {"name": t["function"]["name"], "arguments": ARGUMENTS},
            }
            for i, t in enumerate(turn.tools)
        ]
        return ModelTurnResult(tool_calls=calls, input_tokens=1, output_tokens=len(calls))
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    answers = {names[m["tool_call_id"]]: m["content"] for m in messages if m["role"] == "tool"}
    text = json.dumps(answers)
    return ModelTurnResult(content=text, input_tokens=1, output_tokens=len(text.split()))


def sample(agent: Agent[None, str], runs: int, backend: str) -> float:
    async def main() -> None:
        for _ in range(runs):
            await agent.run("go")

    gc.collect()
    started = time.process_time()
    anyio.run(main, backend=backend)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--backend", choices=("trio", "asyncio"), action="append")
    args = parser.parse_args()
    if args.rounds < 11:
        parser.error("--rounds must be at least 11 (the project's rule for a ratio)")
    test_model = Agent(TestModel(), tools=TOOL_LIST)
    hand = Agent(by_hand, tools=TOOL_LIST)
    # The same answer both ways, or the comparison means nothing.
    assert trio.run(test_model.run, "go").output == trio.run(hand.run, "go").output
    for backend in args.backend or ("trio", "asyncio"):
        ratios: list[float] = []
        times: dict[str, list[float]] = {"TestModel": [], "by hand": []}
        for round_ in range(args.rounds):
            # The order alternates, so drift hits both alike.
            if round_ % 2:
                measured = sample(test_model, args.runs, backend)
                base = sample(hand, args.runs, backend)
            else:
                base = sample(hand, args.runs, backend)
                measured = sample(test_model, args.runs, backend)
            times["by hand"].append(base)
            times["TestModel"].append(measured)
            ratios.append(measured / base)
        per_run = {k: statistics.median(v) / args.runs * 1e6 for k, v in times.items()}
        print(f"{backend}: rounds {args.rounds}, {args.runs} runs per sample (10 tool calls each)")
        for name, micros in per_run.items():
            print(f"  {name:10} {micros:9.1f} us per run")
        print(
            f"  TestModel / by hand: median ratio {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
