"""What an OpenAI-compatible server adds goes back to it: a call's ``extra_content``
(Gemini's thought signature) and the message's ``reasoning_content``, through the
real SDK, the stream, the loop and the transcript, into the next request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.testing import (
    Finish,
    RawEvent,
    ReasoningDelta,
    StreamResponse,
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


@tool
async def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: clear"


async def test_a_calls_signature_and_the_messages_reasoning_are_sent_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = StreamResponse(
        [
            ReasoningDelta("Need the "),
            ReasoningDelta("weather."),
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"city":'},
                            "extra_content": SIGNATURE,
                        }
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Oslo"}'}}]}),
            Finish("tool_calls"),
        ]
    )
    script = [first, StreamResponse.of_text("Clear in Oslo.")]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        result = await Agent("openai:m", tools=[lookup]).run("Weather?")
    assert result.output == "Clear in Oslo."
    assistant = result.messages[1]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
                "extra_content": SIGNATURE,
            }
        ],
        "reasoning_content": "Need the weather.",
        # Signed with the endpoint that added them: sent back to it, to no other.
        "provider_state": {
            "provider": "openai",
            "origin": server.base_url + "/",
            "fields": ["reasoning_content"],
        },
    }
    # The next request carries the call as the server sent it, and the reasoning;
    # the signature is the harness's and stays home.
    sent = server.requests[1].json["messages"]
    assert sent[1] == {k: v for k, v in assistant.items() if k != "provider_state"}
    assert sent[2]["role"] == "tool"


async def test_a_server_that_adds_nothing_gets_the_message_it_always_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = [
        StreamResponse.of_tool_calls(("call_1", "lookup", '{"city": "Oslo"}')),
        StreamResponse.of_text("ok"),
    ]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        await Agent("openai:m", tools=[lookup]).run("Weather?")
    assert server.requests[1].json["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
