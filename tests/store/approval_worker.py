"""A worker process for the approval crash tests: one step of a run that waits for a person.

    python approval_worker.py start   DB RUN_ID EFFECTS   # run it until it suspends, exit
    python approval_worker.py approve DB RUN_ID EFFECTS   # resume with the decisions
    python approval_worker.py hang    DB RUN_ID EFFECTS   # the same, the refund never returns
    python approval_worker.py resume  DB RUN_ID EFFECTS   # a plain resume
    python approval_worker.py refund-only  DB RUN_ID EFFECTS  # approve the refund alone
    python approval_worker.py date-only    DB RUN_ID EFFECTS  # the host's date alone
    python approval_worker.py talk         DB RUN_ID EFFECTS  # "start" in conversation "t"
    python approval_worker.py talk-approve DB RUN_ID EFFECTS  # the decisions, on "t"
    python approval_worker.py talk-hang    DB RUN_ID EFFECTS  # the same, the refund hangs

The model asks for a refund (it needs an approval), a lookup and a date the
host picks (an external tool), then answers. ``approve`` approves the refund
as "ann" and gives the date. Every tool call appends ``<run> <call> <tool>
<pid>`` to EFFECTS, flushed to disk before the tool goes on; under ``hang``
the refund then waits forever, so a SIGKILL lands while it is in flight,
with the lease held (ten minutes) by a process that is gone. Each worker
runs under this process's default owner (``host:pid:machine``), prints
``ready`` once imported and ``finished <reason> <pending ids>`` at the end;
``JUNO_WORKER_BACKEND`` picks the event loop (asyncio by default).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from juno_bind_trio.agent import Agent, ExternalTool, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


async def model(turn: ModelTurn) -> ModelTurnResult:
    if not any(m.get("role") == "assistant" for m in turn.messages):
        return ModelTurnResult(
            tool_calls=(
                call("c1", "refund", amount=500),
                call("c2", "lookup", order="17"),
                call("c3", "pick", day="mon"),
            )
        )
    seen = [m["content"] for m in turn.messages if m.get("role") == "tool"]
    return ModelTurnResult(content=json.dumps(seen))


def open_store(db: str) -> RunStore:
    return PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)


def note(path: str, ctx: RunContext[None], name: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{ctx.run_id} {ctx.tool_call_id} {name} {os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


def tools(effects: str, *, hang: bool) -> list[Any]:
    @tool(requires_approval=True)
    async def refund(ctx: RunContext[None], amount: int) -> str:
        """Refund money (a person approves it first)."""
        note(effects, ctx, "refund")
        if hang:
            await anyio.sleep_forever()  # until the SIGKILL
        return f"refunded {amount}"

    @tool
    async def lookup(ctx: RunContext[None], order: str) -> str:
        """Look an order up."""
        note(effects, ctx, "lookup")
        return f"order {order}"

    return [refund, lookup, ExternalTool("pick", {"type": "object"})]


async def step(command: str, db: str, run_id: str, effects: str) -> None:
    async with open_store(db) as store:
        hang = command in ("hang", "talk-hang")
        agent = Agent(
            model, tools=tools(effects, hang=hang), store=store, lease_ttl=600 if hang else 30
        )
        print("ready", flush=True)
        if command == "start":
            result = await agent.run("refund order 17", run_id=run_id)
        elif command == "talk":
            result = await agent.run("refund order 17", run_id=run_id, conversation="t")
        elif command in ("talk-approve", "talk-hang"):
            # The conversation's road: its waiting run resumes, decisions written first.
            result = await agent.run(
                conversation="t", approvals={"c1": True}, results={"c3": "tue"}
            )
        elif command in ("approve", "hang"):
            result = await agent.resume(
                run_id, approvals={"c1": True}, results={"c3": "tue"}, principal="ann"
            )
        elif command == "refund-only":
            result = await agent.resume(run_id, approvals={"c1": True}, principal="ann")
        elif command == "date-only":
            result = await agent.resume(run_id, results={"c3": {"day": "tue"}}, principal="host")
        else:
            result = await agent.resume(run_id)
    print("finished", result.reason, ",".join(p.id for p in result.pending) or "-", flush=True)


if __name__ == "__main__":
    command, db, run_id, effects = sys.argv[1:]
    anyio.run(
        step, command, db, run_id, effects, backend=os.environ.get("JUNO_WORKER_BACKEND", "asyncio")
    )
