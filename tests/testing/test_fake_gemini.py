"""The Gemini fake against the real ``google-genai`` SDK on its own httpx2 client, both backends.

The SDK's default transport does not run under trio; given an
``httpx2.AsyncClient`` through ``HttpOptions(httpx_async_client=...)`` it
does. What each fault becomes, measured here: an error status is a
``ClientError`` / ``ServerError`` with the gRPC ``status``; an error chunk
mid-stream a ``ServerError``; a malformed chunk ``UnknownApiResponseError``;
a dropped connection httpx2's ``RemoteProtocolError`` (the SDK does not wrap
it); a stall httpx2's ``ReadTimeout``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from fake_cases import STALLS, check_the_stall_ends_at_the_read_timeout
from google import genai
from google.genai import errors, types

from juno_bind_trio.testing import (
    CloseBeforeResponse,
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
    fake_gemini_env,
    open_fake_gemini_server,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sdk(base_url: str, *, read: float = 600.0) -> AsyncIterator[genai.Client]:
    # The SDK sends every request with its own timeout (None unless
    # HttpOptions.timeout, in milliseconds, says), overriding the client's.
    async with httpx2.AsyncClient() as http:
        options = types.HttpOptions(
            base_url=base_url,
            httpx_async_client=http,
            timeout=int(read * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        yield genai.Client(api_key="test", http_options=options)


async def chunks(client: genai.Client, contents: Any = "hi", **options: Any) -> list[Any]:
    stream: Any = await client.aio.models.generate_content_stream(
        model=options.pop("model", "gemini-3-pro"), contents=contents, **options
    )
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


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


def parts_of(received: list[Any]) -> list[types.Part]:
    return [
        part
        for chunk in received
        for candidate in chunk.candidates or ()
        if candidate.content is not None
        for part in candidate.content.parts or ()
    ]


async def test_a_turn_streams_parts_calls_whole_and_a_signature_on_the_first_call() -> None:
    async with open_fake_gemini_server([TURN]) as server, sdk(server.base_url) as client:
        received = await chunks(client)
    parts = parts_of(received)
    assert [(p.text, p.thought) for p in parts[:3]] == [
        ("let me see", True),
        ("Checking ", None),
        ("both.", None),
    ]
    first, second = (p for p in parts if p.function_call is not None)
    assert first.function_call is not None
    assert second.function_call is not None
    assert (first.function_call.name, first.function_call.args) == ("weather", {"city": "Oslo"})
    assert (second.function_call.name, second.function_call.args) == ("time", {})
    assert first.thought_signature  # bytes, issued by the fake
    assert second.thought_signature is None  # only the first call of a step carries one
    last = received[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    usage = last.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count) == (11, 7)
    assert (usage.cached_content_token_count, usage.thoughts_token_count) == (3, 2)
    assert server.requests[0].model == "gemini-3-pro"
    assert server.requests[0].stream is True
    assert server.requests[0].header("x-goog-api-key") == "test"


async def test_the_next_request_must_answer_every_call_and_return_its_signature() -> None:
    script = [TURN, StreamResponse.of_text("Sunny, 14:00.")]
    async with open_fake_gemini_server(script) as server, sdk(server.base_url) as client:
        model_turn = types.Content(role="model", parts=parts_of(await chunks(client)))
        user = types.Content(role="user", parts=[types.Part(text="weather and time?")])
        answers = types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(name="weather", response={"sky": "sunny"}),
                types.Part.from_function_response(name="time", response={"now": "14:00"}),
            ],
        )

        async def refused(contents: list[types.Content]) -> str:
            with pytest.raises(errors.ClientError) as caught:
                await client.aio.models.generate_content(model="gemini-3-pro", contents=contents)
            assert caught.value.status == "INVALID_ARGUMENT"
            assert server.pending() == 1
            return str(caught.value.message)

        one_answer = types.Content(role="user", parts=(answers.parts or [])[:1])
        assert "number of function response parts" in await refused([user, model_turn, one_answer])
        unsigned = types.Content(
            role="model",
            parts=[
                p.model_copy(update={"thought_signature": None}) for p in model_turn.parts or ()
            ],
        )
        assert "missing a thought_signature" in await refused([user, unsigned, answers])
        forged = types.Content(
            role="model",
            parts=[
                p.model_copy(update={"thought_signature": b"forged"}) if p.thought_signature else p
                for p in model_turn.parts or ()
            ],
        )
        assert "Thought signature is not valid" in await refused([user, forged, answers])
        assert "comes immediately after a function call turn" in await refused([user, answers])
        done = await client.aio.models.generate_content(
            model="gemini-3-pro", contents=[user, model_turn, answers]
        )
    assert done.text == "Sunny, 14:00."


async def test_signatures_are_checked_in_the_current_turn_only() -> None:
    """An unsigned call before the last real user message is history the API lets pass."""
    old_call = types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(name="f", args={}))]
    )
    old_answer = types.Content(
        role="user", parts=[types.Part.from_function_response(name="f", response={})]
    )
    contents = [
        types.Content(role="user", parts=[types.Part(text="first")]),
        old_call,
        old_answer,
        types.Content(role="model", parts=[types.Part(text="done")]),
        types.Content(role="user", parts=[types.Part(text="again")]),
    ]
    async with (
        open_fake_gemini_server([StreamResponse.of_text("ok")]) as server,
        sdk(server.base_url) as client,
    ):
        done = await client.aio.models.generate_content(model="g", contents=contents)
    assert done.text == "ok"


async def test_a_text_turn_signs_its_last_text_part() -> None:
    async with (
        open_fake_gemini_server([StreamResponse.of_text("a", "b")]) as server,
        sdk(server.base_url) as client,
    ):
        parts = parts_of(await chunks(client))
    assert [bool(p.thought_signature) for p in parts] == [False, True]


async def test_error_statuses_carry_the_grpc_status_and_retry_info() -> None:
    script: list[FakeResponse] = [
        ErrorResponse(429, "quota", retry_after=7),
        ErrorResponse(503, "overloaded"),
        ErrorResponse(400, "bad schema"),
    ]
    async with open_fake_gemini_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(errors.ClientError) as limited:
            await chunks(client)
        with pytest.raises(errors.ServerError) as unavailable:
            await chunks(client)
        with pytest.raises(errors.ClientError) as invalid:
            await chunks(client)
    assert (limited.value.code, limited.value.status) == (429, "RESOURCE_EXHAUSTED")
    details = limited.value.details["error"]["details"]
    assert details == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]
    assert limited.value.response is not None
    assert (unavailable.value.code, unavailable.value.status) == (503, "UNAVAILABLE")
    assert invalid.value.status == "INVALID_ARGUMENT"


async def test_faults_mid_stream() -> None:
    script: list[FakeResponse] = [
        StreamResponse([TextDelta("par"), ErrorEvent("crashed")]),
        StreamResponse([TextDelta("par"), MalformedChunk()]),
        StreamResponse([TextDelta("par"), Disconnect()]),
        CloseBeforeResponse(),
    ]
    async with open_fake_gemini_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(errors.ServerError) as crashed:
            await chunks(client)
        assert crashed.value.status == "INTERNAL"
        with pytest.raises(errors.UnknownApiResponseError):
            await chunks(client)
        with pytest.raises(httpx2.RemoteProtocolError):
            await chunks(client)
        with pytest.raises(httpx2.RemoteProtocolError):
            await chunks(client)
    async with sdk(server.refused_base_url) as client:
        with pytest.raises(httpx2.ConnectError):
            await chunks(client)


@pytest.mark.parametrize("response", STALLS)
async def test_stalls_end_in_the_read_timeout_at_the_exact_time(response: StreamResponse) -> None:
    await check_the_stall_ends_at_the_read_timeout(
        response, open_fake_gemini_server, sdk, chunks, httpx2.ReadTimeout
    )


async def test_generate_content_gets_the_stream_folded() -> None:
    async with open_fake_gemini_server([TURN]) as server, sdk(server.base_url) as client:
        done = await client.aio.models.generate_content(model="gemini-3-pro", contents="hi")
    assert server.requests[0].stream is False
    assert done.text == "Checking both."
    calls = done.function_calls or []
    assert [(c.name, c.args) for c in calls] == [("weather", {"city": "Oslo"}), ("time", {})]


def test_fake_gemini_env_points_the_sdk_at_the_fake() -> None:
    import os

    with fake_gemini_env([StreamResponse.of_text("from env")]) as server:
        assert os.environ["GOOGLE_GEMINI_BASE_URL"] == server.base_url
        assert "GOOGLE_API_KEY" not in os.environ
        client = genai.Client(
            http_options=types.HttpOptions(retry_options=types.HttpRetryOptions(attempts=1))
        )
        done = client.models.generate_content(model="g", contents="hi")
        client.close()
    assert done.text == "from env"
    assert server.requests[0].header("x-goog-api-key") == "fake-key"
    assert "GOOGLE_GEMINI_BASE_URL" not in os.environ
