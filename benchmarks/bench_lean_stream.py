"""CPU per streamed chunk at 1, 32 and 256 runs at once: the raw SDK, and ``Agent`` on each path.

The endpoint is the package's fake server in another process
(``fake_endpoint.py``), answering every request with a 200-chunk text, so
this process holds only the client side and its CPU time is the client's.
Variants, each a whole run per request:

* **raw SDK**: one ``AsyncOpenAI`` (``max_retries=0``); a streamed chat
  completion read to its end, the text kept (a pydantic chunk per chunk).
* **raw lean**: the same client's ``with_streaming_response``, the event
  stream split by ``providers.openai._sse`` and each chunk ``json.loads``-ed:
  the floor the lean path can reach, without a turn around it.
* **run**: an ``Agent`` built once over ``OpenAIChatModel(...)`` (the adapter
  ``Agent("openai:m")`` builds, on the same client, its watchdog budgets
  raised) and ``await agent.run("hi")`` per run, on the default (lean) path.
* **run sdk**: the same agent over ``OpenAIChatModel(..., stream_path="sdk")``.
* **open_run**: ``async with agent.open_run("hi") as run`` and a reader
  taking every event (``async for event in run``), lean path.

A sample starts *C* runs at once in a task group and waits for all of them;
the figure is this process's CPU time (``time.process_time()``) over the
*C* x 200 chunks. Variants are interleaved round by round, their order
rotated each round; printed: the median per chunk of each, and each one's
ratio to the raw SDK as the median of the per-round ratios.

Then, on trio, the longest single task step during a wave of 256 ``run``s
(a trio ``Instrument``: the longest the event loop was held by one task,
the SDK's request building included), and the memory an idle open stream
holds (256 ``open_run``s, each with its first chunk in and the server
silent after it; the Python heap ``tracemalloc`` counts, per stream),
against the raw SDK holding the same streams open.

    python benchmarks/bench_lean_stream.py [--backend trio|asyncio] [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import openai

from fake_endpoint import answer_text, serving
from juno_bind_trio.agent import Agent, TextEvent
from juno_bind_trio.providers.openai import OpenAIChatModel
from juno_bind_trio.providers.openai._sse import SSEDataDecoder
from juno_bind_trio.providers.openai._stream import StreamPath
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage

CHUNKS = 200
CONCURRENCY = (1, 32, 256)
MESSAGES: Any = [{"role": "user", "content": "hi"}]
EXPECTED = answer_text(CHUNKS)
IDLE_STREAMS = 256


async def raw_run(client: openai.AsyncOpenAI) -> str:
    parts = []
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


async def raw_lean_run(client: openai.AsyncOpenAI) -> str:
    parts: list[str] = []
    opened = client.chat.completions.with_streaming_response.create(
        model="m", messages=MESSAGES, stream=True
    )
    async with opened as raw:
        decoder = SSEDataDecoder()
        async for piece in raw.http_response.aiter_bytes():
            for _, data in decoder.feed(piece):
                if data.startswith("[DONE]"):
                    return "".join(parts)
                choices = json.loads(data).get("choices")
                if choices:
                    text = choices[0].get("delta", {}).get("content")
                    if text:
                        parts.append(text)
    return "".join(parts)


async def agent_run(agent: Agent[None, str]) -> str:
    return (await agent.run("hi")).output


async def open_run_with_reader(agent: Agent[None, str]) -> str:
    async with agent.open_run("hi") as run:
        async for _event in run:
            pass
    assert run.result is not None
    return run.result.output


async def sample(
    run: Callable[[], Awaitable[str]], concurrency: int, *, collect: bool = True
) -> float:
    """CPU seconds per chunk for *concurrency* runs at once."""
    answers: list[str] = []

    async def one() -> None:
        answers.append(await run())

    if collect:
        gc.collect()
    started = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(one)
    spent = time.process_time() - started
    assert answers == [EXPECTED] * concurrency
    return spent / (concurrency * CHUNKS)


async def longest_steps(
    run: Callable[[], Awaitable[str]], concurrency: int, *, freeze: bool
) -> list[tuple[float, str]]:
    """The five longest task steps (CPU seconds, task name) during a wave (trio only).

    CPU time of the thread, so that the machine's other processes taking the
    core mid-step do not count. The benchmark's own ``gc.collect()`` runs
    before the instrument is added; a collection the interpreter starts
    during the wave is counted, in whatever step it lands. With *freeze*,
    ``gc.freeze()`` first (what a server does after its imports): the
    objects alive then are left out of every later collection.
    """
    import trio

    class Steps(trio.abc.Instrument):
        def __init__(self) -> None:
            self.steps: list[tuple[float, str]] = []
            self._began: float | None = None  # None: a step that began before the instrument

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            self._began = time.thread_time()

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if self._began is not None:
                self.steps.append((time.thread_time() - self._began, task.name))
                self._began = None

    gc.collect()
    if freeze:
        gc.freeze()
    steps = Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        await sample(run, concurrency, collect=False)
    finally:
        trio.lowlevel.remove_instrument(steps)
        gc.unfreeze()
    return sorted(steps.steps, reverse=True)[:5]


async def idle_memory(open_one: Callable[[anyio.Event], Coroutine[Any, Any, None]]) -> float:
    """Python heap bytes per idle open stream, over IDLE_STREAMS of them."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    async with anyio.create_task_group() as tg:
        ready = [anyio.Event() for _ in range(IDLE_STREAMS)]
        for event in ready:
            tg.start_soon(open_one, event)
        for event in ready:
            await event.wait()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tg.cancel_scope.cancel()
    tracemalloc.stop()
    return (after - before) / IDLE_STREAMS


