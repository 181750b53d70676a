"""Serving the app with Hypercorn, on whichever anyio backend is running."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import sniffio
from anyio.abc import TaskStatus

from juno_bind_trio._validate import error_kind

__all__ = ["serve"]


async def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* with Hypercorn on *host*:*port* (loopback by default) until cancelled.

    Runs on trio and on asyncio. ``port=0`` picks a free port; with
    ``url = await task_group.start(serve, app, port=0)`` the caller learns
    the base URL (``"http://127.0.0.1:PORT"``) once the app accepts
    connections. Binding anything but loopback exposes the runs to the
    network: give [create_app][juno_bind_trio.web.create_app] an
    ``authorize`` hook and the ``allowed_hosts`` you serve under first.
    """
    if not callable(app):
        raise TypeError(f"serve: app must be an ASGI application (a callable), got {app!r}")
    given_host: object = host
    if not isinstance(given_host, str) or not given_host:
        raise error_kind(given_host, str)(f"serve: host must be a non-empty string, got {host!r}")
    given_port: object = port
    if isinstance(given_port, bool) or not isinstance(given_port, int):
        raise TypeError(f"serve: port must be an integer in 0..65535, got {port!r}")
    if not 0 <= port <= 65535:
        raise ValueError(f"serve: port must be an integer in 0..65535, got {port!r}")
    from hypercorn.config import Config

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        bound_port = sock.getsockname()[1]
    except BaseException:
        sock.close()
        raise
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # Hypercorn owns the socket from here
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 1.0  # open event streams get a second to close
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound_port}"

    # Hypercorn is stopped through its shutdown trigger, never by cancelling it
    # (its asyncio server does not survive a cancel): when serve() is
    # cancelled, the shielded server task is told to shut down, runs the
    # app's lifespan shutdown (which cancels the runs still going) and returns.
    shutdown = anyio.Event()
    on_trio = sniffio.current_async_library() == "trio"

    async def run_server(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.CancelScope(shield=True):
            if on_trio:
                from hypercorn.trio import serve as hypercorn_trio

                await hypercorn_trio(
                    app,
                    config,
                    shutdown_trigger=shutdown.wait,
                    task_status=task_status,  # type: ignore[arg-type]
                )
            else:
                from hypercorn.asyncio import serve as hypercorn_asyncio

                await hypercorn_asyncio(app, config, shutdown_trigger=shutdown.wait)

    async with anyio.create_task_group() as tasks:
        try:
            if on_trio:
                await tasks.start(run_server)
            else:
                tasks.start_soon(run_server)
                # asyncio's Hypercorn reports no start: wait until the port accepts.
                while True:
                    try:
                        stream = await anyio.connect_tcp(host, bound_port)
                    except OSError:
                        await anyio.sleep(0.01)
                        continue
                    await stream.aclose()
                    break
            task_status.started(url)
            await anyio.sleep_forever()
        finally:
            shutdown.set()
