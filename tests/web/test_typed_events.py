"""The relay applies a run's typed events as they are and encodes each once; one view per turn."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgi_driver import Client
from scripted_agent import ScriptedAgent, Wire, reset, text, turn_ended

import juno_bind_trio.web._live_run as runs_module
from juno_bind_trio.web import LiveRuns, create_app

pytestmark = pytest.mark.anyio


async def test_typed_text_is_never_decoded_again_and_each_event_is_encoded_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(data: object) -> object:
        raise AssertionError(f"decoded a wire dict the relay had as an event: {data!r}")

    monkeypatch.setattr(runs_module, "event_from_wire", refuse)
    encoded: list[str] = []
    original = runs_module._wire_of

    def counting(event: object) -> dict[str, Any]:
        wire = original(event)
        encoded.append(wire["kind"])
        return wire

    monkeypatch.setattr(runs_module, "_wire_of", counting)
    script: list[object] = [
        text("t1", 0, 0, "Let me "),
        reset("t1", 1, 1),
        text("t1", 1, 2, "Done."),
        turn_ended("t1", "Done."),
        text("t2", 0, 0, "More"),
        turn_ended("t2", "More"),
    ]
    agent = ScriptedAgent(script)
    live = LiveRuns(agent)
    app = create_app(live)
    async with live.running():
        client = Client(app)
        response = await client.request("POST", "/runs", json_body={"prompt": "go"})
        run_id = response.json()["runId"]
        run = live.get(run_id)
        assert run is not None
        async with client.stream(f"/runs/{run_id}/events") as stream:
            frames = [frame async for frame in stream.frames()]
    assert encoded == ["text", "reset", "text", "turn_ended", "text", "turn_ended", "run_ended"]
    snapshot = run.snapshot()
    assert [(t["turnId"], t["text"], t["final"]) for t in snapshot["turns"]] == [
        ("t1", "Done.", True),
        ("t2", "More", True),
    ]
    assert len(run._views) == 2
    assert [json.loads(f["data"])["kind"] for f in frames][:3] == ["text", "reset", "text"]


async def test_a_run_sources_own_text_shaped_event_is_still_read_from_its_wire() -> None:
    script: list[object] = [
        Wire({"kind": "text", "turnId": "t1", "epoch": 0, "seq": 0, "text": "Hi"}),
        turn_ended("t1", "Hi"),
    ]
    live = LiveRuns(ScriptedAgent(script))
    app = create_app(live)
    async with live.running():
        client = Client(app)
        response = await client.request("POST", "/runs", json_body={"prompt": "go"})
        run_id = response.json()["runId"]
        async with client.stream(f"/runs/{run_id}/events") as stream:
            [frame async for frame in stream.frames()]
        run = live.get(run_id)
        assert run is not None
        assert run.snapshot()["turns"][0]["text"] == "Hi"
