"""A worker process for the handoff crash tests: a triage agent that hands its run to billing.

    python handoff_worker.py DB RUN_ID EFFECTS TURNS HANG

Runs RUN_ID (creating it on first use) or resumes it, under triage, the agent
whose handoffs reach billing. HANG says where the first process stops, for the
test's SIGKILL: ``batch`` (triage's ``look`` in the handoff's own batch, after
its effect line), ``model`` (billing's first model call, after its turn line),
``tool`` (billing's non-repeatable ``send``, after its effect line), or
``none``. Every tool call appends ``<call> <tool> <pid>`` to EFFECTS, every
model call ``<agent> <turn_id> <pid>`` to TURNS; a model that reads
instructions other than its own agent's, or is offered the other agent's
tools, raises. The worker prints ``ready``, then the result as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from juno_bind_trio import RunContext, RunNotFoundError
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore

TRIAGE = "You sort requests."
BILLING = "You handle refunds."


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def append_line(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def build(db_store: RunStore, effects: str, turns: str, hang: str) -> Agent[None, str]:
    def note(ctx: RunContext[None], name: str) -> None:
        append_line(effects, f"{ctx.tool_call_id} {name} {os.getpid()}")

    @tool
    async def look(ctx: RunContext[None], n: int) -> str:
        """A repeatable lookup."""
        note(ctx, "look")
        if hang == "batch" and ctx.tool_call_id == "l1":
            await anyio.sleep_forever()
        return f"looked {n}"

    @tool(repeatable=False)
    async def send(ctx: RunContext[None], n: int) -> str:
        """A non-repeatable effect."""
        note(ctx, "send")
        if hang == "tool":
            await anyio.sleep_forever()
        return f"sent {n}"

    def speaker(name: str, instructions: str, tools: set[str]) -> Any:
        async def model(turn: ModelTurn) -> ModelTurnResult:
            append_line(turns, f"{name} {turn.turn_id} {os.getpid()}")
            if turn.messages[0] != {"role": "system", "content": instructions}:
                raise AssertionError(f"{name} read {turn.messages[0]!r}")
            offered = {entry["function"]["name"] for entry in turn.tools}
            if offered != tools:
                raise AssertionError(f"{name} was offered {offered}")
            answered = {m["tool_call_id"] for m in turn.messages if m["role"] == "tool"}
            if name == "triage":
                return ModelTurnResult(
                    tool_calls=[call("l1", "look", n=1), call("h1", "transfer_to_billing")]
                )
            if hang == "model":
                await anyio.sleep_forever()
            if "s2" not in answered:
                return ModelTurnResult(
                    tool_calls=[call("s2", "send", n=2), call("l3", "look", n=3)]
                )
            return ModelTurnResult(content="billing done")

        return model

    billing = Agent(
        speaker("billing", BILLING, {"send", "look"}),
        name="billing",
        instructions=BILLING,
        tools=[send, look],
    )
    return Agent(
        speaker("triage", TRIAGE, {"look", "transfer_to_billing"}),
        name="triage",
        instructions=TRIAGE,
        tools=[look],
        handoffs=[billing],
        store=db_store,
        lease_ttl=600,
    )


async def main(db: str, run_id: str, effects: str, turns: str, hang: str) -> None:
    store: RunStore = PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)
    async with store:
        agent = build(store, effects, turns, hang)
        print("ready", flush=True)
        try:
            await store.get_run(run_id)
        except RunNotFoundError:
            result = await agent.run("Refund order A-1.", run_id=run_id)
        else:
            result = await agent.resume(run_id)
    print(json.dumps({"output": result.output, "agent": result.agent_name}), flush=True)


if __name__ == "__main__":
    db, run_id, effects, turns, hang = sys.argv[1:]
    backend = os.environ.get("JUNO_WORKER_BACKEND", "asyncio")
    anyio.run(main, db, run_id, effects, turns, hang, backend=backend)
