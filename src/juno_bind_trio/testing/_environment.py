"""The fake server for a synchronous script: in a thread of its own, found through the environment.

[open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server]
runs in the caller's task group, which a script that calls
``agent.run_sync(...)`` does not have. [fake_openai_env][juno_bind_trio.testing.fake_openai_env]
runs the same server on an event loop in a worker thread and points the
openai SDK's own environment variables at it for the body of a ``with``, so
code written for a real endpoint (``Agent("openai:gpt-4o-mini")``, a bare
``AsyncOpenAI()``) talks to the fake one unchanged, with no key and no
network beyond 127.0.0.1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import anyio.from_thread
import sniffio

from juno_bind_trio._validate import error_kind

from ._server import FakeOpenAIServer, Script, _compile_script, open_fake_openai_server

__all__ = ["fake_openai_env"]

_VARIABLES: Final = ("OPENAI_BASE_URL", "OPENAI_API_KEY")


@contextmanager
def fake_openai_env(
    script: Script = None, *, api_key: str = "fake-key", validate_history: bool = True
) -> Iterator[FakeOpenAIServer]:
    """Serve *script* from a thread and set ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` to reach it.

    ```python
    with fake_openai_env([StreamResponse.of_text("Hello!")]):
        print(Agent("openai:any-name").run_sync("Hi").output)
    ```

    Yields the [FakeOpenAIServer][juno_bind_trio.testing.FakeOpenAIServer]
    (its ``requests`` record what was asked). On the way out the variables
    get their old values back and the server stops. The server runs on the
    real clock, in its own event loop; use
    [open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server]
    inside async tests, where it shares the test's (virtual) clock. The
    environment is the process's: do not use this from tests that run in
    parallel threads. *validate_history*: see
    [open_fake_openai_server][juno_bind_trio.testing.open_fake_openai_server].
    """
    given: object = api_key
    if not isinstance(given, str) or not given:
        raise error_kind(given, str)(
            f"fake_openai_env: api_key must be a non-empty str, got {api_key!r}"
        )
    if "\x00" in api_key:
        raise ValueError(
            "fake_openai_env: api_key cannot hold a NUL character (environment values)"
        )
    if not isinstance(validate_history, bool):
        raise TypeError(
            f"fake_openai_env: validate_history must be a bool, got {validate_history!r}"
        )
    try:
        running: str | None = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        running = None
    if running is not None:
        # Blocking this loop's thread on the server's would deadlock a client of it here.
        raise RuntimeError(
            f"fake_openai_env: called inside a running {running} event loop; use "
            "`async with open_fake_openai_server(...)` there, or enter this around the loop"
        )
    _compile_script(script)  # a bad script fails here, not in the server's thread
    saved = {name: os.environ.get(name) for name in _VARIABLES}
    with (
        anyio.from_thread.start_blocking_portal(backend="trio") as portal,
        portal.wrap_async_context_manager(
            open_fake_openai_server(script, validate_history=validate_history)
        ) as server,
    ):
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ["OPENAI_API_KEY"] = api_key
        try:
            yield server
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
