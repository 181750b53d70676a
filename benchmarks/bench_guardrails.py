"""What an input guardrail that never trips costs a run, against the same run without it.

Two runs, each with and without one async input guardrail that passes at
once (``Agent(input_guardrails=[...])``), the agent built once:

* **tools**: ``bench_agent.py``'s run: 10 model turns each asking for 10 tool
  calls over 3 typed tools, then an answer (11 model calls, 100 tool calls).
* **answer**: one model call answering with text, no tools: the smallest run,
  where the guardrail's task group is the largest share (on both backends;
  the tool run's script is Trio's).

The model is a script (one checkpoint per turn). Each sample runs the run
``--runs`` times under one ``anyio.run``, timed in process CPU time, on each
backend (``--backend``, both by default); the variants are interleaved round
by round and the figure is the median of the per-round ratios (guarded /
plain).

Also the latency the guardrail adds, on Trio's virtual clock (exact, no
noise): a first request taking 1.0 s beside a guardrail taking 0.5 s, against
the same request with no guardrail, and against the guardrail awaited before
the request (``blocking=True``).

    python benchmarks/bench_guardrails.py [--rounds N] [--runs R] [--backend trio|asyncio]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import trio
import trio.testing

from bench_agent import TOOLS, TURNS, scripted_model
from juno_bind_trio.agent import Agent, GuardrailResult, RunContext, input_guardrail
from juno_bind_trio.loop import ModelTurn, ModelTurnResult


async def passes(ctx: RunContext[None], messages: list[dict[str, Any]]) -> GuardrailResult:
    return GuardrailResult(tripwire=False)


ANSWER = ModelTurnResult(content="done")


async def answers(turn: ModelTurn) -> ModelTurnResult:
    await anyio.lowlevel.checkpoint()
    return ANSWER


AGENTS = {
    ("tools", False): Agent(scripted_model, tools=TOOLS),
    ("tools", True): Agent(scripted_model, tools=TOOLS, input_guardrails=[passes]),
    ("answer", False): Agent(answers),
    ("answer", True): Agent(answers, input_guardrails=[passes]),
}
MESSAGES = {"tools": 2 + TURNS * 11, "answer": 2}


def runs_of(agent: Agent[Any, Any], expected: int) -> Callable[[int], Awaitable[None]]:
    async def run_many(runs: int) -> None:
        for _ in range(runs):
            result = await agent.run("go")
            assert len(result.messages) == expected, len(result.messages)

    return run_many


def measure(fn: Callable[[int], Awaitable[None]], runs: int, backend: str) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        anyio.run(fn, runs, backend=backend)
        return (time.process_time_ns() - start) / runs
    finally:
        gc.enable()


# --- latency, on the virtual clock ---------------------------------------------------------


async def slow_answer(turn: ModelTurn) -> ModelTurnResult:
    await trio.sleep(1.0)
    return ANSWER


async def slow_check(ctx: RunContext[None], messages: list[dict[str, Any]]) -> GuardrailResult:
    await trio.sleep(0.5)
    return GuardrailResult(tripwire=False)


def virtual_seconds(agent: Agent[Any, Any]) -> float:
    async def once() -> float:
        await agent.run("go")
        return trio.current_time()

    return trio.run(once, clock=trio.testing.MockClock(autojump_threshold=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--backend", choices=("trio", "asyncio"), action="append")
    args = parser.parse_args()
    backends = args.backend or ("trio", "asyncio")
    # bench_agent's scripted model awaits Trio's checkpoint: its run is Trio's only.
    pairs = [(b, r) for b in backends for r in ("tools", "answer") if b == "trio" or r == "answer"]
    for backend, run in pairs:
        runs = args.runs if run == "tools" else args.runs * 20
        plain = runs_of(AGENTS[(run, False)], MESSAGES[run])
        guarded = runs_of(AGENTS[(run, True)], MESSAGES[run])
        measure(plain, runs, backend)  # warm up both
        measure(guarded, runs, backend)
        ratios: list[float] = []
        costs: list[tuple[float, float]] = []
        for round_ in range(args.rounds):
            # Interleaved, the order alternating, so drift hits both alike.
            if round_ % 2:
                g = measure(guarded, runs, backend)
                p = measure(plain, runs, backend)
            else:
                p = measure(plain, runs, backend)
                g = measure(guarded, runs, backend)
            ratios.append(g / p)
            costs.append((p, g))
        p_median = statistics.median(c[0] for c in costs) / 1000
        g_median = statistics.median(c[1] for c in costs) / 1000
        print(
            f"{backend:>7} {run:>6}: plain {p_median:8.1f} us/run, guarded {g_median:8.1f} us/run, "
            f"ratio {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {args.rounds} rounds)"
        )
    alone = virtual_seconds(Agent(slow_answer))
    beside = virtual_seconds(Agent(slow_answer, input_guardrails=[slow_check]))
    before = virtual_seconds(
        Agent(slow_answer, input_guardrails=[input_guardrail(slow_check, blocking=True)])
    )
    print(
        f"latency (virtual clock): no guardrail {alone:.2f} s, beside {beside:.2f} s "
        f"({beside / alone:.2f}x), blocking {before:.2f} s ({before / alone:.2f}x)"
    )


if __name__ == "__main__":
    main()
