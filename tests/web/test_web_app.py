"""The live view's HTTP surface, driven in-process over ASGI on both backends."""

from __future__ import annotations

import json
import pickle
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from asgi_driver import Client
from scripted_agent import (
    WAIT_STOP,
    ScriptedAgent,
    reset,
    text,
    tool_ended,
    tool_started,
    turn_ended,
)

from juno_bind_trio import RunLimitError, UsageError
from juno_bind_trio.completion import TurnTextView, event_from_wire
from juno_bind_trio.web import LiveRuns, create_app

pytestmark = pytest.mark.anyio

FINAL = "The answer is 42."
SCRIPT: list[object] = [
    text("t1", 0, 0, "Let me "),
    text("t1", 0, 1, "think"),
    reset("t1", 1, 2),
    text("t1", 1, 3, "The answer"),
    text("t1", 1, 4, " is"),
    text("t1", 1, 5, " 42."),
    turn_ended("t1", FINAL),
]


@asynccontextmanager
async def serving(agent: ScriptedAgent, **options: Any) -> AsyncIterator[tuple[Any, LiveRuns]]:
    runs = LiveRuns(agent, max_active_runs=options.pop("max_active_runs", 8))
    app = create_app(runs, **options)
    async with runs.running():
        yield app, runs


async def start(client: Client, prompt: str = "What is six times seven?") -> str:
    response = await client.request("POST", "/runs", json_body={"prompt": prompt})
    assert response.status == 201, response.body
    run_id: str = response.json()["runId"]
    return run_id


async def read_all(client: Client, run_id: str, last: int | None = None) -> list[dict[str, str]]:
    headers = {} if last is None else {"last-event-id": str(last)}
    async with client.stream(f"/runs/{run_id}/events", headers=headers) as stream:
        assert stream.status == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        return [frame async for frame in stream.frames()]


def texts_of(frames: list[dict[str, str]]) -> dict[str, TurnTextView]:
    views: dict[str, TurnTextView] = {}
    for frame in frames:
        data = json.loads(frame["data"])
        if data["kind"] in ("text", "reset"):
            event = event_from_wire(data)  # exactly the TypeScript wire: strict parse
            views.setdefault(event.turn_id, TurnTextView(event.turn_id)).apply(event)
    return views


async def test_a_run_streams_every_event_once_with_ids_and_ends() -> None:
    agent = ScriptedAgent(SCRIPT)
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        frames = await read_all(client, run_id)
    ids = [int(f["id"]) for f in frames]
    assert ids == list(range(1, len(frames) + 1))
    kinds = [json.loads(f["data"])["kind"] for f in frames]
    assert kinds == ["text"] * 2 + ["reset"] + ["text"] * 3 + [
        "turn_ended",
        "run_ended",
        "run_status",
    ]
    sent: list[Any] = SCRIPT[:3]
    assert [json.loads(f["data"]) for f in frames[:3]] == [e.to_wire() for e in sent]
    assert texts_of(frames)["t1"].text == FINAL
    assert json.loads(frames[-2]["data"])["reason"] == "completed"
    # A browser reconnecting after the end is told to stop (204), not replayed to.
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        frames = await read_all(client, run_id)
        done = await client.request(
            "GET", f"/runs/{run_id}/events", headers={"last-event-id": frames[-1]["id"]}
        )
        assert done.status == 204
        assert (await client.request("GET", f"/runs/{run_id}/events")).body.count(b"id: ") == len(
            frames
        )


async def test_reconnect_with_last_event_id_mid_turn_loses_and_repeats_nothing() -> None:
    agent = ScriptedAgent(SCRIPT)
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        first: list[dict[str, str]] = []
        async with client.stream(f"/runs/{run_id}/events") as stream:
            async for frame in stream.frames():
                first.append(frame)
                if len(first) == 4:  # after the reset and the retry's first text
                    break
        # The connection dropped mid-turn; the run went on meanwhile.
        await anyio.sleep(0.025)
        rest = await read_all(client, run_id, last=int(first[-1]["id"]))
    ids = [int(f["id"]) for f in first + rest]
    assert ids == list(range(1, len(ids) + 1))  # no gap, no duplicate
    view = texts_of(first + rest)["t1"]
    assert view.text == FINAL
    assert view.held == 0


