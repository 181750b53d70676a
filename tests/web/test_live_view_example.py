"""The live view over a real Agent: the example's fake provider, the openai SDK, the app.

Runs on both backends on the virtual clock: the example's 30 tokens a second
and three-second tools take no wall time here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from asgi_driver import Client

from juno_bind_trio.completion import TurnTextView, event_from_wire
from module_files import load_file

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "live_view.py"


live_view = load_file("example_live_view", EXAMPLE)


async def start(client: Client) -> str:
    response = await client.request("POST", "/runs", json_body={"prompt": "17 + 25, 6 × 7?"})
    assert response.status == 201, response.body
    run_id: str = response.json()["runId"]
    return run_id


def data(frames: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(frame["data"]) for frame in frames]


def answered_every_call(transcript: list[dict[str, Any]]) -> dict[str, str]:
    asked = [
        c["id"] for m in transcript if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    answers = {m["tool_call_id"]: m["content"] for m in transcript if m["role"] == "tool"}
    assert sorted(answers) == sorted(asked)
    assert asked
    return answers


async def test_the_page_and_the_client_modules_are_served() -> None:
    async with live_view.open_live_view() as (runs, app), runs.running():
        client = Client(app)
        page = await client.request("GET", "/")
        assert page.status == 200
        assert b'import { LiveView } from "/static/live-view.js"' in page.body
        for module in ("turn-view.js", "renderer.js", "live-view.js"):
            served = await client.request("GET", f"/static/{module}")
            assert served.status == 200, module
            assert "javascript" in served.headers["content-type"]


async def test_a_whole_run_shows_the_reset_then_the_answer() -> None:
    async with live_view.open_live_view() as (runs, app), runs.running():
        client = Client(app)
        run_id = await start(client)
        async with client.stream(f"/runs/{run_id}/events") as stream:
            frames = [frame async for frame in stream.frames()]
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
    events = data(frames)
    views: dict[str, TurnTextView] = {}
    shown: list[str] = []
    for event in events:
        if event["kind"] in ("text", "reset"):
            parsed = event_from_wire(event)
            view = views.setdefault(parsed.turn_id, TurnTextView(parsed.turn_id))
            view.apply(parsed)
            shown.append(view.text)
    first, second = list(views)
    assert live_view.PARTIAL in shown  # the failing attempt's text was on screen whole
    assert [e["reason"] for e in events if e["kind"] == "reset"] == ["attempt_failed"]
    # ... and then replaced, never glued to the retry's.
    assert not [s for s in shown if "seventeen" in s and live_view.NARRATION[:6] in s]
    assert views[first].text == live_view.NARRATION
    assert views[second].text.startswith("17 + 25 = 42 and 6 × 7 = 42")
    assert "Oslo: 4 °C, sleet." in views[second].text
    assert snapshot["status"] == "ended"
    assert snapshot["reason"] == "completed"
    assert [t["text"] for t in snapshot["turns"]] == [views[first].text, views[second].text]
    answers = answered_every_call(snapshot["transcript"])
    assert answers["call_add"] == "42"
    assert [int(f["id"]) for f in frames] == list(range(1, len(frames) + 1))


async def test_reconnecting_mid_turn_ends_with_the_final_text() -> None:
    async with live_view.open_live_view() as (runs, app), runs.running():
        client = Client(app)
        run_id = await start(client)
        first: list[dict[str, str]] = []
        async with client.stream(f"/runs/{run_id}/events") as stream:
            async for frame in stream.frames():
                first.append(frame)
                event = json.loads(frame["data"])
                if event["kind"] == "text" and event["turnId"].endswith(":2") and event["seq"] == 5:
                    break  # the connection drops in the middle of the answer
        await anyio.sleep(0.5)  # the run streams on meanwhile
        last_id = first[-1]["id"]
        async with client.stream(
            f"/runs/{run_id}/events", headers={"last-event-id": last_id}
        ) as stream:
            rest = [frame async for frame in stream.frames()]
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
    ids = [int(f["id"]) for f in first + rest]
    assert ids == list(range(1, len(ids) + 1))
    view = TurnTextView(f"{run_id}:2")
    for event in data(first + rest):
        if event["kind"] in ("text", "reset"):
            view.apply(event_from_wire(event))
    assert view.held == 0
    assert view.text == snapshot["turns"][1]["text"]
    assert view.text.endswith("Thanks for watching the stream.")


async def wait_for(client: Client, run_id: str, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with client.stream(f"/runs/{run_id}/events") as stream:
        async for frame in stream.frames():
            seen.append(json.loads(frame["data"]))
            if seen[-1]["kind"] == kind:
                break
    return seen


async def test_stop_during_the_tool_batch_answers_every_call() -> None:
    async with live_view.open_live_view() as (runs, app), runs.running():
        client = Client(app)
        run_id = await start(client)
        await wait_for(client, run_id, "tool_call_started")
        stopped = await client.request("POST", f"/runs/{run_id}/stop")
        assert stopped.json()["status"] == "stopping"
        async with client.stream(f"/runs/{run_id}/events") as stream:
            events = data([frame async for frame in stream.frames()])
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
    assert snapshot["reason"] == "stopped"
    answers = answered_every_call(snapshot["transcript"])
    ended = {e["toolCallId"]: e["status"] for e in events if e["kind"] == "tool_call_ended"}
    assert ended["call_lis"] == "finished"  # in flight when Stop came: it finished
    assert "not_run" in ended.values()  # queued: never started
    assert answers["call_lis"] == "Lisbon: 21 °C, sunny."
    assert len(snapshot["turns"]) == 1  # no model turn after the stop
    calls = {c["toolCallId"]: c for c in snapshot["toolCalls"]}
    assert calls["call_osl"]["status"] == "not_run"
    assert calls["call_osl"]["arguments"] == '{"city": "Oslo"}'  # from the assistant's ask


async def test_cancel_during_the_tool_batch_interrupts_the_running_call() -> None:
    async with live_view.open_live_view() as (runs, app), runs.running():
        client = Client(app)
        run_id = await start(client)
        await wait_for(client, run_id, "tool_call_started")
        cancelled = await client.request("POST", f"/runs/{run_id}/cancel")
        assert cancelled.json()["status"] == "cancelling"
        async with client.stream(f"/runs/{run_id}/events") as stream:
            events = data([frame async for frame in stream.frames()])
        snapshot = (await client.request("GET", f"/runs/{run_id}")).json()
    assert snapshot["reason"] == "cancelled"
    answered_every_call(snapshot["transcript"])
    ended = {e["toolCallId"]: e["status"] for e in events if e["kind"] == "tool_call_ended"}
    assert ended["call_lis"] == "interrupted"
