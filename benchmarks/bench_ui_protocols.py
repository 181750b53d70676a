"""A 1,000-chunk turn through each frontend protocol's endpoint, against the package's own SSE view.

One run: an ``Agent`` on the real ``openai`` SDK against the fake provider on
loopback streams a 1,000-chunk answer; the client (httpx, in the same
process, over 127.0.0.1 through Hypercorn) reads the whole response. Three
ways, interleaved round by round:

* baseline: the web view (``LiveRuns`` + ``create_app``): ``POST /runs``,
  then ``GET /runs/{id}/events`` read to the run's last event;
* ``POST /api/chat``: the UI message stream, read to ``[DONE]``;
* ``POST /agui``: AG-UI, read to ``RUN_FINISHED``.

Prints each round's time per run, then per way the median time and the
median of the per-round ratios, on the wall clock and in process CPU time
(everything, the fake provider and the client included, runs in this
process, so CPU time is the steadier figure on a loaded machine).
Target: each protocol at most 1.1x the web view.

    python benchmarks/bench_ui_protocols.py [--chunks 1000] [--rounds 11] [--runs 5]

Needs the ``web`` extra.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio
import httpx2 as httpx  # the HTTP client the openai SDK brings
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from juno_bind_trio.agent import Agent
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server
from juno_bind_trio.web import (
    LiveRuns,
    create_agui_app,
    create_app,
    create_ui_message_stream_app,
    serve,
)


async def bench(chunks: int, rounds: int, runs_per_sample: int) -> None:
    answer = StreamResponse.of_text(*(f"w{i} " for i in range(chunks)))
    plan = RoutePlan([RouteStage("m", [Candidate("fake")])], max_retries=0)
    async with (
        open_fake_openai_server(lambda _request: answer) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        agent = Agent(OpenAIChatModel(plan=plan, clients={"fake": client}))
        live = LiveRuns(agent, max_kept_events=100_000)
        app = Starlette(
            routes=[
                Route("/api/chat", create_ui_message_stream_app(agent), methods=["POST"]),
                Route("/agui", create_agui_app(agent), methods=["POST"]),
                Mount("/", create_app(live)),
            ]
        )
        async with live.running(), anyio.create_task_group() as tasks:
            url = await tasks.start(functools.partial(serve, app, port=0))
            origin = {"origin": url}
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:

                async def web_view() -> None:
                    started = await http.post("/runs", json={"prompt": "go"}, headers=origin)
                    events = started.json()["events"]
                    async with http.stream("GET", events, headers=origin) as response:
                        async for line in response.aiter_lines():
                            if '"status":"ended"' in line:
                                break

                async def ui_stream() -> None:
                    body = {
                        "id": "c",
                        "messages": [
                            {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
                        ],
                        "trigger": "submit-message",
                    }
                    async with http.stream(
                        "POST", "/api/chat", json=body, headers=origin
                    ) as response:
                        async for _ in response.aiter_bytes():
                            pass

                async def agui() -> None:
                    body = {
                        "threadId": "t",
                        "runId": "r",
                        "state": {},
                        "messages": [{"id": "u", "role": "user", "content": "go"}],
                        "tools": [],
                        "context": [],
                        "forwardedProps": {},
                    }
                    async with http.stream("POST", "/agui", json=body, headers=origin) as response:
                        async for _ in response.aiter_bytes():
                            pass

                ways: dict[str, Callable[[], Awaitable[None]]] = {
                    "web view (baseline)": web_view,
                    "UI message stream": ui_stream,
                    "AG-UI": agui,
                }
                for way in ways.values():  # warm up
                    await way()
                wall: dict[str, list[float]] = {name: [] for name in ways}
                cpu: dict[str, list[float]] = {name: [] for name in ways}
                for number in range(rounds):
                    for name, way in ways.items():
                        start, start_cpu = time.perf_counter(), time.process_time()
                        for _ in range(runs_per_sample):
                            await way()
                        wall[name].append((time.perf_counter() - start) / runs_per_sample)
                        cpu[name].append((time.process_time() - start_cpu) / runs_per_sample)
                    shown = "  ".join(f"{n}: {t[-1] * 1000:.1f} ms" for n, t in wall.items())
                    print(f"round {number + 1}: {shown}")
            tasks.cancel_scope.cancel()
    print(f"\n{chunks}-chunk turn, {rounds} rounds x {runs_per_sample} runs, median per run:")
    for label, times in (("wall clock", wall), ("process CPU", cpu)):
        base = times["web view (baseline)"]
        print(f" {label}:")
        for name, series in times.items():
            ratios = [t / b for t, b in zip(series, base, strict=True)]
            print(
                f"  {name:22s} {statistics.median(series) * 1000:7.1f} ms   "
                f"ratio {statistics.median(ratios):.3f} (worst round {max(ratios):.3f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--runs", type=int, default=5, help="runs per sample")
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    args = parser.parse_args()
    anyio.run(bench, args.chunks, args.rounds, args.runs, backend=args.backend)


if __name__ == "__main__":
    main()
