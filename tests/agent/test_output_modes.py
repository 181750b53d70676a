"""Output modes through the real openai SDK against the fake server: tool, native, prompted,
unions and output functions, each re-asked within the turn and shown as one reset."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from juno_bind_trio import AllRoutesFailedError, ModelRetry, StructuredOutputError
from juno_bind_trio.agent import (
    Agent,
    AgentEvent,
    NativeOutput,
    PromptedOutput,
    RunContext,
    ToolOutput,
    tool,
)
from juno_bind_trio.completion import ResetEvent
from juno_bind_trio.testing import (
    ErrorResponse,
    StreamResponse,
    TestModel,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio


class Invoice(pydantic.BaseModel):
    number: str
    total: float


class Refusal(pydantic.BaseModel):
    reason: str


@tool
async def lookup(customer: str) -> str:
    """The customer's open order."""
    return f"{customer}: 3 chairs, 120.5"


async def _run(
    server_script: list[Any], output_type: Any, *, native: bool = True, **options: Any
) -> tuple[Any, list[AgentEvent], list[dict[str, Any]], list[Any]]:
    async with open_fake_openai_server(server_script) as server:
        server.supports_response_format = native
        agent: Agent[None, Any] = Agent(
            "openai:juno",
            base_url=server.base_url,
            api_key="k",
            output_type=output_type,
            tools=[lookup],
            **options,
        )
        events: list[AgentEvent] = []
        partials: list[Any] = []
        async with agent.open_run("Invoice for Ada") as run:
            async for event in run:
                events.append(event)
                partials.append(run.partial_output)
        await agent.aclose()
        bodies = [r.json for r in server.requests]
    assert run.result is not None
    return run.result, events, bodies, partials


def _resets(events: list[AgentEvent]) -> list[ResetEvent]:
    resets = [e for e in events if isinstance(e, ResetEvent)]
    # A re-ask, not a routing retry: the reader can tell why the answer went away.
    assert all(e.reason == "structured_output_retry" for e in resets)
    return resets


async def test_tool_output_works_on_a_server_without_response_format() -> None:
    script = [
        StreamResponse.of_tool_calls(("c1", "lookup", '{"customer": "Ada"}')),
        # A bad first answer: total is not a number.
        StreamResponse.of_tool_calls(("c2", "final_result", '{"number": "A-1", "total": "x"}')),
        StreamResponse.of_tool_calls(("c3", "final_result", '{"number": "A-1", "total": 120.5}')),
    ]
    result, events, bodies, partials = await _run(script, ToolOutput(Invoice), native=False)
    assert result.output == Invoice(number="A-1", total=120.5)
    assert len(_resets(events)) == 1  # the rejected call withdrawn, once
    assert all("response_format" not in b for b in bodies)
    names = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert names == ["lookup", "final_result"]
    # The re-ask shows the model its call and why it was refused, as a tool answer.
    reask = bodies[2]["messages"]
    assert reask[-2]["tool_calls"][0]["function"]["name"] == "final_result"
    assert reask[-1]["role"] == "tool"
    assert "total" in reask[-1]["content"]
    # Only the accepted answer is kept, as the assistant's text: no dangling call.
    last = result.messages[-1]
    assert last["role"] == "assistant"
    assert "tool_calls" not in last
    assert json.loads(last["content"]) == {"number": "A-1", "total": 120.5}
    assert partials[-1] == result.output
    assert any(isinstance(p, Invoice) for p in partials[:-1])  # seen while it streamed


async def test_native_output_on_a_server_without_it_is_the_provider_error() -> None:
    with pytest.raises(AllRoutesFailedError, match="response_format is not supported"):
        await _run([StreamResponse.of_text("{}")], NativeOutput(Invoice), native=False)


async def test_native_output_re_asks_as_one_reset() -> None:
    script = [
        StreamResponse.of_text('{"number": "A-1"}'),
        StreamResponse.of_text('{"number": "A-1", "total": 3}'),
    ]
    result, events, bodies, partials = await _run(script, NativeOutput(Invoice))
    assert result.output == Invoice(number="A-1", total=3)
    assert len(_resets(events)) == 1
    assert bodies[0]["response_format"]["type"] == "json_schema"
    assert partials[-1] == result.output


