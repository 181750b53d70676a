"""`Agent(request_options=...)`: provider options for every request, through the real SDK."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio


class City(pydantic.BaseModel):
    name: str


async def test_a_model_string_sends_the_agents_options(monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_fake_openai_server([StreamResponse.of_text("Hi.")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        agent = Agent("openai:m", request_options={"temperature": 0, "seed": 3})
        result = await agent.run("Hello")
    assert result.output == "Hi."
    (body,) = (r.json for r in server.requests)
    assert (body["temperature"], body["seed"], body["model"]) == (0, 3, "m")
    assert "response_format" not in body


async def test_a_routed_model_keeps_its_options_under_the_agents_and_the_output_format() -> None:
    script = [StreamResponse.of_text('{"name": "Oslo"}')]
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan([RouteStage("m", [Candidate("fake")])])
        model = OpenAIChatModel(
            plan=plan, clients={"fake": client}, request_options={"temperature": 1, "top_p": 0.5}
        )
        agent = Agent(model, output_type=City, request_options={"temperature": 0})
        result = await agent.run("Where?")
    assert result.output == City(name="Oslo")
    (body,) = (r.json for r in server.requests)
    assert body["temperature"] == 0  # the agent's option wins over the model's
    assert body["top_p"] == 0.5
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["name"]
    assert model.request_options == {"temperature": 1, "top_p": 0.5}  # the host's model unchanged


async def _scripted(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="x")


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {"request_options": {"stream": False}},
            ValueError,
            r"request_options must not set \['stream'\]",
        ),
        (
            {"request_options": {"tools": []}},
            ValueError,
            r"request_options must not set \['tools'\]",
        ),
        ({"request_options": [("seed", 1)]}, TypeError, r"request_options must be a mapping"),
        ({"request_options": {1: 2}}, TypeError, r"request_options keys must be strings"),
        (
            {"request_options": {"response_format": {"type": "json_object"}}, "output_type": City},
            ValueError,
            r"request_options sets response_format, which output_type sets",
        ),
    ],
)
def test_bad_request_options_are_refused_at_construction(
    kwargs: dict[str, Any], error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=r"^Agent: " + pattern):
        Agent("openai:m", **kwargs)


def test_request_options_with_a_function_model_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^Agent: request_options are sent by an OpenAI model"):
        Agent(_scripted, request_options={"seed": 1})


def test_a_plain_text_agent_may_ask_for_a_json_object() -> None:
    # With output_type=str the agent sets no format, so the host may.
    agent = Agent("openai:m", request_options={"response_format": {"type": "json_object"}})
    assert agent.output_type is str


async def test_the_hosts_model_shows_the_route_of_the_agents_turn() -> None:
    async with (
        open_fake_openai_server([StreamResponse.of_text('{"name": "Oslo"}')]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan([RouteStage("m", [Candidate("fake")])])
        model = OpenAIChatModel(plan=plan, clients={"fake": client})
        await Agent(model, output_type=City).run("Where?")
    # The agent routed through a model derived with its output format; the
    # host's own model still reports that turn's route.
    assert model.last_route is not None
    assert model.last_route.ok
    assert [a.cursor.model for a in model.last_route.attempts] == ["m"]


def test_a_candidate_format_that_would_replace_the_output_types_is_refused() -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
    plan = RoutePlan(
        [RouteStage("m", [Candidate("fake", options={"response_format": {"type": "text"}})])]
    )
    model = OpenAIChatModel(plan=plan, clients={"fake": client})
    with pytest.raises(ValueError, match=r"^Agent: the plan's candidate 'fake' for 'm' sets"):
        Agent(model, output_type=City)
    assert Agent(model).output_type is str  # plain text: the candidate's format is the host's