async def main(backend: str, rounds: int) -> None:
    plan = RoutePlan([RouteStage("m", [Candidate("fake")])])
    with serving(CHUNKS) as base_url:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)

        # The adapter Agent("openai:m") builds, over one client, with generous
        # watchdog budgets: 256 streams at once on a loaded machine can starve
        # the one-process server past the default 30 s to a first token.
        def model(path: StreamPath) -> OpenAIChatModel:
            return OpenAIChatModel(
                plan=plan,
                clients={"fake": client},
                stream_path=path,
                time_to_first_token=600,
                inter_chunk_timeout=600,
            )

        async with client, Agent(model("lean")) as agent, Agent(model("sdk")) as sdk_agent:
            variants: dict[str, Callable[[], Awaitable[str]]] = {
                "raw SDK": lambda: raw_run(client),
                "raw lean": lambda: raw_lean_run(client),
                "run": lambda: agent_run(agent),
                "run sdk": lambda: agent_run(sdk_agent),
                "open_run": lambda: open_run_with_reader(agent),
            }
            for concurrency in CONCURRENCY:  # warm-up: connections open, code paths hot
                for run in variants.values():
                    await sample(run, concurrency)
            cpu: dict[tuple[str, int], list[float]] = {
                (name, c): [] for name in variants for c in CONCURRENCY
            }
            names = list(variants)
            for index in range(rounds):
                shift = index % len(names)
                order = names[shift:] + names[:shift]
                for concurrency in CONCURRENCY:
                    for name in order:
                        cpu[(name, concurrency)].append(await sample(variants[name], concurrency))
            gaps = (
                {
                    (name, frozen): await longest_steps(variants[name], 256, freeze=frozen)
                    for name in ("raw SDK", "run")
                    for frozen in (False, True)
                }
                if backend == "trio"
                else None
            )

    print(f"CPU time per chunk, {CHUNKS}-chunk answers, median of {rounds} interleaved rounds:")
    for concurrency in CONCURRENCY:
        raw = cpu[("raw SDK", concurrency)]
        cells = []
        for name in names:
            values = cpu[(name, concurrency)]
            paired = statistics.median(v / r for v, r in zip(values, raw, strict=True))
            cells.append(f"{name} {statistics.median(values) * 1e6:6.1f} us ({paired:4.2f}x)")
        print(f"  C={concurrency:3}: " + "  ".join(cells))
    if gaps is not None:
        for (name, frozen), longest in gaps.items():
            shown = ", ".join(f"{seconds * 1e3:.2f}" for seconds, _ in longest)
            how = "after gc.freeze()" if frozen else "default gc"
            print(f"longest task steps (CPU ms), 256 {name} runs at once, {how}: {shown}")

    with serving(CHUNKS, stall=True) as base_url:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        async with client, Agent(model("lean")) as agent:

            async def raw_idle(ready: anyio.Event) -> None:
                stream = await client.chat.completions.create(
                    model="m", messages=MESSAGES, stream=True
                )
                async with stream:
                    async for _chunk in stream:
                        ready.set()

            async def run_idle(ready: anyio.Event) -> None:
                async with agent.open_run("hi") as run:
                    async for event in run:
                        if isinstance(event, TextEvent):
                            ready.set()

            # Warm-up (connections, caches), then measured.
            for opener in (raw_idle, run_idle):
                await idle_memory(opener)
            raw_mem = await idle_memory(raw_idle)
            run_mem = await idle_memory(run_idle)
    print(
        f"memory per idle open stream ({IDLE_STREAMS} open, first chunk in): "
        f"raw SDK {raw_mem / 1024:.1f} KiB, open_run {run_mem / 1024:.1f} KiB (Python heap)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.backend, args.rounds, backend=args.backend)
