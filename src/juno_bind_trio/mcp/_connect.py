"""The ``async with`` blocks that connect to an MCP server and yield its toolset.

The connection lives in a task of its own
------------------------------------------

The SDK's transports are async context managers whose task groups enclose the
body of the ``async with``: when the HTTP transport's request task fails (the
server died mid-call), its task group cancels the body — which would be the
host's whole agent run — and raises out of the block. So the block here does
not run the host's code inside the transport. A keeper task enters the
transport and the session, hands the ready toolset out, and waits; the host's
code runs beside it. If the connection fails, the keeper records why and
ends; the SDK answers every call waiting on the connection with "connection
closed", which becomes a tool failure of kind ``"external"``, and every later
call fails the same way at once. Nothing the server does can cancel the run.

Leaving the block, on every path (normal, exception, cancellation), tells
the keeper to close the session and the transport, and waits for it: for a
stdio server the SDK closes its stdin, waits, then terminates and kills its
process group, shielded from cancellation, so no server process outlives the
block. The close is shielded here too, for at most ``_CLOSE_GRACE`` seconds:
when a scope around the whole block is cancelled, the host's code leaves the
block by that cancellation, and a close run under it would be cut at its
first checkpoint — the cancelled calls' ``notifications/cancelled`` still
queued for the transport, the HTTP session's ``DELETE`` never sent.

What leaves the block is what the host's code raised, as it raised it (an
``ExceptionGroup`` of its own too), never wrapped in the task group that
runs the keeper. The one exception: a ``KeyboardInterrupt`` anywhere among
the failures leaves as a bare ``KeyboardInterrupt``, so Ctrl-C ends a
program the way Python ends it, whichever task Trio delivered it to.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, TextIO

import anyio
import anyio.abc
import attrs
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from juno_bind_trio._errors import MCPConnectionError
from juno_bind_trio._validate import error_kind

from ._convert import DEFAULT_MAX_RESULT_CHARS, check_names, check_prefix, convert_listing
from ._toolset import (
    MCPToolset,
    _check_call_timeout,
    _check_max_result_chars,
    _one_leaf,
    _reraise,
)

__all__ = ["open_mcp_client", "open_mcp_http", "open_mcp_stdio"]

_PAGE_CAP: Final = 1000

_CLOSE_GRACE: Final = 5.0
"""Seconds the shielded close of a connection may take (the session's end, the HTTP
``DELETE``) before it is cut. A stdio server's own shutdown is the SDK's, shielded
and bounded by itself."""


def _check_bool(where: str, option: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{where}: {option} must be a bool, got {value!r}")


@attrs.frozen
class _Options:
    prefix: str | None
    non_repeatable: frozenset[str]
    uses_idempotency_key: frozenset[str]
    serial: frozenset[str]
    call_timeout: float | None
    max_result_chars: int


def _options(
    where: str,
    prefix: object,
    non_repeatable: object,
    uses_idempotency_key: object,
    serial: object,
    call_timeout: object,
    max_result_chars: object,
) -> _Options:
    return _Options(
        prefix=check_prefix(where, prefix),
        non_repeatable=check_names(where, "non_repeatable", non_repeatable),
        uses_idempotency_key=check_names(where, "uses_idempotency_key", uses_idempotency_key),
        serial=check_names(where, "serial", serial),
        call_timeout=_check_call_timeout(where, call_timeout),
        max_result_chars=_check_max_result_chars(where, max_result_chars),
    )


async def _list_all(client: mcp.Client) -> list[mcp.Tool]:
    tools: list[mcp.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise ValueError(f"the server's tool listing did not end within {_PAGE_CAP} pages")


def _describe(exc: BaseException) -> str:
    """The innermost error of an SDK task group's exception group, as text."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in *exc* that are not groups (*exc* itself if it is not one)."""
    found: list[BaseException] = []
    pending = [exc]
    while pending:
        node = pending.pop()
        if isinstance(node, BaseExceptionGroup):
            pending.extend(node.exceptions)
        else:
            found.append(node)
    return found


def _is_cancellation(exc: BaseException) -> bool:
    cancelled = anyio.get_cancelled_exc_class()
    return all(isinstance(leaf, cancelled) for leaf in _leaves(exc))


