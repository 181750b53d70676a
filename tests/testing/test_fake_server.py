"""The fake server against the real ``openai.AsyncOpenAI``: every fault, the exception it becomes.

The expected exception types are the measured facts of
``shared/notes/openai-sdk-under-trio.md``; these tests pin them, so an SDK
upgrade that changes one fails here rather than in routing.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import openai
import pytest
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
    FakeOpenAIServer,
    FakeResponse,
    Finish,
    MalformedChunk,
    Pause,
    RawEvent,
    ReasoningDelta,
    RecordedRequest,
    StreamResponse,
    TextDelta,
    Usage,
    open_fake_openai_server,
    serve_fake_openai,
)

pytestmark = pytest.mark.anyio

MESSAGES: Any = [{"role": "user", "content": "hi"}]


@asynccontextmanager
async def sdk(base_url: str, *, read: float = 600.0) -> AsyncIterator[openai.AsyncOpenAI]:
    timeout = openai.Timeout(30.0, read=read)
    async with openai.AsyncOpenAI(
        base_url=base_url, api_key="test", max_retries=0, timeout=timeout
    ) as client:
        # The SDK's first request probes the OS in a worker thread; while it
        # runs, the autojump clock would leap to the next pending deadline.
        await prime_openai_client(client)
        yield client


async def collect(client: openai.AsyncOpenAI, **options: Any) -> list[Any]:
    """Stream one completion and return its chunks (``async with`` on the stream)."""
    chunks = []
    stream = await client.chat.completions.create(
        model=options.pop("model", "m"), messages=MESSAGES, stream=True, **options
    )
    async with stream:
        async for chunk in stream:
            chunks.append(chunk)
    return chunks


async def drain(client: openai.AsyncOpenAI, seen: list[str]) -> None:
    """Stream one completion, appending each chunk's text to *seen* as it arrives."""
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    async with stream:
        async for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


# --- what a healthy stream carries ---------------------------------------------


async def test_text_stream_arrives_with_chunk_delays_on_the_virtual_clock() -> None:
    start = anyio.current_time()
    arrivals: list[float] = []
    script = [StreamResponse.of_text("Hel", "lo", "!", usage=Usage(7, 3), chunk_delay=2.0)]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        stream = await client.chat.completions.create(model="gpt-x", messages=MESSAGES, stream=True)
        chunks = []
        async with stream:
            async for chunk in stream:
                arrivals.append(anyio.current_time() - start)
                chunks.append(chunk)
    assert text_of(chunks) == "Hello!"
    assert arrivals == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[3].choices[0].finish_reason == "stop"
    assert chunks[4].choices == []
    assert chunks[4].usage is not None
    assert chunks[4].usage.prompt_tokens == 7
    assert chunks[4].usage.total_tokens == 10
    assert {c.model for c in chunks} == {"gpt-x"}  # echoes the requested model
    (request,) = server.requests
    assert request.events_sent == 5
    assert request.completed_at == start + 8.0
    assert request.client_gone_at is None


async def test_reasoning_deltas_arrive_in_model_extra() -> None:
    script = [
        StreamResponse(
            [ReasoningDelta("think"), ReasoningDelta("more", field="reasoning"), TextDelta("ok")]
        )
    ]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        chunks = await collect(client)
    extras = [c.choices[0].delta.model_extra for c in chunks]
    assert extras[0] == {"reasoning_content": "think"}
    assert extras[1] == {"reasoning": "more"}
    assert chunks[2].choices[0].delta.content == "ok"


async def test_tool_call_fragments_keep_index_id_and_name() -> None:
    script = [
        StreamResponse.of_tool_calls(
            ("call_a", "lookup", '{"q": "trio"}'),
            ("call_b", "add", '{"a": 1, "b": 2}'),
            fragments=3,
        )
    ]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        chunks = await collect(client)
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks[:-1]:
        (delta,) = chunk.choices[0].delta.tool_calls
        entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
        entry["id"] += delta.id or ""
        entry["name"] += (delta.function.name or "") if delta.function else ""
        entry["arguments"] += (delta.function.arguments or "") if delta.function else ""
    assert calls == {
        0: {"id": "call_a", "name": "lookup", "arguments": '{"q": "trio"}'},
        1: {"id": "call_b", "name": "add", "arguments": '{"a": 1, "b": 2}'},
    }
    assert len(chunks) == 7  # three fragments a call, then the finish
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_a_non_streamed_completion() -> None:
    script = [
        CompletionResponse(
            "the answer",
            [("call_1", "lookup", '{"q": 1}')],
            finish_reason="tool_calls",
            usage=Usage(5, 6),
            delay=3.0,
        )
    ]
    start = anyio.current_time()
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert anyio.current_time() - start == 3.0
    message = completion.choices[0].message
    assert message.content == "the answer"
    assert message.tool_calls is not None
    assert message.tool_calls[0].id == "call_1"
    assert message.tool_calls[0].function.arguments == '{"q": 1}'  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 6


