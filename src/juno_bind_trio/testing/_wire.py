"""One loopback server for the provider wires beyond chat completions, each wire a small object.

The OpenAI-compatible fake
([open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server])
speaks one wire. The Responses API, Gemini and Bedrock differ in what a
streamed answer looks like on the socket (named SSE events, bare SSE chunks,
AWS's binary event stream) and in what they refuse, but not in anything a
test of a client needs from the server: the same scripted responses, the same
faults at the same points, the same record of each request with its virtual
times. So this module owns everything but the wire, and each wire
(``_responses``, ``_gemini``, ``_bedrock``) is a small object saying

* which requests it answers (its route, the model named, streamed or not);
* what the real API refuses about a request (its conversation rules);
* how a scripted answer, an error status and a stream event look in its bytes.

A script is the one vocabulary of [juno_bind_trio.testing][]
([StreamResponse][juno_bind_trio.testing.StreamResponse] of
[TextDelta][juno_bind_trio.testing.TextDelta],
[ReasoningDelta][juno_bind_trio.testing.ReasoningDelta],
[ToolCallDelta][juno_bind_trio.testing.ToolCallDelta], [Finish][juno_bind_trio.testing.Finish],
[Usage][juno_bind_trio.testing.Usage] and the faults), so one script can be
played by every fake, and a fallback test reads as the same answer from two
providers. A non-streamed request played a [StreamResponse][juno_bind_trio.testing.StreamResponse]
gets the stream folded into one JSON answer, as the real API would have sent it.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeAlias, final

import anyio
import anyio.abc
import attrs
import h11

from ._http import (
    Handler,
    Send,
    check_validate,
    compile_script,
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
    ErrorEvent,
    ErrorResponse,
    FakeResponse,
    Finish,
    MalformedChunk,
    Pause,
    RawEvent,
    ReasoningDelta,
    StreamEvent,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["FakeProviderServer", "ProviderRequest", "ProviderScript"]

Header: TypeAlias = tuple[str, str]


@final
@attrs.define(eq=False)
class ProviderRequest:
    """One request a [FakeProviderServer][juno_bind_trio.testing.FakeProviderServer] received.

    Like [RecordedRequest][juno_bind_trio.testing.RecordedRequest], with the
    model read where the wire puts it (the body, the URL path).
    """

    index: int
    """0-based arrival order across the whole server."""
    connection: int
    """0-based ordinal of the TCP connection it came on."""
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    received_at: float
    model: str | None = None
    """The model it asked for (``None``: no route matched)."""
    stream: bool = False
    """Whether it asked for a streamed answer."""
    response: FakeResponse | None = None
    """The scripted answer it was given, or the refusal it got."""
    first_byte_at: float | None = None
    events_sent: int = 0
    """Scripted stream events written (one event may be several frames of the wire)."""
    completed_at: float | None = None
    client_gone_at: float | None = None

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or ``None`` when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def header(self, name: str) -> str | None:
        """The first header called *name* (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k == wanted), None)


ProviderScript: TypeAlias = (
    Sequence[FakeResponse]
    | Mapping[str, Sequence[FakeResponse]]
    | Callable[[ProviderRequest], FakeResponse]
    | None
)
"""How a [FakeProviderServer][juno_bind_trio.testing.FakeProviderServer] picks an answer: as
[Script][juno_bind_trio.testing.Script] (a sequence, a mapping from model name, a callable,
or ``None`` and [push()][juno_bind_trio.testing.FakeProviderServer.push])."""


# --- the neutral reading of a scripted turn ------------------------------------


@attrs.frozen
class Call:
    """One tool call of a scripted turn, its argument fragments joined."""

    index: int
    id: str
    name: str
    arguments: str


@attrs.frozen
class Turn:
    """What a scripted stream says, read whole: for folding it into one JSON answer."""

    text: str
    reasoning: str
    calls: tuple[Call, ...]
    finish: str | None
    usage: Usage | None
    error: ErrorEvent | None
    malformed: str | None
    disconnects: bool


