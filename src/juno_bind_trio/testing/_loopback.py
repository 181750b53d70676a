"""A fault-injecting loopback HTTP server for any provider's wire: the part every fake shares.

The OpenAI fake (``_server.py``) grew first, with the wire and the server in
one class. A fake of another provider's API needs the same server (h11 on
anyio sockets, the test's own clock, a request record with exact virtual
times, a watcher that notices the client hanging up mid-stall, a port that
refuses every connection) and the same fault menu (refuse, an error status
with ``Retry-After``, close before the answer, close mid-stream, a malformed
event, a stall before the first byte or between events), with only the bytes
of each answer different. Those bytes are a [`Wire`][] here: how a request is
routed and validated, how an error body, a complete answer and a stream of
events are encoded. The scripts are the OpenAI fake's own values
(``StreamResponse``, ``ErrorResponse``, ``CloseBeforeResponse``, ...), so a
test of a fallback from one provider to another reads the same on both sides.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, final

import anyio
import anyio.abc
import attrs
import h11

from ._http import (
    Handler,
    Send,
    next_answer,
    open_served,
    push_answers,
    serve_connection,
    sleep,
)
from ._script import (
    CloseBeforeResponse,
    CompletionResponse,
    Disconnect,
    ErrorResponse,
    FakeResponse,
    Pause,
    StreamEvent,
    StreamResponse,
)
from ._server import RecordedRequest, Script, _compile_script

__all__ = ["LoopbackServer", "StreamEncoder", "Wire", "open_loopback_server"]


class StreamEncoder(Protocol):
    """The bytes of one streamed answer, event by event (stateful: one per answer)."""

    content_type: str

    def start(self) -> bytes:
        """What goes out before the first scripted event (``b""`` for nothing)."""
        ...

    def event(self, event: StreamEvent) -> bytes:
        """The bytes of one scripted event (never a ``Pause`` or a ``Disconnect``)."""
        ...

    def end(self, done: bool) -> bytes:
        """What closes the stream: the wire's end marker when *done*, else only what is owed."""
        ...


class Wire(Protocol):
    """One provider's API, as the loopback server speaks it."""

    name: str
    """For messages: ``"Anthropic"``."""

    def route(self, record: RecordedRequest) -> str | None:
        """``None`` when the request is for this API, else why not (answered 404)."""
        ...

    def refuse(self, record: RecordedRequest) -> ErrorResponse | None:
        """The 400 the real API answers a request it refuses (a broken conversation), or None."""
        ...

    def model_of(self, record: RecordedRequest) -> str | None:
        """The model the request names, for a per-model script."""
        ...

    def error_body(self, response: ErrorResponse) -> tuple[bytes, list[tuple[str, str]]]:
        """The body of a scripted error and any headers of the wire's own."""
        ...

    def completion(self, response: CompletionResponse, record: RecordedRequest) -> bytes:
        """The JSON body of a non-streamed answer."""
        ...

    def stream(self, response: StreamResponse, record: RecordedRequest) -> StreamEncoder:
        """An encoder for one streamed answer."""
        ...


