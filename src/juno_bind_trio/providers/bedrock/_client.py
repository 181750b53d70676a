"""An ``aiobotocore`` ``bedrock-runtime`` client made the way routing needs it, on any backend.

Two things of aiobotocore 3.10 stand between its httpx backend and a
streamed ``converse_stream`` under Trio, both measured against the fake
Bedrock runtime (``tests/testing/test_fake_bedrock.py`` pins the first):

* **The event stream reader speaks aiohttp.** aiobotocore's ``AioEventStream``
  reads ``raw.content.iter_chunks()``, aiohttp's API; handed the httpx
  backend's response it calls ``aread()`` on a response opened as a stream
  and fails with ``httpx2.ResponseNotRead`` before the first event.
  [`StreamingHttpxSession`][juno_bind_trio.providers.bedrock.StreamingHttpxSession]
  gives a streamed answer that one method over httpx's ``aiter_raw()``, and a
  way to close it; signing, serialization, error parsing and botocore's own
  event-stream decoding (CRC checks included) stay the SDK's.
* **The default credential chain is asyncio's.** Past the environment and the
  shared files, aiobotocore's chain asks the instance metadata service through
  its aiohttp session, which fails on Trio with "no running event loop". The
  credentials are therefore resolved here, before the client is made:
  explicit arguments, else ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
  (/ ``AWS_SESSION_TOKEN``), else *sync* botocore's own whole chain (profiles,
  SSO, web identity, container and instance metadata) in a worker thread,
  frozen, and handed to the client as static keys.

So the adapter streams on aiobotocore's httpx backend on both backends; the
fallback the issue allowed (sync botocore in worker threads) is not needed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs

from juno_bind_trio._validate import shown
from juno_bind_trio.providers.openai import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "BedrockCredentials",
    "StreamingHttpxSession",
    "close_event_stream",
    "open_bedrock_client",
    "resolve_credentials",
]

_DEFAULT_REGION: Final = "us-east-1"


@attrs.frozen(repr=False)
class BedrockCredentials:
    """AWS keys as the client signs with them (the secret is never shown in a repr)."""

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:
        return f"BedrockCredentials(access_key={self.access_key!r}, secret_key=..., token=...)"


def _str_or_none(owner: str, name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{owner}: {name} must be a str or None, got {shown(value)}")
    return value


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _sync_chain(region: str | None) -> BedrockCredentials | None:
    import botocore.session

    session = botocore.session.Session()
    if region is not None:
        session.set_config_variable("region", region)
    found = session.get_credentials()
    if found is None:
        return None
    frozen = found.get_frozen_credentials()
    return BedrockCredentials(frozen.access_key, frozen.secret_key, frozen.token)


async def resolve_credentials(
    *,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    aws_session_token: str | None = None,
    region: str | None = None,
) -> BedrockCredentials | None:
    """The keys a client will sign with: explicit, else the environment, else botocore's chain.

    Both explicit keys or neither. The environment is ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``. Past them, sync
    botocore's default chain runs in a worker thread (aiobotocore's own asks
    the metadata service through asyncio and fails on Trio); it is a read
    with nothing to undo, so a cancellation abandons the thread at once and
    its answer is dropped. Temporary credentials found there are frozen as
    they are now: for a host that outlives them, pass keys it refreshes.
    ``None``: nothing found anywhere.
    """
    owner = "resolve_credentials"
    key = _str_or_none(owner, "aws_access_key_id", aws_access_key_id)
    secret = _str_or_none(owner, "aws_secret_access_key", aws_secret_access_key)
    token = _str_or_none(owner, "aws_session_token", aws_session_token)
    _str_or_none(owner, "region", region)
    if (key is None) != (secret is None):
        raise ValueError(
            f"{owner}: aws_access_key_id and aws_secret_access_key go together; got only "
            f"{'aws_access_key_id' if secret is None else 'aws_secret_access_key'}"
        )
    if key is not None and secret is not None:
        return BedrockCredentials(key, secret, token)
    env_key, env_secret = _env("AWS_ACCESS_KEY_ID"), _env("AWS_SECRET_ACCESS_KEY")
    if env_key is not None and env_secret is not None:
        return BedrockCredentials(env_key, env_secret, token or _env("AWS_SESSION_TOKEN"))
    return await anyio.to_thread.run_sync(_sync_chain, region, abandon_on_cancel=True)


class _Chunks:
    __slots__ = ("_response",)

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        async for chunk in self._response.aiter_raw():
            yield chunk, True


class _EventStreamBody:
    """A streamed httpx response as aiobotocore's event-stream reader reads one (aiohttp's API)."""

    __slots__ = ("content", "response")

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self.content = _Chunks(response)

    async def aread(self) -> bytes:
        return await self.response.aread()

    def close(self) -> None:
        # botocore's EventStream.close() is sync; the connection is released by
        # close_event_stream(), awaited by whoever read the stream.
        pass

    async def aclose(self) -> None:
        await self.response.aclose()


def _session_class() -> type[Any]:
    from aiobotocore.httpxsession import HttpxSession

    class StreamingHttpxSession(HttpxSession):  # type: ignore[misc]
        """aiobotocore's httpx session whose streamed answers its event-stream reader can read."""

        async def send(self, request: Any) -> Any:
            response = await super().send(request)
            if request.stream_output and response.status_code < 300:
                response.raw = _EventStreamBody(response.raw)
            return response

    StreamingHttpxSession.__module__ = __name__
    StreamingHttpxSession.__qualname__ = "StreamingHttpxSession"
    return StreamingHttpxSession


