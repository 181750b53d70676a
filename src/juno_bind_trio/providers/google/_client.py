"""A ``google.genai.Client`` made the way routing needs it: on an httpx2 client it is handed.

Why hand it one: the SDK's default async transport does not run under Trio
(measured with google-genai 3.6 on httpx2: its per-event-loop pool is keyed
by asyncio's running loop). Given an ``httpx2.AsyncClient`` through
``HttpOptions(httpx_async_client=...)`` it streams on both backends. A sync
client is handed too, only so that the SDK does not build one of its own,
with a fresh TLS context, per client; nothing here sends through it.

Why the timeout is set on the SDK and not on the HTTP client: the SDK sends
every request with its own ``timeout`` (``HttpOptions.timeout``, in
milliseconds), which replaces the client's; left unset it is ``None``, no
timeout at all. So the package's idle read timeout is given there (httpx
applies it to the connect, each read and each write alike).

Why its retries are off (``HttpRetryOptions(attempts=1)``): routing decides
what to retry, and where.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from juno_bind_trio._validate import shown
from juno_bind_trio.providers.openai import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT

if TYPE_CHECKING:
    from google import genai

__all__ = ["GeminiClient", "new_gemini_client", "open_gemini_client", "sdk_ready"]

_READ_TIMEOUT_MS: Final = int(DEFAULT_READ_TIMEOUT * 1000)


@functools.cache
def sdk_ready() -> ssl.SSLContext:
    """Import the SDK and what its first request needs, once per process; the shared TLS context.

    ``import google.genai`` takes a second or more, and every TLS context
    loads the CA bundle again: both paid here, once, outside any run's deadline.
    """
    import google.genai
    import google.genai.models  # noqa: F401  # the first request's module
    import httpx2

    "localhost".encode("idna")  # host names are IDNA-encoded on the first request
    return httpx2.create_ssl_context()


class GeminiClient:
    """A ``genai.Client`` and the two httpx2 clients it sends through, closed together.

    Made by ``new_gemini_client()``;
    ``client`` is what a [`GeminiAdapter`][juno_bind_trio.providers.google.GeminiAdapter]
    takes, ``aclose()`` closes the HTTP clients (the SDK never closes a client
    it was handed).
    """

    __slots__ = ("_http", "_sync", "base_url", "client")

    def __init__(self, client: genai.Client, http: Any, sync: Any, base_url: str) -> None:
        self.client = client
        """The SDK's client."""
        self.base_url = base_url
        """The URL it sends to."""
        self._http = http
        self._sync = sync

    async def aclose(self) -> None:
        """Close the SDK's client and the HTTP clients under it."""
        try:
            await self.client.aio.aclose()
        finally:
            self._sync.close()
            await self._http.aclose()


def new_gemini_client(*, base_url: str | None, api_key: str) -> GeminiClient:
    """A ``genai.Client`` for the Gemini API (not Vertex AI) on httpx2 clients of its own.

    Its retries off, the package's connect and idle read timeouts; *base_url*
    ``None`` is the SDK's default (``GOOGLE_GEMINI_BASE_URL``, then the public API).
    """
    for name, value in (("base_url", base_url), ("api_key", api_key)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"open_gemini_client: {name} must be a str or None, got {shown(value)}")
    context = sdk_ready()
    import httpx2
    from google import genai
    from google.genai import types

    timeout = httpx2.Timeout(DEFAULT_READ_TIMEOUT, connect=DEFAULT_CONNECT_TIMEOUT)
    http = httpx2.AsyncClient(verify=context, timeout=timeout)
    sync = httpx2.Client(verify=context, timeout=timeout)
    try:
        options = types.HttpOptions(
            base_url=base_url,
            httpx_async_client=http,
            httpx_client=sync,
            timeout=_READ_TIMEOUT_MS,
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        client = genai.Client(vertexai=False, api_key=api_key, http_options=options)
    except BaseException:
        sync.close()
        raise  # the async client has opened nothing yet: dropping it is closing it
    url = str(client._api_client._http_options.base_url or "")
    return GeminiClient(client, http, sync, url)


@asynccontextmanager
async def open_gemini_client(
    *, base_url: str | None = None, api_key: str | None = None
) -> AsyncIterator[genai.Client]:
    """``async with open_gemini_client() as client:`` a ``google.genai.Client`` for routing.

    On httpx2 clients of its own (which is what makes it run on Trio), its
    retries off, the package's idle read timeout; *base_url* and *api_key*
    default to ``GOOGLE_GEMINI_BASE_URL`` / ``GEMINI_API_KEY`` (or
    ``GOOGLE_API_KEY``, which the SDK prefers). Closed on the way out, with
    its connections.

    :raises ValueError: no key is given or set (the SDK's own refusal).
    """
    import os

    for name, value in (("base_url", base_url), ("api_key", api_key)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"open_gemini_client: {name} must be a str or None, got {shown(value)}")
    key = api_key
    if key is None:
        key = os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY") or None
    if not key:
        raise ValueError(
            "open_gemini_client: no API key: pass api_key= or set GEMINI_API_KEY "
            "(in tests, run inside juno_bind_trio.testing.fake_gemini_env(...))"
        )
    owned = new_gemini_client(base_url=base_url, api_key=key)
    try:
        yield owned.client
    finally:
        import anyio

        with anyio.CancelScope(shield=True):
            await owned.aclose()
