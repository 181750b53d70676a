"""Model strings of other providers, and a list of them as a fallback plan, through the fakes.

``Agent("anthropic:...")`` and ``Agent(["anthropic:...", "openai:..."])`` find
their endpoints through the SDKs' own environment variables, as a host on the
real APIs does; ``fake_anthropic_env`` / ``fake_openai_env`` set them.
"""

from __future__ import annotations

import pytest

from juno_bind_trio import UsageError
from juno_bind_trio.agent import Agent
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel, StringModel
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    Usage,
    fake_anthropic_env,
    fake_openai_env,
)


def test_an_anthropic_string_talks_to_the_messages_api() -> None:
    script = [
        StreamResponse(
            [ReasoningDelta("Short."), TextDelta("Hello "), TextDelta("there.")],
        ),
    ]
    script[0] = StreamResponse(
        [*script[0].events, *StreamResponse.of_text(usage=Usage(20, 5, cached_tokens=8)).events]
    )
    with fake_anthropic_env(script) as server:
        result = Agent("anthropic:claude-test", instructions="Be brief.").run_sync("Hi")
    assert result.output == "Hello there."
    body = server.requests[0].json
    assert body["model"] == "claude-test"
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert (result.stats.input_tokens, result.stats.output_tokens) == (20, 5)
    assert result.stats.cached_tokens == 8
    answer = result.messages[-1]
    assert answer[PROVIDER_STATE_KEY]["provider"] == "anthropic"


def test_a_list_of_strings_falls_back_across_providers() -> None:
    claude = [StreamResponse([TextDelta("I think"), Disconnect()])]
    gpt = [StreamResponse.of_text("Fallback answer.")]
    with fake_anthropic_env(claude) as a, fake_openai_env(gpt) as o:
        agent = Agent(["anthropic:claude-test", "openai:gpt-test"])
        result = agent.run_sync("Hi")
    assert result.output == "Fallback answer."
    assert len(a.requests) == 1
    assert o.requests[0].json["model"] == "gpt-test"
    assert all(PROVIDER_STATE_KEY not in m for m in result.messages)
    assert "claude-test" in repr(agent)


def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    agent = Agent("anthropic:claude-test")
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        agent.run_sync("Hi")


@pytest.mark.parametrize(
    ("model", "error", "match"),
    [
        ("claude:x", ValueError, "'openai:<model-name>'"),
        ("anthropic:", ValueError, "a model string must be"),
        ([], ValueError, "must not be empty"),
        (["anthropic:a", 3], TypeError, r"model\[1\]"),
    ],
)
def test_bad_model_strings_are_refused_when_built(
    model: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Agent(model)  # type: ignore[arg-type]


def test_base_url_with_two_providers_is_ambiguous() -> None:
    with pytest.raises(ValueError, match="configure one provider"):
        Agent(["anthropic:a", "openai:b"], base_url="http://127.0.0.1:1")


def test_client_belongs_to_openai_strings_only() -> None:
    with pytest.raises(ValueError, match="client= is an AsyncOpenAI"):
        Agent("anthropic:a", client=object())  # type: ignore[arg-type]


def test_a_routed_model_is_accepted_as_it_is() -> None:
    from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage

    class Never:
        name = "never"
        server = None

        async def stream_turn(self, request: object) -> object:
            raise AssertionError("not called")

        def classify(self, error: Exception, candidate: object, cursor: object) -> object:
            raise AssertionError("not called")

    model = RoutedModel(
        plan=RoutePlan([RouteStage("m", [Candidate("never")])]),
        adapters={"never": Never()},  # type: ignore[dict-item]
    )
    assert "RoutedModel" in repr(Agent(model))


def test_an_error_status_of_the_only_provider_is_the_run_error() -> None:
    with fake_anthropic_env([ErrorResponse(400, "messages: bad")]):
        agent = Agent("anthropic:claude-test")
        with pytest.raises(Exception, match="messages: bad"):
            agent.run_sync("Hi")


@pytest.mark.anyio
async def test_thinking_reaches_the_run_reader_as_reasoning_events() -> None:
    from juno_bind_trio.agent import AgentEvent, ReasoningEvent, TextEvent
    from juno_bind_trio.testing import open_fake_anthropic_server

    script = [StreamResponse([ReasoningDelta("Hmm, "), ReasoningDelta("easy."), TextDelta("4")])]
    script[0] = StreamResponse([*script[0].events, *StreamResponse.of_text().events])
    async with open_fake_anthropic_server(script) as server:
        agent = Agent("anthropic:claude-test", base_url=server.base_url, api_key="k")
        events: list[AgentEvent] = []
        async with agent.open_run("2+2?") as run:
            events.extend([event async for event in run])
        await agent.aclose()
    thought = "".join(e.text for e in events if isinstance(e, ReasoningEvent))
    assert thought == "Hmm, easy."
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "4"
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextEvent))
    assert all(events.index(e) < first_text for e in events if isinstance(e, ReasoningEvent))


@pytest.mark.anyio
async def test_the_agent_owns_one_client_for_its_runs_and_closes_it() -> None:
    from juno_bind_trio.testing import open_fake_anthropic_server

    script = [StreamResponse.of_text("one"), StreamResponse.of_text("two")]
    async with open_fake_anthropic_server(script) as server:
        agent = Agent("anthropic:claude-test", base_url=server.base_url, api_key="k")
        owned = agent._owned
        assert isinstance(owned, StringModel)
        async with agent:
            assert owned.is_open()
            assert (await agent.run("a")).output == "one"
            assert (await agent.run("b")).output == "two"
        assert not owned.is_open()
    # Both runs went over the one client's one kept-alive connection.
    assert [r.connection for r in server.requests] == [0, 0]


def test_a_google_string_talks_to_the_gemini_api() -> None:
    from juno_bind_trio.testing import fake_gemini_env

    script = [StreamResponse.of_text("Hello ", "there.", usage=Usage(20, 5, cached_tokens=8))]
    with fake_gemini_env(script) as server:
        result = Agent("google:gemini-test", instructions="Be brief.").run_sync("Hi")
    assert result.output == "Hello there."
    request = server.requests[0]
    assert request.model == "gemini-test"
    assert request.header("x-goog-api-key") == "fake-key"
    assert request.json["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert (result.stats.input_tokens, result.stats.output_tokens) == (20, 5)
    assert result.stats.cached_tokens == 8
    assert result.messages[-1][PROVIDER_STATE_KEY]["provider"] == "google"


def test_a_google_string_without_a_key_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    agent = Agent("google:gemini-test")
    with pytest.raises(UsageError, match="GEMINI_API_KEY"):
        agent.run_sync("Hi")


@pytest.mark.anyio
async def test_gemini_thoughts_reach_the_run_reader_as_reasoning_events() -> None:
    from juno_bind_trio.agent import AgentEvent, ReasoningEvent, TextEvent
    from juno_bind_trio.testing import open_fake_gemini_server

    script = [StreamResponse([ReasoningDelta("Hmm, "), ReasoningDelta("easy."), TextDelta("4")])]
    script[0] = StreamResponse([*script[0].events, *StreamResponse.of_text().events])
    async with open_fake_gemini_server(script) as server:
        agent = Agent("google:gemini-test", base_url=server.base_url, api_key="k")
        events: list[AgentEvent] = []
        async with agent.open_run("2+2?") as run:
            events.extend([event async for event in run])
        await agent.aclose()
    assert "".join(e.text for e in events if isinstance(e, ReasoningEvent)) == "Hmm, easy."
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "4"
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextEvent))
    assert all(events.index(e) < first_text for e in events if isinstance(e, ReasoningEvent))
