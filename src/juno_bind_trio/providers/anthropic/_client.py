"""An ``AsyncAnthropic`` made the way routing needs it: no retries of its own, bounded waits."""

from __future__ import annotations

import functools
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from juno_bind_trio._validate import shown
from juno_bind_trio.providers.openai import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT

if TYPE_CHECKING:
    import anthropic

__all__ = ["new_anthropic_client", "open_anthropic_client"]


@functools.cache
def sdk_ready() -> tuple[Any, ssl.SSLContext | None]:
    """Import the SDK and what its first request needs, once per process.

    As ``providers.openai``'s: the SDK probes the platform in a worker thread
    on a client's first request (on Trio's autojump clock the clock jumps to
    the next deadline while that thread runs, so a watchdog fires though
    nothing was late), and every client loads the CA bundle into a fresh TLS
    context. Both are done here once; every client made here shares them.
    """
    import anthropic
    import anthropic.resources.messages  # imported by the first request
    from anthropic._base_client import get_platform  # the SDK's own probe, unchanged

    "localhost".encode("idna")
    base = next(
        (c for c in anthropic.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"),
        None,
    )
    http = None if base is None else sys.modules.get(base.__module__.split(".")[0])
    create = getattr(http, "create_ssl_context", None)
    context = create() if callable(create) else None
    return get_platform(), context if isinstance(context, ssl.SSLContext) else None


def new_anthropic_client(*, base_url: str | None, api_key: str | None) -> anthropic.AsyncAnthropic:
    """An ``AsyncAnthropic`` with ``max_retries=0`` and the package's connect and read timeouts.

    ``None`` leaves a setting to the SDK, which reads ``ANTHROPIC_BASE_URL``
    and ``ANTHROPIC_API_KEY``.
    """
    import anthropic

    for name, value in (("base_url", base_url), ("api_key", api_key)):
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"open_anthropic_client: {name} must be a str or None, got {shown(value)}"
            )
    platform, context = sdk_ready()
    timeout = anthropic.Timeout(None, connect=DEFAULT_CONNECT_TIMEOUT, read=DEFAULT_READ_TIMEOUT)
    options: dict[str, Any] = {}
    if context is not None:
        options["http_client"] = anthropic.DefaultAsyncHttpxClient(verify=context, timeout=timeout)
    client = anthropic.AsyncAnthropic(
        api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, **options
    )
    if getattr(client, "_platform", "absent") is None:
        client._platform = platform  # the SDK's own cache of its probe's answer
    return client


@asynccontextmanager
async def open_anthropic_client(
    *, base_url: str | None = None, api_key: str | None = None
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """``async with open_anthropic_client() as client:`` an ``AsyncAnthropic`` for routing.

    Its own retries off (``max_retries=0``: routing decides), a connect and an
    idle read timeout; *base_url* and *api_key* default to ``ANTHROPIC_BASE_URL``
    / ``ANTHROPIC_API_KEY``. Closed on the way out, with its connections.
    """
    client = new_anthropic_client(base_url=base_url, api_key=api_key)
    async with client:
        yield client
