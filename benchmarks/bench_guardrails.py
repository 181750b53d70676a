"""What an input guardrail that never trips costs a run, against the same run without it.

Three runs, each with and without one async input guardrail that passes at
once (``Agent(input_guardrails=[...])``), the agent built once:

* **tools**: ``bench_agent.py``'s run: 10 model turns each asking for 10 tool
  calls over 3 typed tools, then an answer (11 model calls, 100 tool calls).
* **answer**: one model call answering with text, no tools: the smallest run,
  where the guardrail's task group is the largest share (on both backends;
  the tool run's script is Trio's).
* **sdk**: the same one-answer run through the real ``openai`` SDK
  (``Agent("openai:m", base_url=...)``) against the package's fake server in
  another process (``fake_endpoint.py``, a ``--chunks``-chunk streamed
  answer over loopback): a model call that takes real time, as every real
  one does. The server's CPU time is its own process's, not counted here.

The in-process models are scripts (one checkpoint per turn). Each sample runs
the run ``--runs`` times (the answer run 20 times that), timed in process
CPU time, on each backend (``--backend``, both by default); the variants are
interleaved round by round, the order alternating, and the figure is the
median of the per-round ratios (guarded / plain). The scripted rows run each
sample under an ``anyio.run`` of its own; the sdk row runs all its samples
under one, the agents (and so their one client each) built once and warmed
up first.

Beside them, the floor: the same one-checkpoint "request" bare, against it
inside a task group that starts one task running a no-op (the backend's own
nursery on Trio, anyio's task group on asyncio, as the guardrail's). That is
what starting the one task a guardrail needs costs, with no guardrail code.

Also the latency the guardrail adds, on Trio's virtual clock (exact, no
noise): a first request taking 1.0 s beside a guardrail taking 0.5 s, against
the same request with no guardrail, and against the guardrail awaited before
the request (``blocking=True``).

    python benchmarks/bench_guardrails.py [--rounds N] [--runs R] [--chunks C]
        [--backend trio|asyncio] [--row tools|answer|sdk|floor]
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import trio
import trio.testing

from bench_agent import TOOLS, TURNS, scripted_model
from fake_endpoint import answer_text, serving
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


# --- the sdk row: the real openai SDK against the fake server, over loopback -----------


def sdk_agents(base_url: str) -> tuple[Agent[None, str], Agent[None, str]]:
    """The plain and the guarded agent, each with its one client."""
    options: dict[str, Any] = {"base_url": base_url, "api_key": "bench"}
    return Agent("openai:m", **options), Agent("openai:m", input_guardrails=[passes], **options)


async def sdk_runs(agent: Agent[None, str], runs: int, expected: str) -> float:
    """CPU ns per run, *runs* runs one after another."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        for _ in range(runs):
            result = await agent.run("go")
            assert result.output == expected, result.output
        return (time.process_time_ns() - start) / runs
    finally:
        gc.enable()


async def sdk_samples(
    base_url: str, rounds: int, runs: int, chunks: int
) -> list[tuple[float, float]]:
    plain, guarded = sdk_agents(base_url)
    expected = answer_text(chunks)
    costs: list[tuple[float, float]] = []
    async with plain, guarded:
        await sdk_runs(plain, runs, expected)  # warm up: connections open, code paths hot
        await sdk_runs(guarded, runs, expected)
        for round_ in range(rounds):
            if round_ % 2:
                g = await sdk_runs(guarded, runs, expected)
                p = await sdk_runs(plain, runs, expected)
            else:
                p = await sdk_runs(plain, runs, expected)
                g = await sdk_runs(guarded, runs, expected)
            costs.append((p, g))
    return costs


# --- the floor: one task started beside a one-checkpoint request -----------------------


async def nothing() -> None:
    pass


def floor_runs(backend: str, beside: bool) -> Callable[[int], Awaitable[None]]:
    async def bare(runs: int) -> None:
        for _ in range(runs):
            await anyio.lowlevel.checkpoint()

    async def in_group(runs: int) -> None:
        for _ in range(runs):
            group = trio.open_nursery() if backend == "trio" else anyio.create_task_group()
            async with group as tasks:
                tasks.start_soon(nothing)
                await anyio.lowlevel.checkpoint()

    return in_group if beside else bare


def sample_of(
    plain: Callable[[int], Awaitable[None]],
    guarded: Callable[[int], Awaitable[None]],
    runs: int,
    backend: str,
    with_guardrail: bool,
) -> float:
    return measure(guarded if with_guardrail else plain, runs, backend)


def interleaved(rounds: int, sample: Callable[[bool], float]) -> list[tuple[float, float]]:
    """(plain, guarded) per round, the order alternating, after one warm-up of each."""
    sample(False)
    sample(True)
    costs: list[tuple[float, float]] = []
    for round_ in range(rounds):
        if round_ % 2:
            g = sample(True)
            p = sample(False)
        else:
            p = sample(False)
            g = sample(True)
        costs.append((p, g))
    return costs


def report(backend: str, row: str, costs: list[tuple[float, float]]) -> None:
    ratios = [g / p for p, g in costs]
    p_median = statistics.median(c[0] for c in costs) / 1000
    g_median = statistics.median(c[1] for c in costs) / 1000
    added = statistics.median(g - p for p, g in costs) / 1000
    print(
        f"{backend:>7} {row:>6}: plain {p_median:8.1f} us/run, guarded {g_median:8.1f} us/run "
        f"(+{added:.1f}), ratio {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(costs)} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--backend", choices=("trio", "asyncio"), action="append")
    parser.add_argument("--row", choices=("tools", "answer", "sdk", "floor"), action="append")
    args = parser.parse_args()
    backends = args.backend or ("trio", "asyncio")
    rows = args.row or ("tools", "answer", "sdk", "floor")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if "sdk" in rows:
        with serving(args.chunks) as base_url:
            for backend in backends:
                costs = anyio.run(
                    sdk_samples,
                    base_url,
                    args.rounds,
                    args.runs,
                    args.chunks,
                    backend=backend,
                )
                report(backend, "sdk", costs)
    for backend in backends:
        for row in rows:
            # bench_agent's scripted model awaits Trio's checkpoint: its run is Trio's only.
            if row == "sdk" or (row == "tools" and backend != "trio"):
                continue
            runs = args.runs if row == "tools" else args.runs * 20
            if row == "floor":
                plain, guarded = floor_runs(backend, False), floor_runs(backend, True)
            else:
                plain = runs_of(AGENTS[(row, False)], MESSAGES[row])
                guarded = runs_of(AGENTS[(row, True)], MESSAGES[row])
            sample = functools.partial(sample_of, plain, guarded, runs, backend)
            report(backend, row, interleaved(args.rounds, sample))
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
