"""The live view's decide on an agent with a run store: the stored run itself goes on (same
id, ``Agent.open_resume``), the approved call runs once under its receipt, and the store
says where every run stands (``list_waiting`` lists exactly the runs still waiting) -- also
for a run read back from the store after a restart. SQLite and PostgreSQL, both backends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from asgi_driver import Client

from juno_bind_trio.agent import Agent, ExternalTool, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import CallDecision, PostgresRunStore, RunStore, SqliteRunStore
from juno_bind_trio.web import LiveRuns, create_app
from module_files import load_file

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
store_helpers = load_file(
    "web_approvals_store_helpers", ROOT / "tests" / "store" / "store_helpers.py"
)


def call(call_id: str, name: str, **arguments: object) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


class Shop:
    """Two refunds that wait for a person and a date the host picks; every refund made."""

    def __init__(self) -> None:
        self.refunds: list[int] = []

        @tool(requires_approval=True)
        async def refund(ctx: RunContext[None], eur: int) -> str:
            """Refund."""
            self.refunds.append(eur)
            return f"refunded {eur}"

        async def model(turn: ModelTurn) -> ModelTurnResult:
            if turn.messages[-1]["role"] == "user":
                return ModelTurnResult(
                    tool_calls=(
                        call("r50", "refund", eur=50),
                        call("r500", "refund", eur=500),
                        call("d1", "pick_date", month="May"),
                    )
                )
            answers = [m["content"] for m in turn.messages if m["role"] == "tool"]
            return ModelTurnResult(content=" / ".join(answers))

        self.tools = [refund, ExternalTool("pick_date", {"type": "object"})]
        self.model = model

    def agent(self, store: RunStore) -> Agent[None, str]:
        return Agent(self.model, tools=self.tools, store=store)


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        path = tmp_path / "runs.db"
        return lambda: SqliteRunStore(path)
    dsn = store_helpers.postgres_dsn()
    return lambda: PostgresRunStore(dsn)


@asynccontextmanager
async def serving(agent: Agent[None, str]) -> AsyncIterator[Any]:
    runs = LiveRuns(agent)
    async with runs.running():
        yield create_app(runs)


async def ended(client: Client, run_id: str) -> dict[str, Any]:
    async with client.stream(f"/runs/{run_id}/events") as stream:
        frames = [json.loads(f["data"]) async for f in stream.frames()]
    assert frames[-1] == {"kind": "run_status", "runId": run_id, "status": "ended"}
    snapshot: dict[str, Any] = (await client.request("GET", f"/runs/{run_id}")).json()
    snapshot["frames"] = frames
    return snapshot


async def waiting(store: RunStore) -> dict[str, list[str]]:
    return {
        run.run_id: [c.id for c in await store.pending_calls(run.run_id)]
        for run in await store.list_waiting()
    }


async def test_decide_resumes_the_stored_run_and_it_leaves_list_waiting(make_store: Any) -> None:
    shop = Shop()
    async with make_store() as store, serving(shop.agent(store)) as app:
        client = Client(app)
        run_id = (await client.request("POST", "/runs", json_body={"prompt": "refund"})).json()[
            "runId"
        ]
        held = await ended(client, run_id)
        assert held["reason"] == "suspended"
        assert [(c["id"], c["kind"]) for c in held["pending"]] == [
            ("r50", "approval"),
            ("r500", "approval"),
            ("d1", "external"),
        ]
        assert await waiting(store) == {run_id: ["r50", "r500", "d1"]}
        # A host's call is not the page's to decide.
        refused = await client.request(
            "POST", f"/runs/{run_id}/decide", json_body={"approvals": {"d1": True}}
        )
        assert refused.status == 400
        assert "no call 'd1'" in refused.json()["error"]
        decided = await client.request(
            "POST",
            f"/runs/{run_id}/decide",
            json_body={"approvals": {"r50": True, "r500": "over the limit"}},
        )
        assert decided.status == 201, decided.body
        assert decided.json()["runId"] == run_id  # the stored run goes on, not a copy
        again = await ended(client, run_id)
        assert again["reason"] == "suspended"  # the host's date still waits
        assert [c["id"] for c in again["pending"]] == ["d1"]
        assert again["decisions"] == [
            {"callId": "r50", "approved": True, "principal": "local"},
            {"callId": "r500", "approved": False, "principal": "local"},
        ]
        assert shop.refunds == [50]
        assert await waiting(store) == {run_id: ["d1"]}
        receipts = {r.tool_call_id: r.state for r in await store.receipts(run_id)}
        assert receipts == {"r50": "succeeded"}  # it ran under its receipt
        audit = {
            r.call.id: (r.decision.kind, r.decision.principal)
            for r in await store.call_decisions(run_id)
            if r.decision is not None
        }
        assert audit == {"r50": ("approved", "local"), "r500": ("denied", "local")}
        # Decided once: the same decision again is refused.
        twice = await client.request(
            "POST", f"/runs/{run_id}/decide", json_body={"approvals": {"r50": True}}
        )
        assert twice.status == 400
        # The host answers its call; the run completes and waits for nothing.
        done = await shop.agent(store).resume(run_id, results={"d1": "May 3"})
        assert done.reason == "completed"
        assert await waiting(store) == {}
        assert (await store.get_run(run_id)).status == "completed"
        assert shop.refunds == [50]
        assert [r.run_id for r in await store.list_runs()] == [run_id]


async def test_a_run_read_back_after_a_restart_is_decided_in_the_store(make_store: Any) -> None:
    shop = Shop()
    async with make_store() as store:
        async with serving(shop.agent(store)) as app:
            client = Client(app)
            run_id = (await client.request("POST", "/runs", json_body={"prompt": "refund"})).json()[
                "runId"
            ]
            await ended(client, run_id)
        # A new process: nothing in memory; the store's run, with its waiting calls.
        async with serving(shop.agent(store)) as app:
            client = Client(app)
            shown = (await client.request("GET", f"/runs/{run_id}")).json()
            assert shown["reason"] == "suspended"
            assert [(c["id"], c["kind"]) for c in shown["pending"]] == [
                ("r50", "approval"),
                ("r500", "approval"),
                ("d1", "external"),
            ]
            decided = await client.request(
                "POST", f"/runs/{run_id}/decide", json_body={"approvals": {"r500": True}}
            )
            assert decided.status == 201, decided.body
            again = await ended(client, run_id)
            assert [c["id"] for c in again["pending"]] == ["r50", "d1"]
        assert shop.refunds == [500]
        assert await waiting(store) == {run_id: ["r50", "d1"]}


async def test_a_decision_the_store_refuses_is_a_409_naming_the_call(make_store: Any) -> None:
    # The page still shows r50 waiting, but another process settled it; then a
    # worker holds the run. Each refusal is a 409 naming the call, never a
    # failed run: nothing ran, nothing was written, the run is shown as it was.
    shop = Shop()
    async with make_store() as store, serving(shop.agent(store)) as app:
        client = Client(app)
        run_id = (await client.request("POST", "/runs", json_body={"prompt": "refund"})).json()[
            "runId"
        ]
        await ended(client, run_id)
        await store.decide_calls(run_id, {"r50": CallDecision(kind="denied", answer="no")})
        audit = await store.call_decisions(run_id)
        settled = await client.request(
            "POST", f"/runs/{run_id}/decide", json_body={"approvals": {"r50": True}}
        )
        assert settled.status == 409, settled.body
        assert "'r50'" in settled.json()["error"]
        assert "already settled" in settled.json()["error"]
        shown = (await client.request("GET", f"/runs/{run_id}")).json()
        assert shown["reason"] == "suspended"
        assert [c["id"] for c in shown["pending"]] == ["r50", "r500", "d1"]
        lease = await store.claim_run(run_id, owner="elsewhere", ttl=60.0)
        leased = await client.request(
            "POST", f"/runs/{run_id}/decide", json_body={"approvals": {"r500": True}}
        )
        assert leased.status == 409, leased.body
        assert "'elsewhere'" in leased.json()["error"]
        assert "r500" in leased.json()["error"]
        assert (await store.get_run(run_id)).lease_owner == lease.owner
        assert await store.call_decisions(run_id) == audit
        assert shop.refunds == []
