"""The toolset an MCP connection yields.

The ``open_mcp_*`` blocks that make one, and the keeper task that holds the
connection beside the host's code, are in ``_connect``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn, final

import anyio
import anyio.abc
import attrs
import mcp
import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types import REQUEST_TIMEOUT

from juno_bind_trio._errors import ToolFailureError, UsageError
from juno_bind_trio._validate import shown
from juno_bind_trio.agent import RunContext, Tool

from ._convert import (
    DEFAULT_MAX_RESULT_CHARS,
    ArgumentCheck,
    MCPToolInfo,
    check_arguments,
    failure_for,
    result_value,
)

__all__ = ["IDEMPOTENCY_KEY_META", "MCPToolset"]

IDEMPOTENCY_KEY_META: Final = "juno-bind-trio/idempotency-key"
"""The ``_meta`` key a call of a tool marked ``uses_idempotency_key`` carries its key under.

The key is stable across crashes and resumes of the run (the agent's
``RunContext.idempotency_key``), so a server that remembers the keys it has
acted on can make a repeated call a no-op.
"""


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
