"""The ASGI application: start, watch, snapshot, stop and cancel runs over HTTP.

Every request passes the same gate, in this order:

1. **Host.** The ``Host`` header must name an allowed host (loopback names by
   default). A page on another site whose name resolves to 127.0.0.1 (DNS
   rebinding) is refused here, before anything else runs. The check wraps
   the whole app, so it holds for every path: the API, ``/static/``, the
   page, and paths that do not exist.
2. **Cross-site.** A request about runs (every ``/runs`` path: starting,
   watching, reading, stopping, cancelling) whose ``Origin`` is not this
   app's own, or that a browser marks ``Sec-Fetch-Site: cross-site`` /
   ``same-site``, is refused: a run's events and snapshot carry its
   conversation, which another site must not read through the user's
   browser. Starting a run also needs a JSON body, which an HTML form on
   another site cannot send. (The page and the client modules are served to
   any site that links to them: they hold no run.)
3. **Who.** The host's ``authorize(request, action, owner)`` hook names the
   principal acting (or refuses with ``None``). Without a hook, only
   loopback clients are let in, as the principal ``"local"``.
4. **Whose.** Watching, reading, stopping or cancelling a run is allowed only
   to the principal that started it; for anybody else the run does not exist.
   Deciding a suspended run's waiting calls (``"approve"``) is the hook's to
   allow: it is told the run's owner, and whoever it names (a reviewer, the
   owner) decides; without a hook, the loopback principal.
   A run read back from the run store keeps no principal in the store: its
   id carries a digest binding it to the principal that started it, and the
   hook's principal must match that digest.

A request body (only ``POST /runs`` reads one) is bounded by
``max_body_bytes`` ([DEFAULT_MAX_BODY_BYTES][juno_bind_trio.web.DEFAULT_MAX_BODY_BYTES]
by default): a ``Content-Length`` past it is answered 413 before a byte of
the body is read, and a chunked body is read only until it passes the bound,
then answered 413 with the rest left unread. A body that is not JSON — or is
JSON nested deeper than the parser recurses — is a 400.

A reader whose ``Last-Event-ID`` is older than what the run still keeps (or
any reader of a run read back from the store) gets one ``resync`` event
first, carrying the snapshot, with the id the snapshot was taken at; the
stream goes on from there.
"""

from __future__ import annotations

import inspect
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, TypeAlias

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from juno_bind_trio._errors import RunLimitError, UsageError

from ._live_run import LiveRun
from ._runs import LiveRuns

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_MAX_BODY_BYTES",
    "KEEPALIVE_INTERVAL",
    "Action",
    "Authorize",
    "create_app",
]

Action: TypeAlias = Literal["start", "watch", "stop", "cancel", "approve"]
"""What a request wants to do: start a run, or watch (events, snapshot), stop or cancel one,
or approve / deny the calls a suspended run waits on (``"approve"``)."""

Authorize: TypeAlias = Callable[
    [Request, Action, "str | None"], "str | Awaitable[str | None] | None"
]
"""The host's authorization hook: ``authorize(request, action, owner) -> principal | None``.

*owner* is the principal that started the run (``None`` for ``"start"``,
and for a run read back from the run store, whose owner the app checks
against the digest in the run's id instead). Return the principal acting
(a user id, a session, a team), or ``None`` to refuse with 403. The app
then serves a run only to its owner. It may be a coroutine function.
"""

DEFAULT_ALLOWED_HOSTS: Final[frozenset[str]] = frozenset({"127.0.0.1", "localhost", "::1"})
"""The ``Host`` names accepted by default (any port): loopback only."""

DEFAULT_MAX_BODY_BYTES: Final = 1 << 20
"""The largest request body [create_app][juno_bind_trio.web.create_app] reads by default: 1 MiB.

Room for the longest prompt ``POST /runs`` accepts (100,000 characters) even
when every character is sent as a six-byte JSON escape.
"""

KEEPALIVE_INTERVAL: Final = 15.0
"""Seconds between SSE comments on an idle stream, so proxies keep it open."""

_LOCAL_PRINCIPAL: Final = "local"
_MAX_PROMPT: Final = 100_000
_NOT_FOUND: Final = {"error": "no such run"}


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8000
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        return host.rsplit(":", 1)[0]
    return host


