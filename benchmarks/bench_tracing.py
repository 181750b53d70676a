"""What tracing costs: the loop and a streamed turn, with tracing off, API-only and SDK-exported.

Three configurations of the same code, interleaved in one process:

* **off**: the package's tracer lookup replaced by ``lambda: None``, the
  cheapest the instrumentation can be (what a host without
  ``opentelemetry-api`` installed gets);
* **API only**: ``opentelemetry-api`` installed, no SDK configured (the
  default: the API's proxy provider), so every seam makes its one check;
* **SDK**: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter``, so every span is built, ended and exported.

Workloads: ``bench_loop``'s ToolLoop (iterations of one scripted model call
and 10 no-op tool calls) and ``bench_openai``'s routed 1,000-chunk streamed
turn through the real ``openai`` SDK against the loopback fake server. Process
CPU time, >= 11 interleaved rounds, median and ratio against **off**.

    python benchmarks/bench_tracing.py [--rounds N] [--iterations N]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench_loop import CALLS_PER_TURN, script, tool_loop
from bench_openai import BIG, MESSAGES
from juno_bind_trio import _tracing
from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import open_fake_openai_server

EXPORTER = InMemorySpanExporter()
SDK = TracerProvider()
SDK.add_span_processor(SimpleSpanProcessor(EXPORTER))
REAL_TRACER = _tracing.tracer


def _off() -> None:
    return None


@contextmanager
def configured(name: str) -> Iterator[None]:
    """Put the package in configuration *name* for the body."""
    if name == "off":
        _tracing.tracer = _off
    elif name == "SDK":
        _tracing._provider_override = SDK
    try:
        yield
    finally:
        _tracing.tracer = REAL_TRACER
        _tracing._provider_override = None
        EXPORTER.clear()


CONFIGS = ("off", "API only", "SDK")


def report(title: str, unit: str, scale: float, timings: dict[str, list[float]]) -> None:
    base = statistics.median(timings["off"])
    print(title)
    for name in CONFIGS:
        value = statistics.median(timings[name])
        print(f"  {name:<9} {value * scale:9.1f} {unit}  ratio {value / base:6.3f}x")


def bench_loop(rounds: int, iterations: int) -> None:
    timings: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for _ in range(rounds):
        for name in CONFIGS:  # interleaved: drift hits every configuration alike
            turns, answers = script(iterations)
            with configured(name):
                gc.collect()
                gc.disable()
                try:
                    started = time.process_time()
                    count = trio.run(tool_loop, iterations, turns, answers, False)
                    elapsed = time.process_time() - started
                finally:
                    gc.enable()
            assert count == 1 + iterations * (1 + CALLS_PER_TURN)
            timings[name].append(elapsed / iterations)
    report(
        f"ToolLoop, {iterations} iterations x {CALLS_PER_TURN} no-op calls, median of {rounds}:",
        "us/iteration",
        1e6,
        timings,
    )


async def bench_stream(rounds: int) -> None:
    async with (
        open_fake_openai_server(lambda _request: BIG) as server,
        open_openai_client(base_url=server.base_url, api_key="bench") as client,
    ):
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )

        async def routed_turn() -> str:
            stream = TurnTextStream(sink=ListSink(), turn_id="t")
            result = await model.route(MESSAGES, text_stream=stream)
            stream.finish("succeeded")
            return result.unwrap().content or ""

        expected = await routed_turn()  # warm-up
        timings: dict[str, list[float]] = {name: [] for name in CONFIGS}
        for _ in range(rounds):
            for name in CONFIGS:
                with configured(name):
                    started = time.process_time()
                    text = await routed_turn()
                    timings[name].append(time.process_time() - started)
                assert text == expected
    report(
        f"Routed 1,000-chunk streamed turn (openai SDK, loopback), median of {rounds}:",
        "ms/turn",
        1e3,
        timings,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    if args.rounds < 11:
        parser.error("--rounds must be at least 11")
    bench_loop(args.rounds, args.iterations)
    run: Callable[..., Any] = trio.run
    run(bench_stream, args.rounds)


if __name__ == "__main__":
    main()
