"""The openai adapter's cost over the bare SDK, over the same loopback server in the same run.

1. A 1,000-chunk streamed turn: the raw SDK loop (``async with`` the stream,
   ``async for`` the chunks, keep the text) against
   ``stream_chat_completion`` (watchdog, accumulator, text stream into a
   ``ListSink``, defect check) and against a whole routed turn
   (``OpenAIChatModel.route``). Target: at most 1.05x the raw time.
2. Failover latency: a provider drops the connection mid-stream; the time
   from the last chunk the reader saw to the fallback provider's first byte,
   against the baseline of a fresh request's first byte on an open client.

Run: ``python benchmarks/bench_openai.py [--backend trio|asyncio] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio

from juno_bind_trio.completion import ListSink, TextEvent, TurnTextStream
from juno_bind_trio.providers.openai import (
    OpenAIChatModel,
    open_openai_client,
    stream_chat_completion,
)
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)
from provider_bench import BIG, CHUNKS, MESSAGES


async def raw_turn(client: Any) -> str:
    parts = []
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


async def harness_turn(client: Any) -> str:
    stream = TurnTextStream(sink=ListSink(), turn_id="t")
    stream.begin_attempt()
    result = await stream_chat_completion(client, model="m", messages=MESSAGES, text_stream=stream)
    stream.finish("succeeded")
    return result.content or ""


async def bench_stream(rounds: int) -> None:
    async with (
        open_fake_openai_server(lambda _request: BIG) as server,
        open_openai_client(base_url=server.base_url, api_key="bench") as client,
    ):
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )

        async def routed_turn(client: Any) -> str:
            stream = TurnTextStream(sink=ListSink(), turn_id="t")
            result = await model.route(MESSAGES, text_stream=stream)
            stream.finish("succeeded")
            return result.unwrap().content or ""

        timings: dict[str, list[float]] = {"raw": [], "harness": [], "routed": []}
        variants = {"raw": raw_turn, "harness": harness_turn, "routed": routed_turn}
        expected = await raw_turn(client)  # warm-up; also the answer every variant must give
        for _ in range(rounds):
            # Interleaved, so drift in the machine's speed hits every variant alike.
            for name, turn in variants.items():
                # CPU time of this process: the server, the SDK and the harness
                # all run on this one thread, and other processes' load (a
                # shared machine) does not count against any of them.
                started = time.process_time()
                text = await turn(client)
                timings[name].append(time.process_time() - started)
                assert text == expected, name
    raw = min(timings["raw"])
    print(f"1,000-chunk streamed turn, best of {rounds} (CPU time; server, SDK and harness):")
    for name in ("raw", "harness", "routed"):
        value = min(timings[name])
        print(
            f"  {name:8} {value * 1e3:8.2f} ms  {value / CHUNKS * 1e9:8.0f} ns/chunk  "
            f"ratio {value / raw:5.3f}x"
        )


async def bench_failover(rounds: int) -> None:
    dying = StreamResponse([TextDelta(f"t{i} ") for i in range(10)] + [Disconnect()])
    healthy = StreamResponse.of_text("ok")
    plan = RoutePlan([RouteStage("m", [Candidate("a"), Candidate("b")])])
    failover: list[float] = []
    fresh: list[float] = []
    async with (
        open_fake_openai_server(lambda _request: dying) as server_a,
        open_fake_openai_server(lambda _request: healthy) as server_b,
        open_openai_client(base_url=server_a.base_url, api_key="bench") as client_a,
        open_openai_client(base_url=server_b.base_url, api_key="bench") as client_b,
    ):
        model = OpenAIChatModel(plan=plan, clients={"a": client_a, "b": client_b})
        await raw_turn(client_b)  # open B's connection, as a live fallback pool would have it
        for _ in range(rounds):
            last_text_at = 0.0

            sink = ListSink()

            def emit(event: Any, _append: Any = sink.events.append) -> None:
                nonlocal last_text_at
                if isinstance(event, TextEvent) and event.epoch == 0:
                    last_text_at = anyio.current_time()
                _append(event)

            sink.emit = emit
            stream = TurnTextStream(sink=sink, turn_id="t")
            before = len(server_b.requests)
            result = await model.route(MESSAGES, text_stream=stream)
            stream.finish("succeeded")
            assert result.ok
            assert len(result.attempts) == 2
            first_byte = server_b.requests[before].first_byte_at
            assert first_byte is not None
            failover.append(first_byte - last_text_at)

            asked_at = anyio.current_time()
            await raw_turn(client_b)
            first_byte = server_b.requests[-1].first_byte_at
            assert first_byte is not None
            fresh.append(first_byte - asked_at)
    over = statistics.median(failover)
    base = statistics.median(fresh)
    print(f"Mid-stream failure to the fallback's first byte, median of {rounds}:")
    print(f"  fresh request on an open client  {base * 1e6:8.0f} us")
    print(f"  failover (last text -> fallback)  {over * 1e6:8.0f} us  ratio {over / base:5.2f}x")


async def main(rounds: int) -> None:
    await bench_stream(rounds)
    await bench_failover(rounds * 5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(f"backend: {args.backend}")
    anyio.run(main, args.rounds, backend=args.backend)
