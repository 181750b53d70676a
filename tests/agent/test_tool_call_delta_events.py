"""An AgentRun yields a tool call's arguments as they stream, through the real openai SDK."""

from __future__ import annotations

import json

import pytest

from juno_bind_trio.agent import (
    Agent,
    AgentEvent,
    ResetEvent,
    ToolCallDeltaEvent,
    ToolCallStartedEvent,
    tool,
)
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    Disconnect,
    StreamResponse,
    ToolCallDelta,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

ARGUMENTS = '{"city": "Oslo", "days": 2}'


@tool
async def weather(city: str, days: int) -> str:
    return f"{city}: clear for {days} days"


async def test_fragments_arrive_before_the_call_starts_and_add_up_to_its_arguments() -> None:
    script = [
        StreamResponse.of_tool_calls(("call_1", "weather", ARGUMENTS), fragments=4),
        StreamResponse.of_text("Clear."),
    ]
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan([RouteStage("m", [Candidate("fake")])], max_retries=0)
        model = OpenAIChatModel(plan=plan, clients={"fake": client})
        events: list[AgentEvent] = []
        async with Agent(model, tools=[weather]).open_run("Weather?") as run:
            events.extend([event async for event in run])
    deltas = [e for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert deltas, "no argument fragments reached the reader"
    assert {(e.index, e.tool_call_id or "call_1") for e in deltas} == {(0, "call_1")}
    assert deltas[0].tool_call_id == "call_1"
    assert deltas[0].name == "weather"
    assert "".join(e.delta for e in deltas) == ARGUMENTS
    started = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStartedEvent))
    assert max(events.index(e) for e in deltas) < started
    assert json.loads(ARGUMENTS) == {"city": "Oslo", "days": 2}


async def test_a_fallback_withdraws_the_dead_attempts_fragments() -> None:
    dead = StreamResponse(
        [ToolCallDelta(0, id="call_a", name="weather", arguments='{"city": "Be'), Disconnect()]
    )
    script = {
        "a": [dead],
        "b": [StreamResponse.of_text("No tools needed.")],
    }
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan(
            [RouteStage("a", [Candidate("fake")]), RouteStage("b", [Candidate("fake")])],
            max_retries=0,
        )
        model = OpenAIChatModel(plan=plan, clients={"fake": client})
        async with Agent(model, tools=[weather]).open_run("Weather?") as run:
            events = [event async for event in run]
        assert run.result is not None
        assert run.result.output == "No tools needed."
    kinds = [e.to_wire()["kind"] for e in events]
    first_delta = kinds.index("tool_call_delta")
    first_reset = kinds.index("reset")
    assert first_delta < first_reset < kinds.index("text")
    reset = events[first_reset]
    assert isinstance(reset, ResetEvent)
    assert reset.reason == "attempt_failed"
    assert kinds.count("tool_call_started") == 0
