"""What the differential tests of the lean stream paths share: an attempt observed whole.

Each wire's test (``test_{openai,responses,anthropic,gemini}_lean_stream.py``) runs
the same stream through ``stream_path="lean"`` and ``"sdk"`` and requires that
nothing a caller or routing can observe tells them apart. What is observed, and
how two observations are compared, is the same for every wire and lives here:

* the outcome: the turn (content, tool calls, reasoning, the provider state in
  ``extra``, usage, time to first token) or the exception (type, message with the
  fake's port taken out, the wire's own fields, cause) with its routing verdict;
* the text stream's events, as ``repr`` strings;
* the virtual time the attempt took, and when each request's exchange ended;
* what the server received (how many requests, or for Gemini the requests).

What is the wire's own (its fake server, its client, how one turn is asked for,
which fields of its exceptions count, its fault matrix) each test file says in a
``Wire``; the scenarios every wire runs (a cancel, a reused
connection, many events in one read, routing, a page that is not an event
stream) are functions of the wire here, so a wire's test is its matrix and the
assertions that name its own exception types.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import attrs
import pytest
from hypothesis import strategies as st

from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers import ProviderRequest
from juno_bind_trio.providers.openai._stream import StreamPath
from juno_bind_trio.routing import ClassifiedError, RoutePlan
from juno_bind_trio.testing import (
    Disconnect,
    FakeResponse,
    Pause,
    StreamEvent,
    StreamResponse,
    TextDelta,
)

__all__ = [
    "ENDING",
    "MESSAGES",
    "Turn",
    "Wire",
    "attempt",
    "both",
    "cancelled",
    "connections",
    "cut",
    "interleaved",
    "random_script",
    "refused_page",
    "request",
    "routes_the_same",
]

MESSAGES = [{"role": "user", "content": "hi"}]
ENDING = st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b"\r\n\r\n", b"\r\r"])
"""The line endings an SDK's stream reader tells apart, and pairs of them."""
_PORT = re.compile(r"(?<=127\.0\.0\.1:)\d+|(?<=127\.0\.0\.1', )\d+")


class Turn(Protocol):
    """One turn on *client* by *path*: ``text_stream`` may be ``None``; *options* are the
    request's (``time_to_first_token``, ``tools``, ...)."""

    def __call__(
        self, client: Any, path: StreamPath, text_stream: TurnTextStream | None, **options: Any
    ) -> Awaitable[ModelTurnResult]: ...


def _wire_calls(result: ModelTurnResult) -> object:
    return [call.to_wire() for call in result.tool_calls]


def _sorted_extra(result: ModelTurnResult) -> object:
    return json.dumps(dict(result.extra), sort_keys=True)


def _request_count(server: Any) -> object:
    return len(server.requests)


@attrs.frozen(kw_only=True)
class Wire:
    """What one wire's differential test brings: how to reach it, and what its outcome holds.

    *open_server* ``(script)`` and *open_client* ``(base_url, **client_options)`` are async
    context managers; *turn* asks for one turn; *classify* gives an exception's verdict;
    *fields* are the exception's attributes compared (absent ones as ``None``), then the
    status of its ``response`` where *response_status*; *calls* and *extra* show a turn's
    tool calls and ``extra``; *received* what the server saw.
    """

    open_server: Callable[[list[FakeResponse]], AbstractAsyncContextManager[Any]]
    open_client: Callable[..., AbstractAsyncContextManager[Any]]
    turn: Turn
    classify: Callable[[Exception], ClassifiedError]
    fields: tuple[str, ...]
    response_status: bool = False
    calls: Callable[[ModelTurnResult], object] = _wire_calls
    extra: Callable[[ModelTurnResult], object] = _sorted_extra
    received: Callable[[Any], object] = _request_count

    def raised(self, error: Exception) -> tuple[Any, ...]:
        """The exception as compared: ``("raised", type, message, *fields, cause, verdict)``."""
        verdict = self.classify(error)
        shown = [getattr(error, name, None) for name in self.fields]
        if self.response_status:
            response = getattr(error, "response", None)
            shown.append(None if response is None else response.status_code)
        return (
            "raised",
            type(error),
            _PORT.sub("PORT", str(error)),  # each attempt has a server of its own
            *shown,
            type(error.__cause__),
            verdict.action,
            verdict.reason,
            verdict.retry_after,
        )

    def returned(self, result: ModelTurnResult) -> tuple[Any, ...]:
        """The turn as compared."""
        return (
            "returned",
            result.content,
            self.calls(result),
            result.reasoning,
            self.extra(result),
            result.input_tokens,
            result.output_tokens,
            result.cached_tokens,
            result.reasoning_tokens,
            result.time_to_first_token,
        )


