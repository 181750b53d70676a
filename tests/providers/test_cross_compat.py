"""Two OpenAI-compatible endpoints in one plan: what one adds goes back to it and to no other.

Gemini's compatibility endpoint puts a call's ``thought_signature`` in its
``extra_content`` and reasoning in ``reasoning_content``; OpenAI's API refuses
both (``strict_fields``, as the real API answers). Real ``openai`` SDK, both
stream paths, the fakes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from fallback_cases import fallback_model, lookup_loop, turn_text

from juno_bind_trio.completion import ListSink
from juno_bind_trio.loop import LoopState, ToolCallOutcome
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.openai import OpenAIChatAdapter, open_openai_client
from juno_bind_trio.testing import (
    Disconnect,
    ErrorResponse,
    FakeOpenAIServer,
    Finish,
    RawEvent,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

SIGNATURE = {"google": {"thought_signature": "Q2lRQjRNdz09"}}


def chunk(delta: dict[str, Any], finish: str | None = None) -> RawEvent:
    body = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return RawEvent(json.dumps(body))


def signed_call(call_id: str = "call_1") -> StreamResponse:
    """A Gemini-compatible tool call: a signature on the call, reasoning on the message."""
    return StreamResponse(
        [
            chunk({"role": "assistant", "reasoning_content": "Look it up."}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "tides"}'},
                            "extra_content": SIGNATURE,
                        }
                    ]
                }
            ),
            Finish("tool_calls"),
        ]
    )


async def lookup(call: Any) -> ToolCallOutcome:
    await anyio.sleep(0.5)
    return ToolCallOutcome.from_content(call["id"], "found")


@asynccontextmanager
async def compat_then_openai(
    gemini_script: list[Any], openai_script: list[Any], *, stream_path: str
) -> AsyncIterator[tuple[RoutedModel, FakeOpenAIServer, FakeOpenAIServer]]:
    async with (
        open_fake_openai_server(gemini_script) as gemini,
        open_fake_openai_server(openai_script) as openai_api,
        open_openai_client(base_url=gemini.base_url, api_key="g") as gemini_client,
        open_openai_client(base_url=openai_api.base_url, api_key="o") as openai_client,
    ):
        openai_api.strict_fields = True
        compat = OpenAIChatAdapter(gemini_client, stream_path=stream_path)  # type: ignore[arg-type]
        direct = OpenAIChatAdapter(openai_client, stream_path=stream_path)  # type: ignore[arg-type]
        model = fallback_model(
            ("gemini-3-pro", "gemini-compat", compat), ("gpt-4o", "openai", direct)
        )
        yield model, gemini, openai_api


@pytest.mark.parametrize("stream_path", ["lean", "sdk"])
async def test_gemini_compat_dies_mid_stream_and_openai_is_sent_none_of_its_fields(
    stream_path: str,
) -> None:
    sink = ListSink()
    gemini_script = [
        signed_call(),
        StreamResponse([TextDelta("The tides are"), Disconnect()]),
        StreamResponse.of_text("Anything else?"),
    ]
    openai_script = [StreamResponse.of_text("High tide is at noon.")]
    async with compat_then_openai(gemini_script, openai_script, stream_path=stream_path) as (
        model,
        gemini,
        openai_api,
    ):
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await lookup_loop(model, state, sink, run_tool_call=lookup).run()
        assert result.content == "High tide is at noon."
        assert turn_text(sink, "r:2") == "High tide is at noon."

        # The transcript keeps the compatible server's fields, signed with its endpoint.
        first = state.messages[1]
        assert first["tool_calls"][0]["extra_content"] == SIGNATURE
        assert first["reasoning_content"] == "Look it up."
        assert first[PROVIDER_STATE_KEY] == {
            "provider": "openai",
            "origin": gemini.base_url + "/",  # as the SDK holds it
            "fields": ["reasoning_content"],
        }
        # The fallback's message carries no foreign state.
        assert state.messages[-1] == {"role": "assistant", "content": "High tide is at noon."}

        # Its own endpoint got them back (the attempt that died), and no signature.
        retried = gemini.requests[1].json["messages"][1]
        assert retried["tool_calls"][0]["extra_content"] == SIGNATURE
        assert retried["reasoning_content"] == "Look it up."
        assert PROVIDER_STATE_KEY not in retried

        # OpenAI accepted the request it was sent: the bare call, its answer.
        request = openai_api.requests[0]
        assert not isinstance(request.response, ErrorResponse)
        assert request.json["messages"][1] == {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "tides"}'},
                }
            ],
        }

        # The next turn goes to the compatible server again, with its fields.
        state.messages.append({"role": "user", "content": "Thanks."})
        again = await model.route(state.messages)
        assert again.unwrap().content == "Anything else?"
        third = gemini.requests[-1]
        assert not isinstance(third.response, ErrorResponse)
        assert third.json["messages"][1]["tool_calls"][0]["extra_content"] == SIGNATURE
        assert PROVIDER_STATE_KEY not in json.dumps(third.json)


async def test_openai_refuses_the_fields_when_they_are_sent_unsigned() -> None:
    """The check is real: a message written by hand with the fields and no signature goes as it
    is, and the strict fake refuses it as OpenAI's API does."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": "{}"},
                "extra_content": SIGNATURE,
            }
        ],
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        message,
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
    ]
    async with compat_then_openai(
        [ErrorResponse(500, "down")], [StreamResponse.of_text("x")], stream_path="lean"
    ) as (model, _, openai_api):
        outcome = await model.route(messages)
    assert not outcome.ok
    request = openai_api.requests[0]
    assert isinstance(request.response, ErrorResponse)
    assert request.response.status == 400
    assert request.response.message == (
        "Additional properties are not allowed ('extra_content' was unexpected) - "
        "'messages.1.tool_calls.0'"
    )


