"""The two frontends' endpoints: ``useChat``'s UI message stream and AG-UI, as ASGI apps.

Each is one POST endpoint, an ASGI application to mount where the frontend
posts (``Route("/api/chat", app)`` in Starlette, ``app.add_route(...)`` or
``app.mount(...)`` in FastAPI). A request passes the web view's gate (see
``web/_app.py``): the ``Host`` check, the cross-site check, the host's
authorization hook (without one, loopback clients only), a bounded body;
then its body is read into a prompt and a transcript, and the run streams
back as the request's response. Every refusal is a 4xx with a JSON
``{"error": ...}`` naming what was wrong; nothing a client sends is a 500.

A client that goes away
-----------------------

``useChat``'s ``stop()`` and an AG-UI client's ``abortRun()`` abort the
fetch. The endpoint notices the disconnect and, by default
(``on_disconnect="cancel"``), cancels the run's scope: with the loop's
guarantees, every tool call of the last assistant message is answered in
the transcript (``not_run``, ``interrupted``), and a run of an agent with a
store is saved so. ``on_disconnect="continue"`` leaves the run going to its
end instead, unwatched (for a durable run, whose store keeps what it does,
and which a store worker or [Agent.resume][juno_bind_trio.agent.Agent.resume]
can take up again by its id).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, final

import anyio
import attrs
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from juno_bind_trio._errors import UsageError

from ._app import (
    DEFAULT_ALLOWED_HOSTS,
    DEFAULT_MAX_BODY_BYTES,
    Authorize,
    _check_body_limit,
    _check_hosts,
    _check_origins,
    _host_name,
    _is_loopback,
    _read_body,
    _refuse,
)
from ._live_run import RunHandle
from ._runs import DEFAULT_MAX_ACTIVE_RUNS
from ._ui_request import chat_from_ui_messages
from ._ui_stream import UI_MESSAGE_STREAM_HEADERS, ui_message_stream

__all__ = [
    "ChatRunSource",
    "OnDisconnect",
    "ProtocolApp",
    "create_agui_app",
    "create_ui_message_stream_app",
]

OnDisconnect: TypeAlias = Literal["cancel", "continue"]
"""What a protocol endpoint does with a run whose client went away."""

_LOCAL_PRINCIPAL: Final = "local"
_log: Final = logging.getLogger("juno_bind_trio")


class ChatRunSource(Protocol):
    """What the protocol endpoints start runs on: [Agent][juno_bind_trio.agent.Agent] is one."""

    def open_run(
        self, prompt: str, *, message_history: Sequence[Mapping[str, Any]] | None = ...
    ) -> AbstractAsyncContextManager[RunHandle]: ...


class _GoingOnSource(Protocol):
    """A source that also opens a run going on from its history's answers (no prompt) and
    with a client's own tools (AG-UI's client-defined tools): Agent is one. A source without
    them answers such a request 400 (its TypeError)."""

    def open_run(
        self,
        prompt: str | None,
        *,
        message_history: Sequence[Mapping[str, Any]] | None = ...,
        extra_tools: Sequence[Any] | None = ...,
    ) -> AbstractAsyncContextManager[RunHandle]: ...


_AGUI_HEADERS: Final[Mapping[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}

_Frames: TypeAlias = Callable[[RunHandle], AsyncIterator[str]]
_Parse: TypeAlias = Callable[[object], "_Request"]


@attrs.frozen
class _Request:
    """What a protocol's body asks for: the prompt (``None``: go on from the answers at the
    history's end), the history, the run's own tools (a client's), and how to stream."""

    prompt: str | None
    history: list[dict[str, Any]]
    frames: _Frames
    tools: tuple[Any, ...] = ()


def _check_source(owner: str, agent: object) -> None:
    if not callable(getattr(agent, "open_run", None)):
        raise TypeError(f"{owner}: agent must have an open_run() method (an Agent), got {agent!r}")


def _check_on_disconnect(owner: str, value: object) -> OnDisconnect:
    if value not in ("cancel", "continue"):
        raise ValueError(f"{owner}: on_disconnect must be 'cancel' or 'continue', got {value!r}")
    return "cancel" if value == "cancel" else "continue"


def _check_limit(owner: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}: max_active_runs must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{owner}: max_active_runs must be a positive integer, got {value!r}")
    return value


@final
class ProtocolApp:
    """One frontend protocol's endpoint, an ASGI application (see the module).

    Made by [create_ui_message_stream_app][juno_bind_trio.web.create_ui_message_stream_app]
    and [create_agui_app][juno_bind_trio.web.create_agui_app]. ``active`` is
    how many of its runs are going.
    """

    __slots__ = (
        "_active",
        "_agent",
        "_authorize",
        "_body_limit",
        "_headers",
        "_hosts",
        "_max_active",
        "_on_disconnect",
        "_origins",
        "_owner",
        "_parse",
    )

    def __init__(
        self,
        owner: str,
        agent: ChatRunSource,
        parse: _Parse,
        headers: Mapping[str, str],
        *,
        authorize: Authorize | None,
        allowed_hosts: Collection[str],
        allowed_origins: Collection[str],
        max_body_bytes: int,
        max_active_runs: int,
        on_disconnect: OnDisconnect,
    ) -> None:
        given_owner: object = owner
        if given_owner not in ("create_ui_message_stream_app", "create_agui_app"):
            owner = "ProtocolApp"  # made by one of the two factories, or named as itself
        if not callable(parse):
            raise TypeError(f"{owner}: parse must be callable, got {parse!r:.80}")
        given_headers: object = headers
        if not isinstance(given_headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in given_headers.items()
        ):
            raise TypeError(f"{owner}: headers must map str to str, got {headers!r:.80}")
        _check_source(owner, agent)
        if authorize is not None and not callable(authorize):
            raise TypeError(f"{owner}: authorize must be callable or None, got {authorize!r}")
        self._owner = owner
        self._agent = agent
        self._parse = parse
        self._headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        self._authorize = authorize
        self._hosts = _check_hosts(allowed_hosts)
        self._origins = _check_origins(allowed_origins)
        self._body_limit = _check_body_limit(max_body_bytes)
        self._max_active = _check_limit(owner, max_active_runs)
        self._on_disconnect = _check_on_disconnect(owner, on_disconnect)
        self._active = 0

    @property
    def active(self) -> int:
        """How many runs of this endpoint are going."""
        return self._active

    def __repr__(self) -> str:
        return f"<{self._owner} active={self._active} on_disconnect={self._on_disconnect!r}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if kind != "http":
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        request = Request(scope, receive)
        refused = await self._admit(request)
        if isinstance(refused, Response):
            await refused(scope, receive, send)
            return
        if self._active >= self._max_active:
            await _refuse(429, f"{self._max_active} runs are already going")(scope, receive, send)
            return
        self._active += 1
        try:
            await self._stream(scope, refused, receive, send)
        finally:
            self._active -= 1

    async def _admit(self, request: Request) -> Response | _Request:
        host = request.headers.get("host", "")
        if _host_name(host) not in self._hosts:
            return _refuse(421, "this host name is not served here")
        if request.method != "POST":
            return Response(status_code=405, headers={"allow": "POST"})
        why = self._cross_site(request)
        if why is not None:
            return _refuse(403, f"cross-site request refused: {why}")
        if await self._principal(request) is None:
            return _refuse(403, "not allowed")
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _refuse(415, "send the request as application/json")
        raw = await _read_body(request, self._body_limit)
        if isinstance(raw, Response):
            return raw
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            return _refuse(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _refuse(400, "the body must be a JSON object")
        try:
            return self._parse(body)
        except ValueError as exc:  # the protocol's reading error: it names the part
            return _refuse(400, str(exc))
        except RecursionError:
            return _refuse(400, "the body is nested too deeply")

    def _cross_site(self, request: Request) -> str | None:
        origin = request.headers.get("origin")
        if origin is not None:
            own = f"{request.url.scheme}://{request.headers.get('host', '')}".lower()
            if origin.rstrip("/").lower() not in self._origins | {own}:
                return f"origin {origin!r} is not allowed"
            return None
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return f"a {fetch_site} request"
        return None

    async def _principal(self, request: Request) -> str | None:
        authorize = self._authorize
        if authorize is None:
            client = request.client
            return _LOCAL_PRINCIPAL if _is_loopback(client.host if client else None) else None
        decided: object = authorize(request, "start", None)
        if inspect.isawaitable(decided):
            decided = await decided
        if decided is not None and (not isinstance(decided, str) or not decided):
            raise UsageError(
                f"{self._owner}: authorize() must return a principal (a non-empty str) or None, "
                f"got {decided!r}"
            )
        return decided if isinstance(decided, str) else None

    async def _stream(self, scope: Scope, asked: _Request, receive: Receive, send: Send) -> None:
        frames = asked.frames
        try:
            # The agent checks the prompt and the history when the run is asked
            # for, before anything runs: what it refuses is the request's fault.
            # A run going on from its history's answers (a client tool's) has no
            # prompt; a client's own tools are this run's only.
            if asked.tools or asked.prompt is None:
                going_on = cast("_GoingOnSource", self._agent)
                options = {"extra_tools": asked.tools} if asked.tools else {}
                opened = going_on.open_run(asked.prompt, message_history=asked.history, **options)
            else:
                opened = self._agent.open_run(asked.prompt, message_history=asked.history)
        except (TypeError, ValueError) as exc:
            await _refuse(400, str(exc))(scope, receive, send)
            return
        gone = False
        cancel_on_gone = self._on_disconnect == "cancel"
        try:
            async with (
                opened as run,
                anyio.create_task_group() as watchers,
            ):

                async def watch() -> None:
                    nonlocal gone
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            gone = True
                            if cancel_on_gone:
                                run.cancel()
                            return

                watchers.start_soon(watch)
                await send({"type": "http.response.start", "status": 200, "headers": self._headers})
                async for frame in frames(run):
                    if gone:
                        continue  # nobody reads: the run goes to its end (or its cancel)
                    try:
                        await send(
                            {
                                "type": "http.response.body",
                                "body": frame.encode(),
                                "more_body": True,
                            }
                        )
                    except OSError:  # the server found the connection gone first
                        gone = True
                        if cancel_on_gone:
                            run.cancel()
                if not gone:
                    with suppress(OSError):
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                watchers.cancel_scope.cancel()
        except Exception:
            # The run's own failure: the stream said so (an error chunk, RUN_ERROR)
            # before it ended; the developer reads the rest in the log.
            _log.warning("%s: the run failed", self._owner, exc_info=True)


def create_ui_message_stream_app(
    agent: ChatRunSource,
    *,
    authorize: Authorize | None = None,
    allowed_hosts: Collection[str] = DEFAULT_ALLOWED_HOSTS,
    allowed_origins: Collection[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_active_runs: int = DEFAULT_MAX_ACTIVE_RUNS,
    on_disconnect: OnDisconnect = "cancel",
) -> ProtocolApp:
    """The endpoint ``useChat`` posts to: each request a run, streamed as a UI message stream.

    The body is ``useChat``'s (``DefaultChatTransport``): its ``messages``
    are read by [chat_from_ui_messages][juno_bind_trio.web.chat_from_ui_messages]
    (a part it cannot read is a 400 naming it); the answer is
    [ui_message_stream][juno_bind_trio.web.ui_message_stream] with
    [UI_MESSAGE_STREAM_HEADERS][juno_bind_trio.web.UI_MESSAGE_STREAM_HEADERS].
    The options are [create_app][juno_bind_trio.web.create_app]'s, plus
    *max_active_runs* (past it, 429) and *on_disconnect* (see the module).
    """

    def parse(body: object) -> _Request:
        assert isinstance(body, dict)
        prompt, history = chat_from_ui_messages(
            body.get("messages"), trigger=body.get("trigger", "submit-message")
        )
        return _Request(prompt, history, ui_message_stream)

    return ProtocolApp(
        "create_ui_message_stream_app",
        agent,
        parse,
        UI_MESSAGE_STREAM_HEADERS,
        authorize=authorize,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_body_bytes=max_body_bytes,
        max_active_runs=max_active_runs,
        on_disconnect=on_disconnect,
    )


def create_agui_app(
    agent: ChatRunSource,
    *,
    authorize: Authorize | None = None,
    allowed_hosts: Collection[str] = DEFAULT_ALLOWED_HOSTS,
    allowed_origins: Collection[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_active_runs: int = DEFAULT_MAX_ACTIVE_RUNS,
    on_disconnect: OnDisconnect = "cancel",
) -> ProtocolApp:
    """The endpoint an AG-UI client (``HttpAgent``, CopilotKit) posts ``RunAgentInput`` to.

    The input is validated by the ``ag-ui-protocol`` package and read by
    [chat_from_run_input][juno_bind_trio.web.chat_from_run_input]; the
    answer is [agui_events][juno_bind_trio.web.agui_events] as
    ``text/event-stream``. Options as for
    [create_ui_message_stream_app][juno_bind_trio.web.create_ui_message_stream_app].
    """
    from ._agui import agui_events
    from ._agui_request import chat_from_run_input, client_tools, read_run_input

    def parse(body: object) -> _Request:
        run_input = read_run_input(body)
        prompt, history = chat_from_run_input(run_input)
        tools = tuple(client_tools(run_input))

        def frames(run: RunHandle) -> AsyncIterator[str]:
            return agui_events(
                run,
                thread_id=run_input.thread_id,
                run_id=run_input.run_id,
                messages=run_input.messages,
            )

        return _Request(prompt, history, frames, tools)

    return ProtocolApp(
        "create_agui_app",
        agent,
        parse,
        {
            "content-type": "text/event-stream",
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
        },
        authorize=authorize,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_body_bytes=max_body_bytes,
        max_active_runs=max_active_runs,
        on_disconnect=on_disconnect,
    )
