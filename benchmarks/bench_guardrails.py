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

The in-process models are scripts (one checkpoint per turn). A sample is one
``anyio.run`` (the sdk row's samples all share one, its agents and their one
client each built once and warmed up first) in which the two variants run
alternately, run by run, each run timed on its own in process CPU time:
``--runs`` pairs (the answer run 20 times that, the sdk run twice), so the
load on a shared machine falls on both alike. On each backend
(``--backend``, both by default); the figure is the median of the
per-sample ratios (guarded / plain), with the median added time beside it.

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

Run = Callable[[], Awaitable[None]]


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


def run_of(agent: Agent[Any, Any], check: Callable[[Any], bool]) -> Run:
    async def once() -> None:
        result = await agent.run("go")
        assert check(result), result

    return once


async def paired(plain: Run, guarded: Run, pairs: int) -> tuple[float, float]:
    """CPU ns per run of each, the two alternating run by run (which goes first too)."""
    clock = time.process_time_ns
    spent = [0, 0]
    order = ((0, plain), (1, guarded))
    gc.collect()
    gc.disable()
    try:
        for index in range(pairs):
            for which, run in order if index % 2 == 0 else order[::-1]:
                start = clock()
                await run()
                spent[which] += clock() - start
    finally:
        gc.enable()
    return spent[0] / pairs, spent[1] / pairs


def scripted_samples(row: str, backend: str, rounds: int, pairs: int) -> list[tuple[float, float]]:
    if row == "floor":
        plain, guarded = floor_run(backend, False), floor_run(backend, True)
    else:
        expected = MESSAGES[row]

        def check(result: Any) -> bool:
            return len(result.messages) == expected

        plain = run_of(AGENTS[(row, False)], check)
        guarded = run_of(AGENTS[(row, True)], check)
    anyio.run(paired, plain, guarded, pairs, backend=backend)  # warm up
    return [anyio.run(paired, plain, guarded, pairs, backend=backend) for _ in range(rounds)]


# --- the sdk row: the real openai SDK against the fake server, over loopback -----------


async def sdk_samples(
    base_url: str, rounds: int, pairs: int, chunks: int
) -> list[tuple[float, float]]:
    options: dict[str, Any] = {"base_url": base_url, "api_key": "bench"}
    plain_agent: Agent[None, str] = Agent("openai:m", **options)
    guarded_agent: Agent[None, str] = Agent("openai:m", input_guardrails=[passes], **options)
    expected = answer_text(chunks)

    def check(result: Any) -> bool:
        return bool(result.output == expected)

    plain, guarded = run_of(plain_agent, check), run_of(guarded_agent, check)
    async with plain_agent, guarded_agent:
        await paired(plain, guarded, pairs)  # warm up: connections open, code paths hot
        return [await paired(plain, guarded, pairs) for _ in range(rounds)]


# --- the floor: one task started beside a one-checkpoint request -----------------------


async def nothing() -> None:
    pass


def floor_run(backend: str, beside: bool) -> Run:
    async def bare() -> None:
        await anyio.lowlevel.checkpoint()

    async def in_group() -> None:
        group = trio.open_nursery() if backend == "trio" else anyio.create_task_group()
        async with group as tasks:
            tasks.start_soon(nothing)
            await anyio.lowlevel.checkpoint()

    return in_group if beside else bare


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


def report(backend: str, row: str, costs: list[tuple[float, float]]) -> None:
    ratios = [g / p for p, g in costs]
    p_median = statistics.median(c[0] for c in costs) / 1000
    g_median = statistics.median(c[1] for c in costs) / 1000
    added = statistics.median(g - p for p, g in costs) / 1000
    print(
        f"{backend:>7} {row:>6}: plain {p_median:8.1f} us/run, guarded {g_median:8.1f} us/run "
        f"(+{added:.1f}), ratio {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(costs)} rounds)",
        flush=True,
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
                    sdk_samples, base_url, args.rounds, args.runs * 2, args.chunks, backend=backend
                )
                report(backend, "sdk", costs)
    for backend in backends:
        for row in rows:
            # bench_agent's scripted model awaits Trio's checkpoint: its run is Trio's only.
            if row == "sdk" or (row == "tools" and backend != "trio"):
                continue
            pairs = args.runs if row == "tools" else args.runs * 20
            report(backend, row, scripted_samples(row, backend, args.rounds, pairs))
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