def _is_loopback(client_host: str | None) -> bool:
    if client_host is None:
        return False
    try:
        return ipaddress.ip_address(client_host).is_loopback
    except ValueError:
        return False


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _check_hosts(value: object) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Collection):
        raise TypeError(
            f"create_app: allowed_hosts must be a collection of host names, got {value!r}"
        )
    if not all(isinstance(h, str) and h for h in value):
        raise TypeError(
            f"create_app: allowed_hosts must be a collection of host names, got {value!r}"
        )
    return frozenset(h.lower() for h in value)


def _check_body_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"create_app: max_body_bytes must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"create_app: max_body_bytes must be a positive integer, got {value!r}")
    return value


class _HostGate:
    """The first check, around the whole app: a ``Host`` this app is not served under is a 421.

    Outside the router, so no path escapes it: the API, the mounted client
    modules, the page, and a path that matches nothing are all behind it.
    """

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self._app = app
        self._hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = b""
            for name, value in scope.get("headers", ()):
                if name == b"host":
                    host = value
                    break
            if _host_name(host.decode("latin-1")) not in self._hosts:
                if scope["type"] == "http":
                    await _refuse(421, "this host name is not served here")(scope, receive, send)
                else:  # no websocket route exists; refuse before the router says so
                    await send({"type": "websocket.close", "code": 1008})
                return
        await self._app(scope, receive, send)