def request(
    model: str,
    text_stream: TurnTextStream | None,
    *,
    messages: Sequence[Mapping[str, Any]] = MESSAGES,
    tools: Sequence[Mapping[str, Any]] = (),
    options: Mapping[str, Any] | None = None,
    time_to_first_token: float = 5.0,
    inter_chunk_timeout: float = 4.0,
) -> ProviderRequest:
    """The request an adapter's turn sends, with the tests' budgets."""
    return ProviderRequest(
        model=model,
        messages=list(messages),
        tools=list(tools),
        options=dict(options or {}),
        text_stream=text_stream,
        time_to_first_token=time_to_first_token,
        inter_chunk_timeout=inter_chunk_timeout,
    )


def cut(
    lines: Sequence[tuple[bytes, bytes]], tail: bytes, cuts: Sequence[int]
) -> tuple[list[bytes], list[bytes]]:
    """A body (*lines*, each with its ending, then *tail*) as the reads of a client: cut at
    *cuts*, and a read per line, as a server writing an event per send is read (a lean
    reader's shortcut for one whole ``data:`` event, amid whatever came before)."""
    body = b"".join(line + ending for line, ending in lines) + tail
    at = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *at], [*at, len(body)], strict=True)]
    return pieces, [line + ending for line, ending in lines]


def _ended(gone: float | None, completed: float | None, start: float) -> float | None:
    # When the exchange ended: the client hung up, or the server wrote it all
    # (which comes first at one instant is the scheduler's choice, not the path's).
    at = gone if gone is not None else completed
    return None if at is None else _instant(at - start)


def _instant(seconds: float) -> float:
    # A virtual-clock span, to the microsecond: the same instant reached by
    # different sums of jumps can differ in the last bit (0.1 against
    # 0.10000000000000009), which is not a difference between the paths.
    return round(seconds, 6)


