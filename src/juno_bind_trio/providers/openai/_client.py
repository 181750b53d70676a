"""Creating and priming ``openai.AsyncOpenAI`` clients the way routing needs them."""

from __future__ import annotations

import contextlib
import functools
import ssl
import sys
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


@functools.cache
def sdk_ready() -> tuple[Any, ssl.SSLContext | None]:
    """Import the SDK and everything its first request needs; once per process.

    Returns the platform string the SDK sends (``X-Stainless-OS``) and the TLS
    context every client made here shares, or ``None`` for the context when
    the SDK's HTTP library has no ``create_ssl_context``.

    Why: ``import openai`` takes a third of a second to seconds, the first
    request imports the chat resources and the JSON parser on top, and every
    new ``AsyncOpenAI`` loads the CA bundle into a fresh TLS context (20 ms to
    over 100 ms of blocking work on a loaded machine). Paid here, once, when an
    ``Agent`` is built or the first client is opened, none of it lands inside a
    run's deadline or stalls an event loop per run. The context is built by the
    SDK's own HTTP library, so it honours ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
    as its default would, as they are when it is first built.
    """
    import openai
    import openai.resources.chat.completions  # imported by the first request
    import openai.resources.responses  # the Responses adapter's first request
    from openai._base_client import get_platform  # the SDK's own probe, unchanged

    with contextlib.suppress(ImportError):  # the stream parser's JSON library (first chunk)
        import jiter  # noqa: F401
    # Host names are IDNA-encoded on the first request to an http(s) URL.
    "localhost".encode("idna")
    # The HTTP library the SDK's clients are made of (httpx2 for openai 3, httpx before).
    base = next(
        (c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"), None
    )
    http = None if base is None else sys.modules.get(base.__module__.split(".")[0])
    create = getattr(http, "create_ssl_context", None)
    context = create() if callable(create) else None
    return get_platform(), context if isinstance(context, ssl.SSLContext) else None


def new_openai_client(**options: Any) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` on the shared TLS context, its platform probe answered.

    Synchronous and cheap (well under a millisecond once
    ``sdk_ready()`` ran): no CA
    bundle is loaded and no worker thread is needed for the platform probe.
    *options* go to ``AsyncOpenAI``; an ``http_client`` among them is used as
    given.
    """
    import openai

    platform, context = sdk_ready()
    if "http_client" not in options and context is not None:
        options["http_client"] = openai.DefaultAsyncHttpxClient(verify=context)
    client = openai.AsyncOpenAI(**options)
    if getattr(client, "_platform", "absent") is None:
        client._platform = platform  # what prime_openai_client would set, from the cache
    return client


def is_http_url(text: str) -> bool:
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
      the first request's time is the provider's; the SDK's first-request
      imports are done and the TLS context (its CA bundle) is built once per
      process and shared by every client made here, so opening one is cheap
      and blocks no event loop for long.
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
    if base_url is not None and not is_http_url(base_url):
        raise ValueError(f"open_openai_client: base_url must be an http(s) URL, got {base_url!r}")
    for name, value in limits:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            wrong_type = isinstance(value, bool) or not isinstance(value, (int, float))
            raise (TypeError if wrong_type else ValueError)(
                f"open_openai_client: {name} must be a positive number of seconds, got {value!r}"
            )
    if "max_retries" in client_options:
        raise ValueError(
            "open_openai_client: max_retries is always 0 here (routing retries, not the SDK); "
            f"got max_retries={client_options['max_retries']!r}"
        )
    timeout = openai.Timeout(None, connect=connect_timeout, read=read_timeout)
    client = new_openai_client(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, **client_options
    )
    async with client:
        await prime_openai_client(client)
        yield client
