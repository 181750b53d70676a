"""The live view says which agent is speaking: a handoff goes out as its own frame (#32).

A run in memory follows its events (each turn's ``agent``, a handoff's
``toAgent``); a run read back from the store names the agent its record
names (``RunRecord.agent_in_charge``, SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import CustomEvent
from asgi_driver import Client

from juno_bind_trio.agent import Agent, HandoffEvent, agent_in_charge, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.web import AGUIEncoder, LiveRun, LiveRuns, UIMessageStreamEncoder, create_app
from module_files import load_file

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
store_helpers = load_file(
    "web_handoff_store_helpers", ROOT / "tests" / "store" / "store_helpers.py"
)


async def triage_model(turn: ModelTurn) -> ModelTurnResult:
    call = {
        "id": "h1",
        "type": "function",
        "function": {"name": "transfer_to_billing", "arguments": "{}"},
    }
    return ModelTurnResult(content="One moment.", tool_calls=[call])


async def billing_model(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="Billing here.")


async def test_a_served_run_sends_the_handoff_between_the_two_agents_turns() -> None:
    billing = Agent(billing_model, name="billing")
    triage = Agent(triage_model, name="triage", handoffs=[billing])
    runs = LiveRuns(triage)
    app = create_app(runs)
    async with runs.running():
        client = Client(app)
        response = await client.request("POST", "/runs", json_body={"prompt": "refund"})
        assert response.status == 201, response.body
        run_id = response.json()["runId"]
        async with client.stream(f"/runs/{run_id}/events") as stream:
            frames = [json.loads(frame["data"]) async for frame in stream.frames()]
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
    kinds = [frame["kind"] for frame in frames]
    handoff = kinds.index("handoff")
    assert frames[handoff] == {
        "kind": "handoff",
        "fromAgent": "triage",
        "toAgent": "billing",
        "toolCallId": "h1",
    }
    ended = [i for i, kind in enumerate(kinds) if kind == "turn_ended"]
    assert ended[0] < handoff < ended[1]
    assert frames[ended[1]]["content"] == "Billing here."
    # Each turn says whose it was; a client resyncing from the snapshot learns who spoke.
    assert [frames[i]["agent"] for i in ended] == ["triage", "billing"]
    assert snapshot["status"] in ("ended", "completed")
    assert snapshot["agent"] == "billing"
    assert [turn.get("agent") for turn in snapshot["turns"]] == ["triage", "billing"]


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        path = tmp_path / "runs.db"
        return lambda: SqliteRunStore(path)
    dsn = store_helpers.postgres_dsn()
    return lambda: PostgresRunStore(dsn)


async def served_to_the_end(runs: LiveRuns) -> str:
    """Start a run through the app and read its events to the end; its id."""
    async with runs.running():
        client = Client(create_app(runs))
        response = await client.request("POST", "/runs", json_body={"prompt": "refund"})
        assert response.status == 201, response.body
        run_id: str = response.json()["runId"]
        async with client.stream(f"/runs/{run_id}/events") as stream:
            [frame async for frame in stream.frames()]
    return run_id


async def stored_snapshot(runs: LiveRuns, run_id: str) -> dict[str, Any]:
    """``GET /runs/{id}`` from a new process's app: nothing in memory, the run read back."""
    async with runs.running():
        client = Client(create_app(runs))
        response = await client.request("GET", f"/runs/{run_id}")
    assert response.status == 200, response.body
    snapshot: dict[str, Any] = response.json()
    assert "stored" in snapshot
    return snapshot


async def test_a_stored_runs_snapshot_names_the_agent_in_charge(make_store: Any) -> None:
    """Read back from the store after a restart: the record says who took over."""
    async with make_store() as store:
        billing = Agent(billing_model, name="billing")
        triage = Agent(triage_model, name="triage", handoffs=[billing], store=store)
        run_id = await served_to_the_end(LiveRuns(triage))
        snapshot = await stored_snapshot(LiveRuns(triage), run_id)
        assert (await store.get_run(run_id)).agent_in_charge == "billing"
    assert snapshot["agent"] == "billing"


