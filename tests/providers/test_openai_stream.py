"""One attempt: ``stream_chat_completion`` with the real SDK against the fake server."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import CompletionDefectError, StreamStallError, ToolCallAssemblyError
from juno_bind_trio.completion import ListSink, TextEvent, TurnTextStream
from juno_bind_trio.providers.openai import (
    open_openai_client,
    prime_openai_client,
    stream_chat_completion,
)
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeResponse,
    Finish,
    MalformedChunk,
    Pause,
    RawEvent,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "user", "content": "hi"}]


@asynccontextmanager
async def attempt_env(
    script: list[FakeResponse], *, refused: bool = False
) -> AsyncIterator[tuple[Any, openai.AsyncOpenAI]]:
    async with open_fake_openai_server(script) as server:
        url = server.refused_base_url if refused else server.base_url
        async with open_openai_client(base_url=url, api_key="test") as client:
            yield server, client


async def one(client: openai.AsyncOpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("time_to_first_token", 10.0)
    kwargs.setdefault("inter_chunk_timeout", 20.0)
    return await stream_chat_completion(client, model="m", messages=MESSAGES, **kwargs)


# --- what a healthy completion becomes --------------------------------------------


async def test_text_usage_and_time_to_first_token() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [
        StreamResponse.of_text("Hel", "lo", usage=Usage(11, 2), first_byte_delay=3.0, chunk_delay=1)
    ]
    async with attempt_env(script) as (server, client):
        result = await one(client)
        assert anyio.current_time() - start == 6.0  # 3 s to the first byte, then 3 chunks 1 s apart
    assert result.content == "Hello"
    assert result.tool_calls == ()
    assert (result.input_tokens, result.output_tokens) == (11, 2)
    assert result.time_to_first_token == 3.0
    (request,) = server.requests
    assert request.json["stream_options"] == {"include_usage": True}
    assert request.json["model"] == "m"
    assert "tools" not in request.json


async def test_tool_calls_are_assembled_and_tools_are_sent() -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    script: list[FakeResponse] = [
        StreamResponse.of_tool_calls(
            ("c1", "add", '{"a": 1, "b": 2}'), ("c2", "add", '{"a": 3, "b": 4}'), fragments=4
        )
    ]
    async with attempt_env(script) as (server, client):
        result = await one(client, tools=tools, request_options={"temperature": 0})
    assert result.content is None
    assert list(result.tool_calls) == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        },
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 3, "b": 4}'},
        },
    ]
    assert server.requests[0].json["tools"] == tools
    assert server.requests[0].json["temperature"] == 0


async def test_reasoning_is_collected_and_does_not_count_as_the_first_token() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [
        StreamResponse(
            [
                ReasoningDelta("let me "),
                Pause(4),
                ReasoningDelta("think", field="reasoning"),
                Pause(2),
                TextDelta("42"),
                Finish(),
            ]
        )
    ]
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    stream.begin_attempt()
    async with attempt_env(script) as (_, client):
        result = await one(client, text_stream=stream)
    assert result.reasoning == "let me think"
    assert result.content == "42"
    assert result.time_to_first_token == 6.0
    assert anyio.current_time() - start == 6.0
    # Reasoning is not text the reader was shown: only the answer reaches the sink.
    assert [e.text for e in sink.events if isinstance(e, TextEvent)] == ["42"]


async def test_a_refusal_is_the_answer() -> None:
    chunk = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "delta": {"refusal": "I cannot help with that"}, "finish_reason": "stop"}
        ],
    }
    async with attempt_env([StreamResponse([RawEvent(json.dumps(chunk))])]) as (_, client):
        result = await one(client)
    assert result.content == "I cannot help with that"


# --- what each fault becomes ----------------------------------------------------------


async def test_refused_connection() -> None:
    async with attempt_env([], refused=True) as (_, client):
        with pytest.raises(openai.APIConnectionError):
            await one(client)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (401, openai.AuthenticationError),
        (400, openai.BadRequestError),
        (404, openai.NotFoundError),
    ],
)
async def test_status_errors_surface_unchanged(status: int, error_type: type[Exception]) -> None:
    async with attempt_env([ErrorResponse(status, retry_after=2)]) as (_, client):
        with pytest.raises(error_type):
            await one(client)


@pytest.mark.parametrize(
    ("response", "error_type"),
    [
        (CloseBeforeResponse(), openai.APIConnectionError),
        (StreamResponse([TextDelta("par"), Disconnect()]), openai.APIConnectionError),
        (StreamResponse([TextDelta("par"), ErrorEvent()]), openai.APIError),
        (StreamResponse([TextDelta("par"), MalformedChunk()]), json.JSONDecodeError),
    ],
    ids=["close-before-response", "disconnect", "error-event", "malformed-chunk"],
)
async def test_broken_streams(response: FakeResponse, error_type: type[Exception]) -> None:
    async with attempt_env([response]) as (_, client):
        with pytest.raises(error_type):
            await one(client)


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        (StreamResponse([TextDelta("half")], done=False), "no_finish_reason"),
        (StreamResponse([TextDelta("half"), Finish("stop")]), None),
        (StreamResponse([Finish("stop")]), "empty"),
        (StreamResponse([TextDelta("cut"), Finish("length")]), "truncated"),
        (StreamResponse([Finish("content_filter")]), "content_filtered"),
        (StreamResponse.of_tool_calls(("c1", "t", '{"a": ')), "unparseable_tool_arguments"),
    ],
    ids=["no-done", "healthy", "empty", "length", "filtered", "bad-arguments"],
)
async def test_defective_completions(response: FakeResponse, kind: str | None) -> None:
    async with attempt_env([response]) as (_, client):
        if kind is None:
            assert (await one(client)).content == "half"
            return
        with pytest.raises(CompletionDefectError) as caught:
            await one(client)
    assert caught.value.kind == kind


async def test_contradictory_tool_call_deltas_are_a_defect() -> None:
    script: list[FakeResponse] = [
        StreamResponse(
            [
                ToolCallDelta(0, id="c1", name="a", arguments="{}"),
                ToolCallDelta(0, id="c2"),
                Finish("tool_calls"),
            ]
        )
    ]
    async with attempt_env(script) as (_, client):
        with pytest.raises(ToolCallAssemblyError):
            await one(client)


async def test_stall_before_the_first_token_closes_the_connection_at_the_budget() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [StreamResponse.of_text("late", first_byte_delay=math.inf)]
    async with attempt_env(script) as (server, client):
        with pytest.raises(StreamStallError) as caught:
            await one(client, time_to_first_token=7.5)
        assert anyio.current_time() - start == 7.5
        await anyio.sleep(1)
    assert (caught.value.budget, caught.value.timeout) == ("time_to_first_token", 7.5)
    assert server.requests[0].client_gone_at == start + 7.5


async def test_role_only_and_reasoning_chunks_do_not_satisfy_the_first_token_budget() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [
        StreamResponse([ReasoningDelta("hmm"), Pause(3), ReasoningDelta("hmm"), Pause(math.inf)])
    ]
    async with attempt_env(script) as (_, client):
        with pytest.raises(StreamStallError) as caught:
            await one(client, time_to_first_token=5.0, inter_chunk_timeout=20.0)
    assert caught.value.budget == "time_to_first_token"
    assert anyio.current_time() - start == 5.0


async def test_stall_between_chunks() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [
        StreamResponse([TextDelta("a"), Pause(2), TextDelta("b"), Pause(math.inf)])
    ]
    async with attempt_env(script) as (server, client):
        with pytest.raises(StreamStallError) as caught:
            await one(client, inter_chunk_timeout=4.0)
        await anyio.sleep(1)
    assert caught.value.budget == "inter_chunk"
    assert server.requests[0].client_gone_at == start + 6.0


async def test_the_sdk_read_timeout_is_a_backstop_behind_the_watchdog() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k", read_timeout=3.0) as c,
    ):
        with pytest.raises(openai.APITimeoutError):
            await one(c, inter_chunk_timeout=math.inf)
    assert anyio.current_time() - start == 3.0


async def test_cancel_mid_stream_closes_the_connection_at_once() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    async with attempt_env(script) as (server, client):
        with anyio.move_on_after(2.25) as scope:
            await one(client, inter_chunk_timeout=100.0)
        assert scope.cancelled_caught
        await anyio.sleep(1)
    assert server.requests[0].client_gone_at == start + 2.25


async def test_cancel_while_waiting_for_headers_closes_the_connection_at_once() -> None:
    start = anyio.current_time()
    script: list[FakeResponse] = [StreamResponse.of_text("x", first_byte_delay=math.inf)]
    async with attempt_env(script) as (server, client):
        with anyio.move_on_after(1.5):
            await one(client, time_to_first_token=100.0)
        await anyio.sleep(1)
    assert server.requests[0].client_gone_at == start + 1.5


async def test_an_error_raised_mid_stream_closes_the_connection_at_once() -> None:
    """A fault found by this side (a contradictory delta) while the server still streams:
    the stream's ``async with`` hangs up then, not when the client is closed."""
    start = anyio.current_time()
    script: list[FakeResponse] = [
        StreamResponse(
            [
                ToolCallDelta(0, id="c1", name="a", arguments="{}"),
                Pause(1),
                ToolCallDelta(0, id="c2"),
                Pause(math.inf),
            ]
        )
    ]
    async with attempt_env(script) as (server, client):
        with pytest.raises(ToolCallAssemblyError):
            await one(client, inter_chunk_timeout=100.0)
        await anyio.sleep(5)
    assert server.requests[0].client_gone_at == start + 1