StreamingHttpxSession: Final[type[Any]] = _session_class()
"""aiobotocore's ``HttpxSession`` that streams ``converse_stream``.

Passed as ``AioConfig(http_session_cls=…)``.

A streamed 2xx answer's body gets ``content.iter_chunks()`` over httpx's
``aiter_raw()``, what aiobotocore 3.10's event-stream reader calls; close it
with [`close_event_stream()`][juno_bind_trio.providers.bedrock.close_event_stream].
"""


async def close_event_stream(stream: object) -> None:
    """Release the connection under a ``converse_stream`` answer's ``"stream"``, read or not.

    A no-op for a stream of any other session. Shielded: it runs on the way
    out of a cancelled read too.
    """
    body = getattr(stream, "_raw_stream", None)  # botocore's EventStream keeps its body here
    if isinstance(body, _EventStreamBody):
        with anyio.CancelScope(shield=True):
            await body.aclose()


def _config(read_timeout: float, connect_timeout: float) -> Any:
    from aiobotocore.config import AioConfig

    return AioConfig(
        http_session_cls=StreamingHttpxSession,
        # One attempt: routing, not the SDK, decides what to retry.
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        tcp_keepalive=True,
    )


# One botocore data loader per data path (``AWS_DATA_PATH``) for every client of the
# process. A session of its own would read and parse botocore's JSON again for each
# client (the endpoints, the partitions, the bedrock-runtime model: some 80 ms of CPU
# a client, against 13 with the loader's cache); the loader only reads files and keeps
# what it parsed, so a client made from it is the one a fresh session would make.
_LOADERS: dict[str, Any] = {}


def _session() -> Any:
    from aiobotocore.session import get_session

    session = get_session()
    data_path = str(session.get_config_variable("data_path") or "")
    loader = _LOADERS.get(data_path)
    if loader is None:
        _LOADERS[data_path] = session.get_component("data_loader")
    else:
        session.register_component("data_loader", loader)
    return session


@asynccontextmanager
async def open_bedrock_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    aws_session_token: str | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> AsyncIterator[Any]:
    """``async with open_bedrock_client() as client:`` an aiobotocore ``bedrock-runtime`` client.

    On aiobotocore's httpx backend with
    [`StreamingHttpxSession`][juno_bind_trio.providers.bedrock.StreamingHttpxSession] (so it
    streams on Trio and asyncio alike), one attempt per call (routing retries),
    a connect and an idle read timeout. *region* defaults to ``AWS_REGION`` /
    ``AWS_DEFAULT_REGION``, then ``us-east-1``; *endpoint_url* to
    ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, then ``AWS_ENDPOINT_URL``, then the
    region's endpoint. Credentials as
    [`resolve_credentials()`][juno_bind_trio.providers.bedrock.resolve_credentials] finds them
    (none found: botocore's ``NoCredentialsError``, here rather than at the
    first call). Closed on the way out, with its connections.
    """
    client, close = await enter_bedrock_client(
        region=region,
        endpoint_url=endpoint_url,
        aws_access_key_id=aws_access_key_id,
        aws_secret_access_key=aws_secret_access_key,
        aws_session_token=aws_session_token,
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
    )
    try:
        yield client
    finally:
        with anyio.CancelScope(shield=True):
            await close()


async def enter_bedrock_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    aws_session_token: str | None = None,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> tuple[Any, Callable[[], Awaitable[None]]]:
    """As [`open_bedrock_client()`][juno_bind_trio.providers.bedrock.open_bedrock_client], not
    as a context manager: the client and the coroutine function that closes it (for an owner
    that holds the client open in a generator of its own; see ``providers/_owned.py``)."""
    owner = "open_bedrock_client"
    region = _str_or_none(owner, "region", region)
    endpoint_url = _str_or_none(owner, "endpoint_url", endpoint_url)
    for name, seconds in (("read_timeout", read_timeout), ("connect_timeout", connect_timeout)):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError(f"{owner}: {name} must be a number of seconds, got {shown(seconds)}")
        if not seconds > 0:
            raise ValueError(f"{owner}: {name} must be positive, got {seconds!r}")
    region = region or _env("AWS_REGION") or _env("AWS_DEFAULT_REGION") or _DEFAULT_REGION
    endpoint_url = (
        endpoint_url or _env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") or _env("AWS_ENDPOINT_URL")
    )
    credentials = await resolve_credentials(
        aws_access_key_id=aws_access_key_id,
        aws_secret_access_key=aws_secret_access_key,
        aws_session_token=aws_session_token,
        region=region,
    )
    if credentials is None:
        import botocore.exceptions

        raise botocore.exceptions.NoCredentialsError()
    creator = _session().create_client(
        "bedrock-runtime",
        region_name=region,
        endpoint_url=endpoint_url,
        config=_config(float(read_timeout), float(connect_timeout)),
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.token,
    )
    client = await creator.__aenter__()

    async def close() -> None:
        await creator.__aexit__(None, None, None)

    return client, close


def endpoint_of(client: Any) -> tuple[str, int] | None:
    """The host and port *client* sends to, or ``None``."""
    from urllib.parse import urlsplit

    meta = getattr(client, "meta", None)
    url = getattr(meta, "endpoint_url", None)
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.hostname, port if port is not None else (443 if parts.scheme == "https" else 80)


def region_of(client: Any) -> str | None:
    """The region *client* signs for."""
    meta = getattr(client, "meta", None)
    region = getattr(meta, "region_name", None)
    return region if isinstance(region, str) else None
