"""The example's app, plus what the node tests check on the server: ``GET /transcripts``.

    python tests/web/ui_protocol_server.py      # prints its base URL, serves until killed

The example's agent and endpoints (``examples/ui_protocols.py``), with one
more scripted case: a prompt naming "Slowtown" gets a tool call whose tool
takes a minute, so a client can abort during it; and reasoning (thinking) is
streamed before the dying attempt's text ("Recalling Lisbon.", withdrawn with
it) and before the final answer ("The tool says 21 °C."). A request offering the
client-defined tool ``pick_date`` (AG-UI's ``RunAgentInput.tools``) gets a call of it,
and, once the client answers it, "You picked <the answer>.". Each run's transcript is
recorded when the run ends (however it ends) and served as JSON.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from juno_bind_trio.agent import tool
from juno_bind_trio.testing import FakeResponse, ReasoningDelta, RecordedRequest, StreamResponse
from juno_bind_trio.web import serve

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "ui_protocols", ROOT / "examples" / "ui_protocols.py"
)
assert _spec is not None
assert _spec.loader is not None
demo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo)


def script(request: RecordedRequest) -> FakeResponse:
    body = json.loads(request.body)
    messages = body["messages"]
    offered = {t["function"]["name"] for t in body.get("tools") or ()}
    if "pick_date" in offered:
        last = messages[-1]
        if last["role"] == "tool" and last["tool_call_id"] == "call_pick":
            return StreamResponse.of_text(f"You picked {last['content']}.")
        return StreamResponse.of_tool_calls(("call_pick", "pick_date", '{"month": "May"}'))
    asks_slow = any("Slowtown" in str(m.get("content")) for m in messages if m["role"] == "user")
    if asks_slow and body["model"] == "juno-small" and messages[-1]["role"] != "tool":
        return StreamResponse.of_tool_calls(("call_slow", "weather", '{"city": "Slowtown"}'))
    answer: FakeResponse = demo.scenario(0.02)(request)  # paced: the reader sees each attempt
    thought = (
        "The tool says 21 °C."
        if messages[-1]["role"] == "tool"
        else "Recalling Lisbon."
        if body["model"] == "juno-large"
        else None
    )
    if thought is not None and isinstance(answer, StreamResponse):
        answer = attrs.evolve(answer, events=(ReasoningDelta(thought), *answer.events))
    return answer


@tool
async def weather(city: str) -> str:
    """Today's weather in a city."""
    if city == "Slowtown":
        await anyio.sleep(60)
    return {"Lisbon": "Lisbon: 21 °C, sunny."}.get(city, f"{city}: unknown")


class Recording:
    """The agent, recording each run's transcript when it ends."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.transcripts: list[list[dict[str, Any]]] = []

    @asynccontextmanager
    async def open_run(
        self,
        prompt: str | None,
        *,
        message_history: Sequence[Mapping[str, Any]] | None = None,
        extra_tools: Sequence[Any] | None = None,
    ) -> AsyncIterator[Any]:
        run = None
        try:
            async with self.agent.open_run(
                prompt, message_history=message_history, extra_tools=extra_tools
            ) as run:
                yield run
        finally:
            if run is not None:
                self.transcripts.append([dict(m) for m in run.messages])


async def main() -> None:
    async with demo.open_agent(script=script, tools=[weather]) as agent:
        recording = Recording(agent)
        app = demo.build_app(recording)

        async def transcripts(_request: Request) -> JSONResponse:
            return JSONResponse(recording.transcripts)

        app.router.routes.append(Route("/transcripts", transcripts, methods=["GET"]))
        async with anyio.create_task_group() as tasks:
            url = await tasks.start(functools.partial(serve, app, port=0))
            sys.stdout.write(f"{url}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "trio")