async def test_snapshot_has_turn_text_transcript_and_status() -> None:
    agent = ScriptedAgent([*SCRIPT[:4], WAIT_STOP, *SCRIPT[4:]])
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        await anyio.sleep(1)
        mid = (await client.request("GET", f"/runs/{run_id}")).json()
        assert mid["status"] == "running"
        assert mid["turns"] == [
            {"turnId": "t1", "text": "The answer", "final": False, "epoch": 1, "lastSeq": 3}
        ]
        assert mid["lastEventId"] == 4
        assert mid["transcript"][0] == {"role": "user", "content": "What is six times seven?"}
        agent.runs[0].stop()
        await read_all(client, run_id, last=mid["lastEventId"])
        done = (await client.request("GET", f"/runs/{run_id}")).json()
    assert done["status"] == "ended"
    assert done["reason"] == "stopped"
    assert done["turns"] == [{"turnId": "t1", "text": "The answer", "final": True}]


async def test_stop_is_soft_and_cancel_is_hard() -> None:
    script: list[object] = [
        text("t1", 0, 0, "Looking"),
        turn_ended("t1", "Looking", 2),
        tool_started("c1"),
        tool_started("c2"),
        WAIT_STOP,
        tool_ended("c1"),
        tool_ended("c2"),
    ]
    agent = ScriptedAgent(script)
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        await anyio.sleep(1)
        stopped = await client.request("POST", f"/runs/{run_id}/stop")
        assert stopped.status == 200
        assert stopped.json() == {"runId": run_id, "status": "stopping", "changed": True}
        again = await client.request("POST", f"/runs/{run_id}/stop")
        assert again.json()["changed"] is False
        frames = await read_all(client, run_id)
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
        assert agent.runs[0].stopped
        assert not agent.runs[0].cancelled
        statuses = [json.loads(f["data"]) for f in frames if '"run_status"' in f["data"]]
        assert [s["status"] for s in statuses] == ["stopping", "ended"]
        assert snapshot["reason"] == "stopped"
        assert [c["status"] for c in snapshot["toolCalls"]] == ["running", "running"]

        agent2 = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP, text("t1", 0, 1, "never")])
        runs2 = LiveRuns(agent2)
        app2 = create_app(runs2)
        async with runs2.running():
            client2 = Client(app2)
            run_id2 = await start(client2)
            await anyio.sleep(1)
            cancelled = await client2.request("POST", f"/runs/{run_id2}/cancel")
            assert cancelled.json()["status"] == "cancelling"
            frames2 = await read_all(client2, run_id2)
            assert agent2.runs[0].cancelled
            ended = [json.loads(f["data"]) for f in frames2 if '"run_ended"' in f["data"]]
            assert ended[0]["reason"] == "cancelled"
            assert "never" not in "".join(f["data"] for f in frames2)
            late = await client2.request("POST", f"/runs/{run_id2}/cancel")
            assert late.json() == {"runId": run_id2, "status": "ended", "changed": False}


async def test_a_run_that_fails_ends_failed_and_the_server_carries_on() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, "partial")], fail_with=RuntimeError("provider down"))
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        frames = await read_all(client, run_id)
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
        assert (await client.request("POST", "/runs", json_body={"prompt": "again"})).status == 201
    ended = [json.loads(f["data"]) for f in frames if '"run_ended"' in f["data"]]
    # The scripted run said "completed" before the context manager raised.
    assert ended[0]["reason"] == "completed"
    assert snapshot["turns"] == [{"turnId": "t1", "text": "partial", "final": True}]


async def test_a_run_that_cannot_start_ends_failed_naming_only_the_error_type() -> None:
    agent = ScriptedAgent([], fail_on_enter=RuntimeError("https://internal.example/v1 refused"))
    async with serving(agent) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        frames = await read_all(client, run_id)
        snapshot = await client.request("GET", f"/runs/{run_id}")
    ended = [json.loads(f["data"]) for f in frames if '"run_ended"' in f["data"]]
    assert ended == [
        {"kind": "run_ended", "runId": run_id, "reason": "failed", "error": "RuntimeError"}
    ]
    assert snapshot.json()["reason"] == "failed"
    assert b"internal.example" not in b"".join(f["data"].encode() for f in frames) + snapshot.body


