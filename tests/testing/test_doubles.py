"""TestModel, FunctionModel and block_model_requests: an agent's unit tests in process."""

from __future__ import annotations

import datetime
import enum
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import anyio
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juno_bind_trio import UsageError
from juno_bind_trio.agent import (
    Agent,
    AgentEvent,
    TextEvent,
    ToolCallEndedEvent,
    tool,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import (
    FunctionModel,
    StreamResponse,
    TestModel,
    block_model_requests,
    open_fake_openai_server,
    value_from_schema,
)

pytestmark = pytest.mark.anyio


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: Annotated[str, pydantic.Field(min_length=3)]
    number: Annotated[int, pydantic.Field(gt=0, le=9999)]


class Order(pydantic.BaseModel):
    sku: Annotated[str, pydantic.Field(pattern=r"^[a-z]+$")]
    quantity: Annotated[int, pydantic.Field(ge=1, multiple_of=5)]
    ship_to: Address | None = None


def twenty_tools() -> list[Any]:
    """Twenty tools of different shapes, each recording that it ran."""
    ran: list[str] = []

    def record(name: str) -> str:
        ran.append(name)
        return f"{name} ok"

    @tool
    def t01(n: int) -> str:
        return record("t01")

    @tool
    def t02(x: float, y: Annotated[float, pydantic.Field(gt=1.5, lt=2.0)]) -> str:
        return record("t02")

    @tool
    def t03(text: Annotated[str, pydantic.Field(min_length=5, max_length=8)]) -> str:
        return record("t03")

    @tool
    def t04(flag: bool) -> str:
        return record("t04")

    @tool
    def t05(mode: Literal["fast", "slow"]) -> str:
        return record("t05")

    @tool
    def t06(colour: Colour) -> str:
        return record("t06")

    @tool
    def t07(when: datetime.datetime) -> str:
        return record("t07")

    @tool
    def t08(day: datetime.date) -> str:
        return record("t08")

    @tool
    def t09(ident: uuid.UUID) -> str:
        return record("t09")

    @tool
    def t10(tags: Annotated[list[str], pydantic.Field(min_length=2)]) -> str:
        return record("t10")

    @tool
    def t11(scores: dict[str, int]) -> str:
        return record("t11")

    @tool
    def t12(address: Address) -> str:
        return record("t12")

    @tool
    def t13(order: Order) -> str:
        return record("t13")

    @tool
    def t14(maybe: int | None = None) -> str:
        return record("t14")

    @tool
    def t15(pair: tuple[int, str]) -> str:
        return record("t15")

    @tool
    def t16(orders: list[Order]) -> str:
        return record("t16")

    @tool
    def t17(count: Annotated[int, pydantic.Field(ge=-10, le=-3)]) -> str:
        return record("t17")

    @tool
    def t18(either: int | str) -> str:
        return record("t18")

    @tool
    async def t19(site: pydantic.AnyUrl | None = None, limit: int = 3) -> str:
        return record("t19")

    @tool
    def t20() -> str:
        return record("t20")

    tools = [t01, t02, t03, t04, t05, t06, t07, t08, t09, t10]
    tools += [t11, t12, t13, t14, t15, t16, t17, t18, t19, t20]
    return tools


async def test_test_model_calls_every_tool_of_a_twenty_tool_agent_with_valid_arguments() -> None:
    model = TestModel()
    agent = Agent(model, tools=twenty_tools())
    ended: list[ToolCallEndedEvent] = []
    async with agent.open_run("exercise the tools") as run:
        async for event in run:
            if isinstance(event, ToolCallEndedEvent):
                ended.append(event)
    assert run.result is not None
    assert run.result.reason == "completed"
    assert isinstance(run.result.output, str)
    # Every tool ran once, each with arguments its own validation accepted.
    assert sorted(e.tool_name for e in ended) == [f"t{i:02d}" for i in range(1, 21)]
    failed = [e.content for e in ended if e.status != "finished"]
    assert [e.status for e in ended] == ["finished"] * 20, failed
    assert len(model.calls) == 20
    # The answer is each tool's answer by name.
    assert '"t13": "t13 ok"' in run.result.output


async def test_test_model_answers_with_a_valid_structured_output() -> None:
    agent = Agent(TestModel(), tools=twenty_tools()[:2], output_type=Order)
    result = await agent.run("order something")
    assert isinstance(result.output, Order)
    assert result.output.quantity % 5 == 0


async def test_test_model_chooses_tools_and_the_answer() -> None:
    tools = twenty_tools()
    model = TestModel(call_tools=["t01", "t05"], arguments={"t01": {"n": 41}}, text="All done.")
    events: list[AgentEvent] = []
    async with Agent(model, tools=tools).open_run("go") as run:
        async for event in run:
            events.append(event)
    assert run.result is not None
    assert run.result.output == "All done."
    assert model.calls == [("t01", {"n": 41}), ("t05", {"mode": "fast"})]
    # The answer streams word by word to the reader.
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "All done."


async def test_one_test_model_serves_concurrent_runs() -> None:
    model = TestModel()
    agent = Agent(model, tools=twenty_tools()[:3])
    outputs: list[str] = []

    async def one(i: int) -> None:
        result = await agent.run(f"run {i}")
        outputs.append(result.output)

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(one, i)
    assert len(outputs) == 10
    assert len(set(outputs)) == 1
    assert len(model.calls) == 30


def _first_turn(tools: list[dict[str, Any]]) -> ModelTurn:
    return ModelTurn(
        iteration=1,
        turn_id="r:1",
        messages=[{"role": "user", "content": "go"}],
        tools=tools,
        text_stream=None,
        emit=lambda event: None,
    )


def _definition(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "look", "parameters": parameters}}


