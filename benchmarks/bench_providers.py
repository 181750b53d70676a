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
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio

from juno_bind_trio.completion import ListSink, TextEvent, TurnTextStream
from juno_bind_trio.providers import ProviderAdapter, ProviderRequest, RoutedModel
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.bedrock import (
    BedrockAdapter,
    close_event_stream,
    open_bedrock_client,
)
from juno_bind_trio.providers.google import GeminiAdapter, open_gemini_client
from juno_bind_trio.providers.openai import OpenAIResponsesAdapter, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    StreamResponse,
    TextDelta,
    open_fake_anthropic_server,
    open_fake_bedrock_server,
    open_fake_gemini_server,
    open_fake_responses_server,
)

CHUNKS = 1000
MESSAGES: Any = [{"role": "user", "content": "hi"}]
BIG = StreamResponse.of_text(*(f"tok{i} " for i in range(CHUNKS)))

RawTurn = Callable[[Any], Awaitable[str]]


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
        model = RoutedModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), adapters={"p": default}
        )

        async def harness_turn(client: Any, adapter: ProviderAdapter = default) -> str:
            stream = TurnTextStream(sink=ListSink(), turn_id="t")
            stream.begin_attempt()
            request = ProviderRequest(
                model="m",
                messages=MESSAGES,
                text_stream=stream,
                time_to_first_token=30.0,
                inter_chunk_timeout=60.0,
            )
            result = await adapter.stream_turn(request)
            stream.finish("succeeded")
            return result.content or ""

        async def routed_turn(client: Any) -> str:
            stream = TurnTextStream(sink=ListSink(), turn_id="t")
            result = await model.route(MESSAGES, text_stream=stream)
            stream.finish("succeeded")
            return result.unwrap().content or ""

        variants: dict[str, RawTurn] = {"raw": raw_turn}
        for path, adapter in adapters.items():
            label = f"harness-{path}" if path else "harness"
            variants[label] = functools.partial(harness_turn, adapter=adapter)
        variants["routed"] = routed_turn
        timings: dict[str, list[float]] = {label: [] for label in variants}
        expected = await raw_turn(client)  # warm-up; the answer every variant must give
        for variant in variants.values():
            assert await variant(client) == expected
        for index in range(rounds):
            order = list(variants.items())
            if index % 2:
                order.reverse()
            for variant_name, turn in order:
                started = time.process_time()
                text = await turn(client)
                timings[variant_name].append(time.process_time() - started)
                assert text == expected, variant_name
    raw = min(timings["raw"])
    print(f"{name}: 1,000-delta streamed turn, best of {rounds} (raw = {described}):")
    for variant_name in variants:
        value = min(timings[variant_name])
        paired = statistics.median(
            t / r for t, r in zip(timings[variant_name], timings["raw"], strict=True)
        )
        print(
            f"  {variant_name:12} {value * 1e3:8.2f} ms  {value / CHUNKS * 1e9:8.0f} ns/delta  "
            f"ratio {value / raw:5.3f}x (paired median {paired:5.3f}x)"
        )


def _answer(response: StreamResponse, _request: object) -> StreamResponse:
    return response


async def bench_failover(rounds: int) -> None:
    dying = StreamResponse([TextDelta(f"t{i} ") for i in range(10)] + [Disconnect()])
    healthy = StreamResponse.of_text("ok")
    for first, second in (("google", "anthropic"), ("anthropic", "google")):
        scripts = {first: dying, second: healthy}
        gaps: list[float] = []
        cpu: list[float] = []
        async with (
            open_fake_gemini_server(functools.partial(_answer, scripts["google"])) as gemini,
            open_fake_anthropic_server(functools.partial(_answer, scripts["anthropic"])) as claude,
            open_gemini_client(base_url=gemini.base_url, api_key="bench") as gemini_client,
            open_anthropic_client(base_url=claude.base_url, api_key="bench") as claude_client,
        ):
            model = RoutedModel(
                plan=RoutePlan(
                    [RouteStage("m1", [Candidate(first)]), RouteStage("m2", [Candidate(second)])],
                    max_retries=0,
                ),
                adapters={
                    "google": GeminiAdapter(gemini_client),
                    "anthropic": AnthropicAdapter(claude_client),
                },
            )
            await model.route(MESSAGES)  # warm both connections' code paths
            for _ in range(rounds):
                times: dict[int, list[float]] = {0: [], 1: []}
                clocks: dict[int, list[float]] = {0: [], 1: []}
                sink = ListSink()

                def emit(
                    event: Any,
                    _append: Any = sink.events.append,
                    _times: Any = times,
                    _clocks: Any = clocks,
                ) -> None:
                    if isinstance(event, TextEvent):
                        _times[event.epoch].append(anyio.current_time())
                        _clocks[event.epoch].append(time.process_time())
                    _append(event)

                sink.emit = emit
                stream = TurnTextStream(sink=sink, turn_id="t")
                result = await model.route(MESSAGES, text_stream=stream)
                stream.finish("succeeded")
                assert result.unwrap().content == "ok"
                gaps.append(times[1][0] - times[0][-1])
                cpu.append(clocks[1][0] - clocks[0][-1])
        print(
            f"{first} dies mid-stream -> {second}'s first delta, median of {rounds}: "
            f"{statistics.median(gaps) * 1e3:6.2f} ms (max {max(gaps) * 1e3:6.2f} ms); "
            f"this process's CPU in the gap, median {statistics.median(cpu) * 1e3:6.2f} ms"
        )


async def main(rounds: int, only: list[str]) -> None:
    for name in SIDES:
        if name in only:
            await bench_stream(name, rounds)
    if "failover" in only:
        await bench_failover(rounds * 3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--only", default="gemini,responses,bedrock,failover")
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.rounds, args.only.split(","), backend=args.backend)
