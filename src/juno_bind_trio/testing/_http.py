"""The HTTP/1.1 half every loopback fake shares: the socket, the request cycle, the script.

Three fakes serve a provider's API on loopback (the OpenAI-compatible one in
``_server.py``, the Anthropic one on ``_loopback.py``, the Responses, Gemini
and Bedrock ones on ``_wire.py``), and they differ only in the bytes of an
answer and in what they refuse. What they must agree on lives here, once, so
a fault behaves the same whichever fake plays it:

* the ports: an ephemeral listener on 127.0.0.1, and beside it a socket held
  bound but never listening, whose port refuses every connection;
* the cycle on one connection: read a request whole, record it with its
  virtual arrival time, pick its answer, play it while a second task reads
  the socket so that a client hanging up mid-stall is noticed at that exact
  virtual time, then keep the connection alive or close it;
* the script: a sequence, a per-model mapping, a callable or ``None``,
  refused with a `TypeError` naming the caller when it is none of these;
* the lifetime: serving for the body of an ``async with``, stopped by a scope
  of its own, with whatever the body raised leaving bare, not in a group.
"""

from __future__ import annotations

import math
import socket
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol, TypeAlias, TypeVar

import anyio
import anyio.abc
import h11

from ._script import FAKE_RESPONSE_TYPES, ErrorResponse, FakeResponse

MAX_REQUEST_BYTES: Final = 16 * 1024 * 1024
RECEIVE_SIZE: Final = 65536
# Errors that mean "the client is gone", from either backend's socket layer.
GONE: Final = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)

Send: TypeAlias = Callable[[h11.Event], Awaitable[None]]
"""Writes one h11 event to the connection's socket."""
Handler: TypeAlias = Callable[[anyio.abc.SocketStream], Awaitable[None]]
Queues: TypeAlias = dict[str | None, deque[FakeResponse]]


class Exchange(Protocol):
    """What the request cycle reads and writes on a fake's record of one request."""

    index: int
    response: FakeResponse | None
    completed_at: float | None
    client_gone_at: float | None


R = TypeVar("R", bound=Exchange)
R_co = TypeVar("R_co", bound=Exchange, covariant=True)
R_contra = TypeVar("R_contra", bound=Exchange, contravariant=True)


class NewRecord(Protocol[R_co]):
    """A record class: [RecordedRequest][juno_bind_trio.testing.RecordedRequest] or its kin."""

    def __call__(
        self,
        *,
        index: int,
        connection: int,
        method: str,
        target: str,
        headers: tuple[tuple[str, str], ...],
        body: bytes,
        received_at: float,
    ) -> R_co: ...


class Play(Protocol[R_contra]):
    """Writes the answer to one request; returns whether the connection may carry another."""

    def __call__(self, send: Send, record: R_contra, response: FakeResponse) -> Awaitable[bool]: ...


async def sleep(seconds: float) -> None:
    """``anyio.sleep``, where ``math.inf`` is a stall that only a cancellation ends."""
    if math.isinf(seconds):
        await anyio.sleep_forever()
    else:
        await anyio.sleep(seconds)


def check_validate(where: str, value: object) -> bool:
    """*value* when it is a bool, else a `TypeError` naming *where*."""
    if not isinstance(value, bool):
        raise TypeError(f"{where}: validate_history must be a bool, got {value!r}")
    return value


def check_response(value: object, where: str) -> FakeResponse:
    """*value* when it is a scripted response, else a `TypeError` naming *where*."""
    if not isinstance(value, FAKE_RESPONSE_TYPES):
        raise TypeError(f"{where}: not a scripted response: {value!r}")
    return value


def compile_script(
    where: str, script: object
) -> tuple[Queues, Callable[[Any], FakeResponse] | None]:
    """The queues (or the callable) of *script*, refused with a `TypeError` naming *where*."""
    if script is None:
        return {None: deque()}, None
    if callable(script):
        return {}, script
    if isinstance(script, Mapping):
        queues: Queues = {}
        for model, responses in script.items():
            if not isinstance(model, str):
                raise TypeError(f"{where}: script keys must be model names, got {model!r}")
            if isinstance(responses, str | bytes | Mapping) or not isinstance(responses, Sequence):
                raise TypeError(
                    f"{where}: script values must be sequences of responses, "
                    f"got {responses!r} for {model!r}"
                )
            queues[model] = deque(check_response(r, where) for r in responses)
        return queues, None
    if isinstance(script, str | bytes) or not isinstance(script, Sequence):
        raise TypeError(
            f"{where}: script must be a sequence of responses, a mapping of model to "
            f"responses, or a callable, got {script!r}"
        )
    return {None: deque(check_response(r, where) for r in script)}, None


def push_answers(
    queues: Queues,
    respond: object,
    responses: Sequence[object],
    model: str | None,
    *,
    owner: str,
    where: str,
) -> None:
    """Append *responses* to *model*'s queue; a `TypeError` when the script is a callable."""
    if respond is not None:
        raise TypeError(f"{owner}: the script is a callable; push has no queue")
    checked = [check_response(r, where) for r in responses]
    queues.setdefault(model, deque()).extend(checked)