async def test_shutdown_does_not_wait_for_a_run_that_ignores_cancel() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP], ignore_cancel=True)
    runs = LiveRuns(agent)
    start_time = anyio.current_time()
    async with runs.running():
        run = runs.start("hello", owner="local")
        await anyio.sleep(1)
    assert anyio.current_time() - start_time == pytest.approx(1.0)
    assert run.ended
    assert run.reason == "cancelled"


async def test_leaving_running_cancels_the_runs_still_going() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP])
    runs = LiveRuns(agent)
    async with runs.running():
        run = runs.start("hello", owner="local")
        await anyio.sleep(1)
    assert agent.runs[0].cancelled
    assert run.ended
    assert run.reason == "cancelled"


# -- refusals ---------------------------------------------------------------------------------


async def test_run_ids_are_unguessable() -> None:
    agent = ScriptedAgent([])
    async with serving(agent) as (app, _runs):
        client = Client(app)
        ids = {await start(client) for _ in range(8)}
    assert len(ids) == 8
    tokens = set()
    for run_id in ids:
        # 24 URL-safe characters of randomness (144 bits), then the owner's digest.
        token, dot, tag = run_id.partition(".")
        assert dot
        assert len(token) == 24
        assert len(tag) == 22
        assert set(token + tag) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )
        tokens.add(token)
    assert len(tokens) == 8
    # Same principal: the digest differs with the random part.
    assert len({run_id.partition(".")[2] for run_id in ids}) == 8


async def test_without_a_hook_only_loopback_clients_get_in() -> None:
    agent = ScriptedAgent(SCRIPT)
    async with serving(agent) as (app, _runs):
        local = Client(app)
        run_id = await start(local)
        remote = Client(app, client=("203.0.113.9", 40000))
        assert (await remote.request("POST", "/runs", json_body={"prompt": "hi"})).status == 403
        for method, path in [
            ("GET", f"/runs/{run_id}"),
            ("GET", f"/runs/{run_id}/events"),
            ("POST", f"/runs/{run_id}/stop"),
            ("POST", f"/runs/{run_id}/cancel"),
        ]:
            assert (await remote.request(method, path)).status == 403, path
        ipv6 = Client(app, client=("::1", 40000))
        assert (await ipv6.request("GET", f"/runs/{run_id}")).status == 200
    assert len(agent.runs) == 1


async def test_a_foreign_host_name_is_refused_dns_rebinding() -> None:
    agent = ScriptedAgent(SCRIPT)
    async with serving(agent) as (app, _runs):
        rebound = Client(app, host="evil.example:8000", origin="http://evil.example:8000")
        response = await rebound.request("POST", "/runs", json_body={"prompt": "hi"})
        assert response.status == 421
        assert (
            await Client(app, host="localhost:8000", origin=None).request(
                "POST", "/runs", json_body={"prompt": "hi"}
            )
        ).status == 201
        named = create_app(LiveRuns(agent), allowed_hosts={"view.internal"})
        ok = Client(named, host="view.internal", origin=None)
        assert (await ok.request("GET", "/runs/unknown")).status == 404
    assert len(agent.runs) == 1


