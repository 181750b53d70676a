"""History processors: what each request is sent is shaped, checked, and never a broken pair."""

from __future__ import annotations

import functools
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import ToolCallHistoryError, UsageError
from juno_bind_trio.agent import (
    DEFAULT_TOOL_RESULT_MARKER,
    Agent,
    RunContext,
    drop_old_tool_results,
    keep_last_turns,
    tool,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.testing import (
    FunctionModel,
    StreamResponse,
    check_tool_call_history,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio


@tool
def echo(text: str) -> str:
    return text


def _call(call_id: str, text: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "echo", "arguments": json.dumps({"text": text})},
    }


def _scripted(plan: list[int], sent: list[list[dict[str, Any]]]) -> FunctionModel:
    """A model making plan[i] echo calls at step i, then answering; it records what it is sent."""

    def model(turn: ModelTurn) -> ModelTurnResult:
        sent.append([dict(m) for m in turn.messages])
        step = turn.iteration - 1
        if step >= len(plan):
            return ModelTurnResult(content="done")
        calls = [_call(f"c{step}_{i}", f"s{step}c{i}") for i in range(plan[step])]
        return ModelTurnResult(content=f"step {step}", tool_calls=calls)

    return FunctionModel(model)


def _earlier(turns: int) -> list[dict[str, Any]]:
    """An earlier conversation: a user message, then tool turns, then an answer."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
    ]
    for t in range(turns):
        call = _call(f"old{t}", f"old {t}")
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"old{t}", "content": f"old {t}"})
    history.append({"role": "assistant", "content": "first answer"})
    return history


_trims = st.one_of(
    st.integers(1, 4).map(lambda n: ("keep", n)),
    st.integers(1, 4).map(lambda n: ("drop", n)),
    st.floats(0.0, 1.0).map(lambda p: ("random", p)),
    st.integers(0, 12).map(lambda n: ("tail", n)),
)


def _processor(kind: str, value: Any, rnd: random.Random) -> Any:
    if kind == "keep":
        return keep_last_turns(value)
    if kind == "drop":
        return drop_old_tool_results(value)
    if kind == "random":
        return lambda messages: [m for m in messages if rnd.random() >= value]
    return lambda ctx, messages: messages[-value:] if value else messages


@settings(max_examples=60)
@given(
    plan=st.lists(st.integers(1, 3), min_size=0, max_size=5),
    earlier=st.integers(0, 3),
    trims=st.lists(_trims, min_size=1, max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_what_is_sent_is_accepted_by_the_validating_fake_or_a_usage_error(
    backend: str, plan: list[int], earlier: int, trims: list[tuple[str, Any]], seed: int
) -> None:
    rnd = random.Random(seed)
    sent: list[list[dict[str, Any]]] = []
    agent = Agent(
        _scripted(plan, sent),
        tools=[echo],
        max_iterations=len(plan) + 1,
        history_processors=[_processor(kind, value, rnd) for kind, value in trims],
    )
    try:
        result = run_on(
            backend,
            functools.partial(agent.run, message_history=_earlier(earlier)),
            "second question",
        )
    except UsageError as exc:
        refused = str(exc)
        result = None
    else:
        refused = "history_processors["
    assert "history_processors[" in refused
    for messages in sent:
        check_tool_call_history(messages)  # the fake server's rule: raises on a broken pair
        users = [m for m in messages if m["role"] == "user"]
        assert users[-1]["content"] == "second question"
    if result is not None:
        # The run keeps everything: the earlier history, and every step's messages.
        assert result.messages[: len(_earlier(earlier))] == _earlier(earlier)
        assert len(result.messages) == len(_earlier(earlier)) + 1 + sum(1 + n for n in plan) + 1
        assert len(sent) == len(plan) + 1


def test_the_checker_agrees_with_the_fake_on_random_trims() -> None:
    # A sanity check of the property above: random trimming does break pairs, and
    # each break the fake refuses is a UsageError here.
    from juno_bind_trio.agent._processors import check_sent_history

    history = [*_earlier(3), {"role": "user", "content": "q"}]
    rnd = random.Random(7)
    refused = 0
    for _ in range(300):
        trimmed = [m for m in history if rnd.random() > 0.3]
        try:
            check_tool_call_history(trimmed)
            fake_ok = True
        except ToolCallHistoryError:
            fake_ok = False
        try:
            check_sent_history("p", trimmed, None)
            ours_ok = True
        except UsageError:
            ours_ok = False
        if not fake_ok:
            refused += 1
            assert not ours_ok, trimmed
    assert refused > 50


async def test_a_processor_that_breaks_a_pair_is_named_and_nothing_is_sent() -> None:
    sent: list[list[dict[str, Any]]] = []

    def drop_tool_answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in messages if m["role"] != "tool"]

    agent = Agent(_scripted([1], sent), tools=[echo], history_processors=[drop_tool_answers])
    with pytest.raises(UsageError, match=r"history_processors\[0\] \(.*drop_tool_answers\)"):
        await agent.run("go")
    assert len(sent) == 1  # the first request (nothing to break yet), then none


async def test_dropping_the_last_user_message_is_a_usage_error() -> None:
    sent: list[list[dict[str, Any]]] = []
    agent = Agent(_scripted([], sent), history_processors=[lambda messages: messages[:1]])
    with pytest.raises(UsageError, match="dropped or changed the last user message"):
        await agent.run("go", message_history=_earlier(0))
    assert sent == []


async def test_processors_run_in_order_sync_async_with_context_and_keep_the_transcript() -> None:
    sent: list[list[dict[str, Any]]] = []
    seen: list[tuple[int, str]] = []

    async def note(ctx: RunContext[str], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen.append((ctx.iteration, ctx.deps))
        return [{"role": "system", "content": f"for {ctx.deps}"}, *messages]

    def redact(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for message in messages:  # edits in place: the request's copy, not the run's
            if message["role"] == "assistant" and message.get("content"):
                message["content"] = "[redacted]"
        return messages

    agent = Agent(
        _scripted([1], sent), tools=[echo], deps_type=str, history_processors=[note, redact]
    )
    result = await agent.run("go", deps="ada")
    assert seen == [(1, "ada"), (2, "ada")]
    assert sent[1][0] == {"role": "system", "content": "for ada"}
    assert sent[1][2]["content"] == "[redacted]"
    assert result.messages[1]["content"] == "step 0"  # the run keeps what happened
    assert all(m.get("content") != "for ada" for m in result.messages)


async def test_a_processor_editing_deep_inside_a_message_edits_only_the_request() -> None:
    # Down to a tool call's arguments and a part of a content list: the run's
    # transcript keeps what happened, and the next request starts from it again.
    sent: list[list[dict[str, Any]]] = []

    def scrub(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for message in messages:
            for call in message.get("tool_calls") or ():
                call["function"]["arguments"] = "{}"
            content = message.get("content")
            if isinstance(content, list):
                content[0]["text"] = "[scrubbed]"
        return messages

    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "a secret"}]},
        {"role": "assistant", "content": "noted"},
    ]
    agent = Agent(_scripted([1, 2], sent), tools=[echo], history_processors=[scrub])
    result = await agent.run("go", message_history=history)
    calls = [c for m in result.messages for c in m.get("tool_calls") or ()]
    assert len(calls) == 3
    assert all(json.loads(c["function"]["arguments"])["text"] for c in calls)
    assert result.messages[0]["content"] == [{"type": "text", "text": "a secret"}]
    assert history[0]["content"] == [{"type": "text", "text": "a secret"}]
    for request in sent:
        assert request[0]["content"] == [{"type": "text", "text": "[scrubbed]"}]
        assert all(
            c["function"]["arguments"] == "{}" for m in request for c in m.get("tool_calls") or ()
        )


def test_keep_last_turns_keeps_the_system_the_last_user_and_whole_turns() -> None:
    history = [*_earlier(3), {"role": "user", "content": "q2"}]
    kept = keep_last_turns(2)(history)
    assert kept == [
        history[0],
        *history[6:],  # the last old tool turn, the answer, the new question
    ]
    check_tool_call_history(kept)
    question_first = [*history[:2], *history[2:]]
    kept = keep_last_turns(1)(question_first[:-1])  # the last user message is old
    assert kept == [history[0], history[1], history[-2]]
    assert keep_last_turns(10)(history) == history
    with pytest.raises(ValueError, match="positive"):
        keep_last_turns(0)
    with pytest.raises(TypeError, match="positive"):
        keep_last_turns("2")  # type: ignore[arg-type]


def test_drop_old_tool_results_leaves_pairs_whole() -> None:
    history = [*_earlier(3), {"role": "user", "content": "q2"}]
    dropped = drop_old_tool_results(2)(history)
    assert [m["content"] for m in dropped if m["role"] == "tool"] == [
        DEFAULT_TOOL_RESULT_MARKER,
        DEFAULT_TOOL_RESULT_MARKER,
        "old 2",
    ]
    assert history[3]["content"] == "old 0"  # the input is untouched
    check_tool_call_history(dropped)
    assert drop_old_tool_results(1, marker="-")(history)[5]["content"] == "-"
    with pytest.raises(TypeError, match="marker"):
        drop_old_tool_results(1, marker=3)  # type: ignore[arg-type]


def test_bad_processors_are_refused_at_construction() -> None:
    model = _scripted([], [])
    with pytest.raises(TypeError, match=r"history_processors\[0\] must be a function"):
        Agent(model, history_processors=[3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must take"):
        Agent(model, history_processors=[lambda a, b, c: a])
    with pytest.raises(TypeError, match="must be a list"):
        Agent(model, history_processors=keep_last_turns(1))  # type: ignore[arg-type]


async def test_through_the_real_sdk_the_trimmed_history_is_sent_and_accepted() -> None:
    script = [
        StreamResponse.of_tool_calls(("c1", "echo", '{"text": "a"}')),
        StreamResponse.of_tool_calls(("c2", "echo", '{"text": "b"}')),
        StreamResponse.of_tool_calls(("c3", "echo", '{"text": "c"}')),
        StreamResponse.of_text("done"),
    ]
    async with open_fake_openai_server(script) as server:  # validates every history
        agent = Agent(
            "openai:juno",
            base_url=server.base_url,
            api_key="k",
            tools=[echo],
            instructions="Be brief.",
            history_processors=[keep_last_turns(1)],
        )
        result = await agent.run("go")
        await agent.aclose()
        bodies = [r.json["messages"] for r in server.requests]
    assert result.output == "done"
    assert [m["role"] for m in bodies[3]] == ["system", "user", "assistant", "tool"]
    assert bodies[3][2]["tool_calls"][0]["id"] == "c3"
    assert len(result.messages) == 2 + 3 * 2 + 1  # the run keeps every step