async def _read_body(request: Request, limit: int) -> bytes | Response:
    """The request's body, or the answer that refuses it, reading at most *limit* + 1 chunk.

    ``Content-Length`` is read first: a body declared too big is refused
    before any of it is received. A body sent without one (chunked) is
    received chunk by chunk and refused as soon as it passes *limit*; what
    the client still sends is never read (the server then closes the
    connection rather than drain it).
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        declared = declared.strip()
        if not (declared.isascii() and declared.isdigit()):
            return _refuse(400, f"Content-Length must be a number of bytes, got {declared!r}")
        if int(declared) > limit:
            return _refuse(413, f"the body must be at most {limit} bytes")
    body = bytearray()
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return _refuse(400, "the client went away before the body was sent")
        body += message.get("body", b"")
        if len(body) > limit:
            return _refuse(413, f"the body must be at most {limit} bytes")
        if not message.get("more_body", False):
            return bytes(body)


def _check_origins(value: object) -> frozenset[str]:
    if (
        isinstance(value, str)
        or not isinstance(value, Collection)
        or not all(isinstance(o, str) and o.startswith(("http://", "https://")) for o in value)
    ):
        raise TypeError(
            f"create_app: allowed_origins must be a collection of http(s) origins, got {value!r}"
        )
    return frozenset(o.rstrip("/").lower() for o in value)


def create_app(
    runs: LiveRuns,
    *,
    authorize: Authorize | None = None,
    allowed_hosts: Collection[str] = DEFAULT_ALLOWED_HOSTS,
    allowed_origins: Collection[str] = (),
    page: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """The ASGI application serving *runs* (a [LiveRuns][juno_bind_trio.web.LiveRuns]).

    Routes: ``POST /runs`` (``{"prompt": ...}`` → ``201 {"runId": ...}``),
    ``GET /runs/{id}/events`` (Server-Sent Events), ``GET /runs/{id}``
    (snapshot), ``POST /runs/{id}/stop``, ``POST /runs/{id}/cancel``,
    ``POST /runs/{id}/decide`` (``{"approvals": {call id: true | false | reason}}``
    for a run ended ``"suspended"`` → ``201 {"runId": ...}`` of the run continuing
    it: the stored run itself, same id, when the agent has a store; a new run in
    memory otherwise; answered once the run is under way, and ``409 {"error": ...}``
    naming the call when the store refuses the decision -- settled by another
    process, or the run held by a worker resuming it -- with nothing written and
    the run shown as it was), the
    JavaScript client under ``/static/``, and *page* (a path to an HTML file)
    at ``/`` when given. The app's lifespan runs
    [LiveRuns.running][juno_bind_trio.web.LiveRuns.running].

    *authorize*: see [Authorize][juno_bind_trio.web.Authorize]; without it only
    loopback clients get in. *allowed_hosts*: ``Host`` names accepted (add the
    name you serve under when you bind elsewhere). *allowed_origins*: other
    origins (``"https://app.example"``) allowed to make requests about runs.
    *max_body_bytes*: the largest request body read; past it the answer is
    413 (see the module's gate for when that is decided).
    """
    given_runs: object = runs
    if not isinstance(given_runs, LiveRuns):
        raise TypeError(f"create_app: runs must be a LiveRuns, got {runs!r}")
    if authorize is not None and not callable(authorize):
        raise TypeError(f"create_app: authorize must be callable or None, got {authorize!r}")
    hosts = _check_hosts(allowed_hosts)
    origins = _check_origins(allowed_origins)
    body_limit = _check_body_limit(max_body_bytes)
    if page is not None and not isinstance(page, str):
        raise TypeError(f"create_app: page must be a path to an HTML file or None, got {page!r}")

    async def principal_for(request: Request, action: Action, owner: str | None) -> str | None:
        if authorize is None:
            client = request.client
            return _LOCAL_PRINCIPAL if _is_loopback(client.host if client else None) else None
        decided: object = authorize(request, action, owner)
        if inspect.isawaitable(decided):
            decided = await decided
        if decided is not None and (not isinstance(decided, str) or not decided):
            raise UsageError(
                f"create_app: authorize() must return a principal (a non-empty str) or None, "
                f"got {decided!r}"
            )
        return decided if isinstance(decided, str) else None

    def cross_site(request: Request) -> str | None:
        """Why a request about runs looks cross-site, or None."""
        origin = request.headers.get("origin")
        if origin is not None:
            own = f"{request.url.scheme}://{request.headers.get('host', '')}".lower()
            if origin.rstrip("/").lower() not in origins | {own}:
                return f"origin {origin!r} is not allowed"
            return None
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return f"a {fetch_site} request"
        return None

    async def gate(
        request: Request, action: Action, run_id: str | None, *, about_runs: bool = True
    ) -> tuple[str, LiveRun | None] | Response:
        # The Host check ran already, around the whole app (_HostGate).
        if about_runs:
            why = cross_site(request)
            if why is not None:
                return _refuse(403, f"cross-site request refused: {why}")
        run = runs.get(run_id) if run_id is not None else None
        if run_id is not None and run is None:
            # Not in memory. The store keeps no owner, so the hook is asked
            # first (with none), and a refused request never reaches the store.
            principal = await principal_for(request, action, None)
            if principal is None:
                return _refuse(403, "not allowed")
            run = await runs.find(run_id)
            if run is None or not run.owned_by(principal):
                return JSONResponse(_NOT_FOUND, status_code=404)
            return principal, run
        principal = await principal_for(request, action, run.owner if run else None)
        if principal is None:
            return _refuse(403, "not allowed")
        if run is not None and action != "approve" and not run.owned_by(principal):
            # Another principal's run: it does not exist for this request.
            return JSONResponse(_NOT_FOUND, status_code=404)
        return principal, run

    async def start(request: Request) -> Response:
        passed = await gate(request, "start", None)
        if isinstance(passed, Response):
            return passed
        principal, _ = passed
        if (
            request.headers.get("content-type", "").split(";")[0].strip().lower()
            != "application/json"
        ):
            return _refuse(415, "send the prompt as application/json")
        raw = await _read_body(request, body_limit)
        if isinstance(raw, Response):
            return raw
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            # RecursionError: JSON nested deeper than the parser recurses
            # ("[" * 100_000) is a bad body like any other, not a server error.
            return _refuse(400, "the body is not JSON")
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > _MAX_PROMPT:
            return _refuse(400, f"'prompt' must be a non-empty string of at most {_MAX_PROMPT}")
        try:
            run = runs.start(prompt, owner=principal)
        except RunLimitError as exc:
            return _refuse(429, str(exc))
        return JSONResponse(
            {"runId": run.run_id, "events": f"/runs/{run.run_id}/events"}, status_code=201
        )

    async def snapshot(request: Request) -> Response:
        passed = await gate(request, "watch", request.path_params["run_id"])
        if isinstance(passed, Response):
            return passed
        _, run = passed
        assert run is not None
        return JSONResponse(run.snapshot())

    async def events(request: Request) -> Response:
        passed = await gate(request, "watch", request.path_params["run_id"])
        if isinstance(passed, Response):
            return passed
        _, run = passed
        assert run is not None
        raw = request.headers.get("last-event-id", request.query_params.get("lastEventId", "0"))
        if (
            not raw.isascii()
            or not raw.isdigit()
            or len(raw) > 20
            or (not run.stored and int(raw) > run.last_event_id)
        ):
            return _refuse(400, f"Last-Event-ID must be an event id of this run, got {raw!r}")
        if run.ended and not run.stored and int(raw) == run.last_event_id:
            # Nothing more will ever come: 204 tells EventSource to stop reconnecting.
            return Response(status_code=204)
        return StreamingResponse(
            _sse(run, int(raw)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def stop(request: Request) -> Response:
        return await _control(request, "stop")

    async def cancel(request: Request) -> Response:
        return await _control(request, "cancel")

    async def _control(request: Request, action: Literal["stop", "cancel"]) -> Response:
        passed = await gate(request, action, request.path_params["run_id"])
        if isinstance(passed, Response):
            return passed
        _, run = passed
        assert run is not None
        if run.status == "detached":
            return _refuse(
                409, "this run is not running in this process; a store worker resumes it"
            )
        changed = run.request_stop() if action == "stop" else run.request_cancel()
        return JSONResponse({"runId": run.run_id, "status": run.status, "changed": changed})

    async def decide(request: Request) -> Response:
        passed = await gate(request, "approve", request.path_params["run_id"])
        if isinstance(passed, Response):
            return passed
        principal, run = passed
        assert run is not None
        if (
            request.headers.get("content-type", "").split(";")[0].strip().lower()
            != "application/json"
        ):
            return _refuse(415, "send the decisions as application/json")
        raw = await _read_body(request, body_limit)
        if isinstance(raw, Response):
            return raw
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            return _refuse(400, "the body is not JSON")
        approvals = body.get("approvals") if isinstance(body, dict) else None
        if not isinstance(approvals, dict) or not approvals:
            return _refuse(400, "'approvals' must be an object of call id -> true/false/reason")
        if not run.pending:
            return _refuse(409, "this run waits for no decision")
        try:
            going_on = runs.decide(run, approvals, principal=principal)
        except RunLimitError as exc:
            return _refuse(429, str(exc))
        except (UsageError, TypeError) as exc:
            return _refuse(400, str(exc))
        refusal = await runs.refused(going_on)
        if refusal is not None:
            # The store refused (a call settled by another process, the run leased
            # by a worker resuming it): nothing was written, and the run is as it was.
            return _refuse(409, f"the decision was refused: {refusal}")
        return JSONResponse(
            {"runId": going_on.run_id, "events": f"/runs/{going_on.run_id}/events"},
            status_code=201,
        )

    async def index(request: Request) -> Response:
        passed = await gate(request, "start", None, about_runs=False)
        if isinstance(passed, Response):
            return passed
        assert page is not None
        return FileResponse(page, media_type="text/html", headers={"Cache-Control": "no-store"})

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with runs.running():
            yield

    from . import STATIC_DIR

    routes: list[Route | Mount] = [
        Route("/runs", start, methods=["POST"]),
        Route("/runs/{run_id}", snapshot, methods=["GET"]),
        Route("/runs/{run_id}/events", events, methods=["GET"]),
        Route("/runs/{run_id}/stop", stop, methods=["POST"]),
        Route("/runs/{run_id}/cancel", cancel, methods=["POST"]),
        Route("/runs/{run_id}/decide", decide, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    if page is not None:
        routes.insert(0, Route("/", index, methods=["GET"]))
    return Starlette(
        routes=routes, lifespan=lifespan, middleware=[Middleware(_HostGate, hosts=hosts)]
    )


def _frame(event_id: int, event: dict[str, Any]) -> bytes:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event_id}\ndata: {data}\n\n".encode()


def _stored_end(run: LiveRun) -> bytes:
    """The end of a stored run's stream: what a client that knows no resync needs too."""
    status = {"kind": "run_status", "runId": run.run_id, "status": run.status}
    if run.status != "ended":
        return _frame(0, status)
    ended = {"kind": "run_ended", "runId": run.run_id, "reason": run.reason}
    return _frame(0, ended) + _frame(0, status)


async def _sse(run: LiveRun, last_event_id: int) -> AsyncIterator[bytes]:
    """The run's events after *last_event_id*, each with its id, until the run's last one."""
    seen = last_event_id
    yield b"retry: 1000\n\n"
    while True:
        if run.missed(seen):
            # Fell behind the kept window (or the run comes from the store):
            # the snapshot, taken at its own event id, then what follows it.
            snapshot = run.snapshot()
            seen = snapshot["lastEventId"]
            yield _frame(seen, {"kind": "resync", "snapshot": snapshot})
            if run.stored:
                yield _stored_end(run)
                return
            continue
        batch: Sequence[tuple[int, dict[str, Any]]] = run.events_after(seen)
        if batch:
            yield b"".join(_frame(event_id, event) for event_id, event in batch)
            seen = batch[-1][0]
            continue
        if run.ended:
            return
        with anyio.move_on_after(KEEPALIVE_INTERVAL):
            await run.wait_for_more(seen)
            continue
        yield b": keepalive\n\n"
