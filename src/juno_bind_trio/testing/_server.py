"""A fault-injecting OpenAI-compatible server on loopback, for tests and demos.

Why a real server rather than a mock transport: the faults worth testing live
below the SDK's object model. A connection that closes halfway through a
chunked body, a body that ends cleanly without ``[DONE]``, a stall between two
SSE events: a mock of ``AsyncOpenAI`` cannot produce them, and a mock of the
HTTP client (respx) does not intercept the SDK's own ``httpx2`` client. Bytes
on a socket can, and the SDK's real parsing then decides what each fault
becomes, which is the very thing a test of error classification must not fake.

Why in the caller's task group: every delay here is an ``anyio.sleep``, so
the server runs on the test's clock. On Trio's autojump ``MockClock`` (or the
project's virtual asyncio loop) a ten-minute stall costs nothing and the
client's read timeout fires at an exact virtual time. It is written on anyio's
socket streams and h11, so it runs under both backends.

What it records: every request ([`RecordedRequest`][juno_bind_trio.testing.RecordedRequest]), with
the virtual time it arrived, when its answer started and ended, and, when the client
hung up before the answer was complete, the time it went away. That last
field is what a cancellation test asserts on: cancelling a run must close its
connection *at once*, and "at once" is an exact virtual time.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, NoReturn, TypeAlias, final

import anyio
import anyio.abc
import attrs
import h11
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus

from ._gemini_compat import refuse_unsigned_calls, sign_first_call
from ._history import find_fault
from ._http import (
    Handler,
    Send,
    check_validate,
    compile_script,
    next_answer,
    open_ports,
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
    StreamResponse,
    encode_completion,
    encode_event,
)

__all__ = [
    "FakeOpenAIServer",
    "RecordedRequest",
    "Script",
    "open_fake_openai_server",
    "serve_fake_openai",
]

Script: TypeAlias = (
    Sequence[FakeResponse]
    | Mapping[str, Sequence[FakeResponse]]
    | Callable[["RecordedRequest"], FakeResponse]
    | None
)
"""How the server picks an answer.

* a sequence: one response per request, in arrival order;
* a mapping from model name to a sequence: per requested ``model``, in order;
* a callable: called with each [`RecordedRequest`][juno_bind_trio.testing.RecordedRequest], returns
  its answer;
* ``None``: nothing scripted yet (use
  [`FakeOpenAIServer.push()`][juno_bind_trio.testing.FakeOpenAIServer.push]).

