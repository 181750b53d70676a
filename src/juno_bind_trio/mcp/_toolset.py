"""The toolset an MCP connection yields, and the ``async with`` blocks that make one.

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
from typing import Any, Final, NoReturn, TextIO, final

import anyio
import anyio.abc
import attrs
import mcp
import mcp_types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import REQUEST_TIMEOUT

from juno_bind_trio._errors import MCPConnectionError, ToolFailureError, UsageError
from juno_bind_trio._validate import error_kind, shown
from juno_bind_trio.agent import RunContext, Tool

from ._convert import (
    DEFAULT_MAX_RESULT_CHARS,
    ArgumentCheck,
    MCPToolInfo,
    check_arguments,
    check_names,
    check_prefix,
    convert_listing,
    failure_for,
    result_value,
)

__all__ = [
    "IDEMPOTENCY_KEY_META",
    "MCPToolset",
    "open_mcp_client",
    "open_mcp_http",
    "open_mcp_stdio",
]

IDEMPOTENCY_KEY_META: Final = "juno-bind-trio/idempotency-key"
"""The ``_meta`` key a call of a tool marked ``uses_idempotency_key`` carries its key under.

The key is stable across crashes and resumes of the run (the agent's
``RunContext.idempotency_key``), so a server that remembers the keys it has
acted on can make a repeated call a no-op.
"""

_PAGE_CAP: Final = 1000

_CLOSE_GRACE: Final = 5.0
"""Seconds the shielded close of a connection may take (the session's end, the HTTP
``DELETE``) before it is cut. A stdio server's own shutdown is the SDK's, shielded
and bounded by itself."""


def _check_call_timeout(where: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: call_timeout must be None or a number of seconds, got {value!r}")
    if not value > 0 or value == float("inf"):
        raise ValueError(
            f"{where}: call_timeout must be a positive, finite number of seconds, got {value!r}"
        )
    return float(value)


def _check_max_result_chars(where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: max_result_chars must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{where}: max_result_chars must be a positive integer, got {value!r}")
    return value


@final
@attrs.define(eq=False, repr=False)
class MCPToolset:
    """The tools of one connected MCP server; what the ``open_mcp_*`` blocks yield.

    Pass it to ``Agent(tools=[...])`` beside ``@tool`` functions: it is a
    [Toolset][juno_bind_trio.agent.Toolset], and its
    [tools][juno_bind_trio.mcp.MCPToolset.tools] are built with
    [Tool.from_schema][juno_bind_trio.agent.Tool.from_schema].
    [infos][juno_bind_trio.mcp.MCPToolset.infos] describes each tool as the
    model will see it, and [call][juno_bind_trio.mcp.MCPToolset.call] routes
    a call to the server. It is usable only inside the ``async with`` block
    that made it.

    *call_timeout* and *max_result_chars* are the ``open_mcp_*`` options of
    the same names.
    """

    _server: str
    _infos: tuple[MCPToolInfo, ...]
    _client: mcp.Client | None
    _call_timeout: float | None = attrs.field(default=None, alias="call_timeout", kw_only=True)
    _max_result_chars: int = attrs.field(
        default=DEFAULT_MAX_RESULT_CHARS, alias="max_result_chars", kw_only=True
    )
    # Why the connection ended while the block was still open, if it did.
    _lost: str | None = None
    # Set when the host's code leaves the block.
    _left: bool = False
    _by_name: dict[str, MCPToolInfo] = attrs.field(init=False)

    _checks: dict[str, ArgumentCheck] = attrs.field(init=False)
    _tools: tuple[Tool, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        server: object = self._server
        if not isinstance(server, str):
            raise TypeError(f"MCPToolset: server must be a str, got {shown(server)}")
        infos: object = self._infos
        if not isinstance(infos, tuple) or not all(isinstance(i, MCPToolInfo) for i in infos):
            raise TypeError(f"MCPToolset: infos must be a tuple of MCPToolInfo, got {shown(infos)}")
        client: object = self._client
        if client is not None and not isinstance(client, mcp.Client):
            raise TypeError(
                f"MCPToolset: client must be an mcp.Client or None, got {shown(client)}"
            )
        self._call_timeout = _check_call_timeout("MCPToolset", self._call_timeout)
        self._max_result_chars = _check_max_result_chars("MCPToolset", self._max_result_chars)
        self._by_name = {info.name: info for info in self._infos}
        self._checks = {info.name: ArgumentCheck(info.parameters) for info in self._infos}
        self._tools = tuple(self._tool(info) for info in self._infos)

    def _tool(self, info: MCPToolInfo) -> Tool:
        name = info.name

        async def handler(ctx: RunContext[Any], arguments: dict[str, Any]) -> object:
            key = ctx.idempotency_key if info.uses_idempotency_key else None
            return await self.call(name, arguments, idempotency_key=key)

        return Tool.from_schema(
            name=name,
            description=info.description,
            parameters=info.parameters,
            handler=handler,
            serial=info.serial,
            repeatable=info.repeatable,
            uses_idempotency_key=info.uses_idempotency_key,
        )

    def __repr__(self) -> str:
        state = "closed" if self._left else "lost" if self._lost is not None else "open"
        return f"<MCPToolset server={self._server!r} tools={len(self._infos)} {state}>"

    @property
    def server(self) -> str:
        """Who the server is, for messages: its command line, or its URL."""
        return self._server

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as [Tool][juno_bind_trio.agent.Tool]s, for ``Agent(tools=[...])``.

        The same objects every time; each routes its calls through
        [call][juno_bind_trio.mcp.MCPToolset.call], passing the run's
        idempotency key for a tool marked ``uses_idempotency_key``.

        :raises UsageError: the ``async with`` block has been left (an agent
            run outside it fails at its start, not when the model calls).
        """
        if self._left:
            raise UsageError(
                f"MCPToolset.tools: the block that connected {self._server} has been left; "
                "its tools can be used only inside it"
            )
        return self._tools

    @property
    def lost(self) -> str | None:
        """Why the connection ended while the block was still open, or ``None``.

        Set when the transport failed (a streamable-HTTP server that died
        under a request, for one); from then on every call fails at once
        as ``"external"``. A stdio server that exits is found out by the
        next call instead, with the same answer.
        """
        return self._lost

    @property
    def infos(self) -> tuple[MCPToolInfo, ...]:
        """Every tool the server listed when the block was entered, in its order."""
        return self._infos

    def info(self, name: str) -> MCPToolInfo:
        """The tool the model calls *name*; ``KeyError`` if there is none."""
        return self._by_name[name]

    async def call(
        self, name: str, arguments: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> object:
        """Call the tool the model knows as *name* on the server; return what the agent writes.

        The arguments are checked against the tool's input schema first: a
        call the server would refuse fails at once, as ``"validation"``,
        naming every bad field (a ``null`` for an optional argument whose
        schema refuses ``null`` means "not given" and is left out, as for a
        local tool). Returns the result's structured content when the
        server sent any, else the text of its content blocks, cut to the
        toolset's ``max_result_chars`` with a line saying so. Raises
        [MCPToolError][juno_bind_trio.MCPToolError] for a result marked
        ``isError``, and [ToolFailureError][juno_bind_trio.ToolFailureError]
        of kind ``"external"`` (the server is gone or failed, or did not
        answer within the toolset's ``call_timeout``), ``"validation"`` (it
        refused the arguments) or ``"system"`` (its answer cannot be used).
        *idempotency_key* is sent, for a tool marked
        ``uses_idempotency_key``, as the request's ``_meta``
        ``juno-bind-trio/idempotency-key``.

        A cancellation of the caller cancels the request: the SDK sends the
        protocol's ``notifications/cancelled`` for it before the cancellation
        propagates. So does a ``KeyboardInterrupt`` (Ctrl-C on Trio, which
        raises it in the main task wherever that task waits): the request
        is awaited in a task of its own, so the interrupt lands on the wait
        for that task, which then cancels the request.

        :raises KeyError: the toolset has no tool called *name*.
        :raises UsageError: the ``async with`` block has been left.
        """
        given: object = name
        info = self._by_name.get(name) if isinstance(given, str) else None
        if info is None:
            raise KeyError(f"MCPToolset.call: server {self._server} has no tool {name!r}")
        args = self._checks[name](check_arguments("MCPToolset.call", arguments))
        if self._left:
            raise UsageError(
                f"MCPToolset.call: the block that connected {self._server} has been left; "
                "its tools can be called only inside it"
            )
        client = self._client
        if client is None:
            raise ToolFailureError(
                "external",
                f"The MCP server behind tool {info.server_name!r} is unavailable: "
                f"the connection to it ended ({self._lost}).",
            )
        meta: dict[str, Any] | None = None
        if idempotency_key is not None and info.uses_idempotency_key:
            meta = {IDEMPOTENCY_KEY_META: idempotency_key}
        answered: list[mcp_types.CallToolResult] = []
        failed: list[Exception] = []

        async def request() -> None:
            try:
                answered.append(
                    await client.call_tool(
                        info.server_name,
                        args,
                        read_timeout_seconds=self._call_timeout,
                        meta=meta,  # type: ignore[arg-type]
                    )
                )
            except Exception as exc:
                failed.append(exc)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(request, name=f"MCP call {info.server_name}")
        except BaseExceptionGroup as group:
            # The request task never raises but its cancellation, so the group
            # holds what interrupted this task's wait (a KeyboardInterrupt).
            _reraise(_one_leaf(group))
        if failed:
            exc = failed[0]
            if (
                self._call_timeout is not None
                and isinstance(exc, MCPError)
                and exc.error.code == REQUEST_TIMEOUT
            ):
                raise ToolFailureError(
                    "external",
                    f"The MCP server behind tool {info.server_name!r} did not answer within "
                    f"{self._call_timeout:g} s; the call was cancelled on the server.",
                ) from exc
            raise failure_for(info.server_name, exc) from exc
        return result_value(info.server_name, answered[0], self._max_result_chars)


def _one_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _reraise(exc: BaseException) -> NoReturn:
    """Raise *exc* as it was raised: its cause and context kept, not this frame's."""
    context, cause, suppress = exc.__context__, exc.__cause__, exc.__suppress_context__
    try:
        raise exc
    finally:
        exc.__context__, exc.__cause__, exc.__suppress_context__ = context, cause, suppress


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
