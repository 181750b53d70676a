"""Time to the first event of the first run, in a fresh process: Agent against the raw SDK.

Each measurement is a new Python process, timed from its spawn to the line
it prints when the first streamed text arrives, so the figure holds
everything a program started for one question pays: the interpreter, the
imports, building the client, connecting, the request. Two programs:

* **raw SDK**: ``import openai``, an ``AsyncOpenAI``, one streamed chat
  completion, read until the first chunk with content;
* **Agent**: ``from juno_bind_trio import Agent``, ``Agent("openai:m")``
  at module level, as a script writes it, then ``open_run`` read until the
  first ``TextEvent``.

Each on ``trio.run`` and on ``asyncio.run``, against the package's fake
server in another process (``fake_endpoint.py``, a 200-chunk answer). The
variants are interleaved round by round (a discarded warm-up round first,
so the files are in the page cache for all of them), and the figure is the
median; the ratio is the Agent's median over the raw SDK's on the same
backend, with the median of the per-round ratios beside it. Each child also
reports the time from the start of its event loop's work to the first event
(``in the run``): the part a deadline around the first run would see.
Target: the Agent within 1.2x of the raw SDK.

    python benchmarks/bench_first_run.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from fake_endpoint import serving

RAW = """
import time
start = None
import openai

async def main():
    global start
    start = time.perf_counter()
    async with openai.AsyncOpenAI(max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    print("first", time.perf_counter() - start, flush=True)
                    break
"""

AGENT = """
import time
from juno_bind_trio import Agent

agent = Agent("openai:m")

async def main():
    start = time.perf_counter()
    async with agent.open_run("hi") as run:
        async for event in run:
            if type(event).__name__ == "TextEvent":
                print("first", time.perf_counter() - start, flush=True)
                break
"""

RUNNERS = {
    "trio": "\nimport trio\ntrio.run(main)\n",
    "asyncio": "\nimport asyncio\nasyncio.run(main())\n",
}
PROGRAMS = {"raw": RAW, "agent": AGENT}


def measure(program: str, backend: str, env: dict[str, str]) -> tuple[float, float]:
    """(spawn to first event, loop start to first event), in seconds."""
    code = PROGRAMS[program] + RUNNERS[backend]
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.communicate(timeout=60)
    word, in_run = line.split()
    assert word == "first", line
    if process.returncode != 0:
        raise RuntimeError(f"{program} on {backend} exited {process.returncode}")
    return elapsed, float(in_run)


def main(rounds: int) -> None:
    variants = [(p, b) for b in RUNNERS for p in PROGRAMS]
    with serving(200) as base_url:
        env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "bench"}
        env["PYTHONWARNINGS"] = "ignore"
        for variant in variants:  # warm-up: page cache, .pyc files
            measure(*variant, env)
        total: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        in_run: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        for index in range(rounds):
            # Interleaved, in an order that turns each round, so drift in the
            # machine's load hits every variant alike.
            shift = index % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                whole, run = measure(*variant, env)
                total[variant].append(whole)
                in_run[variant].append(run)
    print(f"first event of the first run in a fresh process, median of {rounds} rounds:")
    for backend in RUNNERS:
        raw, agent = total[("raw", backend)], total[("agent", backend)]
        ratio = statistics.median(agent) / statistics.median(raw)
        paired = statistics.median(a / r for a, r in zip(agent, raw, strict=True))
        for program in PROGRAMS:
            spawn = statistics.median(total[(program, backend)]) * 1e3
            run = statistics.median(in_run[(program, backend)]) * 1e3
            print(
                f"  {backend:7} {program:5}  {spawn:7.0f} ms from spawn   {run:6.1f} ms in the run"
            )
        print(f"  {backend:7} ratio  {ratio:5.2f}x (median of per-round ratios {paired:5.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    main(parser.parse_args().rounds)
