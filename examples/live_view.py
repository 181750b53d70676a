"""A run on a web page, streaming at a readable pace, with no API key.

    python examples/live_view.py            # then open the URL it prints

Starts a fault-injecting OpenAI-compatible server on 127.0.0.1 (from
``juno_bind_trio.testing``) and an ``Agent`` whose route plan falls back from
``juno-large`` to ``juno-small``; serves the page with
``juno_bind_trio.web`` on 127.0.0.1. Press Start and watch:

1. the first attempt streams about 30 tokens a second, then its connection
   drops mid-sentence;
2. the fallback model's first words *replace* that partial text (a reset),
   then it asks for a batch of four tools (two calculators, two slow weather
   look-ups that run one at a time);
3. press **Stop** during the batch: no queued call starts, the running one
   finishes, and the transcript still answers every call; or **Cancel**: the
   running call is cut off and answered ``interrupted``;
4. let it run and the final answer streams in.

Ctrl-C stops the server. ``--port 0`` picks a free port. ``--store runs.db``
keeps every run in a SQLite run store: stop the server, start it again, and
``/runs/<id>`` still answers with the run's final text and transcript.

Needs the ``web`` extra (Starlette, Hypercorn): ``pip install -e '.[web]'`` in
the checkout.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio

try:
    from starlette.applications import Starlette
except ImportError as missing:
    raise SystemExit(
        f"examples/live_view.py needs the web extra ({missing}): pip install -e '.[web]'"
    ) from None

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    FakeResponse,
    Pause,
    RecordedRequest,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)
from juno_bind_trio.web import STATIC_DIR, LiveRuns, create_app, serve

PARTIAL = "Let me work those out in my head first: seventeen plus twenty-five is, hmm,"
NARRATION = "I will use the tools for this."
FINAL = "17 + 25 = 42 and 6 × 7 = 42, so both come to 42. {weather} Thanks for watching the stream."


def tokens(text: str) -> list[str]:
    """Split *text* into word-sized pieces, the way a model streams it."""
    return re.findall(r"\S+\s*|\s+", text)


def scenario(pace: float) -> Any:
    """Answer each request of a run by what it asks for (model, and whether tools answered)."""

    def respond(request: RecordedRequest) -> FakeResponse:
        body = json.loads(request.body)
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            answers = [m["content"] for m in messages if m["role"] == "tool"]
            weather = " ".join(a for a in answers if "°C" in a) or "No weather came back."
            return StreamResponse.of_text(*tokens(FINAL.format(weather=weather)), chunk_delay=pace)
        if body["model"] == "juno-large":
            # The first attempt dies mid-sentence, after the reader has seen it.
            events: list[Any] = [TextDelta(t) for t in tokens(PARTIAL)]
            return StreamResponse([*events, Pause(pace * 10), Disconnect()], chunk_delay=pace)
        return StreamResponse.of_tool_calls(
            ("call_add", "add", '{"a": 17, "b": 25}'),
            ("call_mul", "multiply", '{"a": 6, "b": 7}'),
            ("call_lis", "weather", '{"city": "Lisbon"}'),
            ("call_osl", "weather", '{"city": "Oslo"}'),
            text=NARRATION,
            chunk_delay=pace,
        )

    return respond


def make_tools(tool_seconds: float) -> list[Any]:
    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        await anyio.sleep(tool_seconds / 3)
        return a + b

    @tool
    async def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        await anyio.sleep(tool_seconds / 3)
        return a * b

    @tool(serial=True)
    async def weather(city: str) -> str:
        """Today's weather in a city (slow: one look-up at a time)."""
        await anyio.sleep(tool_seconds)
        return {"Lisbon": "Lisbon: 21 °C, sunny.", "Oslo": "Oslo: 4 °C, sleet."}.get(
            city, f"{city}: unknown"
        )

    return [add, multiply, weather]


@asynccontextmanager
async def open_live_view(
    *,
    pace: float = 1 / 30,
    tool_seconds: float = 3.0,
    store: str | os.PathLike[str] | None = None,
    max_kept_runs: int = 64,
    max_kept_events: int = 4096,
) -> AsyncIterator[tuple[LiveRuns, Starlette]]:
    """The fake provider, the agent, its runs and the app, for as long as the block runs.

    *store*: a SQLite file to keep the runs in (``None``: in memory only).
    """
    plan = RoutePlan(
        [
            RouteStage("juno-large", [Candidate("primary")]),
            RouteStage("juno-small", [Candidate("primary")]),
        ]
    )
    async with (
        open_fake_openai_server(scenario(pace)) as server,
        open_openai_client(base_url=server.base_url, api_key="demo") as client,
    ):
        model = OpenAIChatModel(
            plan=plan,
            clients={"primary": client},
            time_to_first_token=10.0,
            inter_chunk_timeout=10.0,
        )
        agent = Agent(
            model, tools=make_tools(tool_seconds), instructions="Use the tools.", store=store
        )
        # With a store, runs no longer in memory are read back from the agent's store.
        runs = LiveRuns(agent, max_kept_runs=max_kept_runs, max_kept_events=max_kept_events)
        yield runs, create_app(runs, page=str(STATIC_DIR / "live-view.html"))


async def main(
    *,
    port: int = 8000,
    pace: float = 1 / 30,
    tool_seconds: float = 3.0,
    store: str | None = None,
    out: TextIO = sys.stdout,
) -> None:
    """Serve the page on 127.0.0.1:*port* until Ctrl-C (SIGINT) or SIGTERM."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            open_live_view(pace=pace, tool_seconds=tool_seconds, store=store) as (_runs, app),
            anyio.create_task_group() as tasks,
        ):
            url = await tasks.start(functools.partial(serve, app, port=port))
            out.write(f"Live view: {url}/  (Ctrl-C to stop)\n")
            out.flush()
            async for _ in signals:
                break
            # A plain cancel: runs still going end with every tool call answered.
            tasks.cancel_scope.cancel()
    out.write("Stopped.\n")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--pace", type=float, default=1 / 30, help="seconds between tokens")
    parser.add_argument("--tool-seconds", type=float, default=3.0)
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--store", default=None, help="a SQLite file to keep the runs in")
    args = parser.parse_args()
    try:
        anyio.run(
            functools.partial(
                main,
                port=args.port,
                pace=args.pace,
                tool_seconds=args.tool_seconds,
                store=args.store,
            ),
            backend=args.backend,
        )
    except KeyboardInterrupt:
        sys.stdout.write("Stopped.\n")


if __name__ == "__main__":
    cli()