def read_turn(events: Sequence[StreamEvent]) -> Turn:
    """Read a scripted stream whole (control events and faults noted, not played)."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, list[str]] = {}
    heads: dict[int, tuple[str | None, str | None]] = {}
    finish: str | None = None
    usage: Usage | None = None
    error: ErrorEvent | None = None
    malformed: str | None = None
    disconnects = False
    for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            call_id, name = heads.get(event.index, (None, None))
            heads[event.index] = (call_id or event.id, name or event.name)
            calls.setdefault(event.index, []).append(event.arguments or "")
        elif isinstance(event, Finish):
            finish = event.reason
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, ErrorEvent):
            error = error or event
        elif isinstance(event, MalformedChunk | RawEvent):
            malformed = malformed or (event.raw if isinstance(event, MalformedChunk) else None)
        elif isinstance(event, Disconnect):
            disconnects = True
    return Turn(
        text="".join(text),
        reasoning="".join(reasoning),
        calls=tuple(
            Call(i, heads[i][0] or f"call_{i}", heads[i][1] or "", "".join(parts))
            for i, parts in sorted(calls.items())
        ),
        finish=finish,
        usage=usage,
        error=error,
        malformed=malformed,
        disconnects=disconnects,
    )


def as_stream(response: CompletionResponse) -> StreamResponse:
    """A non-streamed scripted answer as the stream that says the same."""
    events: list[StreamEvent] = []
    if response.reasoning is not None:
        events.append(ReasoningDelta(response.reasoning))
    if response.content is not None:
        events.append(TextDelta(response.content))
    events.extend(
        ToolCallDelta(i, id=cid, name=name, arguments=args)
        for i, (cid, name, args) in enumerate(response.tool_calls)
    )
    events.append(Finish(response.finish_reason))
    if response.usage is not None:
        events.append(response.usage)
    return StreamResponse(events, first_byte_delay=response.delay, model=response.model)


# --- the wire seam --------------------------------------------------------------


Frame: TypeAlias = bytes | Pause | Disconnect
"""One step of a played stream: bytes to write, or a control event."""


class Wire(Protocol):
    """What differs between provider wires (see the module docstring)."""

    name: str

    def base_url(self, port: int) -> str: ...

    def route(self, method: str, target: str, body: Any) -> tuple[str | None, bool] | None:
        """``(model, streamed)`` for a request this wire answers, else ``None``.

        *body* is the request's parsed JSON (``None`` when it is not JSON).
        """
        ...

    def refuse(self, body: dict[str, Any], record: ProviderRequest) -> ErrorResponse | None:
        """The refusal the real API gives this request's conversation, or ``None``."""
        ...

    def error(self, response: ErrorResponse, record: ProviderRequest) -> tuple[list[Header], bytes]:
        """Headers (content-type included) and body of an error status."""
        ...

    def stream_headers(self) -> list[Header]: ...

    def frames(
        self, response: StreamResponse, record: ProviderRequest
    ) -> Iterator[tuple[StreamEvent | None, Frame]]:
        """The stream's frames, each with the scripted event it plays (``None``: the wire's own)."""
        ...

    def complete(self, response: StreamResponse, record: ProviderRequest) -> bytes:
        """The folded JSON answer of a non-streamed request."""
        ...


