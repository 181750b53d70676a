"""What ``Agent.run`` costs per streamed chunk over the raw SDK, at 1, 32 and 256 runs at once.

The endpoint is the package's fake server in another process
(``fake_endpoint.py``), answering every request with a 200-chunk text, so
this process holds only the client side and its CPU time is the client's.

* **raw SDK**: one ``AsyncOpenAI`` (``max_retries=0``), and per run one
  streamed chat completion read to its end, the text kept: what a host
  writes without the package.
* **Agent**: one ``Agent("openai:m", base_url=..., api_key=...)`` built
  once, as an application builds it, and ``await agent.run("hi")`` per run:
  a whole ``ToolLoop`` run (watchdog, accumulator, turn text stream, routing,
  transcript, result).

Each sample starts *C* runs at once in a task group and waits for all of
them; the figure is this process's CPU time (``time.process_time()``) for
the sample over the *C* x 200 chunks it streamed. Variants are interleaved
round by round (raw and Agent alternating which goes first); the ratio is
the Agent's median over the raw SDK's, with the median of the per-round
ratios beside it. Target: at most 1.1x at every concurrency.

First, the client count: the ``AsyncOpenAI`` objects constructed by the
Agent's first run and by the runs after it (the second and later runs of an
agent construct none).

    python benchmarks/bench_agent_runs.py [--backend trio|asyncio] [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import openai

from fake_endpoint import answer_text, serving
from juno_bind_trio.agent import Agent

CHUNKS = 200
CONCURRENCY = (1, 32, 256)
MESSAGES: Any = [{"role": "user", "content": "hi"}]
EXPECTED = answer_text(CHUNKS)


async def raw_run(client: openai.AsyncOpenAI) -> str:
    parts = []
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


async def agent_run(agent: Agent[None, str]) -> str:
    return (await agent.run("hi")).output


async def sample(run: Callable[[], Awaitable[str]], concurrency: int) -> float:
    """CPU seconds per chunk for *concurrency* runs at once."""
    answers: list[str] = []

    async def one() -> None:
        answers.append(await run())

    gc.collect()
    started = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(one)
    spent = time.process_time() - started
    assert answers == [EXPECTED] * concurrency
    return spent / (concurrency * CHUNKS)


async def count_clients(base_url: str) -> tuple[int, int]:
    """AsyncOpenAI constructions during an agent's first run, and during its next nine."""
    built: list[object] = []
    original = openai.AsyncOpenAI.__init__

    def counting(self: openai.AsyncOpenAI, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    openai.AsyncOpenAI.__init__ = counting  # type: ignore[method-assign]
    try:
        async with Agent("openai:m", base_url=base_url, api_key="bench") as agent:
            built.clear()  # count from the first run, not from the prepare
            await agent.aclose()
            await agent.run("hi")
            first = len(built)
            for _ in range(9):
                await agent.run("hi")
            return first, len(built) - first
    finally:
        openai.AsyncOpenAI.__init__ = original  # type: ignore[method-assign]


async def main(rounds: int) -> None:
    with serving(CHUNKS) as base_url:
        first, later = await count_clients(base_url)
        print(f"AsyncOpenAI constructed: first run {first}, next 9 runs {later}")
        client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        async with client, Agent("openai:m", base_url=base_url, api_key="bench") as agent:
            variants: dict[str, Callable[[], Awaitable[str]]] = {
                "raw": lambda: raw_run(client),
                "agent": lambda: agent_run(agent),
            }
            for concurrency in CONCURRENCY:  # warm-up: connections open, code paths hot
                for run in variants.values():
                    await sample(run, concurrency)
            cpu: dict[tuple[str, int], list[float]] = {
                (name, c): [] for name in variants for c in CONCURRENCY
            }
            for index in range(rounds):
                order = list(variants) if index % 2 == 0 else list(reversed(variants))
                for concurrency in CONCURRENCY:
                    for name in order:
                        cpu[(name, concurrency)].append(await sample(variants[name], concurrency))
    print(f"CPU time per chunk, {CHUNKS}-chunk answers, median of {rounds} rounds:")
    for concurrency in CONCURRENCY:
        raw, agent_cpu = cpu[("raw", concurrency)], cpu[("agent", concurrency)]
        ratio = statistics.median(agent_cpu) / statistics.median(raw)
        paired = statistics.median(a / r for a, r in zip(agent_cpu, raw, strict=True))
        print(
            f"  {concurrency:3} at once: raw {statistics.median(raw) * 1e6:6.1f} us  "
            f"Agent {statistics.median(agent_cpu) * 1e6:6.1f} us  ratio {ratio:5.2f}x "
            f"(per-round {paired:5.2f}x)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.rounds, backend=args.backend)
