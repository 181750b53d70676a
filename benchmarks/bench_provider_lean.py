"""CPU per streamed delta of the Anthropic and Responses adapters, lean and SDK paths, vs raw SDKs.

The endpoint is the package's fake of each API in another process
(``fake_endpoint.py --wire anthropic|responses``), answering every request
with a 200-delta text, so this process holds only the client side and its
CPU time is the client's. Variants, per provider, each a whole streamed turn
per request on one client (``max_retries=0``):

* **raw SDK**: ``messages.create(stream=True)`` / ``responses.create(stream=True)``
  read to its end with ``async for``, the text deltas kept (a pydantic event
  per event): the baseline.
* **lean**: the adapter's ``stream_turn`` on the default path (watchdog,
  accumulator, a ``TurnTextStream`` into a ``ListSink``, defect check).
* **sdk**: the same adapter with ``stream_path="sdk"``.

A sample runs *C* turns at once in a task group (C = 1 and 32); the figure is
this process's CPU time (``time.process_time()``) over the *C* x 200 deltas.
Variants are interleaved round by round, their order rotated each round;
printed: the median per delta of each, and its ratio to the raw SDK as the
median of the per-round ratios.

    python benchmarks/bench_provider_lean.py [--backend trio|asyncio] [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import anyio
import openai

from fake_endpoint import answer_text, serving
from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.providers import ProviderRequest
from juno_bind_trio.providers.anthropic import AnthropicAdapter
from juno_bind_trio.providers.openai import OpenAIResponsesAdapter

CHUNKS = 200
CONCURRENCY = (1, 32)
MESSAGES: Any = [{"role": "user", "content": "hi"}]
EXPECTED = answer_text(CHUNKS)


async def raw_anthropic(client: anthropic.AsyncAnthropic) -> str:
    parts = []
    stream = await client.messages.create(
        model="m", max_tokens=4096, messages=MESSAGES, stream=True
    )
    async with stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                parts.append(event.delta.text)
    return "".join(parts)


async def raw_responses(client: openai.AsyncOpenAI) -> str:
    parts = []
    stream = await client.responses.create(model="m", input="hi", stream=True)
    async with stream:
        async for event in stream:
            if event.type == "response.output_text.delta":
                parts.append(event.delta)
    return "".join(parts)


async def adapter_turn(adapter: Any) -> str:
    stream = TurnTextStream(sink=ListSink(), turn_id="t")
    stream.begin_attempt()
    request = ProviderRequest(
        model="m",
        messages=MESSAGES,
        text_stream=stream,
        # Generous: 32 streams at once on a loaded machine can starve the server.
        time_to_first_token=600,
        inter_chunk_timeout=600,
    )
    result = await adapter.stream_turn(request)
    return str(result.content)


async def sample(run: Callable[[], Awaitable[str]], concurrency: int) -> float:
    """CPU seconds per delta for *concurrency* turns at once."""
    answers: list[str] = []

    async def one() -> None:
        answers.append(await run())

    gc.collect()
    started = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(one)
    spent = time.process_time() - started
    assert answers == [EXPECTED] * concurrency, answers[:1]
    return spent / (concurrency * CHUNKS)


async def measure(
    name: str, variants: dict[str, Callable[[], Awaitable[str]]], rounds: int
) -> None:
    for concurrency in CONCURRENCY:  # warm-up: connections open, code paths hot
        for run in variants.values():
            await sample(run, concurrency)
    cpu: dict[tuple[str, int], list[float]] = {(v, c): [] for v in variants for c in CONCURRENCY}
    names = list(variants)
    for index in range(rounds):
        shift = index % len(names)
        order = names[shift:] + names[:shift]
        for concurrency in CONCURRENCY:
            for variant in order:
                cpu[(variant, concurrency)].append(await sample(variants[variant], concurrency))
    print(f"{name}: CPU per delta, {CHUNKS}-delta answers, median of {rounds} interleaved rounds:")
    for concurrency in CONCURRENCY:
        raw = cpu[("raw SDK", concurrency)]
        cells = []
        for variant in names:
            values = cpu[(variant, concurrency)]
            paired = statistics.median(v / r for v, r in zip(values, raw, strict=True))
            cells.append(f"{variant} {statistics.median(values) * 1e6:6.1f} us ({paired:4.2f}x)")
        print(f"  C={concurrency:3}: " + "  ".join(cells))


async def main(rounds: int) -> None:
    with serving(CHUNKS, wire="anthropic") as base_url:
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key="bench", max_retries=0)
        async with client:
            lean, sdk = AnthropicAdapter(client), AnthropicAdapter(client, stream_path="sdk")
            await measure(
                "Anthropic",
                {
                    "raw SDK": lambda: raw_anthropic(client),
                    "lean": lambda: adapter_turn(lean),
                    "sdk": lambda: adapter_turn(sdk),
                },
                rounds,
            )
    with serving(CHUNKS, wire="responses") as base_url:
        oclient = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
        async with oclient:
            rlean = OpenAIResponsesAdapter(oclient)
            rsdk = OpenAIResponsesAdapter(oclient, stream_path="sdk")
            await measure(
                "Responses",
                {
                    "raw SDK": lambda: raw_responses(oclient),
                    "lean": lambda: adapter_turn(rlean),
                    "sdk": lambda: adapter_turn(rsdk),
                },
                rounds,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    anyio.run(main, args.rounds, backend=args.backend)