async def test_requests_are_recorded() -> None:
    script = [StreamResponse.of_text("a")]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        await collect(client, model="gpt-rec", temperature=0.5)
    (request,) = server.requests
    assert isinstance(request, RecordedRequest)
    assert (request.method, request.target) == ("POST", "/v1/chat/completions")
    assert request.model == "gpt-rec"
    assert request.stream is True
    assert request.json["messages"] == MESSAGES
    assert request.json["temperature"] == 0.5
    assert request.header("Authorization") == "Bearer test"
    assert request.response == StreamResponse.of_text("a")


# --- faults, and what the SDK makes of each --------------------------------------


async def test_connection_refused() -> None:
    async with open_fake_openai_server() as server, sdk(server.refused_base_url) as client:
        with pytest.raises(openai.APIConnectionError):
            await collect(client)
    assert server.requests == []


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
        (401, openai.AuthenticationError),
        (400, openai.BadRequestError),
        (404, openai.NotFoundError),
    ],
)
async def test_error_statuses(status: int, error_type: type[openai.APIStatusError]) -> None:
    script = [ErrorResponse(status, "nope", retry_after=7)]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(error_type) as caught:
            await collect(client)
    assert caught.value.status_code == status
    assert caught.value.request_id == "req_fake_0"
    assert caught.value.response.headers["retry-after"] == "7"
    assert "nope" in str(caught.value)


async def test_408_is_a_bare_status_error() -> None:
    async with open_fake_openai_server([ErrorResponse(408)]) as server, sdk(server.base_url) as c:
        with pytest.raises(openai.APIStatusError) as caught:
            await collect(c)
    assert type(caught.value) is openai.APIStatusError


async def test_close_before_response_after_a_delay() -> None:
    start = anyio.current_time()
    script = [CloseBeforeResponse(delay=4.0)]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(openai.APIConnectionError):
            await collect(client)
        assert anyio.current_time() - start == 4.0
    (request,) = server.requests
    assert request.first_byte_at is None
    assert request.completed_at is None


async def test_disconnect_after_n_chunks() -> None:
    seen: list[str] = []
    script = [StreamResponse([TextDelta("a"), TextDelta("b"), Disconnect(), TextDelta("never")])]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(openai.APIConnectionError):
            await drain(client, seen)
    assert seen == ["a", "b"]
    assert server.requests[0].events_sent == 2
    assert server.requests[0].completed_at is None


async def test_error_event_mid_stream_is_a_plain_api_error() -> None:
    seen: list[str] = []
    script = [StreamResponse([TextDelta("a"), ErrorEvent("overloaded"), TextDelta("b")])]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(openai.APIError) as caught:
            await drain(client, seen)
    assert seen == ["a"]
    assert not isinstance(caught.value, openai.APIStatusError)
    assert "overloaded" in str(caught.value)


async def test_malformed_chunk_is_a_raw_json_error() -> None:
    script = [StreamResponse([TextDelta("a"), MalformedChunk()])]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(json.JSONDecodeError):
            await collect(client)


async def test_raw_event_is_sent_verbatim() -> None:
    raw = '{"id":"x","object":"chat.completion.chunk","created":0,"model":"r","choices":[]}'
    script = [StreamResponse([RawEvent(raw)])]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        (chunk,) = await collect(client)
    assert (chunk.id, chunk.model, chunk.choices) == ("x", "r", [])


async def test_clean_end_without_done_ends_iteration_silently() -> None:
    script = [StreamResponse([TextDelta("half an ans")], done=False)]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        chunks = await collect(client)
    assert text_of(chunks) == "half an ans"
    assert all(c.choices[0].finish_reason is None for c in chunks)
    assert server.requests[0].completed_at is not None


async def test_stall_before_first_byte_times_out_at_the_read_timeout() -> None:
    start = anyio.current_time()
    script = [StreamResponse.of_text("late", first_byte_delay=math.inf)]
    async with (
        open_fake_openai_server(script) as server,
        sdk(server.base_url, read=15.0) as client,
    ):
        with pytest.raises(openai.APITimeoutError):
            await collect(client)
        assert anyio.current_time() - start == 15.0
        await anyio.sleep(1.0)  # the server's view settles; the record keeps the exact time
    (request,) = server.requests
    assert request.first_byte_at is None
    assert request.client_gone_at == start + 15.0


async def test_stall_between_chunks_times_out_one_read_timeout_after_the_last_byte() -> None:
    start = anyio.current_time()
    script = [StreamResponse([TextDelta("a"), Pause(5.0), TextDelta("b"), Pause(60.0), Finish()])]
    async with (
        open_fake_openai_server(script) as server,
        sdk(server.base_url, read=20.0) as client,
    ):
        with pytest.raises(openai.APITimeoutError):
            await collect(client)
        await anyio.sleep(1.0)
    # The SDK's read timeout is an idle limit per read, not a deadline:
    # the 5 s pause resets it, the 60 s one trips it 20 s after "b".
    assert server.requests[0].client_gone_at == start + 25.0
    assert server.requests[0].events_sent == 2