def next_answer(
    queues: Queues,
    respond: Callable[[R], FakeResponse] | None,
    record: R,
    model: str | None,
    *,
    owner: str,
    where: str,
) -> FakeResponse:
    """The script's answer to *record*: the callable's, or the next of *model*'s queue.

    A script with nothing left answers a 500 saying so (*owner* names the
    server), so a script one response short fails loudly instead of hanging.
    """
    if respond is not None:
        return check_response(respond(record), where)
    queue = queues.get(model if model in queues else None)
    if not queue:
        return ErrorResponse(
            500,
            f"{owner}: no scripted response left for request #{record.index} (model {model!r})",
        )
    return queue.popleft()


# --- one connection ---------------------------------------------------------------


async def serve_connection(
    stream: anyio.abc.SocketStream,
    ordinal: int,
    requests: list[R],
    new_record: NewRecord[R],
    pick: Callable[[R], FakeResponse],
    play: Play[R],
) -> None:
    """Answer the requests that come on *stream*, the *ordinal*-th connection, until it closes.

    Each request is appended to *requests* as ``new_record(...)`` before
    *pick* chooses its answer and *play* writes it.
    """
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    async with stream:
        while True:
            try:
                received = await _read_request(stream, conn)
            except (*GONE, h11.RemoteProtocolError):
                return
            if received is None:
                return
            head, body = received
            record = new_record(
                index=len(requests),
                connection=ordinal,
                method=head.method.decode(),
                target=head.target.decode(),
                headers=tuple((k.decode(), v.decode()) for k, v in head.headers),
                body=body,
                received_at=anyio.current_time(),
            )
            requests.append(record)
            if not await _answer(stream, conn, record, pick(record), play):
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()


async def _read_request(
    stream: anyio.abc.SocketStream, conn: h11.Connection
) -> tuple[h11.Request, bytes] | None:
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(RECEIVE_SIZE)
            except anyio.EndOfStream:
                data = b""
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _answer(
    stream: anyio.abc.SocketStream,
    conn: h11.Connection,
    record: R,
    response: FakeResponse,
    play: Play[R],
) -> bool:
    """Play *response* while watching for the client to hang up.

    Returns whether the connection may carry another request.
    """

    async def send(event: h11.Event) -> None:
        data = conn.send(event)
        if data:
            await stream.send(data)

    record.response = response
    keep_open = True
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_client, stream, conn, record, tg.cancel_scope)
        try:
            keep_open = await play(send, record, response)
        except GONE:
            record.client_gone_at = anyio.current_time()
            keep_open = False
        finally:
            tg.cancel_scope.cancel()
    return keep_open and record.client_gone_at is None


async def _watch_client(
    stream: anyio.abc.SocketStream,
    conn: h11.Connection,
    record: Exchange,
    scope: anyio.CancelScope,
) -> None:
    # A client that gives up (a cancelled scope, a read timeout) closes its
    # socket; a server that only ever writes would notice at its next send,
    # which during a stall may be never. Reading while answering is how a
    # hang-up gets its exact time. A well-behaved HTTP/1.1 client sends
    # nothing else until the answer is complete, but anything that does
    # arrive is handed to h11 for the next cycle rather than lost.
    while True:
        try:
            data = await stream.receive(RECEIVE_SIZE)
        except GONE:
            if record.completed_at is None:
                record.client_gone_at = anyio.current_time()
            scope.cancel()
            return
        conn.receive_data(data)


# --- the ports and the lifetime ---------------------------------------------------


@asynccontextmanager
async def open_ports() -> AsyncIterator[tuple[anyio.abc.Listener[anyio.abc.SocketStream], int]]:
    """A listener on an ephemeral port of 127.0.0.1, and a port that refuses connections.

    The second is a bound socket that never listens: the kernel refuses every
    connection to its port, and holding it keeps the port from being handed to
    anyone else, so "connection refused" cannot turn into "connected to a
    stranger". Both close when the block ends.
    """
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    refusing = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with refusing:
        refusing.bind(("127.0.0.1", 0))
        async with listener:
            yield listener, refusing.getsockname()[1]


S = TypeVar("S")


@asynccontextmanager
async def open_served(
    make: Callable[[int, int], tuple[S, Handler]],
) -> AsyncIterator[S]:
    """Serve for the body of an ``async with`` what ``make(port, refused_port)`` returns.

    *make* returns the server the body gets and the handler of each connection.
    """
    # Whatever the body raised is re-raised bare, outside the task group: a
    # test that expects ``openai.RateLimitError`` should not have to dig it out
    # of an exception group only because the server happens to run as a task.
    # The server is stopped by a scope in its own task, never by cancelling the
    # task group's: on asyncio, anyio (4.16) lets a cancelled task group's scope
    # call uncancel() on the caller's task for cancellations of the server's
    # tasks, and a task.cancel() of the caller landing during the teardown was
    # then swallowed (see juno_bind_trio._cancel.task_cancellation).
    failure: BaseException | None = None
    async with open_ports() as (listener, refused_port):
        server, handler = make(listener.extra(anyio.abc.SocketAttribute.local_port), refused_port)
        stop = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_serve_until_stopped, stop, listener, handler)
            try:
                yield server
            except BaseException as exc:
                failure = exc
            finally:
                stop.cancel()
    if failure is not None:
        raise failure


async def _serve_until_stopped(
    stop: anyio.CancelScope, listener: anyio.abc.Listener[anyio.abc.SocketStream], handler: Handler
) -> None:
    with stop:
        await listener.serve(handler)
