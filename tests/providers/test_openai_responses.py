"""The Responses adapter through the real ``openai`` SDK against the fake Responses API.

Every test runs on both backends; the fake validates each ``input`` as the
real API does (a ``function_call_output`` per ``call_id``, a call item sent
back with the reasoning item that came with it, the encrypted reasoning
unchanged), so a second turn it accepts is one the real API would accept.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import openai
import provider_cases as cases
import pytest
from hypothesis import given
from hypothesis import strategies as st
from provider_cases import MESSAGES, NEXT, RETRY, STAGE, STALLS, STOP, Fault, Kind

from juno_bind_trio import CompletionDefectError
from juno_bind_trio.completion import (
    ListSink,
    ReasoningEvent,
    TurnTextStream,
)
from juno_bind_trio.loop import LoopState
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.openai import (
    OpenAIResponsesAdapter,
    classify_responses_error,
    open_openai_client,
)
from juno_bind_trio.providers.openai._responses_convert import (
    convert_input,
    convert_tools,
    request_arguments,
)
from juno_bind_trio.routing import (
    RouteAction,
)
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeProviderServer,
    FakeResponse,
    Finish,
    MalformedChunk,
    StreamResponse,
    TextDelta,
    Usage,
    fake_responses_env,
    open_fake_responses_server,
)

pytestmark = pytest.mark.anyio

NAME = "openai-responses"


@asynccontextmanager
async def gpt_wire(
    script: Sequence[FakeResponse],
) -> AsyncIterator[tuple[FakeProviderServer, OpenAIResponsesAdapter]]:
    async with (
        open_fake_responses_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        yield server, OpenAIResponsesAdapter(client)


def gpt(
    script: Sequence[FakeResponse], **options: Any
) -> AbstractAsyncContextManager[tuple[RoutedModel, FakeProviderServer]]:
    return cases.open_routed(gpt_wire, NAME, "gpt-test", script, **options)


class ThinkingSink:
    """A sink that shows the model's thinking: reasoning events reach it, text goes to a list."""

    retractable = True

    def __init__(self) -> None:
        self.text = ListSink()
        self.thoughts: list[str] = []

    def emit(self, event: Any) -> None:
        self.text.emit(event)

    def emit_reasoning(self, event: ReasoningEvent) -> None:
        self.thoughts.append(event.text)


async def test_text_streams_to_the_reader_with_usage_and_the_request_is_the_responses_shape() -> (
    None
):
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    usage = Usage(prompt_tokens=12, completion_tokens=5, cached_tokens=4, reasoning_tokens=3)
    script = [StreamResponse.of_text("Hel", "lo", usage=usage)]
    async with gpt(script) as (model, server):
        result = await model.route(MESSAGES, text_stream=stream)
    turn = result.unwrap()
    assert turn.content == "Hello"
    assert cases.texts(sink) == ["Hel", "lo"]
    assert (turn.input_tokens, turn.output_tokens) == (12, 5)
    assert (turn.cached_tokens, turn.reasoning_tokens) == (4, 3)
    assert turn.extra == {}
    body = server.requests[0].json
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["stream"] is True
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert server.requests[0].header("authorization") == "Bearer k"


ADD_TOOL = cases.add_tool(
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
)


async def test_parallel_tool_calls_become_items_and_each_is_answered_by_call_id() -> None:
    sink = ListSink()
    script = [
        StreamResponse.of_tool_calls(
            cases.add_call("c1", 1, 2), cases.add_call("c2", 3, 4), text="Adding."
        ),
        StreamResponse.of_text("3 and 7"),
    ]
    async with gpt(script) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(
            model, state, tool=ADD_TOOL, text_sink=sink, run_id="r"
        ).run()
    assert result.reason == "completed"
    assert result.content == "3 and 7"
    assert cases.accepted(server)
    first, second = (r.json for r in server.requests)
    assert first["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two integers.",
            "parameters": ADD_TOOL["function"]["parameters"],
            "strict": False,
        }
    ]
    assert second["input"][2:] == [
        {"role": "assistant", "content": "Adding."},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1, "b": 2}'},
        {"type": "function_call", "call_id": "c2", "name": "add", "arguments": '{"a": 3, "b": 4}'},
        {"type": "function_call_output", "call_id": "c1", "output": "3"},
        {"type": "function_call_output", "call_id": "c2", "output": "7"},
    ]
    assistant = state.messages[2]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert PROVIDER_STATE_KEY not in assistant  # no reasoning: nothing to carry
    # Argument fragments reached the text stream's tool-call channel too.
    assert cases.texts(sink)[0] == "Adding."


