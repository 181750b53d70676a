"""A fake server for a synchronous script: run in a thread, found through the SDK's variables.

What [`fake_openai_env()`][juno_bind_trio.testing.fake_openai_env] does for the OpenAI fake,
for any fake: start it on an event loop in a worker thread, set the
environment variables its SDK reads for the body of a ``with``, and put them
back on the way out. Each provider's ``fake_<provider>_env`` is this with its
own server and variables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TypeVar

import anyio.from_thread
import sniffio

from juno_bind_trio._validate import error_kind

__all__ = ["serve_in_thread"]

ServerT = TypeVar("ServerT")


@contextmanager
def serve_in_thread(
    owner: str,
    open_server: Callable[[], AbstractAsyncContextManager[ServerT]],
    *,
    api_key: str,
    variables: Callable[[ServerT, str], dict[str, str]],
) -> Iterator[ServerT]:
    """Run ``open_server()`` in a thread's event loop; set ``variables(server, api_key)`` meanwhile.

    *owner* names the caller in errors. Refuses to run inside an event loop
    (blocking its thread on the server's would deadlock a client of it there).
    """
    given: object = api_key
    if not isinstance(given, str) or not given:
        raise error_kind(given, str)(f"{owner}: api_key must be a non-empty str, got {api_key!r}")
    if "\x00" in api_key:
        raise ValueError(f"{owner}: api_key cannot hold a NUL character (environment values)")
    try:
        running: str | None = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        running = None
    if running is not None:
        raise RuntimeError(
            f"{owner}: called inside a running {running} event loop; open the fake server with "
            "`async with` there, or enter this around the loop"
        )
    with (
        anyio.from_thread.start_blocking_portal(backend="trio") as portal,
        portal.wrap_async_context_manager(open_server()) as server,
    ):
        values = variables(server, api_key)
        saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield server
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
