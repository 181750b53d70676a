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
import statistics
import time
from typing import Any

import anyio

from juno_bind_trio.completion import ListSink, TextEvent, TurnTextStream
from juno_bind_trio.providers import ProviderRequest, RoutedModel
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.openai import OpenAIChatAdapter, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    StreamResponse,
    TextDelta,
    open_fake_anthropic_server,
    open_fake_openai_server,
)

CHUNKS = 1000
MESSAGES: Any = [{"role": "user", "content": "hi"}]
BIG = StreamResponse.of_text(*(f"tok{i} " for i in range(CHUNKS)))


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
        model = RoutedModel(
            plan=RoutePlan([RouteStage("m", [Candidate("a")])]), adapters={"a": adapter}
        )

        async def harness_turn(client: Any) -> str:
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

        timings: dict[str, list[float]] = {"raw": [], "harness": [], "routed": []}
        variants = {"raw": raw_turn, "harness": harness_turn, "routed": routed_turn}
        expected = await raw_turn(client)  # warm-up; the answer every variant must give
        for index in range(rounds):
            # Interleaved, the order alternated, so drift hits every variant alike.
            order = list(variants.items())
            if index % 2:
                order.reverse()
            for name, turn in order:
                started = time.process_time()
                text = await turn(client)
                timings[name].append(time.process_time() - started)
                assert text == expected, name
    raw = min(timings["raw"])
    print(f"1,000-delta streamed turn, best of {rounds} (CPU time; server, SDK and harness):")
    for name in ("raw", "harness", "routed"):
        value = min(timings[name])
        paired = statistics.median(
            t / r for t, r in zip(timings[name], timings["raw"], strict=True)
        )
        print(
            f"  {name:8} {value * 1e3:8.2f} ms  {value / CHUNKS * 1e9:8.0f} ns/delta  "
            f"ratio {value / raw:5.3f}x (paired median {paired:5.3f}x)"
        )


def _answer(response: StreamResponse, _request: object) -> StreamResponse:
    return response


async def bench_failover(rounds: int) -> None:
    dying = StreamResponse([TextDelta(f"t{i} ") for i in range(10)] + [Disconnect()])
    healthy = StreamResponse.of_text("ok")
    for first, second in (("anthropic", "openai"), ("openai", "anthropic")):
        scripts = {first: dying, second: healthy}
        gaps: list[float] = []
        cpu: list[float] = []
        async with (
            open_fake_anthropic_server(functools.partial(_answer, scripts["anthropic"])) as claude,
            open_fake_openai_server(functools.partial(_answer, scripts["openai"])) as gpt,
            open_anthropic_client(base_url=claude.base_url, api_key="bench") as claude_client,
            open_openai_client(base_url=gpt.base_url, api_key="bench") as gpt_client,
        ):
            model = RoutedModel(
                plan=RoutePlan(
                    [
                        RouteStage("m1", [Candidate(first)]),
                        RouteStage("m2", [Candidate(second)]),
                    ],
                    max_retries=0,
                ),
                adapters={
                    "anthropic": AnthropicAdapter(claude_client),
                    "openai": OpenAIChatAdapter(gpt_client),
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
                assert result.ok
                assert result.unwrap().content == "ok"
                gaps.append(times[1][0] - times[0][-1])
                cpu.append(clocks[1][0] - clocks[0][-1])
        median = statistics.median(gaps)
        worst = max(gaps)
        print(
            f"{first} dies mid-stream -> {second}'s first delta, median of {rounds}: "
            f"{median * 1e3:6.2f} ms (max {worst * 1e3:6.2f} ms); "
            f"this process's CPU in the gap, median {statistics.median(cpu) * 1e3:6.2f} ms"
        )


async def main(rounds: int) -> None:
    await bench_stream(rounds)
    await bench_failover(rounds * 3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.rounds, backend=args.backend)
