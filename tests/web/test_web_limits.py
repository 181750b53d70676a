"""The gate on every path, and what the app reads of a request body.

In-process over ASGI on both backends, on the virtual clocks: every path is
behind the Host check, every run path behind the cross-site check, and a body
past the limit is refused before (or as soon as) it is too big, counting the
ASGI ``receive`` calls the app makes. Hypercorn on a real socket closes the
section: a client that declares a huge body, or streams one, is told 413 while
it is still sending.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from asgi_driver import Client
from scripted_agent import WAIT_STOP, ScriptedAgent, text

from juno_bind_trio.web import DEFAULT_MAX_BODY_BYTES, STATIC_DIR, LiveRuns, create_app, serve

pytestmark = pytest.mark.anyio

SECRET = "the run's conversation"
PAGE = str(STATIC_DIR / "live-view.html")


@asynccontextmanager
async def serving(agent: ScriptedAgent, **options: Any) -> AsyncIterator[tuple[Any, LiveRuns]]:
    runs = LiveRuns(agent)
    app = create_app(runs, **options)
    async with runs.running():
        yield app, runs


async def start(client: Client) -> str:
    response = await client.request("POST", "/runs", json_body={"prompt": "hi"})
    assert response.status == 201, response.body
    run_id: str = response.json()["runId"]
    return run_id


async def test_reading_a_run_cross_site_is_refused_like_changing_it() -> None:
    agent = ScriptedAgent([text("t1", 0, 0, SECRET), WAIT_STOP])
    async with serving(agent, allowed_origins=["https://app.example"]) as (app, _runs):
        run_id = await start(Client(app))
        await anyio.sleep(1)
        paths = [f"/runs/{run_id}/events", f"/runs/{run_id}"]
        refusals = [
            ({"origin": "https://evil.example"}, "origin 'https://evil.example' is not allowed"),
            ({"origin": "null"}, "origin 'null' is not allowed"),
            ({"sec-fetch-site": "cross-site"}, "a cross-site request"),
            ({"sec-fetch-site": "same-site"}, "a same-site request"),
        ]
        plain = Client(app, origin=None)
        for path in paths:
            for headers, why in refusals:
                refused = await plain.request("GET", path, headers=headers)
                assert refused.status == 403, (path, headers)
                assert refused.json() == {"error": f"cross-site request refused: {why}"}
                assert SECRET.encode() not in refused.body
        # The app's own page (same-origin), a friend the host allowed, and a
        # client that is no browser (no Origin, no Sec-Fetch-Site) still read.
        for headers in [
            {"sec-fetch-site": "same-origin"},
            {"origin": "http://127.0.0.1:8000", "sec-fetch-site": "same-origin"},
            {"origin": "https://app.example", "sec-fetch-site": "cross-site"},
            {},
        ]:
            snapshot = await plain.request("GET", paths[1], headers=headers)
            assert snapshot.status == 200, headers
            assert snapshot.json()["turns"][0]["text"] == SECRET
            async with plain.stream(paths[0], headers=headers) as stream:
                assert stream.status == 200, headers
                async for frame in stream.frames():
                    assert json.loads(frame["data"])["text"] == SECRET
                    break
    assert [run.cancelled for run in agent.runs] == [True]


async def test_a_foreign_host_is_refused_on_every_path() -> None:
    agent = ScriptedAgent([])
    async with serving(agent, page=PAGE) as (app, _runs):
        rebound = Client(app, host="evil.example:8000", origin=None)
        own = Client(app, origin=None)
        for path in ["/static/live-view.js", "/static/renderer.js", "/", "/no/such/path"]:
            refused = await rebound.request("GET", path)
            assert refused.status == 421, path
            assert refused.json() == {"error": "this host name is not served here"}
        assert (await own.request("GET", "/static/live-view.js")).status == 200
        assert (await own.request("GET", "/")).status == 200
        assert (await own.request("GET", "/no/such/path")).status == 404
        # The page links from anywhere: it holds no run.
        linked = await own.request("GET", "/", headers={"sec-fetch-site": "cross-site"})
        assert linked.status == 200
        # A missing Host header is no allowed host either.
        bare = Client(app, host="", origin=None)
        assert (await bare.request("GET", "/static/live-view.js")).status == 421
    assert agent.runs == []


NESTED = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"prompt": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"a":' * 30_000 + b"1" + b"}" * 30_000,
]


@pytest.mark.parametrize("body", NESTED, ids=["array", "prompt", "object"])
async def test_json_nested_deeper_than_the_parser_goes_is_a_400(body: bytes) -> None:
    agent = ScriptedAgent([])
    async with serving(agent) as (app, runs):
        refused = await Client(app).request(
            "POST", "/runs", body=body, headers={"content-type": "application/json"}
        )
        assert refused.status == 400, refused.body
        assert refused.json() == {"error": "the body is not JSON"}
        assert runs.active == 0
    assert agent.runs == []


class Sender:
    """An ASGI client that sends a body in chunks, and counts how many the app asked for.

    *chunks*: the body's chunks, or one chunk that repeats forever (a body that never ends).
    """

    def __init__(self, chunks: list[bytes] | bytes) -> None:
        self.chunks = chunks
        self.received = 0
        self.status = 0
        self.body = b""

    async def post(self, app: Any, headers: dict[str, str]) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/runs",
            "raw_path": b"/runs",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1:8000"),
                (b"content-type", b"application/json"),
                *((k.encode(), v.encode()) for k, v in headers.items()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }

        async def receive() -> dict[str, Any]:
            self.received += 1
            if isinstance(self.chunks, bytes):  # "forever": 1,000 chunks, then it ends
                more = self.received < 1000
                return {"type": "http.request", "body": self.chunks, "more_body": more}
            last = self.received >= len(self.chunks)
            return {
                "type": "http.request",
                "body": self.chunks[self.received - 1],
                "more_body": not last,
            }

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
            elif message["type"] == "http.response.body":
                self.body += message.get("body", b"")

        await app(scope, receive, send)


async def test_a_body_declared_too_big_is_refused_before_any_of_it_is_read() -> None:
    agent = ScriptedAgent([])
    async with serving(agent) as (app, _runs):
        huge = Sender(b"x" * 65536)
        await huge.post(app, {"content-length": str(1 << 30)})
        assert (huge.status, huge.received) == (413, 0)
        limit = DEFAULT_MAX_BODY_BYTES
        assert json.loads(huge.body) == {"error": f"the body must be at most {limit} bytes"}
        just_over = Sender(b"x")
        await just_over.post(app, {"content-length": str(limit + 1)})
        assert (just_over.status, just_over.received) == (413, 0)
        for bad in ["-1", "12abc", "١٢"]:
            garbled = Sender([b"{}"])
            await garbled.post(app, {"content-length": bad})
            assert (garbled.status, garbled.received) == (400, 0), bad
    assert agent.runs == []


async def test_a_streamed_body_is_refused_once_it_passes_the_limit_and_the_rest_is_not_read() -> (
    None
):
    agent = ScriptedAgent([])
    async with serving(agent) as (app, _runs):
        endless = Sender(b" " * 65536)  # no Content-Length: chunked, never ending
        await endless.post(app, {})
        assert endless.status == 413
        # 1 MiB in 64 KiB chunks: the seventeenth passes the limit, and is the last read.
        assert endless.received == DEFAULT_MAX_BODY_BYTES // 65536 + 1
    assert agent.runs == []


async def test_the_limit_is_the_hosts_to_set_and_a_body_at_it_is_read() -> None:
    prompt = b'{"prompt": "hi"}'
    padded = prompt + b" " * (100 - len(prompt))
    agent = ScriptedAgent([WAIT_STOP])
    async with serving(agent, max_body_bytes=100) as (app, runs):
        at_limit = Sender([padded])
        await at_limit.post(app, {"content-length": "100"})
        assert at_limit.status == 201, at_limit.body
        streamed = Sender([padded[:50], padded[50:]])
        await streamed.post(app, {})
        assert streamed.status == 201, streamed.body
        over = Sender([padded[:60], padded[60:] + b" "])
        await over.post(app, {})
        assert (over.status, json.loads(over.body)) == (
            413,
            {"error": "the body must be at most 100 bytes"},
        )
        assert runs.active == 2
    with pytest.raises(ValueError, match=r"create_app: max_body_bytes must be a positive integer"):
        create_app(LiveRuns(agent), max_body_bytes=0)
    with pytest.raises(TypeError, match=r"create_app: max_body_bytes must be a positive integer"):
        create_app(LiveRuns(agent), max_body_bytes=1.5)  # type: ignore[arg-type]


async def read_until_closed(stream: Any, limit: float) -> bytes:
    got = b""
    with anyio.move_on_after(limit):
        while True:
            try:
                got += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                break
    return got


async def over_a_real_socket() -> None:
    agent = ScriptedAgent([])
    runs = LiveRuns(agent)
    app = create_app(runs)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            url = await tasks.start(functools.partial(serve, app, port=0))
            port = int(url.rsplit(":", 1)[1])
            head = (
                "POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{}\r\n"
            )
            # Declares a gigabyte and sends none of it: answered at once.
            async with await anyio.connect_tcp("127.0.0.1", port) as declared:
                await declared.send(head.format(f"Content-Length: {1 << 30}\r\n").encode())
                answer = await read_until_closed(declared, 10)
            assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
            assert b"the body must be at most 1048576 bytes" in answer
            # Streams a body that never ends: answered while it is still
            # sending, and the connection is closed under it.
            sent = 0
            async with await anyio.connect_tcp("127.0.0.1", port) as chunked:
                await chunked.send(head.format("Transfer-Encoding: chunked\r\n").encode())
                chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
                answered = anyio.Event()
                reply: list[bytes] = []

                async def listen() -> None:
                    reply.append(await read_until_closed(chunked, 20))
                    answered.set()

                tasks.start_soon(listen)
                with anyio.move_on_after(20):
                    while not answered.is_set() and sent < (64 << 20):
                        try:
                            await chunked.send(chunk)
                        except (anyio.BrokenResourceError, OSError):
                            break
                        sent += len(chunk)
                await answered.wait()
            assert reply[0].startswith(b"HTTP/1.1 413 "), reply[0][:200]
            # The server stopped reading: the client could not send it all.
            assert sent < (64 << 20)
            tasks.cancel_scope.cancel()
    assert agent.runs == []


def test_hypercorn_refuses_big_bodies_while_the_client_still_sends(backend: str) -> None:
    """Real sockets on the real clock (each step bounded), on both backends."""
    anyio.run(over_a_real_socket, backend=backend)
