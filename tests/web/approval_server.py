"""The live view's page on an agent whose tool needs a person's approval, for the browser test.

    python tests/web/approval_server.py [BACKEND] [STORE]  # prints its URL, serves until killed

The model asks to refund 50 € (a call that waits for approval), then, once the
call is answered, says what the tool said. ``GET /effects`` lists every refund
the tool made, so a test can check the approved call ran exactly once.

With STORE (a SQLite file's path) the agent keeps its runs there, and the
model also asks for a date the host picks (an external tool, answered by no
one on the page): Approve then resumes the stored run itself, which ends
suspended again on the external call alone. ``GET /waiting`` lists the
store's waiting runs and the calls each waits on.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from juno_bind_trio.agent import Agent, ExternalTool, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.web import STATIC_DIR, LiveRuns, create_app, serve

REFUNDS: list[int] = []


@tool(requires_approval=True)
async def refund(ctx: RunContext[None], eur: int) -> str:
    """Refund the customer."""
    REFUNDS.append(eur)
    return f"refunded {eur} EUR"


def call(call_id: str, name: str, **arguments: object) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def model_for(*, with_external: bool) -> Callable[[ModelTurn], Awaitable[ModelTurnResult]]:
    async def model(turn: ModelTurn) -> ModelTurnResult:
        last = turn.messages[-1]
        if last["role"] == "tool":
            return ModelTurnResult(content=f"Done: {last['content']}.")
        calls = [call("call_refund", "refund", eur=50)]
        if with_external:
            calls.append(call("call_date", "pick_date", month="May"))
        return ModelTurnResult(content="I will refund you.", tool_calls=tuple(calls))

    return model


async def main(store_path: str | None) -> None:
    async with SqliteRunStore(store_path) if store_path else _no_store() as store:
        if store is None:
            agent = Agent(model_for(with_external=False), tools=[refund])
        else:
            pick = ExternalTool("pick_date", {"type": "object"}, description="Ask for a date")
            agent = Agent(model_for(with_external=True), tools=[refund, pick], store=store)
        runs = LiveRuns(agent)
        app = create_app(runs, page=str(STATIC_DIR / "live-view.html"))

        async def effects(_request: Request) -> JSONResponse:
            return JSONResponse(REFUNDS)

        async def waiting(_request: Request) -> JSONResponse:
            assert store is not None
            listed = []
            for run in await store.list_waiting():
                calls = await store.pending_calls(run.run_id)
                listed.append({"runId": run.run_id, "calls": [c.id for c in calls]})
            return JSONResponse(listed)

        app.router.routes.append(Route("/effects", effects, methods=["GET"]))
        app.router.routes.append(Route("/waiting", waiting, methods=["GET"]))
        async with anyio.create_task_group() as tasks:
            url = await tasks.start(functools.partial(serve, app, port=0))
            sys.stdout.write(f"{url.rstrip('/')}/\n")
            sys.stdout.flush()


@contextlib.asynccontextmanager
async def _no_store() -> AsyncIterator[None]:
    yield None


if __name__ == "__main__":
    anyio.run(
        main,
        sys.argv[2] if len(sys.argv) > 2 else None,
        backend=sys.argv[1] if len(sys.argv) > 1 else "trio",
    )
