"""The Responses API fake against the real ``openai`` SDK (``client.responses``), on both backends.

What each fault becomes is measured here, through the SDK's own parsing:
an ``error`` event and ``response.failed`` arrive as typed events (the SDK
raises nothing for them), a malformed line is a raw ``JSONDecodeError``, a
dropped connection an ``APIConnectionError``, a stall an ``APITimeoutError``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest
from fake_cases import STALLS, check_the_stall_ends_at_the_read_timeout
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.providers.openai._client import prime_openai_client
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    CompletionResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeResponse,
    Finish,
    MalformedChunk,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
    fake_responses_env,
    open_fake_responses_server,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sdk(base_url: str, *, read: float = 600.0) -> AsyncIterator[openai.AsyncOpenAI]:
    timeout = openai.Timeout(30.0, read=read)
    async with openai.AsyncOpenAI(
        base_url=base_url, api_key="test", max_retries=0, timeout=timeout
    ) as client:
        await prime_openai_client(client)
        yield client


async def events(client: openai.AsyncOpenAI, **options: Any) -> list[Any]:
    stream = await client.responses.create(
        model=options.pop("model", "m"), input=options.pop("input", "hi"), stream=True, **options
    )
    async with stream:
        return [event async for event in stream]


TURN = StreamResponse(
    [
        ReasoningDelta("let me see"),
        TextDelta("Checking "),
        TextDelta("both."),
        ToolCallDelta(0, id="call_a", name="weather", arguments='{"city":'),
        ToolCallDelta(0, arguments=' "Oslo"}'),
        ToolCallDelta(1, id="call_b", name="time", arguments="{}"),
        Finish("tool_calls"),
        Usage(11, 7, cached_tokens=3, reasoning_tokens=2),
    ]
)


async def test_a_turn_streams_as_typed_events_and_ends_with_the_whole_response() -> None:
    async with open_fake_responses_server([TURN]) as server, sdk(server.base_url) as client:
        seen = await events(client, include=["reasoning.encrypted_content"], store=False)
    kinds = [e.type for e in seen]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    text = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert text == "Checking both."
    arguments = [e.delta for e in seen if e.type == "response.function_call_arguments.delta"]
    assert arguments == ['{"city":', ' "Oslo"}', "{}"]
    final = seen[-1].response
    assert final.output_text == "Checking both."
    reasoning, message, first, second = final.output
    assert reasoning.type == "reasoning"
    assert reasoning.summary[0].text == "let me see"
    assert reasoning.encrypted_content
    assert message.type == "message"
    assert (first.call_id, first.name, json.loads(first.arguments)) == (
        "call_a",
        "weather",
        {"city": "Oslo"},
    )
    assert (second.call_id, second.name) == ("call_b", "time")
    usage = final.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 7, 18)
    assert usage.input_tokens_details.cached_tokens == 3
    assert usage.output_tokens_details.reasoning_tokens == 2
    assert server.requests[0].model == "m"
    assert server.requests[0].stream is True


async def test_encrypted_reasoning_only_when_the_request_includes_it() -> None:
    async with (
        open_fake_responses_server([TURN]) as server,
        sdk(server.base_url) as client,
    ):
        seen = await events(client)
    assert seen[-1].response.output[0].encrypted_content is None


def items_of(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in response.output]


async def test_the_next_request_must_answer_every_call_and_keep_its_reasoning() -> None:
    async with (
        open_fake_responses_server([TURN, StreamResponse.of_text("Sunny, 14:00.")]) as server,
        sdk(server.base_url) as client,
    ):
        first = (await events(client, include=["reasoning.encrypted_content"], store=False))[-1]
        items = items_of(first.response)
        user = {"role": "user", "content": "weather and time?"}
        answer_a = {"type": "function_call_output", "call_id": "call_a", "output": "sunny"}
        answer_b = {"type": "function_call_output", "call_id": "call_b", "output": "14:00"}

        async def refused(input: Any) -> str:
            with pytest.raises(openai.APIStatusError) as caught:
                await client.responses.create(model="m", input=input, store=False)
            assert server.pending() == 1  # a refusal takes nothing from the script
            return str(caught.value.message)

        assert "No tool output found for function call call_b." in await refused(
            [user, *items, answer_a]
        )
        stranger = {"type": "function_call_output", "call_id": "call_z", "output": "?"}
        assert "No tool call found for function call output with call_id call_z." in (
            await refused([user, *items, answer_a, answer_b, stranger])
        )
        without_reasoning = [user, *items[1:], answer_a, answer_b]
        assert "without its required 'reasoning' item" in await refused(without_reasoning)
        altered = [user, {**items[0], "encrypted_content": "tampered"}, *items[1:]]
        assert "could not be verified" in await refused([*altered, answer_a, answer_b])
        stripped = {k: v for k, v in items[0].items() if k != "encrypted_content"}
        assert "Items are not persisted" in await refused(
            [user, stripped, *items[1:], answer_a, answer_b]
        )
        history: Any = [user, *items, answer_b, answer_a]
        done = await client.responses.create(model="m", input=history, store=False)
    assert done.output_text == "Sunny, 14:00."


async def test_in_stream_failures_are_events_the_sdk_passes_on() -> None:
    script: list[FakeResponse] = [
        StreamResponse([TextDelta("par"), ErrorEvent("overloaded", code="server_error")]),
        StreamResponse([TextDelta("par"), ErrorEvent("it broke", type="response.failed")]),
    ]
    async with open_fake_responses_server(script) as server, sdk(server.base_url) as client:
        error = (await events(client))[-1]
        failed = (await events(client))[-1]
    assert (error.type, error.code, error.message) == ("error", "server_error", "overloaded")
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"
    assert failed.response.error.message == "it broke"


async def test_error_statuses_and_connection_faults() -> None:
    script: list[FakeResponse] = [
        ErrorResponse(429, "slow down", retry_after=7),
        ErrorResponse(503, "overloaded"),
        CloseBeforeResponse(),
        StreamResponse([TextDelta("cut"), Disconnect()]),
        StreamResponse([TextDelta("ok"), MalformedChunk()]),
    ]
    async with open_fake_responses_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(openai.RateLimitError) as limited:
            await events(client)
        assert limited.value.response.headers["retry-after"] == "7"
        with pytest.raises(openai.InternalServerError):
            await events(client)
        with pytest.raises(openai.APIConnectionError):
            await events(client)
        with pytest.raises(openai.APIConnectionError):
            await events(client)
        with pytest.raises(json.JSONDecodeError):
            await events(client)
        assert server.requests[3].events_sent == 1
    async with sdk(server.refused_base_url) as client:
        with pytest.raises(openai.APIConnectionError):
            await events(client)


@pytest.mark.parametrize(
    "response",
    [*STALLS, pytest.param(StreamResponse.of_text("a", "b", chunk_delay=60), id="slow-chunks")],
)
async def test_stalls_end_in_the_sdk_read_timeout_at_the_exact_time(
    response: StreamResponse,
) -> None:
    await check_the_stall_ends_at_the_read_timeout(
        response, open_fake_responses_server, sdk, events, openai.APITimeoutError
    )


async def test_a_non_streamed_request_gets_the_stream_folded() -> None:
    script: list[FakeResponse] = [TURN, CompletionResponse("plain", usage=Usage(1, 2))]
    async with open_fake_responses_server(script) as server, sdk(server.base_url) as client:
        folded = await client.responses.create(model="m", input="hi")
        plain = await client.responses.create(model="m", input="hi")
    assert [item.type for item in folded.output] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert folded.output_text == "Checking both."
    assert plain.output_text == "plain"
    assert plain.usage is not None
    assert plain.usage.total_tokens == 3


async def test_validation_can_be_switched_off() -> None:
    orphan = [{"type": "function_call_output", "call_id": "nobody", "output": "x"}]
    async with (
        open_fake_responses_server(
            [StreamResponse.of_text("fine")], validate_history=False
        ) as server,
        sdk(server.base_url) as client,
    ):
        done = await client.responses.create(model="m", input=orphan)  # type: ignore[arg-type]
    assert done.output_text == "fine"


@settings(max_examples=20)  # each example is a real SDK client and server
@given(pieces=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6))
def test_any_split_of_the_text_reads_back_whole(backend: str, pieces: list[str]) -> None:
    async def scenario() -> tuple[str, str]:
        async with (
            open_fake_responses_server([StreamResponse.of_text(*pieces)]) as server,
            sdk(server.base_url) as client,
        ):
            seen = await events(client)
        deltas = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
        return deltas, seen[-1].response.output_text

    deltas, final = run_on(backend, scenario)
    assert deltas == final == "".join(pieces)


def test_fake_responses_env_points_the_sdk_at_the_fake() -> None:
    import os

    before = os.environ.get("OPENAI_BASE_URL")
    with fake_responses_env([StreamResponse.of_text("from env")]) as server:
        assert os.environ["OPENAI_BASE_URL"] == server.base_url
        client = openai.OpenAI(max_retries=0)
        with client:
            done = client.responses.create(model="m", input="hi")
    assert done.output_text == "from env"
    assert os.environ.get("OPENAI_BASE_URL") == before
    with pytest.raises(ValueError, match="api_key"), fake_responses_env(api_key=""):
        pass
    with (
        pytest.raises(TypeError, match="script"),
        fake_responses_env("not a script"),  # type: ignore[arg-type]
    ):
        pass
