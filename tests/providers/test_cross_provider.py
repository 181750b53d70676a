"""Falling back across providers mid-stream: Anthropic to OpenAI and back, real SDKs, real fakes.

Each side's fake validates its conversation as the real API does, so every
request it answered is one the real API would take: the transcript a
fallback leaves behind is good for the next turn, whichever provider gets it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
from fallback_cases import fallback_model, lookup_loop, turn_text

from juno_bind_trio.completion import ListSink, ResetEvent, TextEvent
from juno_bind_trio.loop import LoopState
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
from juno_bind_trio.providers.openai import OpenAIChatAdapter, open_openai_client
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeOpenAIServer,
    FakeResponse,
    Finish,
    LoopbackServer,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    open_fake_anthropic_server,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def both(
    claude_script: Sequence[FakeResponse],
    gpt_script: Sequence[FakeResponse],
    *,
    claude_first: bool,
) -> AsyncIterator[tuple[RoutedModel, LoopbackServer, FakeOpenAIServer]]:
    async with (
        open_fake_anthropic_server(claude_script) as claude,
        open_fake_openai_server(gpt_script) as gpt,
        open_anthropic_client(base_url=claude.base_url, api_key="a") as claude_client,
        open_openai_client(base_url=gpt.base_url, api_key="o") as gpt_client,
    ):
        model = fallback_model(
            ("claude-test", "anthropic", AnthropicAdapter(claude_client)),
            ("gpt-test", "openai", OpenAIChatAdapter(gpt_client)),
            in_order=claude_first,
            request_options={"max_tokens": 512},
        )
        yield model, claude, gpt


def thinking_call(call_id: str, query: str) -> StreamResponse:
    return StreamResponse(
        [
            ReasoningDelta("I should look it up."),
            ToolCallDelta(0, id=call_id, name="lookup", arguments=json.dumps({"q": query})),
            Finish("tool_calls"),
        ]
    )


async def test_anthropic_dies_mid_stream_and_openai_answers() -> None:
    sink = ListSink()
    claude_script = [
        thinking_call("toolu_1", "tides"),
        StreamResponse([TextDelta("The tides are"), Disconnect()]),
        # The next run's first turn, after the fallback: accepted by the validating fake.
        StreamResponse.of_text("Anything else?"),
    ]
    gpt_script = [StreamResponse.of_text("High tide ", "is at noon.")]
    async with both(claude_script, gpt_script, claude_first=True) as (model, claude, gpt):
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await lookup_loop(model, state, sink).run()
        assert result.content == "High tide is at noon."
        # The reader of turn 2 ends with the fallback's text only.
        assert turn_text(sink, "r:2") == "High tide is at noon."
        second = [e for e in sink.events if e.turn_id == "r:2"]
        assert [type(e) for e in second] == [TextEvent, ResetEvent, TextEvent, TextEvent]
        # OpenAI was sent no Anthropic state, and its own answer carries none.
        sent = gpt.requests[0].json["messages"]
        assert all(PROVIDER_STATE_KEY not in m for m in sent)
        assert sent[1]["tool_calls"][0]["id"] == "toolu_1"
        assistant = [m for m in state.messages if m["role"] == "assistant"]
        assert assistant[0][PROVIDER_STATE_KEY]["provider"] == "anthropic"
        assert PROVIDER_STATE_KEY not in assistant[1]
        # The next request goes to Anthropic again and is accepted: its own
        # thinking block still heads the tool turn, unchanged.
        state.messages.append({"role": "user", "content": "Thanks."})
        again = await model.route(state.messages)
        assert again.unwrap().content == "Anything else?"
        third = claude.requests[-1]
        assert not isinstance(third.response, ErrorResponse)
        assert third.json["messages"][1]["content"][0]["type"] == "thinking"


async def test_openai_dies_mid_stream_and_anthropic_answers() -> None:
    sink = ListSink()
    gpt_script = [
        StreamResponse.of_tool_calls(("call_1", "lookup", '{"q": "moon"}')),
        StreamResponse([TextDelta("The moon is"), Disconnect()]),
    ]
    claude_script = [StreamResponse.of_text("Full ", "tonight.")]
    async with both(claude_script, gpt_script, claude_first=False) as (model, claude, _):
        state = LoopState(messages=[{"role": "user", "content": "Moon phase?"}])
        result = await lookup_loop(model, state, sink).run()
    assert result.content == "Full tonight."
    assert turn_text(sink, "r:2") == "Full tonight."
    request = claude.requests[0]
    assert not isinstance(request.response, ErrorResponse)
    # OpenAI's call and its answer, in Anthropic's shape.
    assert request.json["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "moon"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "found: moon"}],
        },
    ]
    assert request.json["max_tokens"] == 512
    assert all(PROVIDER_STATE_KEY not in m for m in state.messages)