async def test_reasoning_items_go_back_unchanged_over_two_tool_turns() -> None:
    sink = ThinkingSink()
    script = [
        cases.reasoning_then_call("First I add one and two.", cases.add_call("c1", 1, 2)),
        cases.reasoning_then_call("Now three and four.", cases.add_call("c2", 3, 4)),
        StreamResponse.of_text("10"),
    ]
    async with gpt(script) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(
            model, state, tool=ADD_TOOL, text_sink=sink, run_id="r"
        ).run()
    # Every request was accepted by the validating fake: with store false, each
    # call item came back with its reasoning item, the sealed content intact.
    assert result.content == "10"
    assert cases.accepted(server)
    states: list[Any] = [
        m.get(PROVIDER_STATE_KEY) for m in state.messages if m["role"] == "assistant"
    ]
    assert [s["provider"] for s in states[:2]] == [NAME, NAME]
    assert states[2] is None
    sealed = [s["reasoning"][0]["encrypted_content"] for s in states[:2]]
    third = server.requests[2].json["input"]
    reasoning_items = [item for item in third if item.get("type") == "reasoning"]
    assert [item["encrypted_content"] for item in reasoning_items] == sealed
    assert reasoning_items == [states[0]["reasoning"][0], states[1]["reasoning"][0]]
    # The call items keep the API's ids, which tie them to their reasoning.
    calls = [item for item in third if item.get("type") == "function_call"]
    assert [c["id"] for c in calls] == [states[0]["calls"]["c1"], states[1]["calls"]["c2"]]
    # The summaries streamed as reasoning, the transcript stays chat-shaped.
    assert state.messages[2]["tool_calls"][0]["id"] == "c1"
    assert "".join(sink.thoughts) == "First I add one and two.Now three and four."


async def test_an_altered_reasoning_item_is_refused_as_the_api_refuses_it() -> None:
    script = [
        cases.reasoning_then_call("Think.", cases.add_call("c1", 1, 2)),
        StreamResponse.of_text("x"),
    ]
    async with gpt(script) as (model, _):
        first = (await model.route(MESSAGES)).unwrap()
        state = dict(first.extra[PROVIDER_STATE_KEY])
        state["reasoning"] = [{**state["reasoning"][0], "encrypted_content": "dGFtcGVyZWQ="}]
        transcript = [
            *MESSAGES,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                ],
                PROVIDER_STATE_KEY: state,
            },
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
        ]
        result = await model.route(transcript)
    assert not result.ok
    assert isinstance(result.error, openai.BadRequestError)
    assert "could not be verified" in str(result.error)


async def test_structured_output_is_the_native_text_format() -> None:
    schema = cases.PLACE_SCHEMA
    response_format = cases.place_format(strict=True)
    script = [StreamResponse.of_text('{"city": ', '"Lisbon"}')]
    async with gpt(script, request_options={"response_format": response_format}) as (
        model,
        server,
    ):
        turn = (await model.route(MESSAGES)).unwrap()
    assert json.loads(turn.content or "") == {"city": "Lisbon"}
    body = server.requests[0].json
    assert "response_format" not in body
    text_format = body["text"]["format"]
    assert (text_format["type"], text_format["name"], text_format["strict"]) == (
        "json_schema",
        "Place",
        True,
    )
    assert text_format["schema"]["properties"] == schema["properties"]
    assert text_format["schema"]["additionalProperties"] is False


