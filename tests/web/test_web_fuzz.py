"""Any input at the web boundary: a result, or a refusal naming the function; never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

import pytest
from asgi_driver import Client
from hypothesis import event, given, settings
from hypothesis import strategies as st
from scripted_agent import WAIT_STOP, ScriptedAgent, text
from starlette.applications import Starlette

from conftest import run_on
from juno_bind_trio.web import LiveRuns, RunLimitError, create_app, serve

anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.lists(st.text(max_size=5), max_size=3),
    st.sets(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """*good* three times in four, else `anything` (``one_of`` would weigh each branch of it)."""
    return st.integers(0, 3).flatmap(lambda n: good if n else anything)


@settings(max_examples=200, deadline=None)
@given(active=mostly(st.integers(1, 3)), kept=mostly(st.integers(1, 3)))
def test_live_runs_limits(active: Any, kept: Any) -> None:
    agent = ScriptedAgent([WAIT_STOP])
    if not (type(active) is int and active >= 1 and type(kept) is int and kept >= 1):
        with pytest.raises((TypeError, ValueError), match=r"^LiveRuns: max_"):
            LiveRuns(agent, max_active_runs=active, max_kept_runs=kept)
        return
    runs = LiveRuns(agent, max_active_runs=active, max_kept_runs=kept)
    assert (runs.active, runs.kept) == (0, 0)
    if active > 3:
        return  # the bound itself is checked where it is small enough to fill

    async def fill() -> None:
        async with runs.running():
            for n in range(active):
                runs.start(f"run {n}", owner="local")
            with pytest.raises(RunLimitError) as raised:
                runs.start("one too many", owner="local")
            assert raised.value.limit == active
            assert runs.active == active

    run_on("trio", fill)
    assert len(agent.runs) == active  # the refused start never reached the agent


def _names(value: object, good: Callable[[object], bool]) -> bool:
    return (
        not isinstance(value, str)
        and isinstance(value, Collection)
        and all(good(item) for item in value)
    )


@settings(max_examples=200, deadline=None)
@given(
    hosts=mostly(st.lists(st.text(min_size=1, max_size=10), max_size=3)),
    origins=mostly(
        st.lists(st.sampled_from(["http://a.example", "https://b.example:8443"]), max_size=2)
    ),
    authorize=mostly(st.sampled_from([None, lambda request, action, owner: "p"])),
    page=mostly(st.sampled_from([None, "page.html"])),
)
def test_create_app_options(hosts: Any, origins: Any, authorize: Any, page: Any) -> None:
    runs = LiveRuns(ScriptedAgent([]))
    valid = (
        _names(hosts, lambda h: isinstance(h, str) and h != "")
        and _names(origins, lambda o: isinstance(o, str) and o.startswith(("http://", "https://")))
        and (authorize is None or callable(authorize))
        and (page is None or isinstance(page, str))
    )
    if not valid:
        with pytest.raises(TypeError, match=r"^create_app: "):
            create_app(
                runs, allowed_hosts=hosts, allowed_origins=origins, authorize=authorize, page=page
            )
        return
    app = create_app(
        runs, allowed_hosts=hosts, allowed_origins=origins, authorize=authorize, page=page
    )
    assert isinstance(app, Starlette)
    paths = {getattr(route, "path", None) for route in app.routes}
    api = {"/runs", "/runs/{run_id}", "/runs/{run_id}/events", "/runs/{run_id}/stop"}
    assert api | {"/runs/{run_id}/cancel", "/static"} <= paths
    assert ("/" in paths) == (page is not None)


@settings(max_examples=100, deadline=None)
@given(host=anything, port=anything)
def test_serve_refuses_bad_addresses_before_binding(host: Any, port: Any) -> None:
    good_host = isinstance(host, str) and host != ""
    good_port = type(port) is int and 0 <= port <= 65535
    if good_host and good_port:
        return  # a valid address would really bind and serve

    async def attempt() -> None:
        await serve(object(), host=host, port=port)

    with pytest.raises((TypeError, ValueError), match=r"^serve: "):
        run_on("trio", attempt)


MAX_PROMPT = 100_000

prompts = st.one_of(
    st.text(min_size=1, max_size=20),
    st.sampled_from(["", "   ", "\n\t", "x" * MAX_PROMPT, "y" * (MAX_PROMPT + 1)]),
    anything,
)
"""What a body's ``prompt`` may hold: a string (blank, too long or fine), or anything."""


def _dumps(value: object) -> bytes:
    return json.dumps(value, default=str).encode()


def _nested(depth: int, opener: bytes) -> bytes:
    closer = b"]" if opener == b"[" else b"}"
    inner = opener if opener == b"[" else b'{"k":'
    return b'{"prompt": ' + inner * depth + b"1" * (opener == b"{") + closer * depth + b"}"


bodies = st.one_of(
    st.binary(max_size=40),
    anything.map(_dumps),
    st.fixed_dictionaries({"prompt": prompts}, optional={"other": anything}).map(_dumps),
    # Nested past what the parser recurses through: a bad body like the rest.
    st.builds(_nested, st.integers(2_000, 60_000), st.sampled_from([b"[", b"{"])),
)
"""Any request body: bytes, any JSON, an object with a ``prompt`` of any value, deep JSON."""