A request with nothing left to answer it gets a 500 whose message says so,
so a script that is one response short fails loudly instead of hanging.
"""

_CHAT_PATH: Final = "/v1/chat/completions"


@final
@attrs.define(eq=False)
class RecordedRequest:
    """One request the server received, and what became of its answer.

    The times are ``anyio.current_time()`` readings, so on a virtual clock
    they are exact.
    """

    index: int
    """0-based arrival order across the whole server."""
    connection: int
    """0-based ordinal of the TCP connection it came on (keep-alive reuses one)."""
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    received_at: float
    response: FakeResponse | None = None
    """The scripted answer it was given."""
    first_byte_at: float | None = None
    """When the status line went out (``None``: never)."""
    events_sent: int = 0
    """SSE ``data:`` events written for a streamed answer, ``[DONE]`` excluded."""
    completed_at: float | None = None
    """When the whole answer had been written (``None``: it never was)."""
    client_gone_at: float | None = None
    """When the client hung up before the answer was complete (``None``: it did not)."""

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or ``None`` when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def model(self) -> str | None:
        """The request's ``model`` field."""
        body = self.json
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def stream(self) -> bool:
        """Whether the request asked for a streamed answer."""
        body = self.json
        return isinstance(body, dict) and body.get("stream") is True

    def header(self, name: str) -> str | None:
        """The first header called *name* (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k == wanted), None)


def _compile_script(
    script: object,
) -> tuple[dict[str | None, deque[FakeResponse]], Callable[[RecordedRequest], FakeResponse] | None]:
    return compile_script("open_fake_openai_server", script)


def _refuse_history(body: dict[str, Any]) -> ErrorResponse | None:
    """The 400 the real API answers a request whose ``messages`` it refuses, or ``None``."""
    messages = body.get("messages")
    if messages is None:
        return ErrorResponse(
            400,
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list):
        return ErrorResponse(
            400,
            "Invalid type for 'messages': expected an array of objects.",
            param="messages",
            code="invalid_type",
        )
    fault = find_fault(messages)
    if fault is None:
        return None
    return ErrorResponse(400, fault.message, param=fault.param, code=fault.code)


# The fields OpenAI's API defines on an assistant message and on a tool call in it.
_ASSISTANT_FIELDS: Final = frozenset(
    {"role", "content", "refusal", "name", "audio", "tool_calls", "function_call"}
)
_CALL_FIELDS: Final = frozenset({"id", "type", "function"})


def _refuse_unknown_fields(body: dict[str, Any]) -> ErrorResponse | None:
    """The 400 OpenAI's API answers an assistant message or call with a field it does not define."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        unknown = sorted(set(message) - _ASSISTANT_FIELDS)
        where = f"messages.{index}"
        if not unknown:
            calls = message.get("tool_calls")
            for k, call in enumerate(calls if isinstance(calls, list) else []):
                if isinstance(call, dict):
                    unknown = sorted(set(call) - _CALL_FIELDS)
                    if unknown:
                        where = f"messages.{index}.tool_calls.{k}"
                        break
        if unknown:
            names = ", ".join(repr(name) for name in unknown)
            verb = "was" if len(unknown) == 1 else "were"
            text = f"Additional properties are not allowed ({names} {verb} unexpected)"
            return ErrorResponse(400, f"{text} - {where!r}")
    return None