async def test_an_agent_output_type_is_answered_through_text_format() -> None:
    script = [StreamResponse.of_text('{"city": "Porto"}')]
    async with open_fake_responses_server(script) as server:
        output = await cases.ask_for_a_place(
            "openai-responses:gpt-test", base_url=server.base_url, api_key="k"
        )
    assert output == cases.Place(city="Porto")
    body = server.requests[0].json
    assert body["text"]["format"]["type"] == "json_schema"


def test_agent_from_a_model_string_through_the_env_helper() -> None:
    from juno_bind_trio.agent import Agent

    with fake_responses_env([StreamResponse.of_text("Hello!")]) as server:
        result = Agent("openai-responses:gpt-test").run_sync("Hi")
    assert result.output == "Hello!"
    assert server.requests[0].json["input"][-1] == {"role": "user", "content": "Hi"}
    assert server.requests[0].model == "gpt-test"


# --- every fault, classified, on a retractable and a permanent reader -------------------

FAULTS: list[Fault] = [
    ("429", ErrorResponse(429, retry_after=3), NEXT, openai.RateLimitError, False),
    ("500", ErrorResponse(500), NEXT, openai.InternalServerError, False),
    ("503", ErrorResponse(503), NEXT, openai.InternalServerError, False),
    ("closed before the answer", CloseBeforeResponse(), NEXT, openai.APIConnectionError, False),
    (
        "dropped mid-stream",
        StreamResponse([TextDelta("Half"), Disconnect()]),
        NEXT,
        openai.APIConnectionError,
        True,
    ),
    (
        "error event mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("Overloaded", code="server_error")]),
        NEXT,
        openai.APIError,
        True,
    ),
    (
        "response.failed mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("boom", type="response.failed")]),
        NEXT,
        openai.APIError,
        True,
    ),
    (
        "response.failed, context too long",
        StreamResponse(
            [ErrorEvent("too long", type="response.failed", code="context_length_exceeded")]
        ),
        STAGE,
        openai.APIError,
        False,
    ),
    (
        "response.failed, invalid prompt",
        StreamResponse([ErrorEvent("no", type="response.failed", code="invalid_prompt")]),
        STOP,
        openai.APIError,
        False,
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
        "cut off without response.completed",
        StreamResponse([TextDelta("Half")], done=False),
        RETRY,
        CompletionDefectError,
        True,
    ),
    (
        "context too long (400)",
        ErrorResponse(400, "too long", code="context_length_exceeded"),
        STAGE,
        openai.BadRequestError,
        False,
    ),
    ("bad request", ErrorResponse(400, "input: bad"), STOP, openai.BadRequestError, False),
]


@cases.every_fault(FAULTS)
async def test_every_fault_is_classified_and_the_reader_ends_with_the_winner(
    fault: FakeResponse, action: RouteAction, kind: Kind, shown: bool, retractable: bool
) -> None:
    models = ("gpt-a", "gpt-b")
    run = await cases.play_fault(gpt_wire, NAME, models, fault, retractable=retractable)
    first = run.result.attempts[0]
    assert type(first.error) is kind or (
        kind is not openai.APIError and isinstance(first.error, kind)
    )
    assert classify_responses_error(first.error, first.candidate, first.cursor).action is action
    cases.check_the_reader_ends_with_the_winner(
        run, models, action=action, kind=kind, shown=shown, retractable=retractable
    )


async def test_a_429_says_how_long_to_wait() -> None:
    async with gpt([ErrorResponse(429, retry_after=7)]) as (model, _):
        result = await model.route(MESSAGES)
    attempt = result.attempts[0]
    assert isinstance(attempt.error, openai.RateLimitError)
    verdict = classify_responses_error(attempt.error, attempt.candidate, attempt.cursor)
    assert verdict.retry_after == 7.0


async def test_the_error_event_carries_the_servers_code_and_message() -> None:
    script = [StreamResponse([ErrorEvent("slow down", code="rate_limit_exceeded")])]
    async with gpt(script) as (model, _):
        result = await model.route(MESSAGES)
    error = result.attempts[0].error
    assert isinstance(error, openai.APIError)
    assert (error.code, error.message) == ("rate_limit_exceeded", "slow down")


