"""The live view's approvals: a suspended run's waiting calls on its snapshot, decided over
HTTP (``POST /runs/{id}/decide``), the run continuing in memory as a new run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from asgi_driver import Client
from starlette.requests import Request

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.web import LiveRuns, create_app

pytestmark = pytest.mark.anyio


class Shop:
    def __init__(self) -> None:
        self.refunds: list[int] = []

        @tool(requires_approval=True)
        async def refund(ctx: RunContext[None], eur: int) -> str:
            """Refund."""
            self.refunds.append(eur)
            return f"refunded {eur}"

        async def model(turn: ModelTurn) -> ModelTurnResult:
            last = turn.messages[-1]
            if last["role"] == "user":
                calls = tuple(
                    {
                        "id": f"r{eur}",
                        "type": "function",
                        "function": {"name": "refund", "arguments": json.dumps({"eur": eur})},
                    }
                    for eur in (50, 500)
                )
                return ModelTurnResult(tool_calls=calls)
            answers = [m["content"] for m in turn.messages if m["role"] == "tool"]
            return ModelTurnResult(content=" / ".join(answers))

        self.agent = Agent(model, tools=[refund])


class As(Client):
    """A client whose every request says who the user is (``x-user``)."""

    def __init__(self, app: Any, user: str) -> None:
        super().__init__(app)
        self.user = user

    def _headers(self, method: str, headers: Any) -> dict[str, str]:
        return {**super()._headers(method, headers), "x-user": self.user}


@asynccontextmanager
async def serving(shop: Shop, **options: Any) -> AsyncIterator[tuple[Any, LiveRuns]]:
    runs = LiveRuns(shop.agent)
    async with runs.running():
        yield create_app(runs, **options), runs


async def ended(client: Client, run_id: str) -> dict[str, Any]:
    async with client.stream(f"/runs/{run_id}/events") as stream:
        frames = [json.loads(f["data"]) async for f in stream.frames()]
    assert frames[-1] == {"kind": "run_status", "runId": run_id, "status": "ended"}
    response = await client.request("GET", f"/runs/{run_id}")
    snapshot: dict[str, Any] = response.json()
    snapshot["frames"] = frames
    return snapshot


async def test_approve_one_deny_the_other_and_the_run_goes_on_once() -> None:
    shop = Shop()
    async with serving(shop) as (app, _runs):
        client = Client(app)
        started = await client.request("POST", "/runs", json_body={"prompt": "Refund me"})
        first = started.json()["runId"]
        held = await ended(client, first)
        assert held["reason"] == "suspended"
        assert [(c["id"], c["kind"], c["arguments"]) for c in held["pending"]] == [
            ("r50", "approval", {"eur": 50}),
            ("r500", "approval", {"eur": 500}),
        ]
        assert any(f["kind"] == "pending" for f in held["frames"])
        assert shop.refunds == []
        decided = await client.request(
            "POST",
            f"/runs/{first}/decide",
            json_body={"approvals": {"r50": True, "r500": "over the limit"}},
        )
        assert decided.status == 201, decided.body
        second = decided.json()["runId"]
        assert second != first
        done = await ended(client, second)
        assert done["reason"] == "completed"
        assert shop.refunds == [50]  # the approved call ran once; the denied one never
        answer = done["transcript"][-1]["content"]
        assert answer.startswith("refunded 50 / ")
        assert "over the limit" in answer
        assert done["decisions"] == [
            {"callId": "r50", "approved": True, "principal": "local"},
            {"callId": "r500", "approved": False, "principal": "local"},
        ]
        assert done["pending"] == []
        # Decided once: the first run waits for nothing more.
        again = await client.request(
            "POST", f"/runs/{first}/decide", json_body={"approvals": {"r50": True}}
        )
        assert again.status == 409
        assert shop.refunds == [50]


async def test_bad_decisions_are_refused_naming_them() -> None:
    shop = Shop()
    async with serving(shop) as (app, _runs):
        client = Client(app)
        first = (await client.request("POST", "/runs", json_body={"prompt": "x"})).json()["runId"]
        await ended(client, first)
        for body, status, says in [
            ({"approvals": {"nope": True}}, 400, "no call 'nope'"),
            ({"approvals": {"r50": 3}}, 400, "must be True, False or a reason"),
            ({"approvals": {}}, 400, "'approvals'"),
            ({"decide": 1}, 400, "'approvals'"),
        ]:
            response = await client.request("POST", f"/runs/{first}/decide", json_body=body)
            assert response.status == status, (body, response.body)
            assert says in response.json()["error"]
        assert shop.refunds == []
        # Still waiting: a good decision goes through after the bad ones.
        response = await client.request(
            "POST", f"/runs/{first}/decide", json_body={"approvals": {"r50": True, "r500": True}}
        )
        assert response.status == 201
        await ended(client, response.json()["runId"])
        assert sorted(shop.refunds) == [50, 500]


async def test_the_authorization_hook_decides_who_may_approve() -> None:
    shop = Shop()
    seen: list[tuple[str, str | None]] = []

    def authorize(request: Request, action: str, owner: str | None) -> str | None:
        seen.append((action, owner))
        who = request.headers.get("x-user")
        if action == "approve":
            return who if who == "manager" else None
        return who

    async with serving(shop, authorize=authorize) as (app, _runs):
        alice = As(app, "alice")
        first = (await alice.request("POST", "/runs", json_body={"prompt": "x"})).json()["runId"]
        await ended(alice, first)
        refused = await alice.request(
            "POST", f"/runs/{first}/decide", json_body={"approvals": {"r50": True}}
        )
        assert refused.status == 403
        manager = As(app, "manager")
        allowed = await manager.request(
            "POST", f"/runs/{first}/decide", json_body={"approvals": {"r50": True, "r500": False}}
        )
        assert allowed.status == 201
        second = allowed.json()["runId"]
        done = await ended(alice, second)  # alice's run still: she watches it go on
        assert [d["principal"] for d in done["decisions"]] == ["manager", "manager"]
        assert shop.refunds == [50]
        assert ("approve", "alice") in seen
