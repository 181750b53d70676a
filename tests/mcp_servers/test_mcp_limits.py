"""What a toolset does at its edges, in process on the virtual clocks (both backends).

A ``null`` for an optional argument (what strict mode makes a model write),
the per-call timeout, the result cap, and what leaves the block when the
host's code raises. The same behaviours against the npm reference servers
are in test_mcp_reference_servers.py and test_mcp_ctrl_c.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import mcp
import mcp_test_server
import mcp_types
import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio import MCPToolError, ToolFailureError
from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.mcp import (
    DEFAULT_MAX_RESULT_CHARS,
    MCPToolset,
    open_mcp_client,
    open_mcp_http,
    open_mcp_stdio,
)
from juno_bind_trio.mcp._convert import ArgumentCheck, drop_absent_nulls, result_value

pytestmark = pytest.mark.anyio


def in_process(**options: Any) -> Any:
    return open_mcp_client(mcp.Client(mcp_test_server.build_server()), **options)


@pytest.fixture(autouse=True)
def fresh_records() -> None:
    mcp_test_server.STARTED.clear()
    mcp_test_server.CANCELLED.clear()


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


class Script:
    def __init__(self, *turns: ModelTurnResult) -> None:
        self.turns = list(turns)
        self.offered: list[Sequence[Any]] = []

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.offered.append(turn.tools)
        await anyio.lowlevel.checkpoint()
        return self.turns.pop(0)


# --- null for an optional argument ----------------------------------------------------


async def test_in_strict_mode_a_null_for_an_optional_argument_means_not_given() -> None:
    model = Script(
        ModelTurnResult(
            tool_calls=[
                call("c1", "pad", text="ab", width=None),
                call("c2", "pad", text="ab", width=4),
                call("c3", "pad", text=None, width=None),
            ]
        ),
        ModelTurnResult(content="done"),
    )
    async with in_process() as toolset:
        result = await Agent(model, tools=[toolset], strict=True).run("Pad it.")
    (pad,) = [e["function"] for e in model.offered[0] if e["function"]["name"] == "pad"]
    assert pad["strict"] is True
    assert set(pad["parameters"]["required"]) == {"text", "width"}  # required and nullable
    got = {m["tool_call_id"]: m["content"] for m in result.messages if m.get("role") == "tool"}
    assert got["c1"] == "ab........"  # the server's default width, 10
    assert got["c2"] == "ab.."
    # A null for a required argument is still wrong, and named.
    failure = json.loads(got["c3"])
    assert failure["kind"] == "validation"
    assert failure["error"] == "text: None is not of type 'string'"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "limit": {"type": "integer"},
        "note": {"type": ["string", "null"]},
        "mode": {"enum": ["a", "b"]},
        "any": {},
        "child": {"$ref": "#/$defs/node"},
        "rows": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    },
    "required": ["name"],
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "size": {"type": "number"},
                "child": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "string"}]},
            },
        }
    },
}


def test_only_nulls_the_schema_refuses_for_optional_properties_are_dropped() -> None:
    given_arguments = {
        "name": None,  # required: kept, and the validator names it
        "limit": None,  # optional, refuses null: dropped
        "note": None,  # accepts null: kept
        "mode": None,  # an enum without null: dropped
        "any": None,  # unconstrained: kept
        "extra": None,  # not in the schema: kept
        "child": {"size": None, "child": {"size": None, "child": "leaf"}},
        "rows": [{"size": None}, {"size": 2}],
    }
    assert drop_absent_nulls(given_arguments, SCHEMA) == {
        "name": None,
        "note": None,
        "any": None,
        "extra": None,
        "child": {"child": {"child": "leaf"}},
        "rows": [{}, {"size": 2}],
    }
    assert given_arguments["limit"] is None  # a copy: the model's arguments are untouched
    check = ArgumentCheck(SCHEMA)
    assert check({"name": "n", "limit": None, "rows": [{"size": None}]}) == {
        "name": "n",
        "rows": [{}],
    }
    unchanged = {"name": "n", "limit": 3}
    assert check(unchanged) is unchanged  # valid as sent: sent as it is
    with pytest.raises(ToolFailureError) as caught:
        check({"name": "n", "limit": None, "mode": "c"})
    # The errors of the second reading, the one without the absent nulls.
    assert caught.value.message == "mode: 'c' is not one of ['a', 'b']"


def test_arguments_nested_deeper_than_python_recurses_are_walked_without_recursion() -> None:
    deep: dict[str, Any] = {"size": None}
    for _ in range(20_000):
        deep = {"child": deep, "size": None}
    cleaned = drop_absent_nulls({"name": "n", "child": deep}, SCHEMA)
    depth = 0
    node = cleaned["child"]
    while "child" in node:
        assert "size" not in node
        node = node["child"]
        depth += 1
    assert (depth, node) == (20_000, {})


def _without_refused_nulls(value: dict[str, Any]) -> dict[str, Any]:
    """The oracle for the flat schema below: what drop_absent_nulls must leave."""
    refuses = {"limit", "mode"}
    return {k: v for k, v in value.items() if not (v is None and k in refuses)}


FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "limit": {"type": "integer"},
        "mode": {"enum": ["a", "b"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["name"],
}
values = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.sampled_from(["a", "b"]))


@given(
    st.dictionaries(st.sampled_from(["name", "limit", "mode", "note", "other"]), values, max_size=5)
)
def test_dropping_absent_nulls_removes_exactly_the_refused_optional_nulls(
    arguments: dict[str, Any],
) -> None:
    cleaned = drop_absent_nulls(arguments, FLAT)
    assert cleaned == _without_refused_nulls(arguments)
    assert list(cleaned) == [k for k in arguments if k in cleaned]  # order kept
    # And the check sends the arguments unchanged when they were valid as sent.
    check = ArgumentCheck(FLAT)
    try:
        sent = check(arguments)
    except ToolFailureError:
        return
    assert sent in (arguments, cleaned)


# --- the per-call timeout ----------------------------------------------------------------


async def test_a_call_that_outlasts_the_timeout_fails_external_and_is_cancelled_on_the_server() -> (
    None
):
    async with in_process(call_timeout=2.5) as toolset:
        started = anyio.current_time()
        with pytest.raises(ToolFailureError) as caught:
            await toolset.call("slow", {"tag": "late"})
        assert anyio.current_time() - started == 2.5
        assert caught.value.kind == "external"
        assert caught.value.message == (
            "The MCP server behind tool 'slow' did not answer within 2.5 s; "
            "the call was cancelled on the server."
        )
        await anyio.sleep(0.1)
        assert await toolset.call("record", {}) == {"started": ["late"], "cancelled": ["late"]}
        # A call inside the timeout is untouched by it.
        assert await toolset.call("echo", {"text": "quick"}) == "quick"


async def test_without_a_timeout_a_call_waits_until_the_callers_own_deadline() -> None:
    async with in_process() as toolset:
        started = anyio.current_time()
        with anyio.move_on_after(600) as scope:
            await toolset.call("slow", {"tag": "patient"})
        assert scope.cancelled_caught
        assert anyio.current_time() - started == 600
        assert await toolset.call("record", {}) == {
            "started": ["patient"],
            "cancelled": ["patient"],
        }


async def test_in_an_agent_run_a_timed_out_call_is_an_external_failure_and_the_run_goes_on() -> (
    None
):
    model = Script(
        ModelTurnResult(tool_calls=[call("c1", "slow", tag="t"), call("c2", "echo", text="hi")]),
        ModelTurnResult(content="done"),
    )
    async with in_process(call_timeout=1) as toolset:
        result = await Agent(model, tools=[toolset]).run("Go.")
    got = {m["tool_call_id"]: m["content"] for m in result.messages if m.get("role") == "tool"}
    slow = json.loads(got["c1"])
    assert (slow["success"], slow["kind"]) == (False, "external")
    assert "did not answer within 1 s" in slow["error"]
    assert got["c2"] == "hi"
    assert result.output == "done"


# --- the result cap -------------------------------------------------------------------


def cut(text: str, cap: int) -> str:
    return (
        text[:cap] + f"\n[the result was cut here: it had {len(text):,} characters, of which "
        f"only the first {cap:,} are shown]"
    )


async def test_a_result_longer_than_the_cap_is_cut_and_says_so() -> None:
    async with in_process(max_result_chars=10) as toolset:
        assert await toolset.call("echo", {"text": "0123456789"}) == "0123456789"
        assert await toolset.call("echo", {"text": "0123456789A"}) == cut("0123456789A", 10)
        # Structured content is measured as the compact JSON the agent writes.
        assert await toolset.call("add", {"a": 1, "b": 2}) == cut('{"total":3,"terms":[1,2]}', 10)
        with pytest.raises(MCPToolError) as failed:
            await toolset.call("fail", {"reason": "x" * 40})
        assert str(failed.value) == cut("Error executing tool fail: refused: " + "x" * 40, 10)
    async with in_process() as default:
        long = "y" * (DEFAULT_MAX_RESULT_CHARS + 1)
        assert await default.call("echo", {"text": long}) == cut(long, DEFAULT_MAX_RESULT_CHARS)
        structured = await default.call("add", {"a": 1, "b": 2})
        assert structured == {"total": 3, "terms": [1, 2]}  # under the cap: as it is


def test_result_value_cuts_text_blocks_together() -> None:
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="abc") for _ in range(4)]
    )
    assert result_value("t", result, 7) == cut("abc\nabc\nabc\nabc", 7)
    assert result_value("t", result, 15) == "abc\nabc\nabc\nabc"


async def test_limits_are_checked_where_they_are_given() -> None:
    bads: list[Any] = [
        (0, ValueError),
        (-1.0, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        ("1", TypeError),
        (True, TypeError),
    ]
    for bad, error in bads:
        with pytest.raises(error, match=r"open_mcp_client: call_timeout must be"):
            in_process(call_timeout=bad)
        with pytest.raises(error, match=r"open_mcp_stdio: call_timeout must be"):
            open_mcp_stdio("server", call_timeout=bad)
    bad_caps: list[Any] = [(0, ValueError), (2.5, TypeError), (None, TypeError)]
    for bad_cap, error in bad_caps:
        with pytest.raises(error, match=r"open_mcp_http: max_result_chars must be"):
            open_mcp_http("http://127.0.0.1:9/mcp", max_result_chars=bad_cap)
        with pytest.raises(error, match=r"MCPToolset: max_result_chars must be"):
            MCPToolset("s", (), None, max_result_chars=bad_cap)
    with pytest.raises(ValueError, match=r"MCPToolset: call_timeout must be"):
        MCPToolset("s", (), None, call_timeout=0)


# --- what leaves the block -----------------------------------------------------------------


async def test_an_exception_group_the_host_raises_leaves_the_block_as_itself() -> None:
    cause = RuntimeError("why")
    group = ExceptionGroup("the host's own", [ValueError("a"), KeyError("b")])
    group.__cause__ = cause

    async def use_then_raise() -> None:
        async with in_process() as toolset:
            assert await toolset.call("echo", {"text": "hi"}) == "hi"
            raise group

    with pytest.raises(ExceptionGroup) as raised:
        await use_then_raise()
    assert raised.value is group
    assert raised.value.__cause__ is cause  # its own chain, nothing added
    single = ExceptionGroup("one", [ValueError("only")])
    with pytest.raises(ExceptionGroup) as raised_single:
        async with in_process():
            raise single
    assert raised_single.value is single  # a group of one is the host's too: not unwrapped
    plain = LookupError("bare")
    with pytest.raises(LookupError) as raised_plain:
        async with in_process():
            raise plain
    assert raised_plain.value is plain
    assert raised_plain.value.__cause__ is None
    assert raised_plain.value.__context__ is None


async def test_a_keyboard_interrupt_leaves_the_block_bare() -> None:
    interrupt = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as raised:
        async with in_process():
            raise interrupt
    assert raised.value is interrupt
    # Even wrapped by a layer inside the block, with cancellations beside it.
    wrapped = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as raised_wrapped:
        async with in_process():
            raise BaseExceptionGroup("a layer's", [wrapped])
    assert raised_wrapped.value is wrapped
