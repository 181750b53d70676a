"""The whole path through the real openai SDK, against juno_bind_trio.testing's loopback server."""

from __future__ import annotations

import json

import pydantic
import pytest

from juno_bind_trio.agent import Agent, TurnEndedEvent, tool
from juno_bind_trio.completion import ResetEvent, TextEvent
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    ErrorResponse,
    FakeResponse,
    StreamResponse,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio


@tool
async def get_weather(city: str, days: int = 1) -> dict[str, object]:
    """Forecast for a city.

    Args:
        city: The city's name.
        days: Days ahead.
    """
    return {"city": city, "days": days, "sky": "clear"}


class Forecast(pydantic.BaseModel):
    city: str
    sky: str


async def test_a_model_string_runs_against_the_environment_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = [
        StreamResponse.of_tool_calls(("call_1", "get_weather", '{"city": "Oslo", "days": 2}')),
        StreamResponse.of_text("Clear in ", "Oslo."),
    ]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent = Agent("openai:juno-small", tools=[get_weather], instructions="Be brief.")
        result = await agent.run("Weather in Oslo?")
    assert result.output == "Clear in Oslo."
    assert result.reason == "completed"
    first, second = (r.json for r in server.requests)
    assert first["model"] == "juno-small"
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    (offered,) = first["tools"]
    assert offered == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Forecast for a city.",
            "parameters": get_weather.parameters,
        },
    }
    assert "response_format" not in first
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"]) == {"city": "Oslo", "days": 2, "sky": "clear"}
    assert server.requests[0].header("authorization") == "Bearer test-key"


async def test_a_routed_model_falls_back_and_streams_structured_output() -> None:
    script: dict[str, list[FakeResponse]] = {
        "big": [ErrorResponse(503), ErrorResponse(503)],
        "small": [
            StreamResponse.of_text('{"city": "Oslo"'),  # does not validate: no sky
            StreamResponse.of_text('{"city": "Oslo", ', '"sky": "clear"}'),
        ],
    }
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan(
            [
                RouteStage("big", [Candidate("fake")]),
                RouteStage("small", [Candidate("fake")]),
            ],
            max_retries=0,
        )
        model = OpenAIChatModel(
            plan=plan, clients={"fake": client}, request_options={"temperature": 0}
        )
        agent = Agent(model, output_type=Forecast)
        kinds: list[str] = []
        async with agent.open_run("Forecast?") as run:
            async for event in run:
                if isinstance(event, (TextEvent, ResetEvent, TurnEndedEvent)):
                    kinds.append(event.to_wire()["kind"])
    assert run.result is not None
    assert run.result.output == Forecast(city="Oslo", sky="clear")
    assert run.text == '{"city": "Oslo", "sky": "clear"}'
    assert "reset" in kinds
    assert kinds[-1] == "turn_ended"
    bodies = [r.json for r in server.requests]
    # The re-ask is a whole routed turn: it walks the plan from the top again.
    assert [b["model"] for b in bodies] == ["big", "small", "big", "small"]
    for body in bodies:
        assert body["temperature"] == 0  # the host's own options stay
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["schema"]["required"] == ["city", "sky"]
