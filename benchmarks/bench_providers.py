"""The Gemini, Responses and Bedrock adapters' cost over each bare SDK, and Gemini failover.

1. A 1,000-delta streamed turn from each provider's fake on loopback: the raw
   SDK loop (send the streamed request, ``async for`` its chunks or events,
   keep the text) against the adapter's ``stream_turn`` (watchdog,
   accumulator, text stream into a ``ListSink``, defect check) and a whole
   routed turn (``RoutedModel.route``), on the same client and the same fake.
   Interleaved rounds (the order alternated), CPU time of the one process
   (server, SDK and harness together). Target: at most 1.05x the raw time.
2. Failure to the fallback's first delta: Gemini drops the connection after
   ten deltas and Anthropic answers (and the reverse); from the last delta the
   reader saw of the dying attempt to the fallback's first delta. Target: at
   most 20 ms on loopback.

Run: ``python benchmarks/bench_providers.py [--backend trio|asyncio] [--rounds N]
[--only gemini,responses,bedrock,failover]``.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio

from juno_bind_trio.providers import ProviderAdapter
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.bedrock import (
    BedrockAdapter,
    close_event_stream,
    open_bedrock_client,
)
from juno_bind_trio.providers.google import GeminiAdapter, open_gemini_client
from juno_bind_trio.providers.openai import OpenAIResponsesAdapter, open_openai_client
from juno_bind_trio.testing import (
    StreamResponse,
    open_fake_anthropic_server,
    open_fake_bedrock_server,
    open_fake_gemini_server,
    open_fake_responses_server,
)
from provider_bench import (
    BIG,
    MESSAGES,
    RawTurn,
    answer,
    bench_failover,
    harness_turn,
    one_stage,
    print_ratios,
    routed_turn,
    time_interleaved,
)


async def raw_gemini(client: Any) -> str:
    parts = []
    stream = await client.aio.models.generate_content_stream(model="m", contents="hi")
    try:
        async for chunk in stream:
            for candidate in chunk.candidates or ():
                if candidate.content is not None:
                    for part in candidate.content.parts or ():
                        if part.text and not part.thought:
                            parts.append(part.text)
    finally:
        await stream.aclose()
    return "".join(parts)


async def raw_responses(client: Any) -> str:
    parts = []
    stream = await client.responses.create(model="m", input=MESSAGES, stream=True)
    async with stream:
        async for event in stream:
            if event.type == "response.output_text.delta":
                parts.append(event.delta)
    return "".join(parts)


async def raw_bedrock(client: Any) -> str:
    parts = []
    answer = await client.converse_stream(
        modelId="m", messages=[{"role": "user", "content": [{"text": "hi"}]}]
    )
    events = answer["stream"]
    try:
        async for event in events:
            delta = event.get("contentBlockDelta")
            if delta is not None and "text" in delta["delta"]:
                parts.append(delta["delta"]["text"])
    finally:
        await close_event_stream(events)
    return "".join(parts)


@asynccontextmanager
async def gemini_side() -> AsyncIterator[tuple[Any, dict[str, ProviderAdapter]]]:
    async with (
        open_fake_gemini_server(lambda _request: BIG) as server,
        open_gemini_client(base_url=server.base_url, api_key="bench") as client,
    ):
        yield (
            client,
            {"lean": GeminiAdapter(client), "sdk": GeminiAdapter(client, stream_path="sdk")},
        )


@asynccontextmanager
async def responses_side() -> AsyncIterator[tuple[Any, dict[str, ProviderAdapter]]]:
    async with (
        open_fake_responses_server(lambda _request: BIG) as server,
        open_openai_client(base_url=server.base_url, api_key="bench") as client,
    ):
        yield client, {"": OpenAIResponsesAdapter(client)}


@asynccontextmanager
async def bedrock_side() -> AsyncIterator[tuple[Any, dict[str, ProviderAdapter]]]:
    async with (
        open_fake_bedrock_server(lambda _request: BIG) as server,
        open_bedrock_client(
            region="us-east-1",
            endpoint_url=server.base_url,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        ) as client,
    ):
        yield client, {"": BedrockAdapter(client)}


SIDES: dict[str, tuple[Callable[[], AbstractAsyncContextManager[Any]], RawTurn, str]] = {
    "gemini": (gemini_side, raw_gemini, "generate_content_stream, async for the chunks"),
    "responses": (responses_side, raw_responses, "responses.create(stream=True), async for"),
    "bedrock": (bedrock_side, raw_bedrock, "converse_stream, async for the events"),
}


async def bench_stream(name: str, rounds: int) -> None:
    opener, raw_turn, described = SIDES[name]
    async with opener() as (client, adapters):
        default = next(iter(adapters.values()))  # the adapter as constructed by default
        variants: dict[str, RawTurn] = {"raw": raw_turn}
        for path, adapter in adapters.items():
            variants[f"harness-{path}" if path else "harness"] = harness_turn(adapter)
        variants["routed"] = routed_turn(one_stage(default))
        timings = await time_interleaved(client, variants, rounds, warm_every=True)
    print(f"{name}: 1,000-delta streamed turn, best of {rounds} (raw = {described}):")
    print_ratios(timings, width=12)


@asynccontextmanager
async def gemini_and_claude(
    scripts: Mapping[str, StreamResponse],
) -> AsyncIterator[dict[str, ProviderAdapter]]:
    async with (
        open_fake_gemini_server(functools.partial(answer, scripts["google"])) as gemini,
        open_fake_anthropic_server(functools.partial(answer, scripts["anthropic"])) as claude,
        open_gemini_client(base_url=gemini.base_url, api_key="bench") as gemini_client,
        open_anthropic_client(base_url=claude.base_url, api_key="bench") as claude_client,
    ):
        yield {
            "google": GeminiAdapter(gemini_client),
            "anthropic": AnthropicAdapter(claude_client),
        }


async def main(rounds: int, only: list[str]) -> None:
    for name in SIDES:
        if name in only:
            await bench_stream(name, rounds)
    if "failover" in only:
        await bench_failover(gemini_and_claude, ("google", "anthropic"), rounds * 3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--only", default="gemini,responses,bedrock,failover")
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.rounds, args.only.split(","), backend=args.backend)