async def test_cancelling_mid_stream_closes_the_connection_at_once() -> None:
    start = anyio.current_time()
    script = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with anyio.move_on_after(3.0):
            await collect(client)
        await anyio.sleep(1.0)  # the server's view settles; nothing moves the time back
    assert server.requests[0].client_gone_at == start + 3.0


async def test_keep_alive_reuses_one_connection() -> None:
    script: list[FakeResponse] = [
        StreamResponse.of_text("a"),
        ErrorResponse(429),
        StreamResponse.of_text("b"),
    ]
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        await collect(client)
        with pytest.raises(openai.RateLimitError):
            await collect(client)
        await collect(client)
    assert [r.connection for r in server.requests] == [0, 0, 0]


# --- scripts ------------------------------------------------------------------------


async def test_script_per_model() -> None:
    script: dict[str, list[FakeResponse]] = {
        "a": [StreamResponse.of_text("from a")],
        "b": [ErrorResponse(429)],
    }
    async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(openai.RateLimitError):
            await collect(client, model="b")
        assert text_of(await collect(client, model="a")) == "from a"
        assert server.pending("a") == 0


async def test_script_as_a_callable_sees_the_request() -> None:
    def respond(request: RecordedRequest) -> StreamResponse:
        return StreamResponse.of_text(f"#{request.index} {request.model}")

    async with open_fake_openai_server(respond) as server, sdk(server.base_url) as client:
        assert text_of(await collect(client, model="x")) == "#0 x"
        assert text_of(await collect(client, model="y")) == "#1 y"
        with pytest.raises(TypeError, match="push has no queue"):
            server.push(StreamResponse.of_text("z"))


async def test_push_and_an_exhausted_script() -> None:
    async with open_fake_openai_server() as server, sdk(server.base_url) as client:
        server.push(StreamResponse.of_text("pushed"))
        assert server.pending() == 1
        assert text_of(await collect(client)) == "pushed"
        with pytest.raises(openai.InternalServerError, match="no scripted response left"):
            await collect(client)


async def test_unknown_route_is_404() -> None:
    async with open_fake_openai_server() as server, sdk(server.base_url) as client:
        with pytest.raises(openai.NotFoundError, match="no route for GET /v1/models"):
            await client.models.list()


async def test_serve_with_task_status() -> None:
    async with anyio.create_task_group() as tg:
        server = await tg.start(serve_fake_openai, [StreamResponse.of_text("served")])
        assert isinstance(server, FakeOpenAIServer)
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        async with sdk(server.base_url) as client:
            assert text_of(await collect(client)) == "served"
        tg.cancel_scope.cancel()


async def test_the_body_exception_is_not_wrapped_in_a_group() -> None:
    async def body() -> None:
        async with open_fake_openai_server([ErrorResponse(429)]) as server:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
            async with client:
                await collect(client)

    with pytest.raises(openai.RateLimitError):
        await body()


# --- validation -----------------------------------------------------------------------


def test_bad_script_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"StreamResponse: chunk_delay .* got -1"):
        StreamResponse([], chunk_delay=-1)
    with pytest.raises(ValueError, match=r"Pause: seconds .* got nan"):
        Pause(math.nan)
    with pytest.raises(TypeError, match=r"StreamResponse: not a stream event: 'hi'"):
        StreamResponse(["hi"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"StreamResponse: events must be a sequence"):
        StreamResponse("hi")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"ErrorResponse: status must be an int in 400\.\.599, got 200"
    ):
        ErrorResponse(200)
    with pytest.raises(ValueError, match=r"of_tool_calls: fragments must be a positive int"):
        StreamResponse.of_tool_calls(("c", "t", "{}"), fragments=0)


async def test_bad_scripts_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match="open_fake_openai_server: script must be"):
        async with open_fake_openai_server("nope"):  # type: ignore[arg-type]
            pass
    with pytest.raises(TypeError, match="open_fake_openai_server: not a scripted response: 3"):
        async with open_fake_openai_server([3]):  # type: ignore[list-item]
            pass
    async with open_fake_openai_server() as server:
        with pytest.raises(TypeError, match=r"FakeOpenAIServer\.push: not a scripted response"):
            server.push("x")  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    pieces=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12),
    arguments=st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4),
    fragments=st.integers(1, 6),
)
def test_what_is_scripted_is_what_the_sdk_reassembles(
    backend: str, pieces: list[str], arguments: dict[str, Any], fragments: int
) -> None:
    """Any text split and any tool-call fragmentation round-trip through the real SDK."""
    encoded = json.dumps(arguments)

    async def scenario() -> tuple[str, str]:
        script = [
            StreamResponse.of_text(*pieces),
            StreamResponse.of_tool_calls(("c1", "t", encoded), fragments=fragments),
        ]
        async with open_fake_openai_server(script) as server, sdk(server.base_url) as client:
            text = text_of(await collect(client))
            chunks = await collect(client)
        args = "".join(
            c.choices[0].delta.tool_calls[0].function.arguments or ""
            for c in chunks
            if c.choices and c.choices[0].delta.tool_calls
        )
        return text, args

    text, args = run_on(backend, scenario)
    assert text == "".join(pieces)
    assert json.loads(args) == arguments
