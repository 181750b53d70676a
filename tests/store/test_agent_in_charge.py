"""The stored run names the agent in charge (SQLite, PostgreSQL): ``RunRecord.agent_in_charge``.

It is written with every transcript the store saves (the agent's own
``agent_in_charge`` reading of it), so it changes once a handoff's iteration
is saved; a run that never handed off names the agent that started it. A
database made by schema version 4 is upgraded on open and its stored runs
are filled in from their transcripts. The command line lists and shows it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from juno_bind_trio.agent import Agent, agent_in_charge, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import SCHEMA_VERSION, RunStore, SqliteRunStore, _migrations
from juno_bind_trio.store.__main__ import main
from juno_bind_trio.store._migrations import MIGRATIONS

from .store_helpers import raw_execute, raw_query

pytestmark = pytest.mark.anyio


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


async def _hands_off(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(tool_calls=[_call("h1", "transfer_to_billing")])


async def _billing(turn: ModelTurn) -> ModelTurnResult:
    if turn.messages[-1]["role"] == "tool" and turn.messages[-1]["tool_call_id"] == "r1":
        return ModelTurnResult(content="Refunded.")
    return ModelTurnResult(tool_calls=[_call("r1", "refund", order="18")])


@tool(requires_approval=True)
async def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def _triage(store: object) -> Agent[None, str]:
    billing = Agent(_billing, name="billing", instructions="You are billing.", tools=[refund])
    return Agent(_hands_off, name="triage", store=store, handoffs=[billing])  # type: ignore[arg-type]


async def test_the_record_names_the_agent_in_charge_once_the_handoff_is_saved(
    store: RunStore,
) -> None:
    triage = _triage(store)
    first = await triage.run("refund 18", run_id="h")
    # Suspended in billing's hands: its refund waits for an approval. The handoff's
    # iteration is saved, so the record names billing already.
    assert (first.reason, first.agent_name) == ("suspended", "billing")
    record = await store.get_run("h")
    assert (record.agent, record.agent_in_charge) == ("triage", "billing")
    done = await triage.resume("h", approvals={"r1": True})
    assert done.output == "Refunded."
    record = await store.get_run("h")
    assert (record.status, record.agent, record.agent_in_charge) == (
        "completed",
        "triage",
        "billing",
    )
    # The same name as the agent's own reading of the stored transcript.
    assert agent_in_charge((await store.load("h")).messages) == "billing"
    [listed] = [r for r in await store.list_runs() if r.run_id == "h"]
    assert listed.agent_in_charge == "billing"


async def test_a_run_that_never_hands_off_names_its_own_agent(store: RunStore) -> None:
    async def answers(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="hello")

    billing = Agent(_billing, name="billing")
    agent = Agent(answers, name="triage", store=store, handoffs=[billing])
    await agent.run("hi", run_id="plain")
    record = await store.get_run("plain")
    assert (record.agent, record.agent_in_charge) == ("triage", "triage")
    await store.create_run("bare", messages=[{"role": "user", "content": "hi"}])
    assert (await store.get_run("bare")).agent_in_charge is None  # no agent named


def _transcript(switched: bool) -> str:
    marker: dict[str, Any] = {"transferred_to": "billing", "transferred_from": "triage"}
    if switched:
        marker["in_charge"] = True
    return json.dumps(
        [
            {"role": "user", "content": "refund"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call("h1", "transfer_to_billing")],
            },
            {"role": "tool", "tool_call_id": "h1", "content": json.dumps(marker)},
        ]
    )


@pytest.mark.parametrize("page", [1, 2, 200])
async def test_a_version_4_database_is_upgraded_and_its_runs_name_the_agent_in_charge(
    store_factory: Any, store: RunStore, store_kind: str, page: int, monkeypatch: Any
) -> None:
    # The fill-in reads the transcripts a page at a time: every page size names the same.
    monkeypatch.setattr(_migrations, "_FILL_PAGE", page)
    for table in (
        "juno_pending",
        "juno_receipts",
        "juno_runs",
        "juno_conversations",
        "juno_schema",
    ):
        raw_execute(store, f"DROP TABLE {table}")
    raw_execute(store, "CREATE TABLE juno_schema (version INTEGER NOT NULL)")
    dialect = "sqlite" if store_kind == "sqlite" else "postgresql"
    for version, statements in enumerate(MIGRATIONS[dialect][:4], start=1):
        for statement in statements:
            raw_execute(store, statement)
        raw_execute(store, "INSERT INTO juno_schema (version) VALUES (?)", (version,))
    rows = {
        "switched": _transcript(switched=True),
        "open": _transcript(switched=False),  # cut off in the handoff's batch
        "none": json.dumps([{"role": "user", "content": "hi"}]),
        "broken": '[{"role": "tool", "content": "transferred_to',  # not JSON
    }
    for run_id, messages in rows.items():
        raw_execute(
            store,
            "INSERT INTO juno_runs (run_id, status, agent, chain, root_run_id, messages, "
            "iteration, lease_token, created_at, updated_at) "
            "VALUES (?, 'stopped', 'triage', ?, ?, ?, 1, 0, 1.0, 2.0)",
            (
                run_id,
                json.dumps({"links": [{"run_id": run_id, "agent": "triage"}]}),
                run_id,
                messages,
            ),
        )
    async with store_factory() as upgraded:
        named = {
            run_id: (await upgraded.get_run(run_id)).agent_in_charge
            for run_id in ("switched", "open", "none", "broken")
        }
        assert named == {
            "switched": "billing",
            "open": "triage",
            "none": "triage",
            "broken": "triage",  # its transcript unreadable: left to its own agent
        }
        # From then on it is written with each transcript.
        lease = await upgraded.claim_run("none", owner="w1", ttl=30)
        moved = json.loads(_transcript(switched=True))
        await upgraded.save_transcript(lease, moved, iteration=2)
        assert (await upgraded.get_run("none")).agent_in_charge == "billing"
    versions = raw_query(store, "SELECT version FROM juno_schema ORDER BY version")
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
    assert SCHEMA_VERSION == 5


def test_the_command_line_lists_and_shows_the_agent_in_charge(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"

    async def seed() -> None:
        async with SqliteRunStore(path) as store:
            await _triage(store).run("refund 18", run_id="h")
            await store.create_run("bare", messages=[{"role": "user", "content": "hi"}])

    anyio.run(seed)
    out = io.StringIO()
    assert main([str(path), "list"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert [line.rsplit("\t", 1)[-1] for line in lines] == ["agent billing", "agent -"]
    out = io.StringIO()
    assert main([str(path), "show", "h"], out=out) == 0
    shown = json.loads(out.getvalue())["run"]
    assert (shown["agent"], shown["agent_in_charge"]) == ("triage", "billing")
