"""Output guardrails: the final output checked before the run returns it; withdrawn or re-asked."""

from __future__ import annotations

from typing import Any

import anyio
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import GuardrailTripped
from juno_bind_trio.agent import (
    Agent,
    AgentRun,
    GuardrailResult,
    ResetEvent,
    RunContext,
    TextEvent,
    TurnEndedEvent,
    UsageLimits,
    input_guardrail,
    output_guardrail,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import FunctionModel, StreamResponse, open_fake_openai_server

pytestmark = pytest.mark.anyio


async def _read(
    agent: Agent[Any, Any],
    prompt: str,
    events: list[object],
    runs: list[AgentRun[Any]] | None = None,
) -> None:
    """Read a run's events into *events* (its handle into *runs*); its error leaves at the
    block's end."""
    async with agent.open_run(prompt) as run:
        if runs is not None:
            runs.append(run)
        async for event in run:
            events.append(event)


def _answers(*texts: str, asked: list[list[dict[str, Any]]] | None = None) -> FunctionModel:
    """Streams the n-th text (word by word) at the n-th request."""
    count = [0]

    async def fn(turn: ModelTurn) -> Any:
        if asked is not None:
            asked.append(list(turn.messages))
        text = texts[min(count[0], len(texts) - 1)]
        count[0] += 1
        for word in text.split(" "):
            await anyio.sleep(1)
            yield word + " "

    return FunctionModel(fn)


def _no_secret(ctx: RunContext[None], output: object) -> GuardrailResult:
    return GuardrailResult(
        tripwire="secret" in str(output), info=str(output), message="Do not reveal the secret."
    )


async def test_a_trip_after_the_streamed_answer_withdraws_it_before_the_error_leaves() -> None:
    agent = Agent(_answers("the secret is 42"), output_guardrails=[_no_secret])
    events: list[object] = []
    runs: list[AgentRun[Any]] = []
    with pytest.raises(GuardrailTripped) as caught:
        await _read(agent, "tell me", events, runs)
    (run,) = runs
    error = caught.value
    assert type(error) is GuardrailTripped
    assert (error.guardrail, error.kind, error.info) == (
        "_no_secret",
        "output",
        "the secret is 42 ",
    )
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == "the secret is 42 "
    resets = [e for e in events if isinstance(e, ResetEvent)]
    assert [r.reason for r in resets] == ["guardrail"]
    assert not [e for e in events if isinstance(e, TurnEndedEvent)]
    assert run.text == ""  # the reader's final view: nothing
    assert error.result is not None
    assert [m["role"] for m in error.result.messages] == ["user"]  # the answer is not kept
    assert error.result.output == ""


async def test_reask_asks_again_with_the_message_and_the_reader_sees_only_the_new_answer() -> None:
    asked: list[list[dict[str, Any]]] = []
    agent = Agent(
        _answers("the secret is 42", "I cannot say", asked=asked),
        output_guardrails=[output_guardrail(_no_secret, on_trip="reask")],
    )
    async with agent.open_run("tell me") as run:
        async for _ in run:
            pass
    assert run.text == "I cannot say "
    result = run.result
    assert result is not None
    assert result.output == "I cannot say "
    assert result.stats.model_calls == 2  # the re-ask is a request
    assert asked[1][-2:] == [
        {"role": "assistant", "content": "the secret is 42 "},
        {"role": "user", "content": "Do not reveal the secret."},
    ]
    # Only the accepted answer enters the transcript.
    assert [m.get("content") for m in result.messages] == ["tell me", "I cannot say "]


async def test_reask_gives_up_after_max_output_retries() -> None:
    agent = Agent(
        _answers("secret one", "secret two", "secret three"),
        output_guardrails=[output_guardrail(_no_secret, on_trip="reask")],
        max_output_retries=1,
    )
    with pytest.raises(GuardrailTripped) as caught:
        await agent.run("tell me")
    assert caught.value.info == "secret two "
    assert caught.value.result is not None
    assert caught.value.result.stats.model_calls == 2


async def test_reask_is_refused_by_the_request_limit() -> None:
    agent = Agent(
        _answers("secret one", "fine"),
        output_guardrails=[output_guardrail(_no_secret, on_trip="reask")],
        usage_limits=UsageLimits(request_limit=1),
    )
    with pytest.raises(GuardrailTripped):
        await agent.run("tell me")


class Answer(pydantic.BaseModel):
    value: int


async def test_a_structured_output_is_checked_as_its_validated_value() -> None:
    seen: list[object] = []

    async def small(ctx: RunContext[None], output: Answer) -> GuardrailResult:
        seen.append(output)
        return GuardrailResult(tripwire=output.value > 10, message="Keep it under ten.")

    count = [0]

    def fn(turn: ModelTurn) -> ModelTurnResult:
        count[0] += 1
        return ModelTurnResult(content='{"value": 42}' if count[0] == 1 else '{"value": 7}')

    agent = Agent(
        FunctionModel(fn),
        output_type=Answer,
        output_guardrails=[output_guardrail(small, on_trip="reask")],
    )
    result = await agent.run("a number")
    assert result.output == Answer(value=7)
    assert seen == [Answer(value=42), Answer(value=7)]


async def test_tool_turns_are_not_checked_and_the_guardrails_run_together() -> None:
    checked: list[str] = []

    async def slow(ctx: RunContext[None], output: str) -> GuardrailResult:
        await anyio.sleep(5)
        checked.append("slow")
        return GuardrailResult(tripwire=False)

    async def quick(ctx: RunContext[None], output: str) -> GuardrailResult:
        await anyio.sleep(1)
        checked.append("quick")
        return GuardrailResult(tripwire=True)

    agent = Agent(_answers("hello"), output_guardrails=[slow, quick])
    with pytest.raises(GuardrailTripped) as caught:
        await agent.run("hi")
    assert caught.value.guardrail == "quick"
    assert checked == ["quick"]  # the slow one was cancelled at the trip
    assert anyio.current_time() == 2.0


async def test_an_output_guardrail_that_raises_fails_the_run_as_itself() -> None:
    def broken(ctx: RunContext[None], output: str) -> GuardrailResult:
        raise RuntimeError("checker down")

    agent = Agent(_answers("hello"), output_guardrails=[broken])
    with pytest.raises(RuntimeError, match="checker down"):
        await agent.run("hi")


async def test_through_the_sdk_the_withdrawn_answer_never_reaches_the_transcript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = [StreamResponse.of_text("the ", "secret"), StreamResponse.of_text("no comment")]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent = Agent(
            "openai:juno-small", output_guardrails=[output_guardrail(_no_secret, on_trip="reask")]
        )
        result = await agent.run("tell me")
        await agent.aclose()
    assert result.output == "no comment"
    second = server.requests[1].json["messages"]
    assert second[-2:] == [
        {"role": "assistant", "content": "the secret"},
        {"role": "user", "content": "Do not reveal the secret."},
    ]


def test_output_guardrails_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="on_trip must be 'raise' or 'reask'"):
        output_guardrail(_no_secret, on_trip="retry")  # type: ignore[call-overload]
    wrong = input_guardrail(_no_secret)
    model = FunctionModel(lambda turn: ModelTurnResult(content="x"))
    with pytest.raises(TypeError, match=r"output_guardrails\[0\] is an InputGuardrail"):
        Agent(model, output_guardrails=[wrong])  # type: ignore[list-item]


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bad=st.lists(st.booleans(), min_size=1, max_size=5),
    retries=st.integers(min_value=0, max_value=3),
    on_trip=st.sampled_from(["raise", "reask"]),
)
def test_the_readers_final_view_is_never_a_withdrawn_answer(
    backend: str, bad: list[bool], retries: int, on_trip: str
) -> None:
    """Answers that trip (or not) in any order: the reader ends on the first accepted
    answer, or on nothing when the run raised."""
    texts = [f"{'secret' if b else 'fine'}-{i}" for i, b in enumerate(bad)] + ["fine-last"]
    allowed = 1 + (retries if on_trip == "reask" else 0)
    accepted = next((t for t in texts[:allowed] if "secret" not in t), None)

    async def main() -> None:
        agent = Agent(
            _answers(*texts),
            output_guardrails=[output_guardrail(_no_secret, on_trip=on_trip)],  # type: ignore[call-overload]
            max_output_retries=retries,
        )
        events: list[object] = []
        runs: list[AgentRun[Any]] = []
        if accepted is None:
            with pytest.raises(GuardrailTripped):
                await _read(agent, "go", events, runs)
            assert runs[0].text == ""
        else:
            await _read(agent, "go", events, runs)
            assert runs[0].text == accepted + " "
            result = runs[0].result
            assert result is not None
            assert result.output == accepted + " "
            assert "secret" not in str(result.messages)

    run_on(backend, main)
