"""From observe() to the browser's render: the live view's latency over loopback.

One run streams a 1,000-delta turn through a real ``TurnTextStream``
(``observe()`` stamps each delta's wall-clock time), ``LiveRuns``, the
Starlette app on Hypercorn (127.0.0.1), Server-Sent Events, and the shipped
JavaScript client in Debian's headless Chromium, which stamps the moment each
delta's text is in the DOM. Latency per delta = render time − observe time.

The baseline, in the same run and interleaved round by round: the same
deltas from the same ``observe()`` written straight onto a bare SSE response,
and a page that only records when each message arrives (no relay log, no
reader, no renderer). Prints the p95 of each round, the medians over the
rounds and the ratio. Target: live view p95 at most 50 ms.

    python benchmarks/bench_web_latency.py [--deltas 1000] [--rounds 11] [--pace 0.004]

Needs the ``test`` extra (Starlette, Hypercorn, Playwright) and ``/usr/bin/chromium``.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from juno_bind_trio.completion import TurnStreamEvent, TurnTextStream
from juno_bind_trio.web import STATIC_DIR, LiveRuns, create_app, serve

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

LIVE_PAGE = """<!doctype html><meta charset="utf-8"><div id="turns"></div>
<script type="module">
import { LiveView } from "/static/live-view.js";
window.view = new LiveView({ turns: document.getElementById("turns") });
window.ready = true;
</script>"""

BARE_PAGE = """<!doctype html><meta charset="utf-8"><div id="out"></div>
<script>
window.arrivals = [];
window.go = () => {
  const source = new EventSource("/bare");
  source.onmessage = (m) => {
    const event = JSON.parse(m.data);
    if (event.kind === "end") { source.close(); window.done = true; return; }
    window.arrivals.push({ seq: event.seq, at: performance.timeOrigin + performance.now() });
  };
};
window.ready = true;
</script>"""


class StampingSink:
    """A retractable sink that stamps each event's wall-clock time and forwards it."""

    retractable = True

    def __init__(self, send: MemoryObjectSendStream[TurnStreamEvent]) -> None:
        self.send = send
        self.stamps: dict[int, float] = {}

    def emit(self, event: TurnStreamEvent) -> None:
        self.stamps[event.seq] = time.time() * 1000.0
        self.send.send_nowait(event)


async def produce(deltas: int, pace: float, sink: StampingSink, turn_id: str) -> None:
    stream = TurnTextStream(sink=sink, turn_id=turn_id)
    stream.begin_attempt()
    for i in range(deltas):
        await anyio.sleep(pace)
        stream.observe(f"w{i} ")
    stream.finish("succeeded")
    sink.send.close()


class Bench:
    """Both pipelines, served on one port; the stamps of the round in progress."""

    def __init__(self, deltas: int, pace: float) -> None:
        self.deltas = deltas
        self.pace = pace
        self.stamps: dict[int, float] = {}

    # -- the live view's side: a RunSource whose run is one stamped turn ---------------

    @asynccontextmanager
    async def open_run(self, prompt: str, *, run_id: str | None = None) -> AsyncIterator[Any]:
        send, receive = anyio.create_memory_object_stream[TurnStreamEvent](self.deltas + 10)
        sink = StampingSink(send)
        self.stamps = sink.stamps
        bench = self

        class Run:
            messages: ClassVar[list[dict[str, Any]]] = []

            def stop(self) -> None: ...

            def cancel(self) -> None: ...

            async def __aiter__(self) -> AsyncIterator[Any]:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(produce, bench.deltas, bench.pace, sink, f"{run_id}:1")
                    async with receive:
                        async for event in receive:
                            yield event

        yield Run()

    # -- the baseline: observe() straight onto an SSE response --------------------------

    async def bare(self, request: Request) -> Response:
        send, receive = anyio.create_memory_object_stream[TurnStreamEvent](self.deltas + 10)
        sink = StampingSink(send)
        self.stamps = sink.stamps

        async def body() -> AsyncIterator[bytes]:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(produce, self.deltas, self.pace, sink, "bare:1")
                async with receive:
                    async for event in receive:
                        yield f"data: {json.dumps(event.to_wire())}\n\n".encode()
            yield b'data: {"kind": "end"}\n\n'

        return StreamingResponse(body(), media_type="text/event-stream")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def start_server(bench: Bench) -> str:
    runs = LiveRuns(bench)
    app: Starlette = create_app(runs)
    app.router.routes.append(Route("/live", lambda r: HTMLResponse(LIVE_PAGE)))
    app.router.routes.append(Route("/bare-page", lambda r: HTMLResponse(BARE_PAGE)))
    app.router.routes.append(Route("/bare", bench.bare))
    assert (STATIC_DIR / "live-view.js").exists()
    found: list[str] = []
    ready = threading.Event()

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            found.append(await tasks.start(functools.partial(serve, app, port=0)))
            ready.set()

    threading.Thread(
        target=anyio.run, args=(main,), kwargs={"backend": "trio"}, daemon=True
    ).start()
    ready.wait(30)
    return found[0]


def live_round(page: Any, bench: Bench) -> float:
    page.evaluate("window.view.start('go')")
    page.wait_for_function("window.view && window.view.status === 'ended'", timeout=120_000)
    history = page.evaluate("window.view.history.filter(h => h.seq !== null)")
    return p95([h["at"] - bench.stamps[h["seq"]] for h in history])


def bare_round(page: Any, bench: Bench) -> float:
    page.evaluate("window.go()")
    page.wait_for_function("window.done === true", timeout=120_000)
    arrivals = page.evaluate("window.arrivals")
    return p95([a["at"] - bench.stamps[a["seq"]] for a in arrivals])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--pace", type=float, default=0.004, help="seconds between deltas")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    bench = Bench(args.deltas, args.pace)
    url = start_server(bench)
    live: list[float] = []
    bare: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()
        for round_ in range(args.rounds):
            page.goto(f"{url}/live")
            page.wait_for_function("window.ready === true")
            live.append(live_round(page, bench))
            page.goto(f"{url}/bare-page")
            page.wait_for_function("window.ready === true")
            bare.append(bare_round(page, bench))
            print(
                f"round {round_ + 1:2}: live view p95 {live[-1]:6.2f} ms"
                f"   bare SSE p95 {bare[-1]:6.2f} ms"
            )
        browser.close()
    live_median = statistics.median(live)
    bare_median = statistics.median(bare)
    print(
        f"observe() -> render, {args.deltas} deltas every {args.pace * 1000:g} ms, "
        f"{args.rounds} rounds: live view p95 median {live_median:.2f} ms, "
        f"bare SSE p95 median {bare_median:.2f} ms, ratio {live_median / bare_median:.2f}x "
        f"(target: live view p95 <= 50 ms)"
    )


if __name__ == "__main__":
    main()
