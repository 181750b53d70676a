"""Tools chosen per step: tool(fn, prepare=...) and Agent(prepare_tools=...).

A hidden tool is never offered, and a call of it is answered not_found without
running it; through TestModel, FunctionModel and the real SDK on the fake server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent, RunContext, ToolDefinition, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import FunctionModel, StreamResponse, TestModel, open_fake_openai_server

pytestmark = pytest.mark.anyio

NAMES = ("alpha", "beta", "gamma", "delta")


def _offered(turn: ModelTurn) -> list[str]:
    return [t["function"]["name"] for t in turn.tools]


def _call(call_id: str, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments or {})},
    }


def _answers(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        m["tool_call_id"]: json.loads(m["content"]) if m["content"].startswith("{") else m
        for m in messages
        if m["role"] == "tool"
    }


@settings(max_examples=40)
@given(
    schedule=st.lists(
        st.tuples(
            st.frozensets(st.sampled_from(NAMES)),  # the tools visible at this step
            st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),  # what the model calls
        ),
        min_size=1,
        max_size=5,
    ),
    whole=st.booleans(),
)
def test_a_hidden_tool_is_never_offered_and_its_call_is_not_found(
    backend: str, schedule: list[tuple[frozenset[str], list[str]]], whole: bool
) -> None:
    ran: list[tuple[int, str]] = []
    seen: list[list[str]] = []
    schedule = [*schedule, (frozenset(NAMES), [])]  # the last step answers

    def visible(ctx: RunContext[None], definition: ToolDefinition) -> ToolDefinition | None:
        assert ctx.tool_name == definition.name
        return definition if definition.name in schedule[ctx.iteration - 1][0] else None

    async def visible_async(ctx: RunContext[None], defs: list[ToolDefinition]) -> list[Any]:
        return [d for d in defs if d.name in schedule[ctx.iteration - 1][0]]

    def make(name: str) -> Any:
        def run(ctx: RunContext[None]) -> str:
            ran.append((ctx.iteration, name))
            return name

        return tool(run, name=name, prepare=None if whole else visible)

    def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(_offered(turn))
        step = turn.iteration - 1
        if step == len(schedule) - 1:
            return ModelTurnResult(content="done")
        calls = [_call(f"c{step}_{i}", name) for i, name in enumerate(schedule[step][1])]
        return ModelTurnResult(tool_calls=calls)

    agent = Agent(
        FunctionModel(model),
        tools=[make(n) for n in NAMES],
        prepare_tools=visible_async if whole else None,
        max_iterations=len(schedule) + 1,
    )
    result = run_on(backend, agent.run, "go")
    assert result.output == "done"
    answers = _answers(result.messages)
    for step, (shown, called) in enumerate(schedule):
        # Offered: exactly the visible tools, in the agent's order.
        assert seen[step] == [n for n in NAMES if n in shown]
        for i, name in enumerate(called):
            answer = answers[f"c{step}_{i}"]
            if name in shown:
                assert (step + 1, name) in ran
            else:
                assert answer["success"] is False
                assert answer["kind"] == "not_found"
                assert (step + 1, name) not in ran
    hidden_runs = [(it, n) for it, n in ran if n not in schedule[it - 1][0]]
    assert hidden_runs == []


async def test_test_model_calls_only_the_tools_offered() -> None:
    @tool(prepare=lambda ctx, d: None)
    def secret() -> str:
        return "never"

    @tool
    def public() -> str:
        return "ok"

    model = TestModel()
    result = await Agent(model, tools=[secret, public]).run("hi")
    assert [name for name, _ in model.calls] == ["public"]
    assert "secret" not in result.output


async def test_prepare_changes_the_description_and_schema_sent_and_sees_deps() -> None:
    async def narrow(ctx: RunContext[str], definition: ToolDefinition) -> ToolDefinition:
        schema = dict(definition.parameters_json_schema)
        schema["properties"] = {"city": {"type": "string", "enum": [ctx.deps]}}
        return definition.replace(description=f"Only {ctx.deps}.", parameters_json_schema=schema)

    @tool(prepare=narrow)
    def weather(city: str) -> str:
        """The weather."""
        return f"sunny in {city}"

    model = TestModel()
    agent = Agent(model, tools=[weather], deps_type=str, strict=True)
    sent: list[Any] = []

    async def spy(turn: ModelTurn) -> ModelTurnResult:
        sent.append(turn.tools)
        return await model(turn)

    with agent.override(model=spy):
        result = await agent.run("hi", deps="Lisbon")
    function = sent[0][0]["function"]
    assert function["description"] == "Only Lisbon."
    assert function["parameters"]["properties"]["city"]["enum"] == ["Lisbon"]
    assert function["strict"] is True  # rewritten into the agent's dialect again
    assert function["parameters"]["additionalProperties"] is False
    assert "sunny in Lisbon" in result.output


async def test_prepare_tools_orders_and_filters_the_whole_list() -> None:
    def answering(name: str) -> Any:
        return tool(lambda: name, name=name)

    tools = [answering(n) for n in NAMES]
    model = TestModel()
    agent = Agent(model, tools=tools, prepare_tools=lambda ctx, defs: list(reversed(defs))[:2])
    offered: list[list[str]] = []

    async def spy(turn: ModelTurn) -> ModelTurnResult:
        offered.append(_offered(turn))
        return await model(turn)

    with agent.override(model=spy):
        await agent.run("hi")
    assert offered[0] == ["delta", "gamma"]


async def test_the_output_tool_is_always_offered_after_the_prepared_ones() -> None:
    import pydantic

    class Answer(pydantic.BaseModel):
        value: int

    from juno_bind_trio.agent import ToolOutput

    offered: list[list[str]] = []
    model = TestModel()

    async def spy(turn: ModelTurn) -> ModelTurnResult:
        offered.append(_offered(turn))
        return await model(turn)

    agent = Agent(
        spy,
        tools=[tool(lambda: "x", name="x")],
        output_type=ToolOutput(Answer),
        prepare_tools=lambda ctx, defs: [],
    )
    await agent.run("hi")
    assert offered[0] == ["final_result"]


@pytest.mark.parametrize(
    ("prepare", "whole", "message"),
    [
        (lambda ctx, d: "yes", None, "must return a ToolDefinition or None"),
        (
            lambda ctx, d: ToolDefinition(
                name="other", description=None, parameters_json_schema={"type": "object"}
            ),
            None,
            "renamed it to 'other'",
        ),
        (None, lambda ctx, defs: "all", "must return a list of ToolDefinitions"),
        (None, lambda ctx, defs: [*defs, *defs], "offered 'probe' twice"),
        (
            lambda ctx, d: None,
            lambda ctx, defs: [
                ToolDefinition(name="probe", description=None, parameters_json_schema={})
            ],
            "which it was not given",
        ),
        (
            lambda ctx, d: d.replace(parameters_json_schema={"type": "object", "$ref": 3}),
            None,
            "cannot be expressed",
        ),
    ],
)
async def test_a_bad_preparation_is_a_usage_error_and_nothing_is_sent(
    prepare: Any, whole: Any, message: str
) -> None:
    requests: list[ModelTurn] = []

    def model(turn: ModelTurn) -> ModelTurnResult:
        requests.append(turn)
        return ModelTurnResult(content="no")

    agent = Agent(
        FunctionModel(model),
        tools=[tool(lambda: "p", name="probe", prepare=prepare)],
        prepare_tools=whole,
    )
    with pytest.raises(UsageError, match=message):
        await agent.run("hi")
    assert requests == []


def test_prepare_must_be_a_function() -> None:
    with pytest.raises(TypeError, match="prepare must be a function"):
        tool(lambda: 1, name="x", prepare=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="prepare_tools must be a function"):
        Agent(TestModel(), prepare_tools="all")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolDefinition: parameters_json_schema"):
        ToolDefinition(name="x", description=None, parameters_json_schema=[])  # type: ignore[arg-type]


async def test_through_the_real_sdk_a_hidden_tool_is_not_sent_and_its_call_not_run() -> None:
    ran: list[str] = []

    def only_after_login(ctx: RunContext[None], d: ToolDefinition) -> ToolDefinition | None:
        return d if ctx.iteration > 1 else None

    @tool(prepare=only_after_login)
    def delete_account() -> str:
        ran.append("delete")
        return "deleted"

    @tool
    def login() -> str:
        ran.append("login")
        return "logged in"

    script = [
        # Step 1: the model calls both, one of them not offered.
        StreamResponse.of_tool_calls(("c1", "login", "{}"), ("c2", "delete_account", "{}")),
        StreamResponse.of_tool_calls(("c3", "delete_account", "{}")),
        StreamResponse.of_text("done"),
    ]
    async with open_fake_openai_server(script) as server:
        agent = Agent(
            "openai:juno", base_url=server.base_url, api_key="k", tools=[login, delete_account]
        )
        result = await agent.run("close my account")
        await agent.aclose()
        bodies = [r.json for r in server.requests]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["login"]
    assert [t["function"]["name"] for t in bodies[1]["tools"]] == ["login", "delete_account"]
    assert ran == ["login", "delete"]
    answers = _answers(result.messages)
    assert answers["c2"]["kind"] == "not_found"
    assert "at this step" in answers["c2"]["error"]
    assert result.output == "done"


def _properties(turn: ModelTurn, name: str) -> list[str]:
    (found,) = [t for t in turn.tools if t["function"]["name"] == name]
    return sorted(found["function"]["parameters"]["properties"])


@settings(max_examples=25, deadline=None)
@given(edits=st.lists(st.booleans(), min_size=1, max_size=6), whole=st.booleans())
def test_a_schema_edited_in_place_changes_only_its_own_step(
    backend: str, edits: list[bool], whole: bool
) -> None:
    # A sync prepare (or prepare_tools) deletes a property from the schema it was
    # handed, in place, on some steps: that step offers the narrowed schema; every
    # other step, and the tool itself, keep the whole one.
    seen: list[list[str]] = []

    def narrow(definition: ToolDefinition, step: int) -> ToolDefinition:
        if step <= len(edits) and edits[step - 1]:
            del definition.parameters_json_schema["properties"]["limit"]
            definition.parameters_json_schema.get("required", []).clear()
        return definition

    def one(ctx: RunContext[None], definition: ToolDefinition) -> ToolDefinition:
        return narrow(definition, ctx.iteration)

    def every(ctx: RunContext[None], definitions: list[ToolDefinition]) -> list[ToolDefinition]:
        return [narrow(d, ctx.iteration) if d.name == "find" else d for d in definitions]

    @tool(prepare=None if whole else one)
    def find(query: str, limit: int) -> str:
        return query * limit

    def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(_properties(turn, "find"))
        if turn.iteration <= len(edits):
            call = _call(f"c{turn.iteration}", "find", {"query": "a", "limit": 2})
            return ModelTurnResult(tool_calls=[call])
        return ModelTurnResult(content="done")

    before = json.dumps(find.parameters, sort_keys=True)
    agent = Agent(
        FunctionModel(model),
        tools=[find],
        prepare_tools=every if whole else None,
        max_iterations=len(edits) + 1,
    )
    result = run_on(backend, agent.run, "go")
    assert result.output == "done"
    expected = [["query"] if edited else ["limit", "query"] for edited in edits]
    assert seen == [*expected, ["limit", "query"]]
    assert json.dumps(find.parameters, sort_keys=True) == before
    # The tool still validates against its own signature: every call ran.
    assert all(m["content"] == "aa" for m in result.messages if m["role"] == "tool")
