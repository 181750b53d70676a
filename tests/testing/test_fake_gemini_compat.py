"""The OpenAI fake playing Gemini 3's compatible endpoint: it signs calls and refuses unsigned ones.

Through the real ``openai`` SDK, which sends the messages as given (the
``extra_content`` of a call included).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from juno_bind_trio.providers.openai import open_openai_client
from juno_bind_trio.testing import (
    ErrorResponse,
    Finish,
    RawEvent,
    StreamResponse,
    ToolCallDelta,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

QUESTION = {"role": "user", "content": "When is high tide?"}


def call_turn(signature: str | None, call_id: str = "c1") -> list[dict[str, Any]]:
    first: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": "lookup", "arguments": "{}"},
    }
    if signature is not None:
        first["extra_content"] = {"google": {"thought_signature": signature}}
    function = {"name": "lookup", "arguments": "{}"}
    second = {"id": call_id + "b", "type": "function", "function": function}
    return [
        {"role": "assistant", "content": None, "tool_calls": [first, second]},
        {"role": "tool", "tool_call_id": call_id, "content": "found"},
        {"role": "tool", "tool_call_id": call_id + "b", "content": "found"},
    ]


async def send(client: Any, messages: list[dict[str, Any]]) -> list[Any]:
    stream = await client.chat.completions.create(model="m", messages=messages, stream=True)
    async with stream:
        return [chunk async for chunk in stream]


async def test_an_unsigned_call_in_the_current_turn_is_refused_with_geminis_words() -> None:
    async with (
        open_fake_openai_server([StreamResponse.of_text("ok")]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        server.gemini_signatures = True
        with pytest.raises(openai.BadRequestError, match="missing a thought_signature") as caught:
            await send(client, [QUESTION, *call_turn(None)])
        assert "function call `lookup` , position 2" in str(caught.value)
        with pytest.raises(openai.BadRequestError, match="Thought signature is not valid"):
            await send(client, [QUESTION, *call_turn("Zm9yZ2Vk")])
        assert server.pending() == 1  # refusals take nothing from the script
        # The stand-ins the Gemini API documents pass; so does an earlier
        # turn's unsigned call (only the current turn is checked).
        await send(client, [QUESTION, *call_turn("skip_thought_signature_validator")])
        server.push(StreamResponse.of_text("ok"), StreamResponse.of_text("ok"))
        await send(client, [QUESTION, *call_turn("context_engineering_is_the_way_to_go")])
        earlier = [QUESTION, *call_turn(None), {"role": "user", "content": "And tomorrow?"}]
        await send(client, earlier)
        server.gemini_signatures = False
        server.push(StreamResponse.of_text("ok"))
        await send(client, [QUESTION, *call_turn(None)])
    refused = [r for r in server.requests if isinstance(r.response, ErrorResponse)]
    assert [r.index for r in refused] == [0, 1]


async def test_the_first_call_of_a_streamed_answer_is_signed_and_its_signature_is_taken_back() -> (
    None
):
    answer = StreamResponse(
        [
            ToolCallDelta(0, id="c1", name="lookup", arguments="{}"),
            ToolCallDelta(1, id="c1b", name="lookup", arguments="{}"),
            Finish("tool_calls"),
        ]
    )
    async with (
        open_fake_openai_server([answer, StreamResponse.of_text("ok")]) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        server.gemini_signatures = True
        chunks = await send(client, [QUESTION])
        deltas = [chunk.model_dump()["choices"][0]["delta"] for chunk in chunks if chunk.choices]
        calls = [c for d in deltas for c in d.get("tool_calls") or ()]
        signature = calls[0]["extra_content"]["google"]["thought_signature"]
        assert isinstance(signature, str)
        assert "extra_content" not in calls[1]
        await send(client, [QUESTION, *call_turn(signature)])
    assert not isinstance(server.requests[1].response, ErrorResponse)


async def test_a_scripted_signature_is_the_servers_own() -> None:
    raw = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": "{}"},
                            "extra_content": {"google": {"thought_signature": "UmF3"}},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
    }
    scripted = StreamResponse(
        [ToolCallDelta(0, id="c2", name="lookup", arguments="{}", thought_signature="U2NyaXB0")]
    )
    script = [StreamResponse([RawEvent(json.dumps(raw))]), scripted]
    script += [StreamResponse.of_text("ok"), StreamResponse.of_text("ok")]
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        server.gemini_signatures = True
        await send(client, [QUESTION])
        chunks = await send(client, [QUESTION])
        sent = chunks[0].model_dump()["choices"][0]["delta"]["tool_calls"][0]
        assert sent["extra_content"] == {"google": {"thought_signature": "U2NyaXB0"}}
        await send(client, [QUESTION, *call_turn("UmF3")])
        await send(client, [QUESTION, *call_turn("U2NyaXB0")])
    assert not any(isinstance(r.response, ErrorResponse) for r in server.requests)
