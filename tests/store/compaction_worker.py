"""A worker process for the compaction crash test: a durable run that summarizes its old turns.

    python compaction_worker.py DB RUN_ID EFFECTS TURNS HANG

Runs RUN_ID (creating it on first use) or resumes it. The model asks for one
``step`` call a turn for six turns, then answers ``done``; the agent compacts
once the transcript holds more than two model turns, keeping the last one.
HANG ``yes`` makes the first process stop in call ``c4`` (after its effect
line), the turn after the first compaction was saved, for the test's SIGKILL.
Every tool call appends ``<call> step <pid>`` to EFFECTS; every request
appends a line to TURNS: ``model <turn_id> <pid> <call ids it reads> <summaries>``
or ``summary <turn_id> <pid> <call ids it summarizes> <summaries it reads>``
(``-`` for none). Every request's history is checked against the rules the
validating fake server applies before the model answers. The worker prints
``ready``, then the result as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from juno_bind_trio import RunContext, RunNotFoundError
from juno_bind_trio.agent import Agent, Compaction, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.testing import check_tool_call_history

INSTRUCTIONS = "You take steps."
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"  # how the agent's summary begins
STEPS = 6


def append_line(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def read(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """The call ids answered in *messages*, and the summaries they hold (by the ids in them)."""
    ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    summaries = [
        m["content"].removeprefix(SUMMARY_PREFIX).replace(" ", "")
        for m in messages
        if m["role"] == "system" and m["content"].startswith(SUMMARY_PREFIX)
    ]
    return ",".join(ids) or "-", "|".join(summaries) or "-"


def build(store: RunStore, effects: str, turns: str, hang: str) -> Agent[None, str]:
    @tool
    async def step(ctx: RunContext[None], n: int) -> str:
        """Take step n."""
        append_line(effects, f"{ctx.tool_call_id} step {os.getpid()}")
        if hang == "yes" and ctx.tool_call_id == "c4":
            await anyio.sleep_forever()
        return f"step {n} taken"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        check_tool_call_history(turn.messages)
        ids, summaries = read(turn.messages)
        append_line(turns, f"model {turn.turn_id} {os.getpid()} {ids} {summaries}")
        if turn.iteration <= STEPS:
            n = turn.iteration
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "step", "arguments": json.dumps({"n": n})},
            }
            return ModelTurnResult(tool_calls=[call], input_tokens=10, output_tokens=1)
        return ModelTurnResult(content="done", input_tokens=10, output_tokens=1)

    async def summarize(turn: ModelTurn) -> ModelTurnResult:
        check_tool_call_history(turn.messages)
        ids, summaries = read(turn.messages)
        append_line(turns, f"summary {turn.turn_id} {os.getpid()} {ids} {summaries}")
        # What the summary says: the calls it covers, and the summaries it folds in.
        folded = "" if summaries == "-" else f"+{summaries}"
        return ModelTurnResult(content=f"{ids}{folded}", input_tokens=5, output_tokens=1)

    return Agent(
        model,
        instructions=INSTRUCTIONS,
        tools=[step],
        store=store,
        lease_ttl=600,
        max_iterations=STEPS + 2,
        compaction=Compaction(max_turns=2, keep_turns=1, model=summarize),
    )


async def main(db: str, run_id: str, effects: str, turns: str, hang: str) -> None:
    store: RunStore = PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)
    async with store:
        agent = build(store, effects, turns, hang)
        print("ready", flush=True)
        try:
            await store.get_run(run_id)
        except RunNotFoundError:
            result = await agent.run("Take the steps.", run_id=run_id)
        else:
            result = await agent.resume(run_id)
    print(
        json.dumps({"output": result.output, "compactions": result.stats.compactions}), flush=True
    )


if __name__ == "__main__":
    db, run_id, effects, turns, hang = sys.argv[1:]
    backend = os.environ.get("JUNO_WORKER_BACKEND", "asyncio")
    anyio.run(main, db, run_id, effects, turns, hang, backend=backend)
