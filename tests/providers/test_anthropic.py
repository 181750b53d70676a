"""The Anthropic adapter through the real ``anthropic`` SDK against the fake Messages API.

Every test runs on both backends; the fake validates each conversation as
the real API does (a ``tool_use`` answered in the next user turn, thinking
blocks back unchanged, ``max_tokens`` present), so a second turn it accepts
is a transcript the real API would accept.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anthropic
import httpx2
import provider_cases as cases
import pytest
from provider_cases import MESSAGES, NEXT, RETRY, STAGE, STALLS, STOP, Fault, Kind

from juno_bind_trio import CompletionDefectError
from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.loop import LoopState
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.anthropic import (
    STRUCTURED_OUTPUT_TOOL,
    AnthropicAdapter,
    classify_anthropic_error,
    open_anthropic_client,
)
from juno_bind_trio.routing import (
    AllRoutesFailedError,
    RouteAction,
)
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeResponse,
    LoopbackServer,
    MalformedChunk,
    StreamResponse,
    TextDelta,
    Usage,
    anthropic_signature,
    open_fake_anthropic_server,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def claude_wire(
    script: Sequence[FakeResponse],
) -> AsyncIterator[tuple[LoopbackServer, AnthropicAdapter]]:
    async with (
        open_fake_anthropic_server(script) as server,
        open_anthropic_client(base_url=server.base_url, api_key="k") as client,
    ):
        yield server, AnthropicAdapter(client)


def claude(
    script: Sequence[FakeResponse], **options: Any
) -> AbstractAsyncContextManager[tuple[RoutedModel, LoopbackServer]]:
    return cases.open_routed(claude_wire, "anthropic", "claude-test", script, **options)


async def test_text_streams_to_the_reader_and_the_request_is_the_messages_api_shape() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    script = [
        StreamResponse.of_text("Hel", "lo", usage=Usage(prompt_tokens=12, completion_tokens=2))
    ]
    async with claude(script) as (model, server):
        result = await model.route(MESSAGES, text_stream=stream)
    turn = result.unwrap()
    assert turn.content == "Hello"
    assert cases.texts(sink) == ["Hel", "lo"]
    assert (turn.input_tokens, turn.output_tokens) == (12, 2)
    body = server.requests[0].json
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 4096
    assert body["stream"] is True

    assert server.requests[0].header("authorization") == "Bearer k"


async def test_parallel_tool_calls_are_answered_in_one_user_turn() -> None:
    script = [
        StreamResponse.of_tool_calls(
            cases.add_call("c1", 1, 2), cases.add_call("c2", 3, 4), text="Adding."
        ),
        StreamResponse.of_text("3 and 7"),
    ]
    async with claude(script) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(model, state, max_iterations=3).run()
    assert result.reason == "completed"
    assert result.content == "3 and 7"
    first, second = (r.json for r in server.requests)
    assert first["tools"] == [
        {
            "name": "add",
            "description": "Add two integers.",
            "input_schema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        }
    ]
    # The assistant turn as blocks, then both answers in the next user turn.
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1, "b": 2}},
                {"type": "tool_use", "id": "c2", "name": "add", "input": {"a": 3, "b": 4}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "3"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "7"},
            ],
        },
    ]
    # The transcript stays the chat-completions shape.
    assistant = state.messages[2]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert PROVIDER_STATE_KEY not in assistant


async def test_thinking_blocks_go_back_unchanged_over_two_tool_turns() -> None:
    script = [
        cases.reasoning_then_call("First I add one and two.", cases.add_call("c1", 1, 2)),
        cases.reasoning_then_call("Now three and four.", cases.add_call("c2", 3, 4)),
        StreamResponse.of_text("10"),
    ]
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    async with claude(script, request_options=thinking) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(model, state).run()
    # Every request was accepted by the validating fake: the thinking blocks
    # were sent back at the head of their turns, text and signature intact.
    assert result.content == "10"
    assert cases.accepted(server)
    third = server.requests[2].json["messages"]
    assistant_turns = [m for m in third if m["role"] == "assistant"]
    assert [turn["content"][0] for turn in assistant_turns] == [
        {
            "type": "thinking",
            "thinking": "First I add one and two.",
            "signature": anthropic_signature("First I add one and two."),
        },
        {
            "type": "thinking",
            "thinking": "Now three and four.",
            "signature": anthropic_signature("Now three and four."),
        },
    ]
    states: list[Any] = [
        m.get(PROVIDER_STATE_KEY) for m in state.messages if m["role"] == "assistant"
    ]
    assert states[0]["provider"] == "anthropic"
    assert states[2] is None  # the answer had no thinking


async def test_a_changed_thinking_block_is_refused_as_the_api_refuses_it() -> None:
    signature = anthropic_signature("real thought")
    transcript: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
            PROVIDER_STATE_KEY: {
                "provider": "anthropic",
                "thinking": [{"type": "thinking", "thinking": "edited", "signature": signature}],
            },
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    async with claude([StreamResponse.of_text("x")]) as (model, _):
        result = await model.route(transcript)
    assert not result.ok
    error = result.error
    assert isinstance(error, anthropic.BadRequestError)
    assert "Invalid `signature`" in str(error)


async def test_structured_output_is_a_forced_tool_whose_input_is_the_content() -> None:
    response_format = cases.place_format()
    script = [
        StreamResponse.of_tool_calls(
            ("s1", STRUCTURED_OUTPUT_TOOL, '{"city": "Lisbon"}'), fragments=3
        )
    ]
    async with claude(script, request_options={"response_format": response_format}) as (
        model,
        server,
    ):
        turn = (await model.route(MESSAGES)).unwrap()
    assert turn.content == '{"city":"Lisbon"}'
    assert turn.tool_calls == ()
    body = server.requests[0].json
    assert body["tool_choice"] == {"type": "tool", "name": STRUCTURED_OUTPUT_TOOL}
    assert body["tools"][-1]["input_schema"] == cases.PLACE_SCHEMA
    assert "response_format" not in body


# --- every fault, classified, on a retractable and a permanent reader -------------------

FAULTS: list[Fault] = [
    ("429", ErrorResponse(429, retry_after=3), NEXT, anthropic.RateLimitError, False),
    ("529 overloaded", ErrorResponse(529), NEXT, anthropic.InternalServerError, False),
    ("500", ErrorResponse(500), NEXT, anthropic.InternalServerError, False),
    ("closed before the answer", CloseBeforeResponse(), NEXT, anthropic.APIConnectionError, False),
    (
        "dropped mid-stream",
        StreamResponse([TextDelta("Half"), Disconnect()]),
        NEXT,
        # anthropic 2.15 let the HTTP library's own error escape; 2.17 wraps it.
        (httpx2.RemoteProtocolError, anthropic.APIConnectionError),
        True,
    ),
    (
        "overloaded mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("Overloaded", type="overloaded_error")]),
        NEXT,
        anthropic.APIStatusError,
        True,
    ),
    (
        "malformed event",
        StreamResponse([TextDelta("Half"), MalformedChunk()]),
        RETRY,
        json.JSONDecodeError,
        True,
    ),
    *STALLS,
    (
        "cut off without message_stop",
        StreamResponse([TextDelta("Half")], done=False),
        RETRY,
        CompletionDefectError,
        True,
    ),
    (
        "prompt too long",
        ErrorResponse(400, "prompt is too long: 210000 tokens > 200000 maximum"),
        STAGE,
        anthropic.BadRequestError,
        False,
    ),
    ("bad request", ErrorResponse(400, "messages: bad"), STOP, anthropic.BadRequestError, False),
]


@cases.every_fault(FAULTS)
async def test_every_fault_is_classified_and_the_reader_ends_with_the_winner(
    fault: FakeResponse, action: RouteAction, kind: Kind, shown: bool, retractable: bool
) -> None:
    models = ("claude-a", "claude-b")
    run = await cases.play_fault(claude_wire, "anthropic", models, fault, retractable=retractable)
    first = run.result.attempts[0]
    assert isinstance(first.error, kind)
    assert first.action is action or (first.adjusted is not None)
    assert classify_anthropic_error(first.error, first.candidate, first.cursor).action is action
    cases.check_the_reader_ends_with_the_winner(
        run, models, action=action, kind=kind, shown=shown, retractable=retractable
    )


async def test_a_429_says_how_long_to_wait() -> None:
    async with claude([ErrorResponse(429, retry_after=7)]) as (model, _):
        result = await model.route(MESSAGES)
    assert result.attempts[0].error is not None
    assert isinstance(result.error, AllRoutesFailedError | anthropic.RateLimitError)
    error = result.attempts[0].error
    assert isinstance(error, Exception)
    candidate, cursor = result.attempts[0].candidate, result.attempts[0].cursor
    assert classify_anthropic_error(error, candidate, cursor).retry_after == 7.0


def test_a_client_that_retries_is_refused() -> None:
    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="max_retries=0"):
        AnthropicAdapter(client)
    with pytest.raises(TypeError, match="AsyncAnthropic"):
        AnthropicAdapter(object())  # type: ignore[arg-type]


@cases.THOUGHTS
async def test_thinking_keeps_the_stream_alive_but_is_not_the_first_token(
    thoughts: int, ok: bool
) -> None:
    result, took = await cases.route_through_thoughts(claude, thoughts)
    if ok:
        assert result.unwrap().content == "done"
    else:
        cases.check_stalled_before_the_first_token(result, took)


async def test_an_agent_output_type_is_answered_through_the_forced_tool() -> None:
    script = [StreamResponse.of_tool_calls(("s1", STRUCTURED_OUTPUT_TOOL, '{"city": "Porto"}'))]
    async with open_fake_anthropic_server(script) as server:
        output = await cases.ask_for_a_place(
            "anthropic:claude-test", base_url=server.base_url, api_key="k"
        )
    assert output == cases.Place(city="Porto")
    assert server.requests[0].json["tool_choice"] == {
        "type": "tool",
        "name": STRUCTURED_OUTPUT_TOOL,
    }