async def test_a_length_cut_is_a_defect_and_is_retried() -> None:
    script = [
        StreamResponse([TextDelta("Hal"), Finish("length")]),
        StreamResponse.of_text("Whole"),
    ]
    async with gpt(script, max_retries=1) as (model, _):
        result = await model.route(MESSAGES)
    assert isinstance(result.attempts[0].error, CompletionDefectError)
    assert result.unwrap().content == "Whole"


@cases.THOUGHTS
async def test_reasoning_keeps_the_stream_alive_but_is_not_the_first_token(
    thoughts: int, ok: bool
) -> None:
    result, took = await cases.route_through_thoughts(gpt, thoughts)
    if ok:
        turn = result.unwrap()
        assert turn.content == "done"
        assert turn.extra[PROVIDER_STATE_KEY]["reasoning"][0]["type"] == "reasoning"
    else:
        cases.check_stalled_before_the_first_token(result, took)


def test_a_client_that_retries_is_refused() -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="max_retries=0"):
        OpenAIResponsesAdapter(client)
    with pytest.raises(TypeError, match="AsyncOpenAI"):
        OpenAIResponsesAdapter(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="classify"):
        OpenAIResponsesAdapter(client.with_options(max_retries=0), classify=3)  # type: ignore[arg-type]


# --- the conversion at the request boundary ------------------------------------------------


def test_foreign_state_is_dropped_and_options_are_translated() -> None:
    transcript: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Sure.",
            PROVIDER_STATE_KEY: {"provider": "anthropic", "thinking": [{"type": "thinking"}]},
        },
    ]
    items = convert_input(transcript)
    assert items == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {
                    "type": "input_image",
                    "detail": "auto",
                    "image_url": "data:image/png;base64,AAAA",
                },
            ],
        },
        {"role": "assistant", "content": "Sure."},
    ]
    arguments = request_arguments(
        {
            "max_tokens": 100,
            "seed": 1,
            "stop": ["x"],
            "top_k": 3,
            "tool_choice": {"type": "function", "function": {"name": "add"}},
            "reasoning_effort": "low",
            "store": True,
            "custom": 1,
        }
    )
    assert arguments == {
        "max_output_tokens": 100,
        "tool_choice": {"type": "function", "name": "add"},
        "reasoning": {"effort": "low"},
        "store": True,
        "include": ["reasoning.encrypted_content"],
        "extra_body": {"custom": 1},
    }
    assert convert_tools([{"type": "web_search"}]) == [{"type": "web_search"}]


_ids = st.text(alphabet="abcdefgh0123456789", min_size=1, max_size=8)
_texts = st.text(max_size=20)


@st.composite
def _transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(_texts) or "q"}]
    for _ in range(draw(st.integers(0, 3))):
        ids = draw(st.lists(_ids, min_size=0, max_size=3, unique=True))
        text = draw(_texts)
        calls = [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": draw(_texts)}}
            for i in ids
        ]
        assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = calls
        messages.append(assistant)
        messages += [{"role": "tool", "tool_call_id": i, "content": draw(_texts)} for i in ids]
        messages.append({"role": "user", "content": draw(_texts) or "more"})
    return messages


def _back_to_chat(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The inverse of convert_input, for the round trip: items -> chat messages.
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            if not out or out[-1]["role"] != "assistant" or out[-1].get("_closed"):
                out.append({"role": "assistant", "content": None})
            call = {"id": item["call_id"], "type": "function"}
            call["function"] = {"name": item["name"], "arguments": item["arguments"]}
            out[-1].setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            if out and out[-1]["role"] == "assistant":
                out[-1]["_closed"] = True
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        elif item.get("role") == "assistant":
            out.append({"role": "assistant", "content": item["content"]})
        else:
            out.append({"role": item["role"], "content": item["content"]})
    for message in out:
        message.pop("_closed", None)
    return out


@given(_transcripts())
def test_the_conversion_round_trips_a_chat_transcript(messages: list[dict[str, Any]]) -> None:
    items = convert_input(messages)
    # Every call is answered, by call_id, after it: what the API checks.
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs)
    expected = [
        m for m in messages if m["role"] != "assistant" or m["content"] or m.get("tool_calls")
    ]
    assert _back_to_chat(items) == expected
