"""Falling back from Gemini to Anthropic mid-stream, and back: real SDKs, validating fakes.

Each side's fake validates its conversation as the real API does, so every
request it answered is one the real API would take.
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
from juno_bind_trio.providers.google import GeminiAdapter, open_gemini_client
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeProviderServer,
    FakeResponse,
    Finish,
    LoopbackServer,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    open_fake_anthropic_server,
    open_fake_gemini_server,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def both(
    gemini_script: Sequence[FakeResponse],
    claude_script: Sequence[FakeResponse],
    *,
    gemini_first: bool,
) -> AsyncIterator[tuple[RoutedModel, FakeProviderServer, LoopbackServer]]:
    async with (
        open_fake_gemini_server(gemini_script) as gemini,
        open_fake_anthropic_server(claude_script) as claude,
        open_gemini_client(base_url=gemini.base_url, api_key="g") as gemini_client,
        open_anthropic_client(base_url=claude.base_url, api_key="a") as claude_client,
    ):
        model = fallback_model(
            ("gemini-test", "google", GeminiAdapter(gemini_client)),
            ("claude-test", "anthropic", AnthropicAdapter(claude_client)),
            in_order=gemini_first,
            request_options={"max_tokens": 512},
        )
        yield model, gemini, claude


async def test_gemini_dies_mid_stream_and_anthropic_answers() -> None:
    sink = ListSink()
    gemini_script = [
        StreamResponse(
            [
                ReasoningDelta("I should look it up."),
                ToolCallDelta(0, name="lookup", arguments=json.dumps({"q": "tides"})),
                Finish("tool_calls"),
            ]
        ),
        StreamResponse([TextDelta("The tides are"), Disconnect()]),
        # The next turn, after the fallback: accepted by the validating fake.
        StreamResponse.of_text("Anything else?"),
    ]
    claude_script = [StreamResponse.of_text("High tide ", "is at noon.")]
    async with both(gemini_script, claude_script, gemini_first=True) as (model, gemini, claude):
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await lookup_loop(model, state, sink).run()
        assert result.content == "High tide is at noon."
        # The reader of turn 2 ends with the fallback's text only.
        assert turn_text(sink, "r:2") == "High tide is at noon."
        second = [e for e in sink.events if e.turn_id == "r:2"]
        assert [type(e) for e in second] == [TextEvent, ResetEvent, TextEvent, TextEvent]
        # Anthropic was sent no Gemini state, and took the call and its answer.
        request = claude.requests[0]
        assert not isinstance(request.response, ErrorResponse)
        sent = request.json["messages"]
        call_id = state.messages[1]["tool_calls"][0]["id"]
        assert sent[1]["content"] == [
            {"type": "tool_use", "id": call_id, "name": "lookup", "input": {"q": "tides"}}
        ]
        assert "signature" not in json.dumps(request.json)
        assistant = [m for m in state.messages if m["role"] == "assistant"]
        assert assistant[0][PROVIDER_STATE_KEY]["provider"] == "google"
        assert PROVIDER_STATE_KEY not in assistant[1]
        # The next request goes to Gemini again and is accepted: its call still
        # carries the signature it was issued.
        state.messages.append({"role": "user", "content": "Thanks."})
        again = await model.route(state.messages)
        assert again.unwrap().content == "Anything else?"
        third = gemini.requests[-1]
        assert not isinstance(third.response, ErrorResponse)
        assert "thoughtSignature" in third.json["contents"][1]["parts"][0]


async def test_anthropic_dies_mid_tool_loop_and_gemini_takes_its_calls() -> None:
    sink = ListSink()
    claude_script = [
        StreamResponse.of_tool_calls(("toolu_1", "lookup", '{"q": "moon"}')),
        StreamResponse([TextDelta("The moon is"), Disconnect()]),
    ]
    gemini_script = [StreamResponse.of_text("Full ", "tonight.")]
    async with both(gemini_script, claude_script, gemini_first=False) as (model, gemini, _):
        state = LoopState(messages=[{"role": "user", "content": "Moon phase?"}])
        result = await lookup_loop(model, state, sink).run()
    assert result.content == "Full tonight."
    assert turn_text(sink, "r:2") == "Full tonight."
    request = gemini.requests[0]
    # Claude's call in the current turn, with the dummy signature Gemini 3 accepts
    # for calls it did not issue, and its answer right after.
    assert not isinstance(request.response, ErrorResponse)
    model_turn, answer = request.json["contents"][1:]
    assert model_turn["parts"][0]["functionCall"] == {"name": "lookup", "args": {"q": "moon"}}
    assert answer["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"result": "found: moon"}}}
    ]
    assert request.json["generationConfig"]["maxOutputTokens"] == 512
