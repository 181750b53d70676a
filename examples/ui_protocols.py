"""The frontends' own protocols, served from an Agent, with no API key.

    python examples/ui_protocols.py --port 8000   # then point useChat or an AG-UI client at it
    python examples/ui_protocols.py --help        # every flag

Serves, on 127.0.0.1:

* ``POST /api/chat``: the Vercel AI SDK's UI message stream, what ``useChat``
  (``DefaultChatTransport``) posts to and reads;
* ``POST /agui``: AG-UI, what ``@ag-ui/client``'s ``HttpAgent`` and CopilotKit
  post ``RunAgentInput`` to.

Behind both is one ``Agent`` on the built-in fake provider
(``juno_bind_trio.testing``), scripted so every run shows the interesting
part: the first provider dies mid-stream after some text, the fallback
answers with a tool call (its arguments streamed), the tool runs, and the
model answers with text. The dead attempt's text is withdrawn on the client
(``reset-step`` in the UI message stream, a ``MESSAGES_SNAPSHOT`` in AG-UI):
the conversation ends with the fallback's answer alone.

A client that aborts cancels its run: every tool call is answered in the
transcript. ``--tool-seconds`` makes the tool slow enough to abort during it.
``--port 0`` picks a free port; the first line printed is the base URL.

Needs the ``web`` extra (Starlette, Hypercorn, ag-ui-protocol):
``pip install -e '.[web]'`` in the checkout.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio

try:
    from starlette.applications import Starlette
    from starlette.routing import Route
except ImportError as missing:
    raise SystemExit(
        f"examples/ui_protocols.py needs the web extra ({missing}): pip install -e '.[web]'"
    ) from None

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    FakeResponse,
    RecordedRequest,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)
from juno_bind_trio.web import create_agui_app, create_ui_message_stream_app, serve

PARTIAL = "Let me think about Lisbon's weather from memory: it is usually"
FINAL = "It is 21 °C and sunny in Lisbon today."
ARGUMENTS = '{"city": "Lisbon"}'


def scenario(pace: float) -> Any:
    """Answer each model request by what it asks for: the model, and whether the tool answered."""

    def respond(request: RecordedRequest) -> FakeResponse:
        body = json.loads(request.body)
        if body["messages"][-1]["role"] == "tool":
            words = [w + " " for w in FINAL.split(" ")]
            words[-1] = words[-1].rstrip()
            return StreamResponse.of_text(*words, chunk_delay=pace)
        if body["model"] == "juno-large":
            # The first provider dies mid-sentence, after the reader has seen it.
            pieces = [TextDelta(w + " ") for w in PARTIAL.split(" ")]
            return StreamResponse([*pieces, Disconnect()], chunk_delay=pace)
        return StreamResponse.of_tool_calls(
            ("call_weather", "weather", ARGUMENTS), fragments=4, chunk_delay=pace
        )

    return respond


def make_tools(tool_seconds: float) -> list[Any]:
    @tool
    async def weather(city: str) -> str:
        """Today's weather in a city."""
        await anyio.sleep(tool_seconds)
        return {"Lisbon": "Lisbon: 21 °C, sunny."}.get(city, f"{city}: unknown")

    return [weather]


def build_app(agent: Any) -> Starlette:
    """The two endpoints on one app: ``POST /api/chat`` and ``POST /agui``, both on *agent*."""
    return Starlette(
        routes=[
            Route("/api/chat", create_ui_message_stream_app(agent), methods=["POST"]),
            Route("/agui", create_agui_app(agent), methods=["POST"]),
        ]
    )


@asynccontextmanager
async def open_agent(
    *,
    pace: float = 0.0,
    tool_seconds: float = 0.0,
    store: str | None = None,
    script: Any = None,
    tools: Sequence[Any] | None = None,
) -> AsyncIterator[Agent[Any, str]]:
    """The fake provider and the agent on it, for as long as the block runs.

    *script* / *tools*: another provider script and other tools (a test's).
    """
    plan = RoutePlan(
        [
            RouteStage("juno-large", [Candidate("primary")]),
            RouteStage("juno-small", [Candidate("primary")]),
        ],
        max_retries=0,
    )
    async with (
        open_fake_openai_server(script or scenario(pace)) as server,
        open_openai_client(base_url=server.base_url, api_key="demo") as client,
    ):
        model = OpenAIChatModel(plan=plan, clients={"primary": client})
        yield Agent(
            model,
            tools=list(tools) if tools is not None else make_tools(tool_seconds),
            instructions="Use the tools.",
            store=store,
        )


async def main(
    *,
    port: int = 8000,
    pace: float = 0.0,
    tool_seconds: float = 0.0,
    store: str | None = None,
    out: TextIO = sys.stdout,
) -> None:
    """Serve both endpoints on 127.0.0.1:*port* until Ctrl-C (SIGINT) or SIGTERM."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            open_agent(pace=pace, tool_seconds=tool_seconds, store=store) as agent,
            anyio.create_task_group() as tasks,
        ):
            url = await tasks.start(functools.partial(serve, build_app(agent), port=port))
            out.write(f"{url}\n")
            out.write(f"UI message stream: POST {url}/api/chat   AG-UI: POST {url}/agui\n")
            out.flush()
            async for _ in signals:
                break
            tasks.cancel_scope.cancel()
    out.write("Stopped.\n")


def cli(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8000, help="the port on 127.0.0.1 (0: free)")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between streamed chunks")
    parser.add_argument(
        "--tool-seconds", type=float, default=0.0, help="how long the weather tool takes"
    )
    parser.add_argument("--store", default=None, help="a SQLite file to keep the runs in")
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    args = parser.parse_args(argv)
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