async def attempt(
    wire: Wire,
    script: Sequence[FakeResponse],
    path: StreamPath,
    *,
    refused: bool = False,
    client_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> tuple[Any, ...]:
    """Everything observable about one attempt: its outcome, the text stream, time, the socket."""
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    start = anyio.current_time()
    async with wire.open_server(list(script)) as server:
        url = server.refused_base_url if refused else server.base_url
        async with wire.open_client(url, **(client_options or {})) as client:
            try:
                result = await wire.turn(client, path, stream, **options)
            except Exception as error:
                outcome = wire.raised(error)
            else:
                outcome = wire.returned(result)
            ended = _instant(anyio.current_time() - start)
            await anyio.sleep(1)  # let the server see the client go
    gone = [_ended(r.client_gone_at, r.completed_at, start) for r in server.requests]
    return outcome, [repr(e) for e in sink.events], ended, gone, wire.received(server)


async def both(wire: Wire, script: Sequence[FakeResponse], **options: Any) -> tuple[Any, ...]:
    """The attempt on the lean path, once it is the same on the SDK path."""
    lean = await attempt(wire, script, "lean", **options)
    sdk = await attempt(wire, script, "sdk", **options)
    assert lean == sdk
    return lean


def random_script(events: Sequence[StreamEvent], ending: str) -> list[FakeResponse]:
    """A drawn stream, ended as drawn: ``"done"``, ``"no-done"``, ``"disconnect"``, ``"stall"``."""
    tail: list[StreamEvent] = (
        [Disconnect()] if ending == "disconnect" else [Pause(math.inf)] if ending == "stall" else []
    )
    return [StreamResponse([*events, *tail], done=ending != "no-done")]


async def cancelled(wire: Wire, path: StreamPath) -> list[float | None]:
    """When the server saw the client go, for a turn whose scope is cancelled at 2.25 s."""
    start = anyio.current_time()
    script: list[FakeResponse] = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    async with wire.open_server(script) as server, wire.open_client(server.base_url) as client:
        with anyio.move_on_after(2.25) as scope:
            await wire.turn(client, path, None, time_to_first_token=10.0, inter_chunk_timeout=10.0)
        assert scope.cancelled_caught
        await anyio.sleep(1)
    return [None if r.client_gone_at is None else r.client_gone_at - start for r in server.requests]


async def connections(wire: Wire) -> list[int]:
    """The connection each of two turns on one client went on, by the default path."""
    script: list[FakeResponse] = [StreamResponse.of_text("a"), StreamResponse.of_text("b")]
    async with wire.open_server(script) as server, wire.open_client(server.base_url) as client:
        for _ in script:
            await wire.turn(client, "lean", None, time_to_first_token=5.0, inter_chunk_timeout=5.0)
    return [r.connection for r in server.requests]


async def interleaved(
    wire: Wire, path: StreamPath, script: Sequence[FakeResponse]
) -> tuple[str | None, set[int]]:
    """The content of a turn whose ``"x"`` deltas come in one read, and the counts of them a
    task beside it saw in the text stream between its own steps."""
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    seen: set[int] = set()
    async with (
        wire.open_server(list(script)) as server,
        wire.open_client(server.base_url) as client,
        anyio.create_task_group() as tg,
    ):

        async def watch() -> None:
            while True:
                seen.add(sum(1 for e in sink.events if getattr(e, "text", None) == "x"))
                await anyio.lowlevel.checkpoint()

        tg.start_soon(watch)
        result = await wire.turn(
            client, path, stream, time_to_first_token=5.0, inter_chunk_timeout=5.0
        )
        tg.cancel_scope.cancel()
    return result.content, seen


async def routes_the_same(
    wire: Wire,
    plan: RoutePlan,
    faults: Sequence[tuple[str, Sequence[FakeResponse]]],
    model: Callable[[RoutePlan, dict[str, Any], StreamPath], Any],
) -> None:
    """Each fault's first response on endpoint ``a`` (then a healthy one, endpoint ``b``
    healthy throughout) routes the same on both paths: the attempt trail and the answer.
    *model* makes the routed model of the plan over the clients by name."""

    async def route(path: StreamPath, fault: FakeResponse) -> Any:
        async with (
            wire.open_server([fault, StreamResponse.of_text("again")]) as a,
            wire.open_server([StreamResponse.of_text("from b")] * 2) as b,
            wire.open_client(a.base_url) as client_a,
            wire.open_client(b.base_url) as client_b,
        ):
            routed = model(plan, {"a": client_a, "b": client_b}, path)
            result = await routed.route(MESSAGES)
        trail = [
            (r.candidate.provider, r.cursor.model, r.action, type(r.error), r.adjusted)
            for r in result.attempts
        ]
        return trail, result.unwrap().content if result.ok else None

    for _, script in faults:
        assert await route("lean", script[0]) == await route("sdk", script[0])


@asynccontextmanager
async def _login_page() -> AsyncIterator[str]:
    """A server that answers every request 200 with an HTML page, as a proxy's login page does."""
    page = b"<html>sign in</html>"
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n"
        + f"content-length: {len(page)}\r\n\r\n".encode()
        + page
    )

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                received = b""
                while b"\r\n\r\n" not in received:
                    received += await client.receive()
                await client.send(answer)
                await client.receive()  # until the client hangs up

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def refused_page(wire: Wire, path: StreamPath, *, suffix: str = "") -> tuple[Any, ...]:
    """The exception, as compared, of a turn sent to a login page (at its URL + *suffix*)."""
    async with _login_page() as url, wire.open_client(url + suffix) as client:
        with pytest.raises(Exception) as caught:
            await wire.turn(client, path, None, time_to_first_token=5.0, inter_chunk_timeout=5.0)
    return wire.raised(caught.value)
