"""Falling back mid-stream between the Responses API and chat completions, both ways.

Both wires through the real ``openai`` SDK, each against its validating fake:
a transcript a fallback leaves behind is one the next provider accepts, and
neither is sent the other's provider state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
from fallback_cases import fallback_model, lookup_loop, turn_text

from juno_bind_trio.completion import ListSink, ResetEvent, TextEvent
from juno_bind_trio.loop import LoopState
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.openai import (
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    open_openai_client,
)
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeOpenAIServer,
    FakeProviderServer,
    FakeResponse,
    Finish,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    open_fake_openai_server,
    open_fake_responses_server,
)

pytestmark = pytest.mark.anyio

RESPONSES = "openai-responses"


@asynccontextmanager
async def both(
    responses_script: Sequence[FakeResponse],
    chat_script: Sequence[FakeResponse],
    *,
    responses_first: bool,
) -> AsyncIterator[tuple[RoutedModel, FakeProviderServer, FakeOpenAIServer]]:
    async with (
        open_fake_responses_server(responses_script) as responses,
        open_fake_openai_server(chat_script) as chat,
        open_openai_client(base_url=responses.base_url, api_key="r") as responses_client,
        open_openai_client(base_url=chat.base_url, api_key="c") as chat_client,
    ):
        model = fallback_model(
            ("gpt-responses", RESPONSES, OpenAIResponsesAdapter(responses_client)),
            ("gpt-chat", "openai", OpenAIChatAdapter(chat_client)),
            in_order=responses_first,
            request_options={"max_tokens": 256},
        )
        yield model, responses, chat


async def test_responses_dies_mid_stream_and_chat_answers() -> None:
    sink = ListSink()
    responses_script = [
        StreamResponse(
            [
                ReasoningDelta("I should look it up."),
                ToolCallDelta(0, id="call_r1", name="lookup", arguments='{"q": "tides"}'),
                Finish("tool_calls"),
            ]
        ),
        StreamResponse([TextDelta("The tides are"), Disconnect()]),
        # The next run's first turn, back on the Responses API: accepted by its fake.
        StreamResponse.of_text("Anything else?"),
    ]
    chat_script = [StreamResponse.of_text("High tide ", "is at noon.")]
    async with both(responses_script, chat_script, responses_first=True) as (
        model,
        responses,
        chat,
    ):
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await lookup_loop(model, state, sink).run()
        assert result.content == "High tide is at noon."
        assert turn_text(sink, "r:2") == "High tide is at noon."
        second = [e for e in sink.events if e.turn_id == "r:2"]
        assert [type(e) for e in second] == [TextEvent, ResetEvent, TextEvent, TextEvent]
        # Chat completions was sent no Responses state, and its answer carries none.
        sent = chat.requests[0].json["messages"]
        assert all(PROVIDER_STATE_KEY not in m for m in sent)
        assert sent[1]["tool_calls"][0]["id"] == "call_r1"
        assert not isinstance(chat.requests[0].response, ErrorResponse)
        assistant = [m for m in state.messages if m["role"] == "assistant"]
        assert assistant[0][PROVIDER_STATE_KEY]["provider"] == RESPONSES
        assert PROVIDER_STATE_KEY not in assistant[1]
        # Back on the Responses API: its own reasoning item still precedes its call.
        state.messages.append({"role": "user", "content": "Thanks."})
        again = await model.route(state.messages)
        assert again.unwrap().content == "Anything else?"
        last = responses.requests[-1]
        assert not isinstance(last.response, ErrorResponse)
        kinds = [item.get("type", "message") for item in last.json["input"]]
        assert kinds[:3] == ["message", "reasoning", "function_call"]


async def test_chat_dies_mid_stream_and_responses_answers() -> None:
    sink = ListSink()
    chat_script = [
        StreamResponse.of_tool_calls(("call_c1", "lookup", '{"q": "moon"}')),
        StreamResponse([TextDelta("The moon is"), Disconnect()]),
    ]
    responses_script = [StreamResponse.of_text("Full ", "tonight.")]
    async with both(responses_script, chat_script, responses_first=False) as (
        model,
        responses,
        _,
    ):
        state = LoopState(messages=[{"role": "user", "content": "Moon phase?"}])
        result = await lookup_loop(model, state, sink).run()
    assert result.content == "Full tonight."
    assert turn_text(sink, "r:2") == "Full tonight."
    request = responses.requests[0]
    assert not isinstance(request.response, ErrorResponse)
    assert request.json["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_c1",
            "name": "lookup",
            "arguments": '{"q": "moon"}',
        },
        {"type": "function_call_output", "call_id": "call_c1", "output": "found: moon"},
    ]
    assert request.json["max_output_tokens"] == 256
    assert all(PROVIDER_STATE_KEY not in m for m in state.messages)
