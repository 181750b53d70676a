"""The live view's page on an agent whose tool needs a person's approval, for the browser test.

    python tests/web/approval_server.py      # prints its base URL, serves until killed

The model asks to refund 50 € (a call that waits for approval), then, once the
call is answered, says what the tool said. ``GET /effects`` lists every refund
the tool made, so a test can check the approved call ran exactly once.
"""

from __future__ import annotations

import functools
import json
import sys

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.web import STATIC_DIR, LiveRuns, create_app, serve

REFUNDS: list[int] = []


@tool(requires_approval=True)
async def refund(ctx: RunContext[None], eur: int) -> str:
    """Refund the customer."""
    REFUNDS.append(eur)
    return f"refunded {eur} EUR"


async def model(turn: ModelTurn) -> ModelTurnResult:
    last = turn.messages[-1]
    if last["role"] == "tool":
        return ModelTurnResult(content=f"Done: {last['content']}.")
    call = {
        "id": "call_refund",
        "type": "function",
        "function": {"name": "refund", "arguments": json.dumps({"eur": 50})},
    }
    return ModelTurnResult(content="I will refund you.", tool_calls=(call,))


async def main() -> None:
    runs = LiveRuns(Agent(model, tools=[refund]))
    app = create_app(runs, page=str(STATIC_DIR / "live-view.html"))

    async def effects(_request: Request) -> JSONResponse:
        return JSONResponse(REFUNDS)

    app.router.routes.append(Route("/effects", effects, methods=["GET"]))
    async with anyio.create_task_group() as tasks:
        url = await tasks.start(functools.partial(serve, app, port=0))
        sys.stdout.write(f"{url.rstrip('/')}/\n")
        sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "trio")
