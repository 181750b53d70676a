"""One agent run with tools from an MCP server (over stdio) and a local tool.

    python examples/mcp_agent.py                     # offline: a scripted fake model
    python examples/mcp_agent.py --backend asyncio   # the same run on asyncio

With ``--base-url``, ``--api-key`` and ``--model`` (or ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``OPENAI_MODEL``) a real model decides what to call.

The MCP server is ``examples/mcp_notes_server.py``, a small notes server
written with the official SDK, started as a subprocess. The agent gets its
tools as ``notes_add_note`` and ``notes_list_notes`` (the ``prefix``), beside
the local ``word_count``; ``add_note`` is marked non-repeatable, so a resumed
run never adds a note twice.

Needs the ``mcp`` extra (the MCP SDK): ``pip install -e '.[mcp]'`` in the
checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import anyio

from juno_bind_trio.agent import Agent, AgentResult, tool
from juno_bind_trio.mcp import open_mcp_stdio
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

NOTES_SERVER = Path(__file__).with_name("mcp_notes_server.py")


@tool
async def word_count(text: str) -> int:
    """How many words *text* has."""
    return len(text.split())


async def run_with(model: Any, prompt: str, errlog: TextIO) -> AgentResult[str]:
    async with open_mcp_stdio(
        sys.executable,
        [str(NOTES_SERVER)],
        prefix="notes",
        non_repeatable=["add_note"],
        errlog=errlog,
    ) as notes:
        agent = Agent(
            model,
            tools=[notes, word_count],
            instructions="Keep the user's notes with the notes tools.",
        )
        return await agent.run(prompt)


# What the offline model does: add the note and count its words in one turn,
# list the notes in the next, then answer.
SCRIPT = [
    StreamResponse.of_tool_calls(
        ("call_add", "notes_add_note", json.dumps({"text": "buy oat milk"})),
        ("call_count", "word_count", json.dumps({"text": "buy oat milk"})),
    ),
    StreamResponse.of_tool_calls(("call_list", "notes_list_notes", "{}")),
    StreamResponse.of_text("Noted ", "“buy oat milk” (3 words); it is your only note."),
]


async def offline(prompt: str, errlog: TextIO) -> AgentResult[str]:
    """The run against a scripted fake OpenAI server on 127.0.0.1, no key needed."""
    async with (
        open_fake_openai_server(list(SCRIPT)) as server,
        open_openai_client(base_url=server.base_url, api_key="offline") as client,
    ):
        plan = RoutePlan([RouteStage("demo-model", [Candidate("fake")])])
        model = OpenAIChatModel(plan=plan, clients={"fake": client})
        return await run_with(model, prompt, errlog)


async def online(prompt: str, base_url: str | None, api_key: str, name: str) -> AgentResult[str]:
    async with open_openai_client(base_url=base_url, api_key=api_key) as client:
        plan = RoutePlan([RouteStage(name, [Candidate("openai")])])
        model = OpenAIChatModel(plan=plan, clients={"openai": client})
        return await run_with(model, prompt, sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
    args = parser.parse_args()
    prompt = "Remember to buy oat milk."
    if args.api_key and args.model:
        result = anyio.run(
            online, prompt, args.base_url, args.api_key, args.model, backend=args.backend
        )
    else:
        result = anyio.run(offline, prompt, sys.stderr, backend=args.backend)
    for message in result.messages:
        if message.get("role") == "tool":
            print(f"  {message['tool_call_id']}: {message['content']}")
    print(result.output)


if __name__ == "__main__":
    main()