@final
@attrs.define(eq=False)
class FakeProviderServer:
    """A running fake of one provider's wire (Responses API, Gemini, Bedrock).

    From [open_fake_responses_server()][juno_bind_trio.testing.open_fake_responses_server],
    [open_fake_gemini_server()][juno_bind_trio.testing.open_fake_gemini_server],
    [open_fake_bedrock_server()][juno_bind_trio.testing.open_fake_bedrock_server] or the
    ``fake_*_env`` helpers. ``base_url`` is what the provider's SDK takes as its base URL
    or endpoint.
    """

    port: int
    """The ephemeral port it listens on (127.0.0.1)."""
    refused_port: int
    """A port held bound but not listening: connecting to it is refused."""
    _wire: Wire = attrs.field(alias="wire")
    requests: list[ProviderRequest] = attrs.field(factory=list, init=False)
    """Every request received, in arrival order."""
    _queues: dict[str | None, deque[FakeResponse]] = attrs.field(factory=dict, alias="queues")
    _respond: Callable[[ProviderRequest], FakeResponse] | None = attrs.field(
        default=None, alias="respond"
    )
    validate_history: bool = attrs.field(default=True, kw_only=True)
    """Whether a conversation the real API refuses gets its refusal (on by default).

    A refused request is recorded, answered with the API's error, and takes
    nothing from the script. May be switched while the server runs.
    """
    _connections: itertools.count[int] = attrs.field(factory=itertools.count, init=False)

    @property
    def wire(self) -> str:
        """Which wire it speaks: ``"responses"``, ``"gemini"`` or ``"bedrock"``."""
        return self._wire.name

    @property
    def base_url(self) -> str:
        """The SDK's base URL (Responses: ``…/v1``) or endpoint (Gemini, Bedrock)."""
        return self._wire.base_url(self.port)

    @property
    def refused_base_url(self) -> str:
        """A base URL whose every connection is refused: the connection-refused fault."""
        return self._wire.base_url(self.refused_port)

    def push(self, *responses: FakeResponse, model: str | None = None) -> None:
        """Append answers to the script (to *model*'s queue when the script is per model)."""
        push_answers(
            self._queues,
            self._respond,
            responses,
            model,
            owner="FakeProviderServer.push",
            where="FakeProviderServer.push",
        )

    def pending(self, model: str | None = None) -> int:
        """How many scripted answers are still queued (for *model*, when per model)."""
        return len(self._queues.get(model, ()))

    # -- the connection ---------------------------------------------------------

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        await serve_connection(
            stream, next(self._connections), self.requests, ProviderRequest, self._pick, self._play
        )

    def _pick(self, record: ProviderRequest) -> FakeResponse:
        body = record.json
        routed = self._wire.route(record.method, record.target, body)
        if routed is None:
            return ErrorResponse(404, f"fake server: no route for {record.method} {record.target}")
        record.model, record.stream = routed
        if not isinstance(body, dict):
            return ErrorResponse(400, "fake server: the request body is not a JSON object")
        if self.validate_history:
            refusal = self._wire.refuse(body, record)
            if refusal is not None:
                return refusal
        return next_answer(
            self._queues,
            self._respond,
            record,
            record.model,
            owner="fake server",
            where=f"fake {self.wire} server script",
        )

    async def _play(self, send: Send, record: ProviderRequest, response: FakeResponse) -> bool:
        request_id = f"req_fake_{record.index}"
        if isinstance(response, CloseBeforeResponse):
            await sleep(response.delay)
            return False
        if isinstance(response, CompletionResponse):
            response = as_stream(response)
        if isinstance(response, ErrorResponse):
            await sleep(response.delay)
            await self._send_error(send, record, response, request_id)
        elif not record.stream:
            turn = read_turn(response.events)
            await sleep(response.first_byte_delay)
            for event in response.events:
                if isinstance(event, Pause):
                    await sleep(event.seconds)
            if turn.disconnects:
                return False
            if turn.error is not None:
                failed = ErrorResponse(500, turn.error.message, code=turn.error.code)
                await self._send_error(send, record, failed, request_id)
            else:
                payload = (
                    turn.malformed.encode()
                    if turn.malformed is not None
                    else self._wire.complete(response, record)
                )
                headers = [
                    ("content-type", "application/json"),
                    ("content-length", str(len(payload))),
                    ("x-request-id", request_id),
                ]
                record.first_byte_at = anyio.current_time()
                await send(h11.Response(status_code=200, headers=headers))
                await send(h11.Data(data=payload))
        else:
            await sleep(response.first_byte_delay)
            headers = [
                *self._wire.stream_headers(),
                ("transfer-encoding", "chunked"),
                ("x-request-id", request_id),
            ]
            record.first_byte_at = anyio.current_time()
            await send(h11.Response(status_code=200, headers=headers))
            first = True
            for scripted, frame in self._wire.frames(response, record):
                if isinstance(frame, Pause):
                    await sleep(frame.seconds)
                    continue
                if isinstance(frame, Disconnect):
                    return False  # the chunked body is left unfinished
                if not first and response.chunk_delay and scripted is not None:
                    await sleep(response.chunk_delay)
                await send(h11.Data(data=frame))
                if scripted is not None:
                    record.events_sent += 1
                    first = False
        await send(h11.EndOfMessage())
        record.completed_at = anyio.current_time()
        return True

    async def _send_error(
        self,
        send: Send,
        record: ProviderRequest,
        response: ErrorResponse,
        request_id: str,
    ) -> None:
        headers, payload = self._wire.error(response, record)
        headers = [*headers, ("content-length", str(len(payload))), ("x-request-id", request_id)]
        if response.retry_after is not None:
            headers.append(("retry-after", f"{response.retry_after:g}"))
        headers.extend(response.headers)
        record.first_byte_at = anyio.current_time()
        await send(
            h11.Response(status_code=response.status, headers=headers, reason=response.reason)
        )
        await send(h11.Data(data=payload))


@asynccontextmanager
async def open_provider_server(
    where: str, wire: Wire, script: ProviderScript, *, validate_history: bool
) -> AsyncIterator[FakeProviderServer]:
    """Serve *wire* for the body of an ``async with`` (the ``open_fake_*_server`` functions)."""
    check_validate(where, validate_history)
    queues, respond = compile_script(where, script)

    def make(port: int, refused_port: int) -> tuple[FakeProviderServer, Handler]:
        server = FakeProviderServer(
            port=port,
            refused_port=refused_port,
            wire=wire,
            queues=queues,
            respond=respond,
            validate_history=validate_history,
        )
        return server, server._serve_connection

    async with open_served(make) as server:
        yield server
