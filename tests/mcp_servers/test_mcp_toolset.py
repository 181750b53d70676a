"""MCP toolsets against an in-process server (the SDK's own server, no subprocess).

These run on both backends on the virtual clocks: the SDK connects an
``mcp.Client(server)`` to the server directly, with no I/O, so nothing here
touches real time. The subprocess transports are tested in test_mcp_processes.py.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp
import mcp_test_server
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server.mcpserver import MCPServer

from juno_bind_trio import MCPToolError, ToolFailureError, UsageError
from juno_bind_trio.mcp import MCPToolInfo, MCPToolset, open_mcp_client
from juno_bind_trio.mcp._convert import (
    ArgumentCheck,
    convert_listing,
    failure_for,
    model_name,
    result_value,
)
from juno_bind_trio.run import ToolBatch, ToolCallLike, tool_call_id
from juno_bind_trio.schema import SCHEMA_DIALECTS, sanitize_tool_schema

pytestmark = pytest.mark.anyio


def in_process(server: MCPServer | None = None, **options: Any) -> Any:
    return open_mcp_client(mcp.Client(server or mcp_test_server.build_server()), **options)


@pytest.fixture(autouse=True)
def fresh_records() -> None:
    mcp_test_server.STARTED.clear()
    mcp_test_server.CANCELLED.clear()


async def test_listing_keeps_the_servers_names_descriptions_and_schemas() -> None:
    server = mcp_test_server.build_server()
    listed = {tool.name: tool for tool in await server.list_tools()}
    async with in_process(server) as toolset:
        assert isinstance(toolset, MCPToolset)
        assert [info.name for info in toolset.infos] == list(listed)
        for info in toolset.infos:
            assert info.server_name == info.name
            assert info.description == listed[info.name].description
            assert info.parameters == listed[info.name].input_schema
            assert info.repeatable
            assert not info.uses_idempotency_key
            assert not info.serial
        assert toolset.info("add").parameters["required"] == ["a", "b"]


async def test_prefix_and_per_tool_options() -> None:
    async with in_process(
        prefix="calc", non_repeatable=["add"], uses_idempotency_key=["echo"], serial=["pid"]
    ) as toolset:
        names = [info.name for info in toolset.infos]
        assert names == [f"calc_{info.server_name}" for info in toolset.infos]
        add = toolset.info("calc_add")
        assert (add.server_name, add.repeatable, add.uses_idempotency_key) == ("add", False, False)
        assert toolset.info("calc_echo").uses_idempotency_key
        assert toolset.info("calc_pid").serial
        assert toolset.info("calc_echo").repeatable
        # Calls go to the server under its own name.
        assert await toolset.call("calc_add", {"a": 2, "b": 3}) == {"total": 5, "terms": [2, 3]}


async def test_an_option_naming_an_unlisted_tool_is_refused_when_the_block_is_entered() -> None:
    with pytest.raises(ValueError, match=r"non_repeatable names tools .* does not list: \['ad'\]"):
        async with in_process(non_repeatable=["ad"]):
            pytest.fail("the block must not be entered")


async def test_calls_return_structured_content_or_text() -> None:
    async with in_process() as toolset:
        assert await toolset.call("add", {"a": 1, "b": 2}) == {"total": 3, "terms": [1, 2]}
        assert await toolset.call("echo", {"text": "héllo"}) == "héllo"


async def test_a_result_marked_is_error_is_an_mcp_tool_error_without_a_kind() -> None:
    async with in_process() as toolset:
        with pytest.raises(MCPToolError, match="refused: no reason") as caught:
            await toolset.call("fail", {"reason": "no reason"})
    assert caught.value.tool_name == "fail"
    assert not hasattr(caught.value, "kind")


async def test_arguments_that_break_the_schema_are_a_validation_failure_naming_each_field() -> None:
    async with in_process() as toolset:
        with pytest.raises(ToolFailureError) as caught:
            await toolset.call("add", {"a": "one"})
        assert caught.value.kind == "validation"
        assert (
            caught.value.message
            == "(arguments): 'b' is a required property; a: 'one' is not of type 'integer'"
        )
        # Nothing was sent: the server's own check would have said it in its words.
        assert await toolset.call("add", {"a": 1, "b": 1}) == {"total": 2, "terms": [1, 1]}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 12},  # not a schema
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}},
        {"type": "object", "properties": {"x": {"pattern": "("}}},  # a regex that does not compile
    ],
)
def test_a_schema_the_validator_cannot_use_is_left_to_the_server(schema: dict[str, Any]) -> None:
    ArgumentCheck(schema)({"x": "anything"})


async def test_unknown_names_and_use_after_the_block() -> None:
    async with in_process() as toolset:
        with pytest.raises(KeyError, match="no tool 'nope'"):
            await toolset.call("nope", {})
        with pytest.raises(TypeError, match=r"MCPToolset\.call: arguments must be a mapping"):
            await toolset.call("echo", ["not", "an", "object"])
    with pytest.raises(UsageError, match="has been left"):
        await toolset.call("echo", {"text": "late"})
    assert "closed" in repr(toolset)


async def test_a_cancelled_call_is_cancelled_on_the_server_too() -> None:
    async with in_process() as toolset:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(toolset.call, "slow", {"tag": "cut"})
                await anyio.sleep(1)
                assert mcp_test_server.STARTED == ["cut"]
                scope.cancel()
        assert scope.cancelled_caught
        assert await toolset.call("record", {}) == {"started": ["cut"], "cancelled": ["cut"]}


async def test_leaving_the_block_by_an_exception_closes_the_connection() -> None:
    with pytest.raises(LookupError):
        async with in_process() as toolset:
            raise LookupError("host bug")
    with pytest.raises(UsageError):
        await toolset.call("echo", {"text": "late"})


@pytest.mark.parametrize("dialect", SCHEMA_DIALECTS)
async def test_every_listed_schema_survives_sanitization_for_every_dialect(dialect: str) -> None:
    async with in_process() as toolset:
        for info in toolset.infos:
            result = sanitize_tool_schema(info.parameters, dialect=dialect)  # type: ignore[arg-type]
            assert result.schema["type"] == "object"


async def test_two_server_tools_that_map_to_one_name_are_refused() -> None:
    server = MCPServer("clash")

    @server.tool(name="get.item")
    async def dotted() -> str:
        return "dotted"

    @server.tool(name="get_item")
    async def underscored() -> str:
        return "underscored"

    with pytest.raises(ValueError, match=r"'get\.item' and 'get_item'.*'get_item'"):
        async with in_process(server):
            pytest.fail("the block must not be entered")


async def test_a_name_the_model_rule_forbids_is_offered_with_underscores() -> None:
    server = MCPServer("dots")

    @server.tool(name="files.read")
    async def read() -> str:
        return "content"

    async with in_process(server, prefix="fs") as toolset:
        (info,) = toolset.infos
        assert (info.name, info.server_name) == ("fs_files_read", "files.read")
        assert await toolset.call("fs_files_read", {}) == {"result": "content"}


def test_bad_options_are_type_and_value_errors_naming_the_function() -> None:
    client = mcp.Client(mcp_test_server.build_server())
    with pytest.raises(TypeError, match=r"open_mcp_client: client must be an mcp\.Client"):
        open_mcp_client("http://x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="open_mcp_client: non_repeatable must be a collection"):
        open_mcp_client(client, non_repeatable="add")
    with pytest.raises(ValueError, match="open_mcp_client: prefix must be"):
        open_mcp_client(client, prefix="a b")
    with pytest.raises(TypeError, match="open_mcp_client: serial must hold"):
        open_mcp_client(client, serial=[1])  # type: ignore[list-item]


@given(st.text(min_size=1, max_size=80))
def test_model_names_follow_the_function_name_rule_or_are_refused(name: str) -> None:
    try:
        made = model_name(name, "p")
    except ValueError as exc:
        message = str(exc)
    else:
        assert made.startswith("p_")
        assert all(c.isascii() and (c.isalnum() or c in "_-") for c in made)
        assert len(made) <= 64
        return
    assert repr(name) in message


def test_failures_of_the_connection_are_external_and_bad_answers_system() -> None:
    from mcp.shared.exceptions import MCPError

    closed = failure_for(
        "t", MCPError(code=mcp.types.CONNECTION_CLOSED, message="Connection closed")
    )
    assert isinstance(closed, ToolFailureError)
    assert closed.kind == "external"
    invalid = failure_for("t", MCPError(code=mcp.types.INVALID_PARAMS, message="bad a"))
    assert isinstance(invalid, ToolFailureError)
    assert (invalid.kind, invalid.message) == ("validation", "bad a")
    broken = failure_for("t", RuntimeError("Invalid structured content returned by tool t"))
    assert isinstance(broken, ToolFailureError)
    assert broken.kind == "system"
    unreachable = failure_for("t", OSError("connection refused"))
    assert isinstance(unreachable, ToolFailureError)
    assert unreachable.kind == "external"


def test_non_text_blocks_are_described_not_dropped() -> None:
    result = mcp.types.CallToolResult(
        content=[
            mcp.types.TextContent(type="text", text="see"),
            mcp.types.ImageContent(type="image", data="QUJD", mime_type="image/png"),
        ]
    )
    assert result_value("t", result) == "see\n[image: image/png, 4 base64 characters]"
    failed = mcp.types.CallToolResult(content=[], is_error=True)
    with pytest.raises(MCPToolError, match="failed without saying why"):
        result_value("t", failed)


def test_tool_info_is_frozen() -> None:
    info = MCPToolInfo(
        name="a",
        server_name="a",
        description=None,
        parameters={"type": "object"},
        output_schema=None,
        repeatable=True,
        uses_idempotency_key=False,
        serial=False,
    )
    with pytest.raises(AttributeError):
        info.name = "b"  # type: ignore[misc]


async def test_a_hard_cancel_of_a_batch_interrupts_running_mcp_calls_and_refuses_queued_ones() -> (
    None
):
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "slow", "arguments": "{}"}}
        for i in range(3)
    ]
    async with in_process() as toolset:

        async def dispatch(call: ToolCallLike) -> object:
            return await toolset.call("slow", {"tag": tool_call_id(call)})

        batch: ToolBatch[object] = ToolBatch(calls)
        with anyio.move_on_after(5):
            await batch.run(dispatch, per_tool_limit=2)
        assert batch.states == ("interrupted", "interrupted", "refused")
        # The server's handlers were cancelled too, and the third never reached it.
        record = await toolset.call("record", {})
        assert isinstance(record, dict)
        assert sorted(record["started"]) == sorted(record["cancelled"]) == ["c0", "c1"]


@given(
    st.lists(
        st.text(alphabet="ab._/-", min_size=1, max_size=6), min_size=1, max_size=6, unique=True
    ),
    st.sampled_from([None, "p"]),
)
def test_a_listing_is_offered_under_distinct_valid_names_or_refused(
    names: list[str], prefix: str | None
) -> None:
    listed = [mcp.types.Tool(name=name, input_schema={"type": "object"}) for name in names]
    mapped = [model_name(name, prefix) for name in names]
    if len(set(mapped)) < len(mapped):
        # Two server names map to one model name: refused, naming both.
        with pytest.raises(ValueError, match="would both be offered to the model"):
            convert_listing(
                "t",
                "s",
                listed,
                prefix=prefix,
                non_repeatable=(),
                uses_idempotency_key=(),
                serial=(),
            )
        return
    infos = convert_listing(
        "t", "s", listed, prefix=prefix, non_repeatable=(), uses_idempotency_key=(), serial=()
    )
    assert [info.server_name for info in infos] == names
    offered = [info.name for info in infos]
    assert len(set(offered)) == len(offered)
    assert all(
        name == model_name(info.server_name, prefix)
        for name, info in zip(offered, infos, strict=True)
    )


def test_a_toolset_built_by_hand_checks_its_parts() -> None:
    with pytest.raises(TypeError, match="MCPToolset: infos must be a tuple of MCPToolInfo"):
        MCPToolset("s", ("not an info",), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MCPToolset: server must be a str"):
        MCPToolset(b"s", (), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"MCPToolset: client must be an mcp\.Client"):
        MCPToolset("s", (), "client")  # type: ignore[arg-type]
    assert MCPToolset("s", (), None).infos == ()