@final
@attrs.define(eq=False)
class FakeOpenAIServer:
    """A running fake server, from
    [`open_fake_openai_server()`][juno_bind_trio.testing.open_fake_openai_server] or
    [`serve_fake_openai()`][juno_bind_trio.testing.serve_fake_openai].

    Point the real SDK at it with
    ``openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)``.
    """

    port: int
    """The ephemeral port it listens on (127.0.0.1)."""
    refused_port: int
    """A port held bound but not listening for the server's lifetime: connecting is refused."""
    requests: list[RecordedRequest] = attrs.field(factory=list, init=False)
    """Every request received, in arrival order."""
    _queues: dict[str | None, deque[FakeResponse]] = attrs.field(factory=dict, alias="queues")
    _respond: Callable[[RecordedRequest], FakeResponse] | None = attrs.field(
        default=None, alias="respond"
    )
    validate_history: bool = attrs.field(default=True, kw_only=True)
    """Whether a request whose tool-call history the real API would refuse gets its 400.

    On by default, like the real API (see
    [check_tool_call_history][juno_bind_trio.testing.check_tool_call_history]).
    A refused request is recorded, answered with the 400, and takes nothing
    from the script. May be switched off and on while the server runs.
    """
    supports_response_format: bool = attrs.field(default=True, kw_only=True)
    """Whether ``response_format`` is accepted, as on the real API (the default).

    ``False`` plays a server that has tools but no structured output (many
    OpenAI-compatible servers): a request carrying ``response_format`` is
    answered 400 naming it, and takes nothing from the script. May be
    switched while the server runs.
    """
    strict_fields: bool = attrs.field(default=False, kw_only=True)
    """Whether an assistant message or a tool call may carry only the fields the API defines.

    ``True`` plays OpenAI's own API, which refuses any other field with a 400
    (``Additional properties are not allowed ('extra_content' was unexpected) -
    'messages.1'``): what a turn that fell back from a compatible server that
    adds fields of its own (Gemini's ``extra_content``, ``reasoning_content``)
    must not send. Off by default, since compatible servers take their own
    fields back. A refused request takes nothing from the script. May be
    switched while the server runs.
    """
    gemini_signatures: bool = attrs.field(default=False, kw_only=True)
    """Whether the server plays Gemini 3's OpenAI-compatible endpoint on thought signatures.

    ``True``: the first tool call of each streamed answer carries a signature
    (``extra_content.google.thought_signature``), and a request whose current
    turn has a call turn whose first call carries none, or one this server did
    not issue, gets Gemini's 400 (the stand-ins the Gemini API documents for
    calls it did not make pass); see ``testing/_gemini_compat.py``. Off by
    default. A refused request takes nothing from the script. May be switched
    while the server runs.
    """
    _issued: set[str] = attrs.field(factory=set, init=False)
    _connections: itertools.count[int] = attrs.field(factory=itertools.count, init=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the SDK's ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def refused_base_url(self) -> str:
        """A ``base_url`` whose every connection is refused: the connection-refused fault."""
        return f"http://127.0.0.1:{self.refused_port}/v1"

    def push(self, *responses: FakeResponse, model: str | None = None) -> None:
        """Append answers to the script (to *model*'s queue when the script is per model)."""
        push_answers(
            self._queues,
            self._respond,
            responses,
            model,
            owner="FakeOpenAIServer.push",
            where="FakeOpenAIServer.push",
        )

    def pending(self, model: str | None = None) -> int:
        """How many scripted answers are still queued (for *model*, when per model)."""
        return len(self._queues.get(model, ()))

    # -- the connection ---------------------------------------------------------

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        await serve_connection(
            stream, next(self._connections), self.requests, RecordedRequest, self._pick, self._play
        )

    def _pick(self, record: RecordedRequest) -> FakeResponse:
        if record.method != "POST" or record.target.split("?")[0] != _CHAT_PATH:
            return ErrorResponse(404, f"fake server: no route for {record.method} {record.target}")
        body = record.json
        if not isinstance(body, dict):
            return ErrorResponse(400, "fake server: the request body is not a JSON object")
        if self.validate_history:
            refusal = _refuse_history(body)
            if refusal is not None:
                return refusal
        if self.strict_fields:
            refusal = _refuse_unknown_fields(body)
            if refusal is not None:
                return refusal
        if self.gemini_signatures:
            refusal = refuse_unsigned_calls(body, self._issued)
            if refusal is not None:
                return refusal
        if not self.supports_response_format and "response_format" in body:
            return ErrorResponse(
                400,
                "fake server: response_format is not supported by this server",
                param="response_format",
                code="unsupported_parameter",
            )
        response = next_answer(
            self._queues,
            self._respond,
            record,
            record.model,
            owner="fake server",
            where="open_fake_openai_server script",
        )
        if self.gemini_signatures:
            response = sign_first_call(response, record.index, self._issued)
        return response

    async def _play(self, send: Send, record: RecordedRequest, response: FakeResponse) -> bool:
        completion_id = f"chatcmpl-fake-{record.index}"
        request_id = f"req_fake_{record.index}"
        if isinstance(response, CloseBeforeResponse):
            await sleep(response.delay)
            return False
        if isinstance(response, ErrorResponse):
            await sleep(response.delay)
            payload = response.body()
            headers = [
                ("content-type", "application/json"),
                ("content-length", str(len(payload))),
                ("x-request-id", request_id),
            ]
            if response.retry_after is not None:
                headers.append(("retry-after", f"{response.retry_after:g}"))
            headers.extend(response.headers)
            record.first_byte_at = anyio.current_time()
            await send(
                h11.Response(status_code=response.status, headers=headers, reason=response.reason)
            )
            await send(h11.Data(data=payload))
        elif isinstance(response, CompletionResponse):
            await sleep(response.delay)
            model = response.model or record.model or "fake-model"
            payload = encode_completion(response, completion_id=completion_id, model=model)
            headers = [
                ("content-type", "application/json"),
                ("content-length", str(len(payload))),
                ("x-request-id", request_id),
            ]
            record.first_byte_at = anyio.current_time()
            await send(h11.Response(status_code=200, headers=headers))
            await send(h11.Data(data=payload))
        else:
            if not await self._play_stream(send, record, response, completion_id, request_id):
                return False
        await send(h11.EndOfMessage())
        record.completed_at = anyio.current_time()
        return True

    @staticmethod
    async def _play_stream(
        send: Send,
        record: RecordedRequest,
        response: StreamResponse,
        completion_id: str,
        request_id: str,
    ) -> bool:
        await sleep(response.first_byte_delay)
        headers = [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("transfer-encoding", "chunked"),
            ("x-request-id", request_id),
        ]
        record.first_byte_at = anyio.current_time()
        await send(h11.Response(status_code=200, headers=headers))
        model = response.model or record.model or "fake-model"
        first = True
        for event in response.events:
            if isinstance(event, Pause):
                await sleep(event.seconds)
                continue
            if isinstance(event, Disconnect):
                # Returning False closes the socket with the chunked body
                # unfinished: the client sees the connection drop mid-stream.
                return False
            data = encode_event(event, completion_id=completion_id, model=model, first=first)
            assert data is not None
            if not first and response.chunk_delay:
                await sleep(response.chunk_delay)
            await send(h11.Data(data=data))
            record.events_sent += 1
            first = False
        if response.done:
            await send(h11.Data(data=b"data: [DONE]\n\n"))
        return True


async def serve_fake_openai(
    script: Script = None,
    *,
    validate_history: bool = True,
    task_status: TaskStatus[FakeOpenAIServer] = TASK_STATUS_IGNORED,
) -> NoReturn:
    """Run a fake server until cancelled; ``await task_group.start(serve_fake_openai, script)``.

    Reports the [`FakeOpenAIServer`][juno_bind_trio.testing.FakeOpenAIServer] through *task_status*
    once it is listening on 127.0.0.1 at an ephemeral port. *validate_history*: see
    [open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server].
    """
    check_validate("serve_fake_openai", validate_history)
    async with open_ports() as (listener, refused_port):
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        server = _new_server(port, refused_port, script, validate_history)
        task_status.started(server)
        await listener.serve(server._serve_connection)
    raise AssertionError("unreachable: serve() returns only by raising")  # pragma: no cover


@asynccontextmanager
async def open_fake_openai_server(
    script: Script = None, *, validate_history: bool = True
) -> AsyncIterator[FakeOpenAIServer]:
    """Start a fake OpenAI-compatible server for the body of an ``async with``.

    ``async with open_fake_openai_server([StreamResponse.of_text("hi")]) as server:``
    The server runs in a task group of its own inside the caller's task;
    leaving the block cancels it and closes every connection.

    Like the real API, the server refuses a request whose ``messages`` break
    the tool-call history rules (an answer to no call, a call left
    unanswered, an answer given twice, a bad ``role``: see
    [check_tool_call_history][juno_bind_trio.testing.check_tool_call_history])
    with a 400 in the API's error shape, before the script is consulted.
    ``validate_history=False`` switches that off, for a test that means to
    send a broken transcript and script what the provider answers it.
    """
    check_validate("open_fake_openai_server", validate_history)
    _compile_script(script)  # refuse a bad script here, bare, not from inside the task group

    def make(port: int, refused_port: int) -> tuple[FakeOpenAIServer, Handler]:
        server = _new_server(port, refused_port, script, validate_history)
        return server, server._serve_connection

    async with open_served(make) as server:
        yield server


def _new_server(
    port: int, refused_port: int, script: Script, validate_history: bool
) -> FakeOpenAIServer:
    queues, respond = _compile_script(script)
    return FakeOpenAIServer(
        port=port,
        refused_port=refused_port,
        queues=queues,
        respond=respond,
        validate_history=validate_history,
    )