async def test_test_model_generates_again_for_a_schema_edited_in_place() -> None:
    # The arguments are made once per schema; an edit to the same dict is seen.
    model = TestModel()
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 3}},
    }
    definition = _definition(parameters)
    first = await model(_first_turn([definition]))
    parameters["properties"]["n"]["minimum"] = 7
    second = await model(_first_turn([definition]))
    third = await model(_first_turn([definition]))
    assert [c["function"]["arguments"] for c in first.tool_calls] == ['{"n": 3}']
    assert [c["function"]["arguments"] for c in second.tool_calls] == ['{"n": 7}']
    assert third.tool_calls == second.tool_calls
    assert model.calls == [("look", {"n": 3}), ("look", {"n": 7}), ("look", {"n": 7})]


async def test_test_model_calls_hold_values_of_their_own() -> None:
    # Editing what TestModel.calls recorded never changes a later run's arguments,
    # for a flat value (a shallow copy) and a nested one (a deep one).
    for parameters in (
        {"type": "object", "properties": {"path": {"type": "string"}}},
        {
            "type": "object",
            "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
        },
    ):
        model = TestModel()
        definition = _definition(parameters)
        await model(_first_turn([definition]))
        recorded = model.calls[0][1]
        expected = dict(recorded)
        recorded.clear()
        again = await model(_first_turn([definition]))
        assert model.calls[1][1] == expected
        assert again.tool_calls[0]["function"]["arguments"] == json.dumps(expected)
        if "paths" in expected:
            model.calls[1][1]["paths"].append("b")
            await model(_first_turn([definition]))
            assert model.calls[2][1] == expected


def test_test_model_refuses_bad_options_by_name() -> None:
    with pytest.raises(TypeError, match="call_tools"):
        TestModel(call_tools="t01")
    with pytest.raises(TypeError, match="arguments"):
        TestModel(arguments={"t01": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="text"):
        TestModel(text=3)  # type: ignore[arg-type]


# --- value_from_schema: a value every schema pydantic writes accepts ----------------------

_leaf_types: st.SearchStrategy[Any] = st.one_of(
    st.just(int),
    st.just(float),
    st.just(bool),
    st.just(str),
    st.just(datetime.date),
    st.just(uuid.UUID),
    st.just(Colour),
    st.builds(
        lambda lo, span: Annotated[int, pydantic.Field(ge=lo, le=lo + span)],
        st.integers(-50, 50),
        st.integers(0, 5),
    ),
    st.builds(
        lambda lo, span: Annotated[int, pydantic.Field(gt=lo, lt=lo + 2 + span)],
        st.integers(-50, 50),
        st.integers(0, 5),
    ),
    st.builds(
        lambda lo, span: Annotated[float, pydantic.Field(gt=lo, lt=lo + span)],
        st.floats(-100, 100, allow_nan=False),
        st.floats(0.01, 10, allow_nan=False),
    ),
    st.builds(
        lambda lo, extra: Annotated[str, pydantic.Field(min_length=lo, max_length=lo + extra)],
        st.integers(0, 6),
        st.integers(0, 3),
    ),
    st.builds(lambda m: Annotated[int, pydantic.Field(ge=1, multiple_of=m)], st.integers(1, 7)),
    st.sampled_from([Literal["a", "b"], Literal[3], Literal[True]]),
)


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        children.map(lambda t: list[t]),  # type: ignore[valid-type]
        children.map(lambda t: t | None),
        children.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        st.tuples(children, children).map(lambda p: tuple[p[0], p[1]]),  # type: ignore[valid-type]
        st.tuples(children, st.integers(1, 3)).map(
            lambda p: Annotated[list[p[0]], pydantic.Field(min_length=p[1])]  # type: ignore[valid-type]
        ),
        st.lists(children, min_size=1, max_size=3).map(
            lambda fields: pydantic.create_model(  # type: ignore[call-overload]
                "Generated", **{f"f{i}": (t, ...) for i, t in enumerate(fields)}
            )
        ),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_leaf_types, _compound, max_leaves=6))