async def test_cross_site_state_changes_are_refused() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP])
    async with serving(agent, allowed_origins=["https://app.example"]) as (app, _runs):
        client = Client(app)
        run_id = await start(client)
        evil = Client(app, origin="https://evil.example")
        for path in ["/runs", f"/runs/{run_id}/stop", f"/runs/{run_id}/cancel"]:
            response = await evil.request("POST", path, json_body={"prompt": "hi"})
            assert response.status == 403, path
            assert "cross-site" in response.json()["error"]
        no_origin = Client(app, origin=None)
        fetch_cross = await no_origin.request(
            "POST", f"/runs/{run_id}/stop", headers={"sec-fetch-site": "cross-site"}
        )
        assert fetch_cross.status == 403
        # A form post (no JSON body) cannot start a run.
        form = await client.request(
            "POST",
            "/runs",
            body=b"prompt=hi",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert form.status == 415
        # Media types are case-insensitive: this one is JSON.
        shouted = await client.request(
            "POST",
            "/runs",
            body=b'{"prompt": 5}',
            headers={"content-type": "Application/JSON; charset=UTF-8"},
        )
        assert shouted.status == 400, shouted.body
        friend = Client(app, origin="https://app.example")
        await anyio.sleep(1)
        assert (await friend.request("POST", f"/runs/{run_id}/stop")).status == 200
        assert agent.runs[0].stopped
        assert not agent.runs[0].cancelled
    assert len(agent.runs) == 1


async def test_a_hook_decides_who_and_runs_are_served_only_to_their_owner() -> None:
    calls: list[tuple[str, str | None]] = []

    async def authorize(request: Any, action: str, owner: str | None) -> str | None:
        calls.append((action, owner))
        user: str | None = request.headers.get("x-user")
        if user == "mallory" and action == "start":
            return None
        return user

    agent = ScriptedAgent([text("t1", 0, 0, "secret"), WAIT_STOP])
    async with serving(agent, authorize=authorize) as (app, _runs):
        alice = await start_as(app, "alice")
        as_bob = Client(app, client=("203.0.113.9", 1))
        bob = {"x-user": "bob"}
        for method, path in [
            ("GET", f"/runs/{alice}"),
            ("GET", f"/runs/{alice}/events"),
            ("POST", f"/runs/{alice}/stop"),
            ("POST", f"/runs/{alice}/cancel"),
        ]:
            response = await as_bob.request(method, path, headers=bob)
            assert response.status == 404, path  # another's run does not exist for bob
            assert b"secret" not in response.body
        refused = await as_bob.request(
            "POST", "/runs", json_body={"prompt": "hi"}, headers={"x-user": "mallory"}
        )
        assert refused.status == 403
        nobody = await as_bob.request("GET", f"/runs/{alice}")
        assert nobody.status == 403
        mine = await as_bob.request("GET", f"/runs/{alice}", headers={"x-user": "alice"})
        assert mine.status == 200
    assert ("start", None) in calls
    assert ("watch", "alice") in calls
    assert ("stop", "alice") in calls
    assert ("cancel", "alice") in calls
    assert not agent.runs[0].stopped


async def start_as(app: Any, user: str) -> str:
    client = Client(app, client=("203.0.113.9", 1))
    response = await client.request(
        "POST", "/runs", json_body={"prompt": "hi"}, headers={"x-user": user}
    )
    assert response.status == 201, response.body
    run_id: str = response.json()["runId"]
    return run_id


async def test_a_hook_that_returns_a_non_principal_is_a_usage_error() -> None:
    agent = ScriptedAgent([])
    async with serving(agent, authorize=lambda request, action, owner: 42) as (app, _runs):
        with pytest.raises(UsageError, match=r"authorize\(\) must return a principal"):
            await Client(app).request("POST", "/runs", json_body={"prompt": "hi"})


async def test_bad_requests_are_refused_with_a_reason() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP])
    async with serving(agent, max_active_runs=1) as (app, _runs):
        client = Client(app)
        assert (await client.request("GET", "/runs/nope")).status == 404
        assert (await client.request("GET", "/runs/nope/events")).status == 404
        assert (await client.request("POST", "/runs/nope/stop")).status == 404
        for body in [{"prompt": ""}, {"prompt": 3}, {}, ["x"]]:
            response = await client.request("POST", "/runs", json_body=body)
            assert response.status == 400, body
        not_json = await client.request(
            "POST", "/runs", body=b"{", headers={"content-type": "application/json"}
        )
        assert not_json.status == 400
        run_id = await start(client)
        for bad in ["-1", "abc", "99", "١"]:
            response = await client.request(
                "GET", f"/runs/{run_id}/events", headers={"last-event-id": bad}
            )
            assert response.status == 400, bad
        busy = await client.request("POST", "/runs", json_body={"prompt": "second"})
        assert busy.status == 429
    assert len(agent.runs) == 1