async def test_a_message_signed_by_another_endpoint_loses_only_what_its_signature_names() -> None:
    from juno_bind_trio.providers.openai._origin import messages_for_origin

    message = {
        "role": "assistant",
        "content": "x",
        "name": "helper",
        "reasoning_content": "r",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
                "extra_content": SIGNATURE,
            }
        ],
        PROVIDER_STATE_KEY: {
            "provider": "openai",
            "origin": "https://a.example/v1",
            "fields": ["reasoning_content"],
        },
    }
    plain = {"role": "user", "content": "hi"}
    theirs = messages_for_origin([plain, message], "https://b.example/v1")
    assert theirs[0] is plain
    assert theirs[1] == {
        "role": "assistant",
        "content": "x",
        "name": "helper",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    ours = messages_for_origin([plain, message], "https://a.example/v1")
    assert ours[1] == {k: v for k, v in message.items() if k != PROVIDER_STATE_KEY}
    assert PROVIDER_STATE_KEY in message  # the transcript is not touched
    untouched = [plain, {"role": "assistant", "content": "y", "reasoning_content": "r"}]
    assert messages_for_origin(untouched, "https://b.example/v1") is untouched


async def test_gemini_compat_dies_and_anthropic_takes_its_call_without_its_fields() -> None:
    from juno_bind_trio.providers.anthropic import AnthropicAdapter, open_anthropic_client
    from juno_bind_trio.testing import open_fake_anthropic_server

    gemini_script = [signed_call(), StreamResponse([TextDelta("The tides"), Disconnect()])]
    claude_script = [StreamResponse.of_text("Noon.")]
    async with (
        open_fake_openai_server(gemini_script) as gemini,
        open_fake_anthropic_server(claude_script) as claude,
        open_openai_client(base_url=gemini.base_url, api_key="g") as gemini_client,
        open_anthropic_client(base_url=claude.base_url, api_key="a") as claude_client,
    ):
        model = fallback_model(
            ("gemini-3-pro", "gemini-compat", OpenAIChatAdapter(gemini_client)),
            ("claude-test", "anthropic", AnthropicAdapter(claude_client)),
            request_options={"max_tokens": 64},
        )
        state = LoopState(messages=[{"role": "user", "content": "When is high tide?"}])
        result = await lookup_loop(model, state, ListSink(), run_tool_call=lookup).run()
    assert result.content == "Noon."
    request = claude.requests[0]
    assert not isinstance(request.response, ErrorResponse)
    sent = json.dumps(request.json)
    assert "thought_signature" not in sent
    assert "reasoning_content" not in sent
    assert request.json["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "tides"}}
    ]
