"""What tracing costs: the loop and a streamed turn, with tracing off, API-only and SDK-exported.

Three configurations of the same code, interleaved in one process:

* **off**: the package's tracer lookup replaced by ``lambda: None``, the
  cheapest the instrumentation can be (what a host without
  ``opentelemetry-api`` installed gets);
* **API only**: ``opentelemetry-api`` installed, no SDK configured (the
  default: the API's proxy provider), so every seam makes its one check;
* **SDK**: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter``, so every span is built, ended and exported.

Workloads, on trio and on asyncio: ``bench_loop``'s ToolLoop script
(iterations of one scripted model call and 10 no-op tool calls, the model and
the tools each one anyio checkpoint, so both backends run the same code) and
``bench_openai``'s routed 1,000-chunk streamed turn through the real
``openai`` SDK against the loopback fake server. Process CPU time, >= 11
interleaved rounds (the loop: every backend and configuration in each round;
the streamed turn: every configuration in each round, per backend), median and
ratio against **off** of the same backend.

    python benchmarks/bench_tracing.py [--rounds N] [--iterations N] [--backend trio|asyncio|both]

Fewer than 11 rounds is a check that the benchmark runs, not a figure.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench_loop import CALLS_PER_TURN, save, script
from juno_bind_trio import _tracing
from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import open_fake_openai_server
from provider_bench import BIG, MESSAGES

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
BACKENDS = ("trio", "asyncio")


async def tool_loop(
    iterations: int, turns: list[ModelTurnResult], answers: dict[str, ToolCallOutcome]
) -> int:
    """``bench_loop``'s loop without events, its ports on anyio (so on either backend)."""
    state = LoopState([{"role": "user", "content": "go"}])
    position = iter(turns)

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        await anyio.lowlevel.checkpoint()
        return next(position)

    async def run_tool(call: Any) -> ToolCallOutcome:
        await anyio.lowlevel.checkpoint()
        return answers[call["id"]]

    loop = ToolLoop(
        state=state,
        max_iterations=iterations,
        call_model=call_model,
        run_tool_call=run_tool,
        save_session=save,
        stop=anyio.CancelScope(),
    )
    result = await loop.run()
    assert result.reason == "max_iterations"
    return len(state.messages)


def report(title: str, unit: str, scale: float, timings: dict[str, list[float]]) -> None:
    base = statistics.median(timings["off"])
    print(title)
    for name in CONFIGS:
        value = statistics.median(timings[name])
        print(f"  {name:<9} {value * scale:9.1f} {unit}  ratio {value / base:6.3f}x")


def bench_loop(rounds: int, iterations: int, backends: tuple[str, ...]) -> None:
    timings: dict[tuple[str, str], list[float]] = {
        (backend, name): [] for backend in backends for name in CONFIGS
    }
    for _ in range(rounds):
        # Interleaved: drift hits every backend and configuration alike.
        for backend in backends:
            for name in CONFIGS:
                turns, answers = script(iterations)
                with configured(name):
                    gc.collect()
                    gc.disable()
                    try:
                        started = time.process_time()
                        count = anyio.run(tool_loop, iterations, turns, answers, backend=backend)
                        elapsed = time.process_time() - started
                    finally:
                        gc.enable()
                assert count == 1 + iterations * (1 + CALLS_PER_TURN)
                timings[backend, name].append(elapsed / iterations)
    for backend in backends:
        report(
            f"{backend}: ToolLoop, {iterations} iterations x {CALLS_PER_TURN} no-op calls, "
            f"median of {rounds}:",
            "us/iteration",
            1e6,
            {name: timings[backend, name] for name in CONFIGS},
        )


async def bench_stream(rounds: int, backend: str) -> None:
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
        f"{backend}: routed 1,000-chunk streamed turn (openai SDK, loopback), median of {rounds}:",
        "ms/turn",
        1e3,
        timings,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="both")
    args = parser.parse_args()
    if args.rounds < 1 or args.iterations < 1:
        parser.error("--rounds and --iterations must be positive")
    if args.rounds < 11:
        print(f"({args.rounds} rounds: a check that this runs, not a figure; use >= 11)")
    backends: tuple[str, ...] = BACKENDS if args.backend == "both" else (args.backend,)
    bench_loop(args.rounds, args.iterations, backends)
    for backend in backends:
        anyio.run(bench_stream, args.rounds, backend, backend=backend)


if __name__ == "__main__":
    main()
