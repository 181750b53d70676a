"""A live reader's cost: a 1,000-chunk turn read by a task in the same process.

The recommended path (``async with open_memory_sink() as (sink, events)``, a
reader task rendering every event into a ``TurnTextView``) against the raw
SDK loop (``async with`` the stream, ``async for`` the chunks, keep the text)
on the same loopback server, on each backend:

* through ``OpenAIChatModel.route`` (one routed turn), and
* through a one-turn ``ToolLoop`` (``call_model=OpenAIChatModel``,
  ``text_sink=sink``).

Interleaved rounds, CPU time of this one process (server, SDK, harness and
reader together; other processes' load does not count), median of the
rounds. Target: at most 1.05x the raw loop, all four ratios.

Run: ``python benchmarks/bench_live_reader.py [--rounds N] [--backend trio|asyncio|both]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from juno_bind_trio.completion import (
    CoalescingReceiver,
    ListSink,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
    open_memory_sink,
)
from juno_bind_trio.loop import LoopState, ToolLoop
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

CHUNKS = 1000
MESSAGES: Any = [{"role": "user", "content": "hi"}]
BIG = StreamResponse.of_text(*(f"tok{i} " for i in range(CHUNKS)))
EXPECTED = "".join(f"tok{i} " for i in range(CHUNKS))


async def raw_turn(client: Any) -> str:
    parts = []
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


async def render(events: CoalescingReceiver[TurnStreamEvent], view: TurnTextView) -> None:
    async for event in events:
        view.apply(event)


async def no_tools(call: Any) -> Any:  # the model asks for none
    raise AssertionError(call)


async def run_backend(rounds: int) -> dict[str, float]:
    async with (
        open_fake_openai_server(lambda _request: BIG) as server,
        open_openai_client(base_url=server.base_url, api_key="bench") as client,
    ):
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )

        async def routed_with_reader(_client: Any) -> str:
            view = TurnTextView("t")
            async with anyio.create_task_group() as tg, open_memory_sink() as (sink, events):
                tg.start_soon(render, events, view)
                stream = TurnTextStream(sink=sink, turn_id="t")
                result = await model.route(MESSAGES, text_stream=stream)
                stream.finish("succeeded")
            assert view.text == result.unwrap().content
            return view.text

        async def loop_with_reader(_client: Any) -> str:
            view = TurnTextView("run:1")
            async with anyio.create_task_group() as tg, open_memory_sink() as (sink, events):
                tg.start_soon(render, events, view)
                result = await ToolLoop(
                    state=LoopState(messages=list(MESSAGES)),
                    max_iterations=1,
                    call_model=model,
                    run_tool_call=no_tools,
                    text_sink=sink,
                    run_id="run",
                ).run()
            assert view.text == result.content
            return view.text

        async def routed_no_reader(_client: Any) -> str:
            # The reference: the same routed turn into a ListSink, nobody reading.
            stream = TurnTextStream(sink=ListSink(), turn_id="t")
            result = await model.route(MESSAGES, text_stream=stream)
            stream.finish("succeeded")
            return result.unwrap().content or ""

        variants: dict[str, Callable[[Any], Awaitable[str]]] = {
            "raw": raw_turn,
            "route": routed_with_reader,
            "loop": loop_with_reader,
            "route_list": routed_no_reader,
        }
        timings: dict[str, list[float]] = {name: [] for name in variants}
        for turn in variants.values():  # warm-up: connections, imports, caches
            assert await turn(client) == EXPECTED
        for round_index in range(rounds):
            # Interleaved, and the order rotated every round, so drift in the
            # machine's speed (and any first/last-in-round effect) hits all alike.
            names = list(variants)
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.process_time()
                text = await variants[name](client)
                timings[name].append(time.process_time() - started)
                assert text == EXPECTED, name
    raw = statistics.median(timings["raw"])
    result = {"raw_ms": raw * 1e3, "raw_min_ms": min(timings["raw"]) * 1e3}
    for name in ("route", "loop", "route_list"):
        # Three estimates of one ratio. This VM's CPU time per turn flips
        # between two states (about 180 and 290 ms for the raw loop) in
        # stretches of several rounds, so the medians' ratio depends on which
        # state each variant's median lands in. The median of each round's own
        # ratio compares variants in the same state; the best-of ratio compares
        # the fastest state with itself.
        result[name] = statistics.median(timings[name]) / raw
        result[name + "_best"] = min(timings[name]) / min(timings["raw"])
        result[name + "_paired"] = statistics.median(
            variant / baseline
            for variant, baseline in zip(timings[name], timings["raw"], strict=True)
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    backends = ("trio", "asyncio") if args.backend == "both" else (args.backend,)
    print(
        f"1,000-chunk turn with a live reader (open_memory_sink + TurnTextView), "
        f"median of {args.rounds} interleaved rounds, CPU time, ratio to the raw SDK loop:"
    )
    for backend in backends:
        result = anyio.run(run_backend, args.rounds, backend=backend)
        print(
            f"  {backend:8} raw {result['raw_ms']:7.1f} ms   "
            f"route + reader {result['route']:5.3f}x   "
            f"one-turn ToolLoop + reader {result['loop']:5.3f}x   "
            f"(reference: route into a ListSink, no reader {result['route_list']:5.3f}x)"
        )
        print(
            f"  {'':8} paired (median of each round's ratio): route {result['route_paired']:5.3f}x"
            f"   loop {result['loop_paired']:5.3f}x   reference {result['route_list_paired']:5.3f}x"
        )
        print(
            f"  {'':8} best of the rounds (raw {result['raw_min_ms']:.1f} ms): "
            f"route {result['route_best']:5.3f}x   loop {result['loop_best']:5.3f}x   "
            f"reference {result['route_list_best']:5.3f}x"
        )


if __name__ == "__main__":
    main()