async def test_a_stored_run_that_never_handed_off_names_the_agent_that_started_it(
    make_store: Any,
) -> None:
    """As the live run's snapshot does once a turn ended: a name, not ``None``."""
    async with make_store() as store:
        billing = Agent(billing_model, name="billing", store=store)
        run_id = await served_to_the_end(LiveRuns(billing))
        snapshot = await stored_snapshot(LiveRuns(billing), run_id)
    assert snapshot["agent"] == "billing"
    assert agent_in_charge(snapshot["transcript"]) is None  # the transcript alone says nothing


async def test_the_stores_record_is_the_truth_where_the_transcript_disagrees(
    make_store: Any,
) -> None:
    """The web view reads the record, not its own reading of the messages."""
    async with make_store() as store:
        billing = Agent(billing_model, name="billing")
        triage = Agent(triage_model, name="triage", handoffs=[billing], store=store)
        run_id = await served_to_the_end(LiveRuns(triage))
        store_helpers.raw_execute(
            store, "UPDATE juno_runs SET agent_in_charge = ? WHERE run_id = ?", ("audit", run_id)
        )
        assert (await store.get_run(run_id)).agent_in_charge == "audit"
        snapshot = await stored_snapshot(LiveRuns(triage), run_id)
    assert agent_in_charge(snapshot["transcript"]) == "billing"
    assert snapshot["agent"] == "audit"


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


@tool(requires_approval=True)
async def refund() -> str:
    """Refund the order."""
    return "refunded"


async def billing_refunds(turn: ModelTurn) -> ModelTurnResult:
    if turn.messages[-1].get("tool_call_id") == "r1":
        return ModelTurnResult(content="Refunded.")
    return ModelTurnResult(tool_calls=[call("r1", "refund")])


def refund_desk(store: RunStore | None) -> Agent[None, str]:
    """Triage hands off to billing, whose refund waits for an approval: the run suspends
    in billing's hands."""
    billing = Agent(billing_refunds, name="billing", tools=[refund])
    return Agent(triage_model, name="triage", handoffs=[billing], store=store)


async def ended(run: LiveRun) -> None:
    while not run.ended:
        await run.wait_for_more(run.last_event_id)


async def test_a_decided_stored_run_names_the_agent_in_charge_before_its_first_event(
    make_store: Any,
) -> None:
    async with make_store() as store:
        desk = refund_desk(store)
        run_id = await served_to_the_end(LiveRuns(desk))
        again = LiveRuns(desk)
        async with again.running():
            found = await again.find(run_id)
            assert found is not None
            assert (found.snapshot()["agent"], [c["id"] for c in found.pending]) == (
                "billing",
                ["r1"],
            )
            going_on = again.decide(found, {"r1": True}, principal="alice")
            # No checkpoint since: the run has not started, and already names billing.
            assert going_on.last_event_id == 0
            assert going_on.snapshot()["agent"] == "billing"
            await ended(going_on)
        assert going_on.reason == "completed"
        assert going_on.snapshot()["agent"] == "billing"


async def test_a_run_decided_in_memory_goes_on_naming_the_agent_in_charge() -> None:
    runs = LiveRuns(refund_desk(None))
    async with runs.running():
        first = runs.start("refund", owner="alice")
        await ended(first)
        assert (first.reason, first.snapshot()["agent"]) == ("suspended", "billing")
        going_on = runs.decide(first, {"r1": True}, principal="alice")
        assert going_on.last_event_id == 0
        assert going_on.snapshot()["agent"] == "billing"
        await ended(going_on)
    assert going_on.reason == "completed"
    assert going_on.snapshot()["agent"] == "billing"


def test_the_protocol_encoders_pass_a_handoff_on() -> None:
    """AG-UI: a CUSTOM event named "handoff"; the AI SDK's stream: a data-handoff part
    (the npm clients' own schemas check both: tests/web/test_ui_protocols_node.py)."""
    event = HandoffEvent("triage", "billing", "h1")
    frame = {"kind": "handoff", "fromAgent": "triage", "toAgent": "billing", "toolCallId": "h1"}
    agui = AGUIEncoder(thread_id="th", run_id="r")
    (custom,) = agui.feed(event)
    assert isinstance(custom, CustomEvent)
    assert (custom.name, custom.value) == ("handoff", frame)
    ui = UIMessageStreamEncoder(message_id="m")
    assert ui.feed(event) == [{"type": "data-handoff", "data": frame}]