def _holds_cancellation(exc: BaseException) -> bool:
    cancelled = anyio.get_cancelled_exc_class()
    return any(isinstance(leaf, cancelled) for leaf in _leaves(exc))


def _interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` in *exc* if it is one, or a group of only
    interrupts and cancellations holding one; else ``None``."""
    cancelled = anyio.get_cancelled_exc_class()
    leaves = _leaves(exc)
    interrupts = [leaf for leaf in leaves if isinstance(leaf, KeyboardInterrupt)]
    if interrupts and all(isinstance(leaf, (KeyboardInterrupt, cancelled)) for leaf in leaves):
        return interrupts[-1]  # the first one raised (the walk runs backwards)
    return None


def _leaving(group: BaseExceptionGroup[BaseException], host: BaseException | None) -> BaseException:
    """What leaves an ``open_mcp_*`` block for the task group's *group*.

    *host* is what the host's code raised in the block, if it raised. The
    group holds it and whatever the keeper raised; the keeper catches every
    ``Exception`` once the block is entered, so that can only be a
    cancellation or a ``KeyboardInterrupt`` Trio raised in one of the SDK's
    tasks.
    """
    interrupt = _interrupt_in(group)
    if interrupt is not None:
        return interrupt
    failures = [e for e in group.exceptions if not _is_cancellation(e)]
    if len(failures) == 1:
        (only,) = failures
        if host is not None and not _holds_cancellation(host):
            # The host's exception, as the host raised it: the very object.
            # (Trio's nursery splits the cancellations out of a group passing
            # through it, which hands back an equal copy of a host's group.)
            return host
        return _one_leaf(only) if isinstance(only, BaseExceptionGroup) else only
    return group


@asynccontextmanager
async def _serve(
    where: str, server: str, client: mcp.Client, options: _Options
) -> AsyncIterator[MCPToolset]:
    close = anyio.Event()
    # The keeper's outcome, for the host's `async with` to read after the task group.
    failures: list[BaseException] = []
    # What the host's code raised inside the block, to tell it from the keeper's.
    raised: list[BaseException] = []

    async def keep(*, task_status: anyio.abc.TaskStatus[MCPToolset]) -> None:
        toolset: MCPToolset | None = None
        refusal: ValueError | None = None
        try:
            with anyio.CancelScope() as connection:
                async with client:
                    listing = await _list_all(client)
                    try:
                        infos = convert_listing(
                            where,
                            server,
                            listing,
                            prefix=options.prefix,
                            non_repeatable=options.non_repeatable,
                            uses_idempotency_key=options.uses_idempotency_key,
                            serial=options.serial,
                        )
                    except ValueError as exc:
                        # Raised after the client is closed, not through its task
                        # groups, so the host gets the ValueError itself.
                        refusal = exc
                    else:
                        toolset = MCPToolset(
                            server,
                            infos,
                            client,
                            call_timeout=options.call_timeout,
                            max_result_chars=options.max_result_chars,
                        )
                        task_status.started(toolset)
                        # From here on only the host leaving the block closes the
                        # connection. A cancel of a scope around the whole block
                        # must not cut the transport while the calls it cancels
                        # are still telling the server so (each waits, shielded,
                        # for its cancellation notification to be written), nor
                        # cut the close itself: the notifications still queued
                        # are flushed, and the HTTP session's DELETE is sent,
                        # as when the block is left normally. The close stays
                        # shielded, bounded by its own deadline.
                        connection.shield = True
                        await close.wait()
                        connection.deadline = anyio.current_time() + _CLOSE_GRACE
        except Exception as exc:
            if toolset is None:
                raise  # tg.start() raises it in the host's task: the block is not entered
            failures.append(exc)
        finally:
            if toolset is not None:
                toolset._client = None
                if not toolset._left:
                    toolset._lost = _describe(failures[0]) if failures else "the server closed it"
        if refusal is not None:
            raise refusal

    try:
        async with anyio.create_task_group() as tg:
            try:
                toolset = await tg.start(keep)
            except ValueError:
                raise
            except Exception as exc:
                raise MCPConnectionError(
                    f"{where}: could not connect to the MCP server {server}: {_describe(exc)}",
                    server,
                ) from exc
            try:
                yield toolset
            except BaseException as exc:
                raised.append(exc)
                raise
            finally:
                toolset._left = True
                close.set()
    except BaseExceptionGroup as group:
        # The task group wraps what the host's code raised (and what the
        # keeper raised, which is only ever a cancellation or an interrupt):
        # give back what was raised, not the wrapping the host never asked for.
        leaving = _leaving(group, raised[0] if raised else None)
        if leaving is group:
            raise
        _reraise(leaving)


def _check_server_parameters(
    where: str, command: object, args: object, env: object, cwd: object
) -> tuple[str, list[str], dict[str, str] | None, str | None]:
    if not isinstance(command, str) or not command:
        raise error_kind(command, str)(
            f"{where}: command must be a non-empty string, got {command!r}"
        )
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"{where}: args must be a sequence of strings, got {args!r}")
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"{where}: args must be a sequence of strings, got {arg!r} in it")
    if env is not None:
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise TypeError(f"{where}: env must be None or a mapping of strings, got {env!r}")
        env = dict(env)
    if cwd is not None and not isinstance(cwd, (str, os.PathLike)):
        raise TypeError(f"{where}: cwd must be None or a path, got {cwd!r}")
    return command, list(args), env, None if cwd is None else os.fspath(cwd)


def open_mcp_stdio(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    errlog: TextIO | None = None,
    prefix: str | None = None,
    non_repeatable: Collection[str] = (),
    uses_idempotency_key: Collection[str] = (),
    serial: Collection[str] = (),
    call_timeout: float | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> AbstractAsyncContextManager[MCPToolset]:
    """Start an MCP server as a subprocess, talk to it over stdin/stdout; yield its toolset.

    ``async with open_mcp_stdio("uvx", ["mcp-server-time"]) as time_tools:``
    starts *command* with *args* (in its own process group; *env* is added
    to a minimal inherited environment, *cwd* is its working directory, its
    stderr goes to *errlog*, default ``sys.stderr``), completes the
    protocol's greeting, lists the server's tools and yields an
    [MCPToolset][juno_bind_trio.mcp.MCPToolset]. Leaving the block, however
    it is left, closes the server's stdin, and terminates then kills its
    process group if it has not exited within the SDK's grace period.

    *prefix* names every tool ``<prefix>_<name>`` (two servers, or a server
    and a local tool, that offer the same name are otherwise refused when
    the agent is built). *non_repeatable* names the server's tools whose
    effect must never happen twice (receipts and resume treat them as they
    treat a local ``@tool(repeatable=False)``); *uses_idempotency_key*
    those that receive the call's idempotency key (in the request's
    ``_meta``) and so may be re-dispatched on resume; *serial* those whose
    calls must run one at a time. A name in these options that the server
    does not list is refused.

    *call_timeout*: the longest, in seconds, a call may wait for the server's
    answer (the SDK's per-request timeout). A call that takes longer is
    cancelled on the server (``notifications/cancelled``) and fails as
    ``"external"``, saying so, and the run goes on. Without one (the
    default) a call waits for as long as the server takes; what bounds it
    then is the run's own deadline or cancellation, which ends the run and
    answers the call ``"interrupted"``.

    *max_result_chars*: the most characters of a result the agent gets
    ([DEFAULT_MAX_RESULT_CHARS][juno_bind_trio.mcp.DEFAULT_MAX_RESULT_CHARS]
    by default). A longer result (its text, or its structured content as
    compact JSON) is cut to that many characters, and a line appended to it
    tells the model it was cut and how long it was. The SDK has read the
    whole result by then: this bounds the transcript and the next request,
    not what the server sends.

    :raises MCPConnectionError: the server could not be started or greeted.
    :raises ValueError: a listed tool cannot be offered to a model (its name,
        its schema), two of its tools map to one name, or an option names a
        tool the server does not list.
    :raises TypeError: an argument of the wrong type.
    """
    where = "open_mcp_stdio"
    command, arg_list, env_dict, cwd_str = _check_server_parameters(where, command, args, env, cwd)
    options = _options(
        where,
        prefix,
        non_repeatable,
        uses_idempotency_key,
        serial,
        call_timeout,
        max_result_chars,
    )
    parameters = StdioServerParameters(command=command, args=arg_list, env=env_dict, cwd=cwd_str)
    transport = stdio_client(parameters, errlog=sys.stderr if errlog is None else errlog)
    server = " ".join([command, *arg_list])
    return _serve(where, server, mcp.Client(transport, cache=None), options)


def open_mcp_http(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    prefix: str | None = None,
    non_repeatable: Collection[str] = (),
    uses_idempotency_key: Collection[str] = (),
    serial: Collection[str] = (),
    call_timeout: float | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> AbstractAsyncContextManager[MCPToolset]:
    """Connect to an MCP server over streamable HTTP at *url*; yield its toolset.

    *headers* are sent with every request (an ``Authorization`` header, for
    one). Leaving the block ends the HTTP session (the SDK's ``DELETE``) and
    closes the connection, however it is left: a cancel of a scope around the
    block too. The other options are
    [open_mcp_stdio][juno_bind_trio.mcp.open_mcp_stdio]'s.

    :raises MCPConnectionError: the server could not be reached or greeted.
    :raises ValueError: as for ``open_mcp_stdio``, or *url* is not http(s).
    :raises TypeError: an argument of the wrong type.
    """
    where = "open_mcp_http"
    if not isinstance(url, str):
        raise TypeError(f"{where}: url must be a string, got {url!r}")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: url must start with http:// or https://, got {url!r}")
    given: object = headers
    if given is not None and (
        not isinstance(given, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items())
    ):
        raise TypeError(f"{where}: headers must be None or a mapping of strings, got {headers!r}")
    if given:
        for name, value in given.items():
            # What HTTP can carry: names in ASCII, values in Latin-1, neither
            # with a line break (httpx would fail on the first request instead).
            if not (name.isascii() and name.isprintable() and name) or not (
                value.isprintable() and all(ord(c) < 256 for c in value)
            ):
                raise ValueError(
                    f"{where}: header {name!r} cannot be sent over HTTP (names are printable "
                    f"ASCII, values printable Latin-1), got {value!r}"
                )
    options = _options(
        where,
        prefix,
        non_repeatable,
        uses_idempotency_key,
        serial,
        call_timeout,
        max_result_chars,
    )
    http_client = None
    if headers:
        from mcp.shared._httpx_utils import create_mcp_http_client

        http_client = create_mcp_http_client(headers=dict(headers))
    transport = _http_transport(url, http_client)
    return _serve(where, url, mcp.Client(transport, cache=None), options)


@asynccontextmanager
async def _http_transport(url: str, http_client: Any) -> AsyncIterator[Any]:
    if http_client is None:
        async with streamable_http_client(url) as streams:
            yield streams
    else:
        async with http_client, streamable_http_client(url, http_client=http_client) as streams:
            yield streams


def open_mcp_client(
    client: mcp.Client,
    *,
    prefix: str | None = None,
    non_repeatable: Collection[str] = (),
    uses_idempotency_key: Collection[str] = (),
    serial: Collection[str] = (),
    call_timeout: float | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> AbstractAsyncContextManager[MCPToolset]:
    """Yield the toolset of a server reached through an SDK ``mcp.Client`` you built.

    For what the other two blocks do not cover: another transport, the
    SDK's OAuth, sampling callbacks — or an in-process server in tests,
    ``mcp.Client(my_server)``. The client must not be entered yet: the block
    enters it, and leaving the block closes it. Options as for
    [open_mcp_stdio][juno_bind_trio.mcp.open_mcp_stdio].
    """
    where = "open_mcp_client"
    if not isinstance(client, mcp.Client):
        raise TypeError(f"{where}: client must be an mcp.Client, got {client!r}")
    options = _options(
        where,
        prefix,
        non_repeatable,
        uses_idempotency_key,
        serial,
        call_timeout,
        max_result_chars,
    )
    target = client.server
    if isinstance(target, str):
        server = target
    elif isinstance(target, StdioServerParameters):
        server = " ".join([target.command, *target.args])
    else:
        server = f"<{type(target).__name__}>"
    return _serve(where, server, client, options)
