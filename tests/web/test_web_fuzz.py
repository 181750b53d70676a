"""Any input at the web boundary: a result, or a refusal naming the function; never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgi_driver import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_agent import WAIT_STOP, ScriptedAgent, text

from conftest import run_on
from juno_bind_trio.web import LiveRuns, create_app, serve

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


@settings(max_examples=200, deadline=None)
@given(active=anything, kept=anything)
def test_live_runs_limits(active: Any, kept: Any) -> None:
    agent = ScriptedAgent([])
    if type(active) is int and active >= 1 and type(kept) is int and kept >= 1:
        LiveRuns(agent, max_active_runs=active, max_kept_runs=kept)
    else:
        with pytest.raises((TypeError, ValueError), match=r"^LiveRuns: max_"):
            LiveRuns(agent, max_active_runs=active, max_kept_runs=kept)


@settings(max_examples=200, deadline=None)
@given(hosts=anything, origins=anything, authorize=anything, page=anything)
def test_create_app_options(hosts: Any, origins: Any, authorize: Any, page: Any) -> None:
    runs = LiveRuns(ScriptedAgent([]))
    try:
        create_app(
            runs, allowed_hosts=hosts, allowed_origins=origins, authorize=authorize, page=page
        )
    except TypeError as exc:
        assert str(exc).startswith("create_app: ")  # noqa: PT017


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


@settings(max_examples=60, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=40), anything.map(lambda v: json.dumps(v, default=str).encode())
    ),
    content_type=st.sampled_from(
        ["application/json", "text/plain", "", "application/json; charset=utf-8"]
    ),
    last_event_id=st.text(max_size=8),
)
def test_http_requests_get_an_answer_never_a_server_error(
    backend: str, body: bytes, content_type: str, last_event_id: str
) -> None:
    async def scenario() -> None:
        agent = ScriptedAgent([text("t1", 0, 0, "x"), WAIT_STOP])
        runs = LiveRuns(agent, max_active_runs=1000)
        app = create_app(runs)
        async with runs.running():
            client = Client(app)
            started = await client.request(
                "POST", "/runs", body=body, headers={"content-type": content_type}
            )
            assert started.status in (201, 400, 415), started.body
            run_id = started.json()["runId"] if started.status == 201 else "nope"
            if last_event_id.isascii() and last_event_id.isdigit() and run_id != "nope":
                return  # a valid id would open a stream that waits for the run
            header = {"last-event-id": last_event_id} if last_event_id.isprintable() else {}
            events = await client.request("GET", f"/runs/{run_id}/events", headers=header)
            assert events.status in (200, 400, 404)
            if events.status != 200:
                assert "error" in events.json()
            run = runs.get(run_id)
            if run is not None:
                run.request_cancel()

    run_on(backend, scenario)
