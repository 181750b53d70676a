"""A program that a test interrupts with SIGINT again and again, an MCP call in flight each time.

``python ctrl_c_client.py BACKEND ROUNDS SERVER...`` runs ROUNDS rounds, each a
fresh ``anyio.run`` on BACKEND (``trio`` or ``asyncio``): connect to SERVER
(``stdio COMMAND ARGS...`` or ``http URL``), start server-everything's
``trigger-long-running-operation`` (30 s) — in even rounds with
``toolset.call`` in the main task, in odd rounds through an ``Agent`` run —
print ``CALLING <round>``, and wait to be interrupted. What left ``anyio.run``
is printed as ``LEFT <round> <type name>``. The last round's interrupt is not
caught: the program ends the way Python ends on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

import anyio

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.mcp import MCPToolset, open_mcp_http, open_mcp_stdio

LONG = "trigger-long-running-operation"
ARGUMENTS = {"duration": 30, "steps": 30}


def calling(round_: int) -> None:
    print(f"CALLING {round_}", flush=True)


async def use(toolset: MCPToolset, round_: int) -> None:
    if round_ % 2 == 0:
        calling(round_)
        await toolset.call(LONG, ARGUMENTS)
        return

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if any(m.get("role") == "tool" for m in turn.messages):
            return ModelTurnResult(content="done")
        calling(round_)
        arguments = json.dumps(ARGUMENTS)
        call = {"id": "c1", "type": "function", "function": {"name": LONG, "arguments": arguments}}
        return ModelTurnResult(tool_calls=[call])

    await Agent(model, tools=[toolset]).run("Run the long operation.")


async def one_round(round_: int, server: list[str], errlog: TextIO) -> None:
    if server[0] == "stdio":
        async with open_mcp_stdio(server[1], server[2:], errlog=errlog) as toolset:
            await use(toolset, round_)
    else:
        async with open_mcp_http(server[1]) as toolset:
            await use(toolset, round_)
    print(f"LEFT {round_} nothing: the call returned", flush=True)


def main(backend: str, rounds: int, server: list[str]) -> None:
    with open(os.devnull, "w") as errlog:
        for round_ in range(rounds - 1):
            try:
                anyio.run(one_round, round_, server, errlog, backend=backend)
            except BaseException as exc:  # what left the run is the finding
                # An interrupt is named alone (the test expects exactly that);
                # anything else says why, so that a failed round can be read.
                said = "" if isinstance(exc, KeyboardInterrupt) else f": {exc}"
                print(f"LEFT {round_} {type(exc).__name__}{said}", flush=True)
        anyio.run(one_round, rounds - 1, server, errlog, backend=backend)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
