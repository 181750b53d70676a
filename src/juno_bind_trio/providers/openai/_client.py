"""Creating and priming ``openai.AsyncOpenAI`` clients the way routing needs them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio.to_thread

from juno_bind_trio._validate import shown

if TYPE_CHECKING:
    import openai

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "open_openai_client",
    "prime_openai_client",
]

DEFAULT_READ_TIMEOUT: Final = 120.0
"""The SDK's read timeout set by
[`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client]: an idle limit per
socket read.

A backstop, not the policy. The stream watchdog's budgets (30 s to the first
token, 60 s between chunks by default) fire first and say which budget ran
out; this catches a request made without a watchdog, and is still far
shorter than the SDK's own ten minutes.
"""

DEFAULT_CONNECT_TIMEOUT: Final = 10.0
"""The SDK's connect timeout set by
[`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client], in seconds."""


async def prime_openai_client(client: Any) -> None:
    """Run the SDK's one-time platform probe now instead of inside the first request.

    ``AsyncOpenAI`` detects the operating system (for its ``X-Stainless-OS``
    header) on a client's first request, in a worker thread. That thread hop
    is then part of the first request's time: on a real clock it is charged
    to the first attempt's time-to-first-token budget, and on a virtual clock
    (Trio's autojump ``MockClock``) the clock jumps to the next pending
    deadline while the thread runs, so a watchdog or a ``move_on_after``
    fires although nothing was late. Priming once, right after creating the
    client and before any deadline is armed, removes both effects.

    Idempotent and cheap after the first call. It sets the attribute the SDK
    itself caches the answer in; with an SDK that no longer has it, it does
    nothing and the SDK probes as before.
    """
    if getattr(client, "_platform", "absent") is not None:
        return
    from openai._base_client import get_platform  # the SDK's own probe, unchanged

    client._platform = await anyio.to_thread.run_sync(get_platform)


def _is_http_url(text: str) -> bool:
    # Checked here: the SDK's HTTP client refuses the rest only when it builds
    # the first request, with an error of its own naming nothing of ours.
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return text.isprintable() and parts.scheme in ("http", "https") and bool(parts.netloc)


@asynccontextmanager
async def open_openai_client(
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    **client_options: Any,
) -> AsyncIterator[openai.AsyncOpenAI]:
    """An ``AsyncOpenAI`` for routing: SDK retries off, an idle read timeout, primed, closed.

    ``async with open_openai_client(base_url=..., api_key=...) as client:``

    * ``max_retries=0``: routing decides what to retry; the SDK's own retries
      would spend minutes on a dead provider before the fallback is tried.
    * *read_timeout*: the SDK's per-read idle limit, a backstop behind the
      stream watchdog.
    * primed ([`prime_openai_client()`][juno_bind_trio.providers.openai.prime_openai_client]), so
      the first request's time is the provider's.
    * closed on exit, whatever happens: under Trio an unclosed client leaks
      its sockets (its finaliser only works on asyncio).

    *base_url* and *api_key* default to the SDK's own environment variables
    (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``); *client_options* go to
    ``AsyncOpenAI`` unchanged (``default_headers``, ``organization``, …).
    """
    import openai

    limits: tuple[tuple[str, object], ...] = (
        ("read_timeout", read_timeout),
        ("connect_timeout", connect_timeout),
    )
    for name, text in (("base_url", base_url), ("api_key", api_key)):
        if text is not None and not isinstance(text, str):
            raise TypeError(f"open_openai_client: {name} must be a str or None, got {shown(text)}")
    if base_url is not None and not _is_http_url(base_url):
        raise ValueError(f"open_openai_client: base_url must be an http(s) URL, got {base_url!r}")
    for name, value in limits:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(
                f"open_openai_client: {name} must be a positive number of seconds, got {value!r}"
            )
    if "max_retries" in client_options:
        raise ValueError(
            "open_openai_client: max_retries is always 0 here (routing retries, not the SDK); "
            f"got max_retries={client_options['max_retries']!r}"
        )
    timeout = openai.Timeout(None, connect=connect_timeout, read=read_timeout)
    client = openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, **client_options
    )
    async with client:
        await prime_openai_client(client)
        yield client
