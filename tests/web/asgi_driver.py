"""Drive an ASGI app in-process, on the test's own anyio backend and virtual clock.

httpx's ASGI transport waits for the whole body, which a Server-Sent Events
stream never finishes mid-run; this driver hands the body over chunk by chunk
and drops the connection when the reader's scope ends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs

Headers = Mapping[str, str]


def _scope(
    method: str, path: str, headers: Headers, client: tuple[str, int], host: str
) -> dict[str, Any]:
    raw_path, _, query = path.partition("?")
    items = {"host": host, **{k.lower(): v for k, v in headers.items()}}
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in items.items()],
        "client": client,
        "server": ("127.0.0.1", 8000),
    }


@attrs.define
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.define
class Stream:
    status: int
    headers: dict[str, str]
    chunks: anyio.abc.ObjectReceiveStream[bytes]
    _buffer: str = ""

    async def frames(self) -> AsyncIterator[dict[str, str]]:
        """Each SSE frame as ``{"id": ..., "data": ...}`` (comments skipped)."""
        async for chunk in self.chunks:
            self._buffer += chunk.decode()
            while "\n\n" in self._buffer:
                block, self._buffer = self._buffer.split("\n\n", 1)
                frame: dict[str, str] = {}
                for line in block.split("\n"):
                    if line.startswith(":") or not line:
                        continue
                    key, _, value = line.partition(": ")
                    frame[key] = value
                if "data" in frame:
                    yield frame


@attrs.define
class Client:
    app: Any
    client: tuple[str, int] = ("127.0.0.1", 50000)
    host: str = "127.0.0.1:8000"
    origin: str | None = "http://127.0.0.1:8000"

    def _headers(self, method: str, headers: Headers | None) -> dict[str, str]:
        out = {}
        if method == "POST" and self.origin is not None:
            out["origin"] = self.origin
        out.update(headers or {})
        return out

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: object = None,
        body: bytes = b"",
        headers: Headers | None = None,
    ) -> Response:
        all_headers = self._headers(method, headers)
        if json_body is not None:
            body = json.dumps(json_body).encode()
            all_headers.setdefault("content-type", "application/json")
        scope = _scope(method, path, all_headers, self.client, self.host)
        sent = False
        status = 0
        response_headers: dict[str, str] = {}
        parts: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                response_headers.update(
                    (k.decode().lower(), v.decode()) for k, v in message.get("headers", [])
                )
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return Response(status, response_headers, b"".join(parts))

    @asynccontextmanager
    async def stream(self, path: str, *, headers: Headers | None = None) -> AsyncIterator[Stream]:
        """GET *path* and read its body as it comes; leaving the block drops the connection."""
        scope = _scope("GET", path, self._headers("GET", headers), self.client, self.host)
        send_chunk, receive_chunk = anyio.create_memory_object_stream[bytes](1000)
        started = anyio.Event()
        start: dict[str, Any] = {}
        disconnected = anyio.Event()

        async def receive() -> dict[str, Any]:
            if not start.get("asked"):
                start["asked"] = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start["status"] = message["status"]
                start["headers"] = {
                    k.decode().lower(): v.decode() for k, v in message.get("headers", [])
                }
                started.set()
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await send_chunk.send(message["body"])
                if not message.get("more_body", False):
                    await send_chunk.aclose()

        async with anyio.create_task_group() as tasks:

            async def serve() -> None:
                async with send_chunk:
                    await self.app(scope, receive, send)

            tasks.start_soon(serve)
            await started.wait()
            try:
                yield Stream(start["status"], start["headers"], receive_chunk)
            finally:
                disconnected.set()
                tasks.cancel_scope.cancel()
                receive_chunk.close()


def sorted_ids(frames: Sequence[Mapping[str, str]]) -> list[int]:
    return [int(frame["id"]) for frame in frames]
