"""The Anthropic adapter's cost over the bare SDK, and failover across providers, on loopback.

1. A 1,000-delta streamed turn from the fake Messages API: the raw SDK loop
   (``async with`` the stream of ``messages.create(stream=True)``, ``async
   for`` the events, keep the text) against ``AnthropicAdapter.stream_turn``
   (watchdog, accumulator, text stream into a ``ListSink``, defect check) and
   a whole routed turn (``RoutedModel.route``). Interleaved rounds, CPU time
   of the one process (server, SDK and harness together). Target: at most
   1.05x the raw time.
2. Failure to the fallback's first delta, across providers: Anthropic drops
   the connection after ten deltas and OpenAI answers (and the reverse); the
   time from the last delta the reader saw of the dying attempt to the first
   delta of the fallback. Target: at most 20 ms on loopback.

Run: ``python benchmarks/bench_anthropic.py [--backend trio|asyncio] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio

from juno_bind_trio.providers import ProviderAdapter
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.openai import OpenAIChatAdapter, open_openai_client
from juno_bind_trio.testing import (
    StreamResponse,
    open_fake_anthropic_server,
    open_fake_openai_server,
)
from provider_bench import (
    BIG,
    CHUNKS,
    MESSAGES,
    answer,
    bench_failover,
    harness_turn,
    one_stage,
    print_ratios,
    routed_turn,
    time_interleaved,
)


async def raw_turn(client: Any) -> str:
    parts = []
    stream = await client.messages.create(
        model="m", max_tokens=4096, messages=MESSAGES, stream=True
    )
    async with stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                parts.append(event.delta.text)
    return "".join(parts)


async def bench_stream(rounds: int) -> None:
    async with (
        open_fake_anthropic_server(lambda _request: BIG) as server,
        open_anthropic_client(base_url=server.base_url, api_key="bench") as client,
    ):
        adapter = AnthropicAdapter(client)
        variants = {
            "raw": raw_turn,
            "harness": harness_turn(adapter),
            "routed": routed_turn(one_stage(adapter, "a")),
        }
        timings = await time_interleaved(client, variants, rounds, warm_every=False)
    print(f"{CHUNKS:,}-delta streamed turn, best of {rounds} (CPU time; server, SDK and harness):")
    print_ratios(timings, width=8)


@asynccontextmanager
async def claude_and_gpt(
    scripts: Mapping[str, StreamResponse],
) -> AsyncIterator[dict[str, ProviderAdapter]]:
    async with (
        open_fake_anthropic_server(functools.partial(answer, scripts["anthropic"])) as claude,
        open_fake_openai_server(functools.partial(answer, scripts["openai"])) as gpt,
        open_anthropic_client(base_url=claude.base_url, api_key="bench") as claude_client,
        open_openai_client(base_url=gpt.base_url, api_key="bench") as gpt_client,
    ):
        yield {
            "anthropic": AnthropicAdapter(claude_client),
            "openai": OpenAIChatAdapter(gpt_client),
        }


async def main(rounds: int) -> None:
    await bench_stream(rounds)
    await bench_failover(claude_and_gpt, ("anthropic", "openai"), rounds * 3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.rounds, backend=args.backend)
