"""classify_openai_error on what the real openai SDK raises, driven through httpx2.MockTransport.

Each fault is produced by the SDK itself, from an HTTP exchange: the status
errors by its response handling, the mid-stream ones by its SSE iterator.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio
import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletion

from juno_bind_trio import CompletionDefectError, StreamStallError
from juno_bind_trio.providers.openai import classify_openai_error
from juno_bind_trio.routing import (
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    parse_retry_after,
)

pytestmark = pytest.mark.anyio

RETRY = RouteAction.RETRY_SAME_ENDPOINT
NEXT = RouteAction.NEXT_CANDIDATE
STAGE = RouteAction.NEXT_STAGE
STOP = RouteAction.PROPAGATE

CANDIDATE = Candidate("openai", base_url="https://provider.test/v1")
CURSOR = RouteCursor(0, 0, 1, 1, "gpt-test")

Handler = Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]


def chunk(content: str | None, finish: str | None = None) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def sse(*parts: bytes) -> httpx2.Response:
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=b"".join(parts)
    )


def error_body(message: str, code: str | None = None, type_: str = "error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": code, "param": None}}


async def stream_through_sdk(handler: Handler) -> tuple[list[str], str | None]:
    """Run one streamed chat completion through the real SDK; return text and finish reason."""
    transport = httpx2.MockTransport(handler)
    texts: list[str] = []
    finish: str | None = None
    async with openai.AsyncOpenAI(
        api_key="test",
        base_url="https://provider.test/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    ) as client:
        stream = await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async with stream:
            async for item in stream:
                for choice in item.choices:
                    if choice.delta.content:
                        texts.append(choice.delta.content)
                    finish = choice.finish_reason or finish
    return texts, finish


async def sdk_error(handler: Handler) -> Exception:
    try:
        await stream_through_sdk(handler)
    except Exception as exc:
        return exc
    raise AssertionError("the SDK raised nothing")


def responding(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Handler:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        return httpx2.Response(status, headers=headers, json=body)

    return handler


def raising(exc_type: type[httpx2.TransportError]) -> Handler:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        raise exc_type("injected", request=request)

    return handler


def classify(error: Exception) -> ClassifiedError:
    verdict = classify_openai_error(error, CANDIDATE, CURSOR)
    assert verdict.cause is error
    return verdict


# -- before the body -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "sdk_type", "action"),
    [
        (500, error_body("boom", "server_error"), openai.InternalServerError, NEXT),
        (503, error_body("overloaded"), openai.InternalServerError, NEXT),
        (401, error_body("bad key", "invalid_api_key"), openai.AuthenticationError, NEXT),
        (403, error_body("region"), openai.PermissionDeniedError, NEXT),
        (404, error_body("no such model", "model_not_found"), openai.NotFoundError, NEXT),
        (408, error_body("timeout"), openai.APIStatusError, NEXT),
        (409, error_body("lock timeout"), openai.ConflictError, RETRY),
        (400, error_body("bad messages", "invalid_value"), openai.BadRequestError, STOP),
        (422, error_body("unprocessable"), openai.UnprocessableEntityError, STOP),
        (
            400,
            error_body("input refused", "content_policy_violation"),
            openai.BadRequestError,
            STOP,
        ),
        (
            400,
            error_body("too long", "context_length_exceeded"),
            openai.BadRequestError,
            STAGE,
        ),
        (400, error_body("no tools here", "unsupported_parameter"), openai.BadRequestError, STAGE),
    ],
)
async def test_status_errors(
    status: int, body: Any, sdk_type: type[Exception], action: RouteAction
) -> None:
    error = await sdk_error(responding(status, body))
    assert type(error) is sdk_type
    verdict = classify(error)
    assert verdict.action is action
    assert verdict.retry_after is None
    assert verdict.reason


async def test_rate_limit_carries_the_servers_retry_after() -> None:
    error = await sdk_error(
        responding(429, error_body("slow down", "rate_limit_exceeded"), {"retry-after": "7"})
    )
    assert isinstance(error, openai.RateLimitError)
    verdict = classify(error)
    assert (verdict.action, verdict.retry_after) == (NEXT, 7.0)


async def test_retry_after_ms_is_preferred_and_in_milliseconds() -> None:
    headers = {"retry-after-ms": "1500", "retry-after": "9"}
    error = await sdk_error(responding(503, error_body("busy"), headers))
    assert classify(error).retry_after == 1.5


async def test_quota_exhaustion_moves_on_without_a_wait() -> None:
    error = await sdk_error(responding(429, error_body("quota", "insufficient_quota")))
    verdict = classify(error)
    assert (verdict.action, verdict.retry_after) == (NEXT, None)


async def test_connection_refused_moves_to_the_next_candidate() -> None:
    error = await sdk_error(raising(httpx2.ConnectError))
    assert type(error) is openai.APIConnectionError
    assert classify(error).action is NEXT


async def test_read_timeout_is_a_stall_of_this_endpoint() -> None:
    error = await sdk_error(raising(httpx2.ReadTimeout))
    assert type(error) is openai.APITimeoutError
    assert classify(error).action is NEXT


# -- mid-stream --------------------------------------------------------------------


async def test_tcp_close_mid_stream_moves_on() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            yield chunk("Hel")
            raise httpx2.RemoteProtocolError("incomplete chunked read", request=request)

        await anyio.lowlevel.checkpoint()
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    error = await sdk_error(handler)
    assert type(error) is openai.APIConnectionError
    assert isinstance(error.__cause__, httpx2.RemoteProtocolError)
    assert classify(error).action is NEXT


async def test_error_event_mid_stream_has_no_status_and_moves_on() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        return sse(chunk("Hi"), b'data: {"error": {"message": "boom", "code": "server_error"}}\n\n')

    error = await sdk_error(handler)
    assert type(error) is openai.APIError
    assert not hasattr(error, "status_code")
    assert classify(error).action is NEXT


async def test_error_event_saying_the_model_cannot_take_it_falls_back_a_stage() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        event = {"error": {"message": "too long", "code": "context_length_exceeded"}}
        return sse(b"data: " + json.dumps(event).encode() + b"\n\n")

    assert classify(await sdk_error(handler)).action is STAGE


async def test_a_malformed_chunk_is_a_defect_retried_on_the_same_endpoint() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        return sse(chunk("Hi"), b"data: {not json\n\n")

    error = await sdk_error(handler)
    assert type(error) is json.JSONDecodeError
    assert classify(error).action is RETRY


async def test_clean_truncation_without_done_is_detected_and_retried() -> None:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        return sse(chunk("Hel"), chunk("lo"))  # no finish_reason, no [DONE]

    texts, finish = await stream_through_sdk(handler)  # the SDK raises nothing
    assert (texts, finish) == (["Hel", "lo"], None)
    # What the adapter raises for it, and what routing does:
    defect = CompletionDefectError("no_finish_reason", "stream ended without a finish reason")
    assert classify(defect).action is RETRY


# -- this package's own stream errors and the SDK's parse helpers ------------------------


def completion(finish: str) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": "partial"},
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (StreamStallError("time_to_first_token", 20.0), NEXT),
        (StreamStallError("inter_chunk", 5.0), NEXT),
        (CompletionDefectError("empty", "no content and no tool calls"), RETRY),
        (openai.LengthFinishReasonError(completion=completion("length")), RETRY),
        (openai.ContentFilterFinishReasonError(), RETRY),
        (openai.OpenAIError("The api_key client option must be set"), NEXT),
        (ValueError("a bug in the host"), STOP),
        (KeyError("missing"), STOP),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v.value,
)
def test_non_http_errors(error: Exception, action: RouteAction) -> None:
    assert classify(error).action is action


def test_cancellation_and_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="classify_openai_error: error must be an Exception"):
        classify_openai_error(KeyboardInterrupt(), CANDIDATE, CURSOR)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="candidate must be a Candidate, got 'openai'"):
        classify_openai_error(ValueError(), "openai", CURSOR)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cursor must be a RouteCursor, got 1"):
        classify_openai_error(ValueError(), CANDIDATE, 1)  # type: ignore[arg-type]


# -- parse_retry_after -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "4"}, 4.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "whenever"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    # 2015-10-21T07:28:00Z, so the dates above are 10 s ahead and 60 s behind.
    assert parse_retry_after(headers, now=lambda: 1445412480.0) == expected
    assert parse_retry_after(None) is None