@final
@attrs.define(eq=False)
class LoopbackServer:
    """A running fake of one wire; its ``requests`` record what was asked."""

    wire: Wire
    port: int
    """The ephemeral port it listens on (127.0.0.1)."""
    refused_port: int
    """A port held bound but not listening: connecting is refused."""
    validate: bool = True
    """Whether a request the real API would refuse gets the wire's 400 (see ``Wire.refuse``)."""
    requests: list[RecordedRequest] = attrs.field(factory=list, init=False)
    _queues: dict[str | None, deque[FakeResponse]] = attrs.field(factory=dict, kw_only=True)
    _respond: Callable[[RecordedRequest], FakeResponse] | None = attrs.field(
        default=None, kw_only=True
    )
    _connections: itertools.count[int] = attrs.field(factory=itertools.count, init=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def refused_base_url(self) -> str:
        """A base URL whose every connection is refused."""
        return f"http://127.0.0.1:{self.refused_port}"

    def push(self, *responses: FakeResponse, model: str | None = None) -> None:
        """Append answers to the script (to *model*'s queue when the script is per model)."""
        push_answers(
            self._queues,
            self._respond,
            responses,
            model,
            owner=f"{self.wire.name} fake",
            where=f"{self.wire.name} fake push",
        )

    def pending(self, model: str | None = None) -> int:
        """How many scripted answers are still queued (for *model*, when per model)."""
        return len(self._queues.get(model, ()))

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        await serve_connection(
            stream, next(self._connections), self.requests, RecordedRequest, self._pick, self._play
        )

    def _pick(self, record: RecordedRequest) -> FakeResponse:
        wrong = self.wire.route(record)
        if wrong is not None:
            return ErrorResponse(404, f"fake {self.wire.name} server: {wrong}")
        if not isinstance(record.json, dict):
            return ErrorResponse(400, "fake server: the request body is not a JSON object")
        if self.validate:
            refusal = self.wire.refuse(record)
            if refusal is not None:
                return refusal
        return next_answer(
            self._queues,
            self._respond,
            record,
            None if self._respond is not None else self.wire.model_of(record),
            owner=f"fake {self.wire.name} server",
            where=f"fake {self.wire.name} script",
        )

    async def _play(self, send: Send, record: RecordedRequest, response: FakeResponse) -> bool:
        request_id = f"req_fake_{record.index}"
        if isinstance(response, CloseBeforeResponse):
            await sleep(response.delay)
            return False
        if isinstance(response, ErrorResponse | CompletionResponse):
            await sleep(response.delay)
            if isinstance(response, ErrorResponse):
                payload, extra = self.wire.error_body(response)
                status = response.status
                reason = response.reason
            else:
                payload, extra, status, reason = (
                    self.wire.completion(response, record),
                    [],
                    200,
                    b"",
                )
            headers = [
                ("content-type", "application/json"),
                ("content-length", str(len(payload))),
                ("request-id", request_id),
                ("x-request-id", request_id),
                *extra,
            ]
            if isinstance(response, ErrorResponse):
                if response.retry_after is not None:
                    headers.append(("retry-after", f"{response.retry_after:g}"))
                headers.extend(response.headers)
            record.first_byte_at = anyio.current_time()
            await send(h11.Response(status_code=status, headers=headers, reason=reason))
            await send(h11.Data(data=payload))
        else:
            encoder = self.wire.stream(response, record)
            await sleep(response.first_byte_delay)
            headers = [
                ("content-type", encoder.content_type),
                ("cache-control", "no-cache"),
                ("transfer-encoding", "chunked"),
                ("request-id", request_id),
                ("x-request-id", request_id),
            ]
            record.first_byte_at = anyio.current_time()
            await send(h11.Response(status_code=200, headers=headers))
            opening = encoder.start()
            if opening:
                await send(h11.Data(data=opening))
            first = True
            for event in response.events:
                if isinstance(event, Pause):
                    await sleep(event.seconds)
                    continue
                if isinstance(event, Disconnect):
                    return False
                if not first and response.chunk_delay:
                    await sleep(response.chunk_delay)
                data = encoder.event(event)
                if data:
                    await send(h11.Data(data=data))
                record.events_sent += 1
                first = False
            closing = encoder.end(response.done)
            if closing:
                await send(h11.Data(data=closing))
        await send(h11.EndOfMessage())
        record.completed_at = anyio.current_time()
        return True


@asynccontextmanager
async def open_loopback_server(
    wire: Wire, script: Script = None, *, validate: bool = True, owner: str | None = None
) -> AsyncIterator[LoopbackServer]:
    """Serve *wire* on 127.0.0.1 for the body of an ``async with``, answering from *script*.

    *script* is what the OpenAI fake takes (a sequence, a per-model mapping, a
    callable or ``None``). The server runs in a task group of its own; leaving
    the block stops it. What the body raised leaves bare, not in a group.
    """
    given: object = validate
    if not isinstance(given, bool):
        where = owner or f"fake {wire.name} server"
        raise TypeError(f"{where}: validate_history must be a bool, got {validate!r}")
    queues, respond = _compile_script(script)

    def make(port: int, refused_port: int) -> tuple[LoopbackServer, Handler]:
        server = LoopbackServer(wire, port, refused_port, validate, queues=queues, respond=respond)
        return server, server._serve_connection

    async with open_served(make) as server:
        yield server


def sse(event: str, data: Any) -> bytes:
    """One named server-sent event with a JSON *data* (as Anthropic's and the Responses API's)."""
    import json

    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
