"""Agent.run with a scripted model: typed tools, validation, context, results, lineage."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import anyio
import pydantic
import pytest
from agent_scripts import Say, ScriptedModel, call, tool_answers

from juno_bind_trio import RunContext, ToolFailureError, UsageError
from juno_bind_trio.agent import Agent, AgentResult, tool
from juno_bind_trio.loop import ToolCallOutcome
from juno_bind_trio.run import ChainRule, tool_call_args_hash

pytestmark = pytest.mark.anyio


async def test_a_run_calls_typed_tools_and_returns_the_answer() -> None:
    ran: list[tuple[str, int]] = []

    @tool
    async def forecast(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        ran.append((city, days))
        return f"{city}: sunny for {days} days"

    model = ScriptedModel(
        [Say(calls=[call("c1", "forecast", city="Lisbon", days=2)]), Say(text="Sunny.")]
    )
    agent = Agent(model, tools=[forecast], instructions="Be brief.")
    result = await agent.run("Weather?", run_id="r1")

    assert isinstance(result, AgentResult)
    assert result.output == "Sunny."
    assert result.reason == "completed"
    assert result.run_id == "r1"
    assert result.iterations == 2
    assert result.stats.tool_calls == 1
    assert ran == [("Lisbon", 2)]
    assert result.messages[0] == {"role": "system", "content": "Be brief."}
    assert result.messages[1] == {"role": "user", "content": "Weather?"}
    assert tool_answers(result.messages) == {"c1": "Lisbon: sunny for 2 days"}
    json.dumps(result.messages)  # JSON-serialisable as it is
    # The model was offered the tool with its schema.
    (offered,) = model.tools_seen[0]
    assert offered["function"]["name"] == "forecast"
    assert offered["function"]["description"] == "Forecast for a city."


async def test_arguments_that_do_not_validate_never_reach_the_tool_and_the_model_reads_why() -> (
    None
):
    ran: list[Any] = []

    @tool
    async def book(city: str, nights: int, breakfast: bool = False) -> str:
        ran.append(city)
        return "booked"

    model = ScriptedModel(
        [
            Say(calls=[call("c1", "book", city=3, nights="many", pool=True)]),
            Say(calls=[call("c2", "book", '{"city": "Rome"')]),  # not JSON
            Say(calls=[call("c3", "book", city="Rome", nights=2)]),
            Say(text="Booked."),
        ]
    )
    result = await Agent(model, tools=[book]).run("Book Rome")
    answers = tool_answers(result.messages)
    assert ran == ["Rome"]  # only the valid call ran
    first = answers["c1"]
    assert first["success"] is False
    assert first["kind"] == "validation"
    # Every bad field, named, with why.
    assert "city: Input should be a valid string (got 3)" in first["error"]
    assert "nights: Input should be a valid integer" in first["error"]
    assert "(got 'many')" in first["error"]
    assert "pool: no such parameter" in first["error"]
    assert "breakfast" not in first["error"]
    assert answers["c2"]["kind"] == "validation"
    assert "not valid JSON" in answers["c2"]["error"]
    assert answers["c3"] == "booked"
    # The model saw the failure on its next turn.
    assert any(m.get("tool_call_id") == "c1" for m in model.seen[1])
    assert result.stats.tool_failures == 2


async def test_a_missing_field_is_named() -> None:
    @tool
    async def book(city: str, nights: int) -> str:
        return "booked"

    model = ScriptedModel([Say(calls=[call("c1", "book", city="Rome")]), Say(text="ok")])
    result = await Agent(model, tools=[book]).run("Book")
    assert "nights: required, but missing" in tool_answers(result.messages)["c1"]["error"]


class Room(pydantic.BaseModel):
    beds: int = 1
    view: str = "garden"


async def test_null_for_an_optional_parameter_means_not_given() -> None:
    """What OpenAI strict mode sends for an optional parameter left out."""
    seen: list[Any] = []

    @tool
    async def book(city: str, nights: int = 1, room: Room | None = None) -> str:
        seen.append((city, nights, room))
        return "booked"

    model = ScriptedModel(
        [
            Say(
                calls=[
                    call("c1", "book", city="Rome", nights=None, room={"beds": 2, "view": None}),
                    call("c2", "book", city=None),
                ]
            ),
            Say(text="ok"),
        ]
    )
    result = await Agent(model, tools=[book], strict=True).run("Book")
    assert seen == [("Rome", 1, Room(beds=2, view="garden"))]
    # A required parameter's null is still wrong, and said so.
    assert "city: Input should be a valid string" in tool_answers(result.messages)["c2"]["error"]


@dataclasses.dataclass
class Bank:
    owner: str


async def test_run_context_is_injected_and_left_out_of_the_schema() -> None:
    contexts: list[RunContext[Bank]] = []

    @tool
    async def balance(ctx: RunContext[Bank], account: str) -> int:
        contexts.append(ctx)
        return 42

    assert "ctx" not in balance.parameters["properties"]
    model = ScriptedModel(
        [
            Say(calls=[call("c1", "balance", '{"account": "main"}')]),
            Say(calls=[call("c2", "balance", '{ "account" :  "main" }')]),
            Say(text="42"),
        ]
    )
    bank = Bank("ana")
    agent = Agent(model, tools=[balance], deps_type=Bank, name="teller")
    await agent.run("Balance?", deps=bank, run_id="run-7")
    first, second = contexts
    assert first.deps is bank
    assert (first.run_id, first.tool_call_id, first.tool_name, first.iteration) == (
        "run-7",
        "c1",
        "balance",
        1,
    )
    assert second.iteration == 2
    assert first.chain.run_id == "run-7"
    assert first.chain.agent == "teller"
    assert first.chain.depth == 0
    # The idempotency key: from the run, the call and the *parsed* arguments.
    expected = tool_call_args_hash(["run-7", "c1", tool_call_args_hash({"account": "main"})])
    assert first.idempotency_key == expected
    assert second.idempotency_key != first.idempotency_key  # another call id
    again = RunContext(
        deps=bank,
        run_id="run-7",
        tool_call_id="c1",
        tool_name="balance",
        iteration=1,
        chain=first.chain,
        arguments='{"account":"main"}',
    )
    assert again.idempotency_key == first.idempotency_key  # whitespace does not matter


async def test_deps_of_the_wrong_type_are_refused_before_the_run() -> None:
    agent = Agent(ScriptedModel([]), deps_type=Bank)
    with pytest.raises(TypeError, match=r"Agent.run: deps must be a Bank"):
        await agent.run("x", deps="not a bank")  # type: ignore[arg-type]


class Weather(pydantic.BaseModel):
    city: str
    celsius: float


@dataclasses.dataclass
class Wind:
    knots: int


async def test_return_values_become_tool_messages() -> None:
    @tool
    async def as_text() -> str:
        return "plain text"

    @tool
    async def as_model() -> Weather:
        return Weather(city="Oslo", celsius=-3.5)

    @tool
    async def as_dataclass() -> Wind:
        return Wind(12)

    @tool
    async def as_list() -> list[int]:
        return [1, 2]

    @tool
    async def as_outcome(ctx: RunContext[None]) -> ToolCallOutcome:
        return ToolCallOutcome.from_content(ctx.tool_call_id, "full control")

    @tool
    async def as_none() -> None:
        return None

    names = ["as_text", "as_model", "as_dataclass", "as_list", "as_outcome", "as_none"]
    model = ScriptedModel([Say(calls=[call(f"c_{n}", n) for n in names]), Say(text="done")])
    agent = Agent(model, tools=[as_text, as_model, as_dataclass, as_list, as_outcome, as_none])
    result = await agent.run("go")
    contents = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert contents == {
        "c_as_text": "plain text",
        "c_as_model": '{"city":"Oslo","celsius":-3.5}',
        "c_as_dataclass": '{"knots":12}',
        "c_as_list": "[1,2]",
        "c_as_outcome": "full control",
        "c_as_none": "null",
    }


async def test_failures_keep_their_kind_and_other_exceptions_name_their_type() -> None:
    @tool
    async def lookup(city: str) -> str:
        if city == "Atlantis":
            raise ToolFailureError("not_found", "no such city")
        return {"Paris": "x"}[city]  # KeyError for anything else

    @tool
    async def unserialisable() -> object:
        return object()

    model = ScriptedModel(
        [
            Say(
                calls=[
                    call("c1", "lookup", city="Atlantis"),
                    call("c2", "lookup", city="Lima"),
                    call("c3", "unserialisable"),
                ]
            ),
            Say(text="ok"),
        ]
    )
    result = await Agent(model, tools=[lookup, unserialisable]).run("go")
    answers = tool_answers(result.messages)
    assert answers["c1"] == {"success": False, "kind": "not_found", "error": "no such city"}
    assert answers["c2"] == {"success": False, "error": "KeyError: 'Lima'"}
    assert answers["c3"]["kind"] == "system"
    assert "cannot be written as JSON" in answers["c3"]["error"]


async def test_a_usage_error_in_a_tool_ends_the_run_instead_of_reaching_the_model() -> None:
    @tool
    async def misconfigured() -> str:
        raise UsageError("the host forgot to configure this")

    model = ScriptedModel([Say(calls=[call("c1", "misconfigured")]), Say(text="never")])
    with pytest.raises(UsageError, match="forgot"):
        await Agent(model, tools=[misconfigured]).run("go")
    assert len(model.turns) == 1  # no second model call


async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    import threading

    threads: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        threads.append(threading.get_ident())
        return a + b

    model = ScriptedModel([Say(calls=[call("c1", "add", a=2, b=3)]), Say(text="5")])
    result = await Agent(model, tools=[add]).run("2+3")
    assert tool_answers(result.messages) == {"c1": 5}
    assert threads != [threading.get_ident()]


async def test_a_plain_function_in_tools_becomes_a_tool_and_an_unknown_name_is_not_found() -> None:
    async def shout(text: str) -> str:
        return text.upper()

    model = ScriptedModel(
        [Say(calls=[call("c1", "shout", text="hi"), call("c2", "whisper", text="hi")]), Say("ok")]
    )
    result = await Agent(model, tools=[shout]).run("go")
    answers = tool_answers(result.messages)
    assert answers["c1"] == "HI"
    assert answers["c2"]["kind"] == "not_found"
    assert "the tools are: shout" in answers["c2"]["error"]


async def test_serial_tools_run_one_at_a_time_before_the_rest() -> None:
    order: list[str] = []

    @tool(serial=True)
    async def first() -> str:
        order.append("first:start")
        await anyio.sleep(1)
        order.append("first:end")
        return "1"

    @tool
    async def other(n: int) -> str:
        order.append(f"other{n}")
        return "x"

    model = ScriptedModel(
        [
            Say(calls=[call("c1", "other", n=1), call("c2", "first"), call("c3", "other", n=2)]),
            Say("ok"),
        ]
    )
    await Agent(model, tools=[first, other]).run("go")
    assert order[:2] == ["first:start", "first:end"]
    assert sorted(order[2:]) == ["other1", "other2"]


async def test_message_history_continues_a_conversation_after_healing_it() -> None:
    model = ScriptedModel([Say(text="Hello, Ana.")])
    agent = Agent(model, instructions="Be kind.")
    first = await agent.run("I am Ana.")
    # A transcript cut short: a call with no answer.
    broken = [
        *first.messages,
        {"role": "user", "content": "Look something up."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c9", "lookup", q="x")],
        },
    ]
    model.turns.append(Say(text="You are Ana."))
    second = await agent.run("Who am I?", message_history=broken)
    assert second.output == "You are Ana."
    sent = model.seen[1]
    # Instructions once, the history in order, the unanswered call answered, the prompt last.
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert json.loads(sent[5]["content"])["kind"] == "interrupted"
    assert sent[-1] == {"role": "user", "content": "Who am I?"}


async def test_a_sub_agent_run_descends_from_the_calling_tool() -> None:
    chains: list[Any] = []

    @tool
    async def note(ctx: RunContext[None]) -> str:
        chains.append(ctx.chain)
        return "noted"

    child_model = ScriptedModel([Say(calls=[call("k1", "note")]), Say(text="child done")])
    child = Agent(child_model, tools=[note], name="child")

    @tool
    async def delegate(ctx: RunContext[None], task: str) -> str:
        result = await child.run(task, parent=ctx, run_id="child-run")
        return result.output

    parent_model = ScriptedModel(
        [Say(calls=[call("p1", "delegate", task="do it")]), Say(text="parent done")]
    )
    parent = Agent(parent_model, tools=[delegate], name="parent")
    result = await parent.run("go", run_id="parent-run")
    assert tool_answers(result.messages) == {"p1": "child done"}
    (chain,) = chains
    assert [(link.run_id, link.agent) for link in chain.links] == [
        ("parent-run", "parent"),
        ("child-run", "child"),
    ]


async def test_a_sub_agent_refused_by_the_chain_rule_reaches_the_model_as_a_conflict() -> None:
    child = Agent(ScriptedModel([]), name="child", chain_rule=ChainRule(max_depth=0))

    @tool
    async def delegate(ctx: RunContext[None]) -> str:
        return (await child.run("x", parent=ctx)).output

    model = ScriptedModel([Say(calls=[call("p1", "delegate")]), Say(text="ok")])
    result = await Agent(model, tools=[delegate]).run("go")
    answer = tool_answers(result.messages)["p1"]
    assert answer["kind"] == "conflict"
    assert "at most 0 deep" in answer["error"]


async def test_max_iterations_ends_the_run_with_the_last_text() -> None:
    @tool
    async def again() -> str:
        return "again"

    model = ScriptedModel([Say(text=f"t{i}", calls=[call(f"c{i}", "again")]) for i in range(3)])
    result = await Agent(model, tools=[again], max_iterations=3).run("loop")
    assert result.reason == "max_iterations"
    assert result.output == "t2"


async def test_run_arguments_are_checked_at_the_boundary() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(TypeError, match=r"Agent\.run: prompt must be a str"):
        await agent.run(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Agent\.run: message_history must be a list"):
        await agent.run("x", message_history="hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Agent\.run: stop must be None or a CancelScope"):
        await agent.run("x", stop=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Agent\.run: parent must be the RunContext"):
        await agent.run("x", parent="p")  # type: ignore[arg-type]


async def test_run_sync_refuses_to_run_inside_a_running_loop() -> None:
    with pytest.raises(UsageError, match=r"use `await agent\.run"):
        Agent(ScriptedModel([])).run_sync("x")


def test_run_sync_runs_on_the_backend_asked_for(backend: Any) -> None:
    import sniffio

    libraries: list[str] = []

    @tool
    async def which() -> str:
        libraries.append(sniffio.current_async_library())
        return "ok"

    model = ScriptedModel([Say(calls=[call("c1", "which")]), Say(text="done")])
    result = Agent(model, tools=[which]).run_sync("go", backend=backend)
    assert result.output == "done"
    assert libraries == [backend]


class Shelf:
    """A toolset whose tools change between runs (as an MCP server's may)."""

    def __init__(self, *tools: Any) -> None:
        self.current = list(tools)

    @property
    def tools(self) -> list[Any]:
        return self.current


async def test_a_toolset_is_read_at_the_start_of_each_run() -> None:
    @tool
    async def alpha() -> str:
        return "a"

    @tool
    async def beta() -> str:
        return "b"

    shelf = Shelf(alpha)
    model = ScriptedModel(
        [
            Say(calls=[call("c1", "alpha"), call("c2", "beta")]),
            Say(text="one"),
            Say(calls=[call("c3", "beta")]),
            Say(text="two"),
        ]
    )
    agent = Agent(model, tools=[shelf])
    first = await agent.run("go")
    assert tool_answers(first.messages)["c1"] == "a"
    assert tool_answers(first.messages)["c2"]["kind"] == "not_found"
    assert [t["function"]["name"] for t in model.tools_seen[0]] == ["alpha"]
    shelf.current = [alpha, beta]
    second = await agent.run("again")
    assert tool_answers(second.messages)["c3"] == "b"
    assert [t["function"]["name"] for t in model.tools_seen[2]] == ["alpha", "beta"]


async def test_a_toolset_clashing_with_a_tool_is_a_usage_error_at_run_start() -> None:
    @tool
    async def alpha() -> str:
        return "a"

    async def another() -> str:
        return "b"

    model = ScriptedModel([Say(text="never")])
    agent = Agent(model, tools=[alpha, Shelf(tool(another, name="alpha"))])
    with pytest.raises(UsageError, match="two tools are named 'alpha'"):
        await agent.run("go")
    assert model.seen == []  # refused before the model was called


async def test_the_agents_text_sink_gets_every_turn_and_open_run_still_streams() -> None:
    from juno_bind_trio.completion import ListSink, TextEvent

    sink = ListSink()
    model = ScriptedModel([Say(text="Hello there", chunks=["Hello", " there"])])
    agent = Agent(model, text_sink=sink)
    read: list[str] = []
    async with agent.open_run("hi", run_id="r") as run:
        async for event in run:
            if isinstance(event, TextEvent):
                read.append(event.text)
    assert "".join(read) == "Hello there"
    assert [e.text for e in sink.events if isinstance(e, TextEvent)] == ["Hello", " there"]
    assert {e.turn_id for e in sink.events} == {"r:1"}


def test_run_sync_calls_synchronous_instructions_once_per_run() -> None:
    calls: list[object] = []

    def instructions(deps: object) -> str:
        calls.append(deps)
        return "Be brief."

    agent = Agent(ScriptedModel([Say(text="done")]), instructions=instructions)
    assert agent.run_sync("go", deps="d").output == "done"
    assert calls == ["d"]
