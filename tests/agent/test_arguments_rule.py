"""Every tool reads a call's arguments by the package's one rule.

``""``, whitespace and ``"null"`` are ``{}`` for a typed tool, for a tool
from a schema and for the receipt key alike; anything but a JSON object is a
validation failure the model reads, and the tool is not run.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent, RunContext, Tool, tool
from juno_bind_trio.run import ToolCall, tool_call_receipt_key

pytestmark = pytest.mark.anyio

ABSENT = ["", "   ", "null", " null\n", "{}"]


def schema_tool(seen: list[dict[str, Any]]) -> Tool:
    async def handler(ctx: RunContext[Any], arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return "schema ran"

    return Tool.from_schema(
        name="from_schema",
        description=None,
        parameters={"type": "object", "properties": {}},
        handler=handler,
    )


@tool
async def typed(limit: int = 3) -> str:
    """Runs with its default."""
    return f"typed ran with {limit}"


async def test_no_arguments_however_sent_run_every_kind_of_tool() -> None:
    seen: list[dict[str, Any]] = []
    calls = []
    for index, raw in enumerate(ABSENT):
        calls.append(call(f"t{index}", "typed", raw))
        calls.append(call(f"s{index}", "from_schema", raw))
    model = ScriptedModel([Say(calls=calls), Say(text="done")])
    result = await Agent(model, tools=[typed, schema_tool(seen)]).run("go")
    answers = tool_answers(result.messages)
    for index in range(len(ABSENT)):
        assert answers[f"t{index}"] == "typed ran with 3"
        assert answers[f"s{index}"] == "schema ran"
    assert seen == [{}] * len(ABSENT)
    keys = {tool_call_receipt_key("r", call("c", "typed", raw)).args_hash for raw in ABSENT}
    assert len(keys) == 1


@pytest.mark.parametrize(
    ("raw", "found"),
    [("[1]", "got an array"), ("7", "got a JSON number"), ('{"limit": ', "not valid JSON")],
)
async def test_what_is_not_an_object_is_a_validation_failure_for_every_tool(
    raw: str, found: str
) -> None:
    seen: list[dict[str, Any]] = []
    model = ScriptedModel(
        [Say(calls=[call("t", "typed", raw), call("s", "from_schema", raw)]), Say(text="ok")]
    )
    result = await Agent(model, tools=[typed, schema_tool(seen)]).run("go")
    answers = tool_answers(result.messages)
    for call_id, name in (("t", "typed"), ("s", "from_schema")):
        assert answers[call_id]["kind"] == "validation"
        assert answers[call_id]["error"].startswith(f"invalid arguments for {name}: ")
        assert found in answers[call_id]["error"]
    assert seen == []


async def test_invoke_takes_the_call_or_its_raw_text() -> None:
    ctx: RunContext[None] = RunContext(
        deps=None,
        run_id="r",
        tool_call_id="c",
        tool_name="typed",
        iteration=1,
        chain=None,  # type: ignore[arg-type]
    )
    assert await typed.invoke(ctx, ToolCall("c", "typed", '{"limit": 5}')) == "typed ran with 5"
    assert await typed.invoke(ctx, " null ") == "typed ran with 3"
    with pytest.raises(TypeError, match=r"Tool.invoke: arguments must be a ToolCall or the raw"):
        await typed.invoke(ctx, {"limit": 5})  # type: ignore[arg-type]


def test_the_runs_own_context_has_no_idempotency_key() -> None:
    ctx: RunContext[None] = RunContext(
        deps=None,
        run_id="r",
        tool_call_id="",
        tool_name="",
        iteration=0,
        chain=None,  # type: ignore[arg-type]
    )
    with pytest.raises(UsageError, match=r"RunContext.idempotency_key: this context belongs to no"):
        ctx.idempotency_key  # noqa: B018