good_bodies = st.fixed_dictionaries(
    {"prompt": st.text(min_size=1, max_size=20).filter(str.strip)}, optional={"other": anything}
).map(_dumps)
"""Bodies a run starts from (sent as JSON)."""

content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "text/plain", ""]
)
last_event_ids = st.one_of(st.text(max_size=8), st.integers(0, 6).map(str))
"""Any header text, and small ids, which a run's short stream makes valid, current or too new."""


def accepted_prompt(body: bytes, content_type: str) -> str | None:
    """The prompt ``POST /runs`` must start a run with, or None when it must refuse.

    The documented contract: a JSON body (``application/json``, parameters
    allowed) that is an object whose ``prompt`` is a non-blank string of at
    most 100,000 characters.
    """
    if content_type.split(";")[0].strip().lower() != "application/json":  # media types ignore case
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    prompt = value.get("prompt") if isinstance(value, dict) else None
    if isinstance(prompt, str) and prompt.strip() and len(prompt) <= MAX_PROMPT:
        return prompt
    return None


def sse_frames(body: bytes) -> list[tuple[int, dict[str, Any]]]:
    """Each ``id:``/``data:`` frame of an SSE body, data parsed; comments and ``retry`` skipped."""
    frames = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if line and ": " in line)
        if "data" in fields:
            frames.append((int(fields["id"]), json.loads(fields["data"])))
    return frames


async def exchange(body: bytes, content_type: str, last_event_id: str) -> None:
    """``POST /runs``; if a run started, its snapshot, then its events. Checks every answer."""
    agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP])
    runs = LiveRuns(agent, max_active_runs=1000)
    app = create_app(runs)
    async with runs.running():
        client = Client(app)
        started = await client.request(
            "POST", "/runs", body=body, headers={"content-type": content_type}
        )
        event(f"POST /runs answered {started.status}")
        prompt = accepted_prompt(body, content_type)
        header = {"last-event-id": last_event_id} if last_event_id.isprintable() else {}
        if prompt is None:
            # Refused with a reason, and nothing started.
            json_type = content_type.lower().startswith("application/json")
            assert started.status == (400 if json_type else 415), started.body
            assert started.headers["content-type"] == "application/json"
            assert set(started.json()) == {"error"}
            assert runs.active == 0
            missing = await client.request("GET", "/runs/nope/events", headers=header)
            assert (missing.status, missing.json()) == (404, {"error": "no such run"})
            assert agent.runs == []
            return

        # Started: the answer names the run and where its events are.
        assert started.status == 201, started.body
        assert started.headers["content-type"] == "application/json"
        answer = started.json()
        run_id = answer["runId"]
        assert isinstance(run_id, str)
        assert run_id
        assert answer == {"runId": run_id, "events": f"/runs/{run_id}/events"}
        run = runs.get(run_id)
        assert run is not None
        assert (run.prompt, run.owner, run.status) == (prompt, "local", "running")
        snapshot = await client.request("GET", f"/runs/{run_id}")
        assert snapshot.status == 200
        assert snapshot.headers["content-type"] == "application/json"
        assert snapshot.json()["runId"] == run_id
        assert snapshot.json()["status"] == "running"

        # Cancel it and let it end, so any stream the request opens ends too.
        assert run.request_cancel()
        while not run.ended:
            await run.wait_for_more(run.last_event_id)
        assert [r.cancelled for r in agent.runs] == [True]  # one run, the one started
        last = run.last_event_id
        raw = header.get("last-event-id", "0")
        events = await client.request("GET", answer["events"], headers=header)
        event(f"GET events answered {events.status}")
        if not (raw.isascii() and raw.isdigit()) or int(raw) > last:
            assert events.status == 400, (raw, events.body)
            assert "Last-Event-ID" in events.json()["error"]
        elif int(raw) == last:
            assert events.status == 204  # has everything: EventSource stops
            assert events.body == b""
        else:
            assert events.status == 200
            assert events.headers["content-type"].startswith("text/event-stream")
            assert events.headers["cache-control"] == "no-store"
            assert events.body.startswith(b"retry: 1000\n\n")
            frames = sse_frames(events.body)
            # Exactly the events after Last-Event-ID, in order, each once,
            # ending with the cancelled run's end and its final status.
            assert [i for i, _ in frames] == list(range(int(raw) + 1, last + 1))
            assert all(data["runId"] == run_id for _, data in frames if "runId" in data)
            assert frames[-1][1] == {"kind": "run_status", "runId": run_id, "status": "ended"}
            if len(frames) >= 2:
                assert frames[-2][1] == {
                    "kind": "run_ended",
                    "runId": run_id,
                    "reason": "cancelled",
                }


@settings(max_examples=60, deadline=None)
@given(body=bodies, content_type=content_types, last_event_id=last_event_ids)
def test_http_requests_get_an_answer_never_a_server_error(
    backend: str, body: bytes, content_type: str, last_event_id: str
) -> None:
    run_on(backend, exchange, body, content_type, last_event_id)


@settings(max_examples=60, deadline=None)
@given(
    body=good_bodies,
    content_type=st.sampled_from(["application/json", "application/json; charset=utf-8"]),
    last_event_id=last_event_ids,
)
def test_a_started_run_answers_its_snapshot_and_exactly_the_events_asked_for(
    backend: str, body: bytes, content_type: str, last_event_id: str
) -> None:
    run_on(backend, exchange, body, content_type, last_event_id)
