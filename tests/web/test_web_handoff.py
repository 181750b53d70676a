"""The live view says which agent is speaking: a handoff goes out as its own frame (#32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ag_ui.core import CustomEvent
from asgi_driver import Client

from juno_bind_trio.agent import Agent, HandoffEvent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.web import AGUIEncoder, LiveRuns, UIMessageStreamEncoder, create_app

pytestmark = pytest.mark.anyio


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


async def test_a_stored_runs_snapshot_names_the_agent_in_charge(tmp_path: Path) -> None:
    """Read back from the store after a restart: the transcript says who took over."""
    path = tmp_path / "runs.db"
    billing = Agent(billing_model, name="billing")
    triage = Agent(triage_model, name="triage", handoffs=[billing], store=path)
    runs = LiveRuns(triage)
    async with runs.running():
        client = Client(create_app(runs))
        response = await client.request("POST", "/runs", json_body={"prompt": "refund"})
        run_id = response.json()["runId"]
        async with client.stream(f"/runs/{run_id}/events") as stream:
            [frame async for frame in stream.frames()]
    again = LiveRuns(triage)  # a new process: nothing in memory
    async with again.running():
        client = Client(create_app(again))
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
    assert "stored" in snapshot
    assert snapshot["agent"] == "billing"


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
