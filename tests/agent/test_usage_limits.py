"""`UsageLimits`: a run stops softly at a limit and raises `UsageLimitExceeded` with the result."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import UsageError, UsageLimitExceeded
from juno_bind_trio.agent import Agent, UsageLimits, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import (
    StreamResponse,
    Usage,
    check_tool_call_history,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
async def look(page: int) -> str:
    """Look a page up."""
    ran.append(f"page {page}")
    return f"page {page} says hi"


def _call(call_id: str, page: int) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "look", "arguments": json.dumps({"page": page})},
    }


class Script:
    """A model that asks for *calls* tool calls per turn forever, with the given usage."""

    def __init__(self, calls: int = 1, input_tokens: int = 10, output_tokens: int = 5) -> None:
        self.requests = 0
        self.calls = calls
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        self.requests += 1
        n = self.requests
        return ModelTurnResult(
            tool_calls=tuple(_call(f"c{n}_{i}", i) for i in range(self.calls)),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
        )


def _answered(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def _asked(messages: list[dict[str, Any]]) -> list[str]:
    return [
        c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or ()
    ]


async def test_the_request_limit_stops_before_the_next_request_after_the_tools_ran() -> None:
    ran.clear()
    model = Script()
    agent = Agent(model, tools=[look], usage_limits=UsageLimits(request_limit=2))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    error = caught.value
    assert model.requests == 2
    assert (error.limit, error.value, error.used) == ("request_limit", 2, 2)
    assert str(error) == "the run reached its request_limit of 2 (2 used) and stopped"
    result = error.result
    assert result.reason == "should_stop"
    assert result.iterations == 2
    assert error.usage == result.stats
    assert (result.stats.input_tokens, result.stats.output_tokens) == (20, 10)
    # Both batches ran and are answered: the stop came between them and the next request.
    assert ran == ["page 0", "page 0"]
    assert sorted(_answered(result.messages)) == _asked(result.messages) == ["c1_0", "c2_0"]
    check_tool_call_history(result.messages)


async def test_a_request_limit_of_zero_makes_no_request() -> None:
    model = Script()
    with pytest.raises(UsageLimitExceeded) as caught:
        await Agent(model, usage_limits=UsageLimits(request_limit=0)).run("go")
    assert model.requests == 0
    assert caught.value.result.messages == [{"role": "user", "content": "go"}]


async def test_a_response_past_a_token_limit_has_its_calls_answered_not_run() -> None:
    ran.clear()
    model = Script(calls=2, input_tokens=100, output_tokens=30)
    agent = Agent(model, tools=[look], usage_limits=UsageLimits(total_tokens_limit=200))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    error = caught.value
    # 130 after the first response (its calls ran), 260 after the second: stop there.
    assert (error.limit, error.value, error.used) == ("total_tokens_limit", 200, 260)
    assert model.requests == 2
    assert ran == ["page 0", "page 1"]
    result = error.result
    assert result.reason == "stopped"
    answers = _answered(result.messages)
    assert sorted(answers) == sorted(_asked(result.messages))
    assert answers["c1_0"] == "page 0 says hi"
    assert "page" not in answers["c2_0"]
    assert "page" not in answers["c2_1"]
    assert result.stats.tool_calls_not_run == 2
    check_tool_call_history(result.messages)


@pytest.mark.parametrize(
    ("limits", "name", "used"),
    [
        (UsageLimits(input_tokens_limit=15), "input_tokens_limit", 20),
        (UsageLimits(output_tokens_limit=9), "output_tokens_limit", 10),
        (UsageLimits(total_tokens_limit=15), "total_tokens_limit", 30),
    ],
)
async def test_each_token_limit_is_its_own(limits: UsageLimits, name: str, used: int) -> None:
    model = Script(input_tokens=10, output_tokens=5)
    with pytest.raises(UsageLimitExceeded) as caught:
        await Agent(model, tools=[look], usage_limits=limits).run("go")
    assert (caught.value.limit, caught.value.used) == (name, used)
    assert model.requests == 2


async def test_a_limit_reached_exactly_is_not_exceeded() -> None:
    async def answer(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="done", input_tokens=7, output_tokens=3)

    limits = UsageLimits(request_limit=1, total_tokens_limit=10, tool_calls_limit=0)
    result = await Agent(answer, usage_limits=limits).run("go")
    assert (result.output, result.reason) == ("done", "completed")


async def test_a_final_answer_past_a_token_limit_raises_with_the_answer() -> None:
    async def answer(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="done", output_tokens=50)

    with pytest.raises(UsageLimitExceeded) as caught:
        await Agent(answer, usage_limits=UsageLimits(output_tokens_limit=10)).run("go")
    assert caught.value.result.output == "done"
    assert caught.value.result.reason == "completed"


async def test_a_batch_that_would_pass_the_tool_calls_limit_does_not_run() -> None:
    ran.clear()
    model = Script(calls=3)
    agent = Agent(model, tools=[look], usage_limits=UsageLimits(tool_calls_limit=4))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go")
    error = caught.value
    assert (error.limit, error.value, error.used) == ("tool_calls_limit", 4, 6)
    assert ran == ["page 0", "page 1", "page 2"]  # the first batch only
    assert error.result.stats.tool_calls_not_run == 3
    assert sorted(_answered(error.result.messages)) == sorted(_asked(error.result.messages))


async def test_limits_per_run_replace_the_agents() -> None:
    model = Script()
    agent = Agent(model, tools=[look], usage_limits=UsageLimits(request_limit=1))
    with pytest.raises(UsageLimitExceeded) as caught:
        await agent.run("go", usage_limits=UsageLimits(request_limit=3))
    assert (caught.value.value, model.requests) == (3, 3)
    with pytest.raises(UsageLimitExceeded):
        await agent.run("again")
    assert model.requests == 4  # the agent's limit again, counted afresh per run


async def test_open_run_raises_at_the_end_of_its_block() -> None:
    model = Script()
    agent = Agent(model, tools=[look])
    with pytest.raises(UsageLimitExceeded) as caught:
        async with agent.open_run("go", usage_limits=UsageLimits(request_limit=1)) as run:
            kinds = [type(event).__name__ async for event in run]
    assert kinds[-1] == "RunEndedEvent"
    assert caught.value.result.iterations == 1


async def test_token_usage_from_the_openai_sdk_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = [
        StreamResponse.of_text("one", usage=Usage(prompt_tokens=40, completion_tokens=5)),
    ]
    async with open_fake_openai_server(replies) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent = Agent("openai:gpt-4o-mini", usage_limits=UsageLimits(input_tokens_limit=30))
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run("hi")
    assert len(server.requests) == 1
    assert (caught.value.limit, caught.value.used) == ("input_tokens_limit", 40)
    assert caught.value.result.output == "one"


@pytest.mark.parametrize(
    "name",
    [
        "request_limit",
        "input_tokens_limit",
        "output_tokens_limit",
        "total_tokens_limit",
        "tool_calls_limit",
    ],
)
@pytest.mark.parametrize(
    ("value", "error"), [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)]
)
def test_bad_limits_are_refused_naming_the_value(
    name: str, value: object, error: type[Exception]
) -> None:
    given: dict[str, Any] = {name: value}
    message = rf"^UsageLimits: {name} must be a non-negative int or None, got"
    with pytest.raises(error, match=message):
        UsageLimits(**given)


async def test_usage_limits_must_be_usage_limits() -> None:
    model = Script()
    with pytest.raises(TypeError, match=r"^Agent: usage_limits must be a UsageLimits or None"):
        Agent(model, usage_limits={"request_limit": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Agent.run: usage_limits must be a UsageLimits"):
        await Agent(model).run("go", usage_limits=3)  # type: ignore[arg-type]
    assert model.requests == 0


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    request_limit=st.none() | st.integers(0, 6),
    token_limit=st.none() | st.integers(0, 400),
    calls_limit=st.none() | st.integers(0, 8),
    script=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=8
    ),
)
def test_no_request_past_the_limit_and_every_call_answered(
    backend: str,
    request_limit: int | None,
    token_limit: int | None,
    calls_limit: int | None,
    script: list[tuple[int, int, int]],
) -> None:
    requests: list[int] = []
    executed: list[str] = []
    exceeded: list[tuple[str, int, int]] = []

    @tool
    async def work(n: int) -> str:
        """Do work."""
        executed.append(str(n))
        await anyio.lowlevel.checkpoint()
        return "ok"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        requests.append(1)
        i = len(requests) - 1
        calls, tokens_in, tokens_out = script[min(i, len(script) - 1)]
        if i >= len(script) - 1:
            calls = 0  # the last scripted turn answers
        return ModelTurnResult(
            content="done" if calls == 0 else None,
            tool_calls=tuple(
                {
                    "id": f"c{i}_{k}",
                    "type": "function",
                    "function": {"name": "work", "arguments": json.dumps({"n": k})},
                }
                for k in range(calls)
            ),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
        )

    limits = UsageLimits(
        request_limit=request_limit, total_tokens_limit=token_limit, tool_calls_limit=calls_limit
    )
    agent = Agent(model, tools=[work], usage_limits=limits, max_iterations=20)

    async def main() -> None:
        try:
            result = await agent.run("go")
        except UsageLimitExceeded as exc:
            result = exc.result
            exceeded.append((exc.limit, exc.value, exc.used))
        check_tool_call_history(result.messages)
        assert sorted(_answered(result.messages)) == sorted(_asked(result.messages))
        if request_limit is not None:
            assert len(requests) <= request_limit
        if calls_limit is not None:
            assert len(executed) <= calls_limit
        assert result.stats.model_calls == len(requests)
        for limit, value, used in exceeded:
            assert used > value or (limit == "request_limit" and used == value)

    run_on(backend, main)


async def test_a_model_returning_the_wrong_type_is_the_hosts_usage_error_with_limits_too() -> None:
    # With limits the agent reads the response's usage: a model that returned
    # something else must still reach the loop's UsageError, not an AttributeError.
    async def wrong(turn: ModelTurn) -> Any:
        return {"content": "a dict, not a ModelTurnResult"}

    agent = Agent(wrong, usage_limits=UsageLimits(total_tokens_limit=100))
    with pytest.raises(UsageError, match="ModelTurnResult"):
        await agent.run("go")
