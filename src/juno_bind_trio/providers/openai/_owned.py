"""The ``AsyncOpenAI`` an agent built from a model string owns: one per event loop.

An ``Agent("openai:<name>")`` used to open a client per run: a TLS context
and a connection pool built on the event loop each time, so no keep-alive
and no TLS session survived from one run to the next. It now owns one
client, opened at its first use and shared by every later run.

Why one *per event loop* and not one for the agent's whole life: the SDK's
HTTP client is bound to the loop it first ran on. Its pooled connections are
that loop's streams and its locks that backend's (measured with openai 3.57
on httpx2: a second ``asyncio.run`` on the same client fails with "Event loop
is closed", and trio then asyncio fails on the pool's trio lock). Only trio
after trio happens to work. ``Agent.run_sync`` starts a loop per call, as
does a script that calls ``trio.run`` twice, so each loop gets its own client
and the rule is the same on both backends.

Why no warning when nobody closes it: the client is held open by an async
generator suspended inside ``async with client``. Both event loops finalize
the async generators still alive when they end (``asyncio.run`` in
``shutdown_asyncgens``, ``trio.run`` after its main task returns), which
closes the client in its own loop, with its sockets. When the owner is
dropped while its loop runs on (an agent built per request in a server, say),
the generator is collected and the loop's finalizer closes the client then.
``aclose()`` closes it at once.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Final, final
from weakref import WeakKeyDictionary

import anyio
import anyio.lowlevel

from juno_bind_trio._errors import UsageError
from juno_bind_trio._validate import shown

from ._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    is_http_url,
    new_openai_client,
    sdk_ready,
)

if TYPE_CHECKING:
    import openai

__all__ = ["OwnedClient"]

_KEY_VARIABLE: Final = "OPENAI_API_KEY"
_URL_VARIABLE: Final = "OPENAI_BASE_URL"


async def _held_open(client: openai.AsyncOpenAI) -> AsyncGenerator[None, None]:
    # Suspended at the yield for the client's life; closed by aclose() or by
    # the event loop's async generator finalization (see the module docstring).
    async with client:
        yield


@final
class _Held:
    __slots__ = ("client", "holder")

    def __init__(self, client: openai.AsyncOpenAI, holder: AsyncGenerator[None, None]) -> None:
        self.client = client
        self.holder = holder


@final
class OwnedClient:
    """One ``AsyncOpenAI`` per event loop, opened at its first use there, closed with it.

    *owner* names the caller in errors; *base_url* and *api_key* default to
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, read when a loop's client is
    opened (so an agent built before the environment is set, as in the
    quick start, still finds it). Building one imports the SDK
    (``sdk_ready()``).
    """

    __slots__ = ("_api_key", "_base_url", "_clients", "_owner", "opened")

    def __init__(self, owner: str, *, base_url: object = None, api_key: object = None) -> None:
        for name, text in (("base_url", base_url), ("api_key", api_key)):
            if text is not None and not isinstance(text, str):
                raise TypeError(f"{owner}: {name} must be a str or None, got {shown(text)}")
        if base_url is not None and not is_http_url(str(base_url)):
            raise ValueError(f"{owner}: base_url must be an http(s) URL, got {base_url!r}")
        if api_key == "":
            raise ValueError(
                f"{owner}: api_key must not be empty; leave it out to read {_KEY_VARIABLE}"
            )
        sdk_ready()
        self._owner = owner
        self._base_url: str | None = base_url if isinstance(base_url, str) else None
        self._api_key: str | None = api_key if isinstance(api_key, str) else None
        self._clients: WeakKeyDictionary[object, _Held] = WeakKeyDictionary()
        self.opened = 0
        """How many clients this owner has built (one per event loop it ran in)."""

    def _settings(self) -> tuple[str, str | None]:
        key = self._api_key if self._api_key is not None else os.environ.get(_KEY_VARIABLE)
        if not key:
            raise UsageError(
                f"{self._owner}: no API key for the OpenAI endpoint: set {_KEY_VARIABLE} (any "
                f"non-empty value for a local server that needs none) and {_URL_VARIABLE} for "
                "an OpenAI-compatible provider, or pass Agent(..., api_key=..., base_url=...); "
                "in tests and examples, run inside juno_bind_trio.testing.fake_openai_env(...)"
            )
        url = self._base_url if self._base_url is not None else os.environ.get(_URL_VARIABLE)
        if url is not None and not url:
            url = None  # as the SDK reads an empty variable: the default endpoint
        if url is not None and not is_http_url(url):
            raise UsageError(f"{self._owner}: {_URL_VARIABLE} must be an http(s) URL, got {url!r}")
        return key, url

    async def client(self) -> openai.AsyncOpenAI:
        """This event loop's client, opened now if it has none (no checkpoint in between).

        :raises UsageError: no API key (``OPENAI_API_KEY`` unset or empty and
            none given), or ``OPENAI_BASE_URL`` is not an http(s) URL.
        """
        loop = anyio.lowlevel.current_token().native_token
        held = self._clients.get(loop)
        if held is not None:
            return held.client
        key, url = self._settings()
        import openai

        timeout = openai.Timeout(None, connect=DEFAULT_CONNECT_TIMEOUT, read=DEFAULT_READ_TIMEOUT)
        client = new_openai_client(api_key=key, base_url=url, max_retries=0, timeout=timeout)
        holder = _held_open(client)
        # Recorded before the first await, so a run starting meanwhile finds it.
        self._clients[loop] = _Held(client, holder)
        self.opened += 1
        await holder.asend(None)  # enters `async with client`; awaits nothing
        return client

    async def aclose(self) -> None:
        """Close this event loop's client, if it has one; the next run opens another."""
        held = self._clients.pop(anyio.lowlevel.current_token().native_token, None)
        if held is None:
            await anyio.lowlevel.checkpoint()
            return
        with anyio.CancelScope(shield=True):
            await held.holder.aclose()

    def is_open(self) -> bool:
        """Whether the current event loop has an open client of this owner."""
        loop = anyio.lowlevel.current_token().native_token
        return loop in self._clients