async def test_the_run_limit_is_its_own_error_and_only_it_answers_429() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP])
    async with serving(agent, max_active_runs=2) as (app, runs):
        client = Client(app)
        await start(client)
        await start(client)
        with pytest.raises(RunLimitError, match=r"2 runs are already going") as raised:
            runs.start("third", owner="local")
        assert raised.value.limit == 2
        assert isinstance(raised.value, UsageError)
        copy = pickle.loads(pickle.dumps(raised.value))
        assert (type(copy), str(copy), copy.limit) == (RunLimitError, str(raised.value), 2)
        busy = await client.request("POST", "/runs", json_body={"prompt": "third"})
        assert busy.status == 429
        assert busy.json() == {"error": "LiveRuns.start: 2 runs are already going"}
    assert len(agent.runs) == 2


async def test_another_usage_error_saying_already_going_is_not_a_429(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app maps the limit by its type, never by the words of a message."""
    agent = ScriptedAgent([])
    async with serving(agent) as (app, _runs):

        def start_refusing(self: LiveRuns, prompt: str, *, owner: str) -> object:
            raise UsageError("LiveRuns.start: 2 runs are already going")

        monkeypatch.setattr(LiveRuns, "start", start_refusing)
        with pytest.raises(UsageError, match=r"already going") as raised:
            await Client(app).request("POST", "/runs", json_body={"prompt": "hi"})
        assert type(raised.value) is UsageError
    assert agent.runs == []


def test_construction_refuses_wiring_mistakes() -> None:
    agent = ScriptedAgent([])
    with pytest.raises(TypeError, match=r"LiveRuns: agent must have an open_run"):
        LiveRuns(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_active_runs must be a positive integer, got 0"):
        LiveRuns(agent, max_active_runs=0)
    with pytest.raises(TypeError, match=r"max_kept_runs must be a positive integer"):
        LiveRuns(agent, max_kept_runs=True)
    runs = LiveRuns(agent)
    with pytest.raises(TypeError, match=r"create_app: runs must be a LiveRuns"):
        create_app(agent)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"allowed_hosts must be a collection"):
        create_app(runs, allowed_hosts="localhost")
    with pytest.raises(TypeError, match=r"allowed_origins must be a collection of http"):
        create_app(runs, allowed_origins=["app.example"])
    with pytest.raises(TypeError, match=r"authorize must be callable"):
        create_app(runs, authorize="yes")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"enter `async with runs.running\(\):` first"):
        runs.start("hi", owner="local")


class ResyncingReader:
    """What the shipped client does with a stream, in Python: a resync restores every
    turn from the snapshot it carries; text and reset events then apply in order.

    Asserts as it goes that no event is lost (seqs follow on) or repeated."""

    def __init__(self) -> None:
        self.turns: dict[str, dict[str, Any]] = {}
        self.resyncs = 0
        self.shown: list[str] = []

    def apply(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "resync":
            self.resyncs += 1
            for turn in event["snapshot"]["turns"]:
                restored = {"text": turn["text"], "final": turn["final"]}
                if not turn["final"]:
                    restored |= {"epoch": turn["epoch"], "last": turn["lastSeq"]}
                self.turns[turn["turnId"]] = restored
                self.shown.append(turn["text"])
        elif kind in ("text", "reset"):
            turn = self.turns.setdefault(
                event["turnId"], {"text": "", "final": False, "epoch": 0, "last": -1}
            )
            if turn["final"]:
                return
            assert event["seq"] == turn["last"] + 1, (event, turn)  # nothing lost or repeated
            turn["last"] = event["seq"]
            if event["epoch"] >= turn["epoch"]:
                turn["epoch"] = event["epoch"]
                turn["text"] = "" if kind == "reset" else turn["text"] + event["text"]
            self.shown.append(turn["text"])
        elif kind == "turn_ended":
            self.turns[event["turnId"]] = {"text": event["content"], "final": True}
            self.shown.append(event["content"])


async def test_a_runs_event_log_is_bounded_and_a_late_reader_is_resynced() -> None:
    agent = ScriptedAgent(SCRIPT)
    runs = LiveRuns(agent, max_kept_events=2)
    app = create_app(runs)
    async with runs.running():
        client = Client(app)
        run_id = await start(client)
        first: list[dict[str, str]] = []
        async with client.stream(f"/runs/{run_id}/events") as stream:
            async for frame in stream.frames():
                first.append(frame)
                if len(first) == 2:  # "Let me " and "think": then the connection drops
                    break
        await anyio.sleep(0.035)  # three more events: the reset falls out of the window
        run = runs.get(run_id)
        assert run is not None
        assert run.kept_events == 2
        assert run.last_event_id == 5
        assert run.snapshot()["status"] == "running"
        rest = await read_all(client, run_id, last=int(first[-1]["id"]))
        # At the end, still only the newest two events are kept.
        assert run.snapshot()["status"] == "ended"
        assert run.kept_events == 2
        after_end = await read_all(client, run_id, last=1)
    resync = json.loads(rest[0]["data"])
    assert resync["kind"] == "resync"
    # A resync carries the snapshot at its own id; the stream goes on after it.
    # (A reader slower than the window again gets another resync, never a gap.)
    previous = int(first[-1]["id"])
    for frame in rest:
        event = json.loads(frame["data"])
        if event["kind"] == "resync":
            assert int(frame["id"]) == event["snapshot"]["lastEventId"] > previous
        else:
            assert int(frame["id"]) == previous + 1
        previous = int(frame["id"])
    assert previous == 9
    (mid_turn,) = resync["snapshot"]["turns"]
    assert mid_turn == {
        "turnId": "t1",
        "text": "The answer is",
        "final": False,
        "epoch": 1,
        "lastSeq": 4,
    }
    reader = ResyncingReader()
    for frame in first + rest:
        reader.apply(json.loads(frame["data"]))
    assert reader.resyncs >= 1
    assert reader.turns["t1"] == {"text": FINAL, "final": True}
    # Every text shown is one the turn passed through.
    passed = {"", "Let me ", "Let me think", "The answer", "The answer is", FINAL}
    assert set(reader.shown) <= passed
    late = ResyncingReader()
    for frame in after_end:
        late.apply(json.loads(frame["data"]))
    assert late.turns["t1"] == {"text": FINAL, "final": True}
    # The snapshot was taken after the run's last event: it is all there is to say.
    (only,) = after_end
    ended = json.loads(only["data"])["snapshot"]
    assert (ended["status"], ended["reason"], ended["lastEventId"]) == ("ended", "completed", 9)


async def test_a_reader_that_keeps_up_gets_every_event_through_a_small_window() -> None:
    # The run's last three events come at once: a window of three holds them.
    agent = ScriptedAgent(SCRIPT)
    runs = LiveRuns(agent, max_kept_events=3)
    app = create_app(runs)
    async with runs.running():
        client = Client(app)
        run_id = await start(client)
        frames = await read_all(client, run_id)
        run = runs.get(run_id)
        assert run is not None
        assert run.kept_events == 3
    assert [int(f["id"]) for f in frames] == list(range(1, 10))
    assert all(json.loads(f["data"])["kind"] != "resync" for f in frames)
    assert texts_of(frames)["t1"].text == FINAL


async def test_a_reader_inside_the_kept_window_is_not_resynced() -> None:
    agent = ScriptedAgent(SCRIPT)
    runs = LiveRuns(agent, max_kept_events=4)
    app = create_app(runs)
    async with runs.running():
        client = Client(app)
        run_id = await start(client)
        await read_all(client, run_id)
        run = runs.get(run_id)
        assert run is not None
        oldest_kept = run.last_event_id - run.kept_events
        frames = await read_all(client, run_id, last=oldest_kept)
        resynced = await read_all(client, run_id, last=oldest_kept - 1)
    assert [int(f["id"]) for f in frames] == list(range(oldest_kept + 1, run.last_event_id + 1))
    assert all(json.loads(f["data"])["kind"] != "resync" for f in frames)
    assert json.loads(resynced[0]["data"])["kind"] == "resync"


def test_the_event_bound_is_checked() -> None:
    agent = ScriptedAgent([])
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_kept_events must be a positive integer"):
            LiveRuns(agent, max_kept_events=bad)
    with pytest.raises(TypeError, match="max_kept_events must be a positive integer"):
        LiveRuns(agent, max_kept_events=2.5)  # type: ignore[arg-type]