def test_value_from_schema_is_accepted_by_the_type_that_wrote_the_schema(kind: Any) -> None:
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(kind)
    schema = adapter.json_schema()
    value = value_from_schema(schema)
    adapter.validate_python(value)
    assert value_from_schema(schema) == value  # the same value every time


def test_value_from_schema_says_which_pattern_it_cannot_meet() -> None:
    with pytest.raises(ValueError, match=r"\^x\{3\}\$"):
        value_from_schema({"type": "string", "pattern": r"^x{3}$"})
    with pytest.raises(ValueError, match="#/\\$defs/Missing"):
        value_from_schema({"$ref": "#/$defs/Missing"})


# --- FunctionModel ------------------------------------------------------------------------


async def test_function_model_takes_plain_async_and_streaming_functions() -> None:
    def plain(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content=f"plain {len(turn.messages)}")

    async def awaited(turn: ModelTurn) -> ModelTurnResult:
        await anyio.sleep(1)
        return ModelTurnResult(content="awaited")

    async def streamed(turn: ModelTurn) -> AsyncIterator[str | ModelTurnResult]:
        for piece in ("one ", "two ", "three"):
            await anyio.sleep(0.1)
            yield piece
        yield ModelTurnResult(output_tokens=3)

    assert (await Agent(FunctionModel(plain)).run("hi")).output == "plain 1"
    assert (await Agent(FunctionModel(awaited)).run("hi")).output == "awaited"
    seen: list[str] = []
    async with Agent(FunctionModel(streamed)).open_run("hi") as run:
        async for event in run:
            if isinstance(event, TextEvent):
                seen.append(event.text)
    assert run.result is not None
    assert run.result.output == "one two three"
    assert seen == ["one ", "two ", "three"]
    assert run.result.stats.output_tokens == 3


async def test_function_model_drives_tools_from_the_transcript() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    def model(turn: ModelTurn) -> ModelTurnResult:
        last = turn.messages[-1]
        if last["role"] == "tool":
            return ModelTurnResult(content=f"The sum is {last['content']}.")
        arguments = '{"a": 2, "b": 3}'
        call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": arguments}}
        return ModelTurnResult(tool_calls=[call])

    result = await Agent(FunctionModel(model), tools=[add]).run("add 2 and 3")
    assert result.output == "The sum is 5."


async def test_function_model_names_what_it_got_wrong() -> None:
    def wrong(turn: ModelTurn) -> Any:
        return "not a result"

    with pytest.raises(TypeError, match="ModelTurnResult, got 'not a result'"):
        await Agent(FunctionModel(wrong)).run("hi")
    with pytest.raises(TypeError, match="fn must be a function"):
        FunctionModel(3)  # type: ignore[arg-type]


# --- block_model_requests -----------------------------------------------------------------


async def test_a_real_client_request_inside_the_block_is_a_usage_error() -> None:
    async with open_fake_openai_server(lambda request: StreamResponse.of_text("real")) as server:
        agent = Agent("openai:gpt-test", base_url=server.base_url, api_key="k")
        async with agent:
            with block_model_requests():
                blocked = "'gpt-test' was made inside block_model_requests"
                with pytest.raises(UsageError, match=blocked):
                    await agent.run("hi")
                # In-process models are not requests.
                assert (await Agent(TestModel(text="fine")).run("hi")).output == "fine"
            assert server.requests == []
            # Outside the block the same agent reaches the server.
            assert (await agent.run("hi")).output == "real"
        assert len(server.requests) == 1


async def test_the_block_covers_every_provider_adapter_not_only_openai() -> None:
    from juno_bind_trio.testing import open_fake_anthropic_server

    async with open_fake_anthropic_server(lambda request: StreamResponse.of_text("real")) as server:
        agent = Agent("anthropic:claude-test", base_url=server.base_url, api_key="k")
        async with agent:
            refused = pytest.raises(UsageError, match="'claude-test' was made inside")
            with block_model_requests(), refused:
                await agent.run("hi")
            assert server.requests == []
            assert (await agent.run("hi")).output == "real"
        assert len(server.requests) == 1


def test_the_block_nests_and_lifts(block_model_requests: None) -> None:
    # Here the fixture of the same name holds a block for the whole test.
    from juno_bind_trio import _blocking

    with pytest.raises(UsageError):
        _blocking.check_model_request("OpenAI", "m")
    from juno_bind_trio.testing import block_model_requests as blocked

    with blocked(), blocked():
        pass
    with pytest.raises(UsageError):
        _blocking.check_model_request("OpenAI", "m")


def test_no_block_outside_the_fixture() -> None:
    from juno_bind_trio import _blocking

    _blocking.check_model_request("OpenAI", "m")  # no block: returns