async def test_no_socket_is_left_unclosed() -> None:
    """Every path (success, each fault, a stall, a cancel) leaves no socket to the GC."""
    script: list[FakeResponse] = [
        StreamResponse.of_text("ok"),
        StreamResponse([TextDelta("a"), Disconnect()]),
        StreamResponse([TextDelta("a"), ErrorEvent()]),
        StreamResponse([MalformedChunk()]),
        StreamResponse([TextDelta("a")], done=False),
        StreamResponse.of_text("x", first_byte_delay=math.inf),
        StreamResponse([TextDelta("a"), Pause(math.inf)]),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        async with attempt_env(script) as (_, client):
            for _ in range(6):
                with contextlib.suppress(Exception):  # every fault is expected here
                    await one(client, time_to_first_token=5.0)
            with anyio.move_on_after(1):
                await one(client)
        gc.collect()
    leaks = [str(w.message) for w in caught if "socket" in str(w.message).lower()]
    assert leaks == []


# --- validation ---------------------------------------------------------------------------


async def test_a_client_with_sdk_retries_is_refused() -> None:
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    async with client:
        with pytest.raises(
            ValueError, match=r"stream_chat_completion: .*max_retries=0.*got max_retries=2"
        ):
            await stream_chat_completion(client, model="m", messages=MESSAGES)
    with pytest.raises(
        TypeError, match=r"stream_chat_completion: client must be an openai\.AsyncOpenAI"
    ):
        await stream_chat_completion(object(), model="m", messages=MESSAGES)  # type: ignore[arg-type]


async def test_bad_arguments_are_refused_by_name() -> None:
    async with attempt_env([]) as (_, client):
        with pytest.raises(ValueError, match=r"request_options must not set \['model'\]"):
            await one(client, request_options={"model": "x"})
        with pytest.raises(ValueError, match="model must be a non-empty string"):
            await stream_chat_completion(client, model="", messages=MESSAGES)
        with pytest.raises(TypeError, match="text_stream must be a TurnTextStream"):
            await one(client, text_stream=ListSink())
    with pytest.raises(ValueError, match="open_openai_client: read_timeout must be a positive"):
        async with open_openai_client(read_timeout=0):
            pass
    with pytest.raises(ValueError, match="open_openai_client: max_retries is always 0"):
        async with open_openai_client(max_retries=3):
            pass


async def test_prime_is_idempotent() -> None:
    async with open_openai_client(base_url="http://127.0.0.1:9/v1", api_key="k") as client:
        platform = client._platform
        assert platform is not None
        await prime_openai_client(client)
        assert client._platform is platform


# --- properties -------------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(
    # At least one visible character: whitespace-only content is an "empty"
    # completion defect (tested on its own), not what this property is about.
    pieces=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=10).filter(
        lambda pieces: "".join(pieces).strip() != ""
    ),
    delays=st.lists(st.integers(0, 3), min_size=10, max_size=10),
    budget=st.integers(1, 4),
)
def test_stall_verdict_matches_the_largest_gap(
    backend: str, pieces: list[str], delays: list[int], budget: int
) -> None:
    """Whatever the pacing, the attempt succeeds iff no gap reaches the budget, and a stall
    fires exactly one budget after the last chunk."""
    events: list[Any] = []
    gaps = delays[: len(pieces)]
    for piece, gap in zip(pieces, gaps, strict=True):
        if gap:
            events.append(Pause(gap))
        events.append(TextDelta(piece))
    events.append(Finish())

    async def scenario() -> tuple[str, Any, float]:
        start = anyio.current_time()
        async with attempt_env([StreamResponse(events)]) as (_, client):
            try:
                result = await one(client, time_to_first_token=budget, inter_chunk_timeout=budget)
            except StreamStallError as exc:
                return "stall", exc.budget, anyio.current_time() - start
            return "ok", result.content, anyio.current_time() - start

    verdict, detail, elapsed = run_on(backend, scenario)
    stalls_at = None
    clock = 0
    for index, gap in enumerate(gaps):
        if gap >= budget:
            stalls_at = clock + budget
            expected_budget = "time_to_first_token" if index == 0 else "inter_chunk"
            break
        clock += gap
    if stalls_at is None:
        assert (verdict, detail, elapsed) == ("ok", "".join(pieces), sum(gaps))
    else:
        assert (verdict, detail, elapsed) == ("stall", expected_budget, stalls_at)
