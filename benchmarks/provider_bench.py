"""What the adapter benchmarks share: the turn, its variants, the interleaved timing, the failover.

``bench_anthropic.py`` and ``bench_providers.py`` measure each adapter the
same way: a 1,000-delta streamed turn from the provider's fake, the bare SDK
loop against the adapter's ``stream_turn`` and a whole routed turn, timed in
interleaved rounds with the order alternated; and the gap between the last
delta a reader saw of a dying attempt and the fallback's first delta. The
measuring lives here; each benchmark keeps its providers' raw SDK loops and
clients. ``bench_openai.py`` takes the turn from here.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio

from juno_bind_trio.completion import ListSink, TextEvent, TurnTextStream
from juno_bind_trio.providers import ProviderAdapter, ProviderRequest, RoutedModel
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import Disconnect, StreamResponse, TextDelta

CHUNKS = 1000
MESSAGES: Any = [{"role": "user", "content": "hi"}]
BIG = StreamResponse.of_text(*(f"tok{i} " for i in range(CHUNKS)))

RawTurn = Callable[[Any], Awaitable[str]]
"""One streamed turn on a client, returning its text."""


def harness_turn(adapter: ProviderAdapter) -> RawTurn:
    """The adapter's ``stream_turn`` into a ``ListSink``, with the watchdog's usual budgets."""

    async def turn(client: Any) -> str:
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

    return turn


def routed_turn(model: RoutedModel) -> RawTurn:
    """A whole ``RoutedModel.route`` turn into a ``ListSink``."""

    async def turn(client: Any) -> str:
        stream = TurnTextStream(sink=ListSink(), turn_id="t")
        result = await model.route(MESSAGES, text_stream=stream)
        stream.finish("succeeded")
        return result.unwrap().content or ""

    return turn


def one_stage(adapter: ProviderAdapter, name: str = "p") -> RoutedModel:
    """A model routing to model ``m`` on *adapter* alone (under the name *name*)."""
    return RoutedModel(
        plan=RoutePlan([RouteStage("m", [Candidate(name)])]), adapters={name: adapter}
    )


async def time_interleaved(
    client: Any, variants: Mapping[str, RawTurn], rounds: int, *, warm_every: bool
) -> dict[str, list[float]]:
    """CPU seconds of each variant's turn on *client*, *rounds* of each, interleaved.

    The ``"raw"`` variant's text is the answer every variant must give; it runs
    once first as a warm-up (and every variant does when *warm_every*). The
    order alternates from round to round, so drift hits every variant alike.
    CPU time of this process: the server, the SDK and the harness all run on
    this one thread, and other processes' load does not count against any.
    """
    expected = await variants["raw"](client)
    if warm_every:
        for variant in variants.values():
            assert await variant(client) == expected
    timings: dict[str, list[float]] = {label: [] for label in variants}
    for index in range(rounds):
        order = list(variants.items())
        if index % 2:
            order.reverse()
        for label, turn in order:
            started = time.process_time()
            text = await turn(client)
            timings[label].append(time.process_time() - started)
            assert text == expected, label
    return timings


def print_ratios(timings: Mapping[str, list[float]], *, width: int) -> None:
    """Each variant's best time, per delta, and its ratio to ``"raw"`` (best and paired median)."""
    raw = min(timings["raw"])
    for label, times in timings.items():
        value = min(times)
        paired = statistics.median(t / r for t, r in zip(times, timings["raw"], strict=True))
        print(
            f"  {label:{width}} {value * 1e3:8.2f} ms  {value / CHUNKS * 1e9:8.0f} ns/delta  "
            f"ratio {value / raw:5.3f}x (paired median {paired:5.3f}x)"
        )


# --- failover -------------------------------------------------------------------------

DYING = StreamResponse([TextDelta(f"t{i} ") for i in range(10)] + [Disconnect()])
"""Ten deltas, then the connection drops."""
HEALTHY = StreamResponse.of_text("ok")


def answer(response: StreamResponse, _request: object) -> StreamResponse:
    """A fake's script that answers *response* to every request (with ``functools.partial``)."""
    return response


def two_stages(first: str, second: str, adapters: dict[str, ProviderAdapter]) -> RoutedModel:
    """Model ``m1`` on *first*, then ``m2`` on *second*, no retries."""
    return RoutedModel(
        plan=RoutePlan(
            [RouteStage("m1", [Candidate(first)]), RouteStage("m2", [Candidate(second)])],
            max_retries=0,
        ),
        adapters=adapters,
    )


async def failover_gaps(model: RoutedModel, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds from the dying attempt's last delta to the fallback's first, *rounds* times,
    and this process's CPU time over each gap (the rest of a gap is waiting for a core)."""
    await model.route(MESSAGES)  # warm both connections' code paths
    gaps: list[float] = []
    cpu: list[float] = []
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
    return gaps, cpu


PairOpener = Callable[
    [Mapping[str, StreamResponse]], AbstractAsyncContextManager[dict[str, ProviderAdapter]]
]
"""Opens two providers' fakes, each answering its script, and yields their adapters by name."""


async def bench_failover(open_pair: PairOpener, names: tuple[str, str], rounds: int) -> None:
    """The failover gap with the first of *names* dying and the second answering, then reversed."""
    for first, second in (names, names[::-1]):
        async with open_pair({first: DYING, second: HEALTHY}) as adapters:
            gaps, cpu = await failover_gaps(two_stages(first, second, adapters), rounds)
        print(
            f"{first} dies mid-stream -> {second}'s first delta, median of {len(gaps)}: "
            f"{statistics.median(gaps) * 1e3:6.2f} ms (max {max(gaps) * 1e3:6.2f} ms); "
            f"this process's CPU in the gap, median {statistics.median(cpu) * 1e3:6.2f} ms"
        )
