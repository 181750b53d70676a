"""A worker process for the crash tests: runs (or resumes) one agent run, or drains a store.

    python kill_worker.py run   DB RUN_ID OWNER EFFECTS     # run RUN_ID, or resume it
    python kill_worker.py hang  DB RUN_ID EFFECTS           # run it until its first send hangs
    python kill_worker.py drain DB OWNER EFFECTS DONE TTL   # serve_runs until none is left

OWNER ``default`` leaves the agent's ``store_owner`` unset (this process's
``host:pid:machine``). ``hang`` runs under the default owner with a
ten-minute lease, and its first ``send`` writes its effect line and then
never returns: a SIGKILL then lands while that call is in flight, with
the run's lease held long after the process is gone.

DB is a SQLite path or a PostgreSQL DSN; ``JUNO_WORKER_BACKEND`` (``asyncio``
by default, or ``trio``) is the event loop the worker runs on. Every tool call appends one line,
``<run> <call> <tool> <pid>``, to EFFECTS (flushed before the tool goes on,
so a line is there whenever the effect happened), then sleeps a little, so a
SIGKILL lands mid-call as often as between calls. ``send`` is non-repeatable,
``look`` repeatable. The model answers from a script, by how many assistant
messages the transcript holds, and, with ``JUNO_TURN_LOG`` set to a path, appends
``<turn_id> <iteration> <pid>`` to it for every turn it answers. The worker
prints ``ready`` once imported.
"""

from __future__ import annotations

import functools
import json
import os
import random
import sys
from typing import Any

import anyio

from juno_bind_trio import LeaseLostError, RunContext, RunLeasedError
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


SCRIPT = (
    ModelTurnResult(tool_calls=(call("a", "send", n=1), call("b", "look", n=2))),
    ModelTurnResult(
        tool_calls=(call("c", "send", n=3), call("d", "send", n=4), call("e", "look", n=5))
    ),
    ModelTurnResult(content="done"),
)


def open_store(db: str) -> RunStore:
    if db.startswith("postgresql://"):
        return PostgresRunStore(db)
    return SqliteRunStore(db)


def append_line(path: str, line: str) -> None:
    """Append and flush to disk: the line is there whenever what it records happened."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def tools(effects: str, *, hang: bool = False) -> list[Any]:
    def note(ctx: RunContext[None], name: str) -> None:
        append_line(effects, f"{ctx.run_id} {ctx.tool_call_id} {name} {os.getpid()}")

    @tool(repeatable=False)
    async def send(ctx: RunContext[None], n: int) -> str:
        """A non-repeatable effect."""
        note(ctx, "send")
        if hang and n == 1:
            await anyio.sleep_forever()  # until the SIGKILL
        await anyio.sleep(random.uniform(0, 0.03))
        return f"sent {n}"

    @tool
    async def look(ctx: RunContext[None], n: int) -> str:
        """A repeatable one."""
        note(ctx, "look")
        await anyio.sleep(random.uniform(0, 0.03))
        return f"looked {n}"

    return [send, look]


async def model(turn: ModelTurn) -> ModelTurnResult:
    await anyio.sleep(random.uniform(0, 0.03))
    spoken = sum(1 for m in turn.messages if m["role"] == "assistant")
    turns = os.environ.get("JUNO_TURN_LOG")
    if turns:
        append_line(turns, f"{turn.turn_id} {turn.iteration} {os.getpid()}")
    return SCRIPT[spoken]


async def run_one(db: str, run_id: str, owner: str, effects: str, *, hang: bool = False) -> None:
    async with open_store(db) as store:
        agent = Agent(
            model,
            tools=tools(effects, hang=hang),
            store=store,
            store_owner=None if owner == "default" else owner,
            lease_ttl=600 if hang else 5,
        )
        print("ready", flush=True)
        if (await store.get_run(run_id)).status != "completed":  # the kill came too late
            await agent.resume(run_id)
    print("finished", flush=True)


async def drain(db: str, owner: str, effects: str, done: str, ttl: float) -> None:
    """Claim and finish runs until every run is done (waiting out dead workers' leases)."""
    async with open_store(db) as store:
        agent = Agent(model, tools=tools(effects), store=store, store_owner=owner, lease_ttl=ttl)
        print("ready", flush=True)
        while True:
            lease = await store.claim_next(owner=owner, ttl=ttl)
            if lease is None:
                left = await store.list_runs(status="running", limit=1)
                left += await store.list_runs(status="pending", limit=1)
                if not left:
                    break
                await anyio.sleep(0.2)  # a dead worker's lease has yet to run out
                continue
            try:
                # The same owner takes the run from its own claim at once.
                result = await agent.resume(lease.run_id)
            except (RunLeasedError, LeaseLostError):
                continue  # another worker got there: it finishes the run
            if result.reason == "completed":
                append_line(done, f"{lease.run_id} {owner}")
    print("finished", flush=True)


if __name__ == "__main__":
    backend = os.environ.get("JUNO_WORKER_BACKEND", "asyncio")  # the event loop it runs on
    command, *rest = sys.argv[1:]
    if command == "run":
        db, run_id, owner, effects = rest
        anyio.run(run_one, db, run_id, owner, effects, backend=backend)
    elif command == "hang":
        db, run_id, effects = rest
        hang = functools.partial(run_one, db, run_id, "default", effects, hang=True)
        anyio.run(hang, backend=backend)
    else:
        db, owner, effects, done, ttl = rest
        anyio.run(drain, db, owner, effects, done, float(ttl), backend=backend)