async def test_prompted_output_puts_the_schema_in_the_instructions() -> None:
    script = [
        StreamResponse.of_text("Sure! Here it is."),
        StreamResponse.of_text('```json\n{"number": "A-2", "total": 9.5}\n```'),
    ]
    result, events, bodies, partials = await _run(
        script, PromptedOutput(Invoice), native=False, instructions="Be exact."
    )
    assert result.output == Invoice(number="A-2", total=9.5)
    assert len(_resets(events)) == 1
    system = bodies[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be exact.")
    assert '"total"' in system["content"]
    # The transcript keeps the agent's own instructions.
    assert result.messages[0] == {"role": "system", "content": "Be exact."}
    assert partials[-1] == result.output


async def test_a_union_in_tool_mode_offers_one_tool_per_member() -> None:
    script = [
        StreamResponse.of_tool_calls(("c1", "final_result_Refusal", '{"reason": "no order"}')),
    ]
    result, _, bodies, _ = await _run(script, ToolOutput([Invoice, Refusal]), native=False)
    assert result.output == Refusal(reason="no order")
    names = {t["function"]["name"] for t in bodies[0]["tools"]}
    assert {"final_result_Invoice", "final_result_Refusal"} <= names


@pytest.mark.parametrize("given", [[Invoice, Refusal], Invoice | Refusal])
async def test_a_native_union_picks_the_member_that_validates(given: Any) -> None:
    script = [StreamResponse.of_text('{"result": {"reason": "closed"}}')]
    result, _, _, _ = await _run(script, given)
    assert result.output == Refusal(reason="closed")


async def test_tool_mode_with_str_accepts_a_text_answer() -> None:
    script = [StreamResponse.of_text("I cannot find it.")]
    result, events, _, _ = await _run(script, ToolOutput(Invoice | str), native=False)
    assert result.output == "I cannot find it."
    assert _resets(events) == []


async def test_tool_mode_without_str_re_asks_a_text_answer() -> None:
    script = [
        StreamResponse.of_text("It is A-1."),
        StreamResponse.of_tool_calls(("c1", "final_result", '{"number": "A-1", "total": 1}')),
    ]
    result, events, bodies, _ = await _run(script, ToolOutput(Invoice), native=False)
    assert result.output == Invoice(number="A-1", total=1)
    assert len(_resets(events)) == 1
    assert "final_result" in bodies[1]["messages"][-1]["content"]


async def test_an_output_function_retry_asks_again() -> None:
    saved: list[Invoice] = []

    async def save_invoice(ctx: RunContext[None], invoice: Invoice) -> str:
        if invoice.total <= 0:
            raise ModelRetry("the total must be positive")
        saved.append(invoice)
        return f"saved {invoice.number} in {ctx.tool_name}"

    script = [
        StreamResponse.of_tool_calls(("c1", "final_result", '{"number": "A-1", "total": 0}')),
        StreamResponse.of_tool_calls(("c2", "final_result", '{"number": "A-1", "total": 5}')),
    ]
    result, events, bodies, _ = await _run(script, ToolOutput(save_invoice), native=False)
    assert result.output == "saved A-1 in final_result"
    assert saved == [Invoice(number="A-1", total=5)]
    assert len(_resets(events)) == 1
    assert "the total must be positive" in bodies[1]["messages"][-1]["content"]


async def test_a_plain_output_function_is_native() -> None:
    def total_of(invoice: Invoice) -> float:
        if invoice.total > 100:
            raise ModelRetry("too large")
        return invoice.total

    script = [
        StreamResponse.of_text('{"number": "A-1", "total": 500}'),
        StreamResponse.of_text('{"number": "A-1", "total": 50}'),
    ]
    result, events, bodies, _ = await _run(script, total_of)
    assert result.output == 50
    assert len(_resets(events)) == 1
    assert "too large" in bodies[1]["messages"][-1]["content"]


async def test_running_out_of_re_asks_names_the_last_problem() -> None:
    script = [
        StreamResponse.of_tool_calls((f"c{i}", "final_result", '{"number": 1}')) for i in range(3)
    ]
    async with open_fake_openai_server(script) as server:
        agent = Agent(
            "openai:juno",
            base_url=server.base_url,
            api_key="k",
            output_type=ToolOutput(Invoice),
            max_output_retries=2,
        )
        with pytest.raises(StructuredOutputError, match="in 3 attempts"):
            await agent.run("q")
        await agent.aclose()


async def test_test_model_calls_the_tools_then_the_output_tool() -> None:
    model = TestModel()
    agent = Agent(model, output_type=ToolOutput(Invoice), tools=[lookup])
    result = await agent.run("q")
    output: object = result.output  # checked at run time, whatever the type says
    assert isinstance(output, Invoice)
    assert [name for name, _ in model.calls] == ["lookup", "final_result"]


def test_bad_modes_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="name"):
        ToolOutput(Invoice, name="has space")
    with pytest.raises(TypeError, match="ToolOutput"):
        Agent(TestModel(), output_type=ToolOutput(str))

    @tool
    async def final_result(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="final_result"):
        Agent(TestModel(), output_type=ToolOutput(Invoice), tools=[final_result])

    def two(a: int, b: int) -> int:
        return a + b

    with pytest.raises(TypeError, match="one value"):
        Agent(TestModel(), output_type=two)


async def test_an_unknown_server_error_is_not_swallowed() -> None:
    import openai

    with pytest.raises(openai.BadRequestError):
        await _run([ErrorResponse(400, "nope")], ToolOutput(Invoice), native=False)
