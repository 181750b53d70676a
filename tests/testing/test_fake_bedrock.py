"""The Bedrock fake against the real SDKs: ``aiobotocore`` (httpx backend) and sync ``botocore``.

aiobotocore 3.10's event-stream reader expects aiohttp's response
(``raw.content.iter_chunks()``); handed the httpx backend's response it
raises ``httpx2.ResponseNotRead`` before the first event (pinned below).
``StreamingHttpxSession`` here gives it that one method over httpx2's
``aiter_raw()``; everything else (signing, serialization, error parsing,
botocore's own event-stream decoding and CRC checks) is the SDK's. The sync
botocore client reads the same stream with nothing adapted, in a test of
its own. Measured faults: an error status is the modeled ``ClientError``
subclass (``ThrottlingException``, ``ServiceUnavailableException``, …); an
exception message mid-stream is ``EventStreamError`` with its code; a broken
frame ``ChecksumMismatch``; a dropped connection httpx2's
``RemoteProtocolError``; a stall botocore's ``ReadTimeoutError``; a close before
the response ``HTTPClientError``; a refused connection ``EndpointConnectionError``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import botocore.config
import botocore.eventstream
import botocore.exceptions
import botocore.session
import httpx2
import pytest
from aiobotocore.config import AioConfig
from aiobotocore.httpxsession import HttpxSession
from aiobotocore.session import get_session
from fake_cases import STALLS, check_the_stall_ends_at_the_read_timeout
from hypothesis import given
from hypothesis import strategies as st

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
    fake_bedrock_env,
    open_fake_bedrock_server,
)
from juno_bind_trio.testing._bedrock import encode_message

pytestmark = pytest.mark.anyio

CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


class _Chunks:
    def __init__(self, response: httpx2.Response) -> None:
        self._response = response

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        async for chunk in self._response.aiter_raw():
            yield chunk, True


class _EventStreamBody:
    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self.content = _Chunks(response)

    async def aread(self) -> bytes:
        return await self._response.aread()

    def close(self) -> None:
        pass


class StreamingHttpxSession(HttpxSession):  # type: ignore[misc]
    async def send(self, request: Any) -> Any:
        response = await super().send(request)
        if request.stream_output and response.status_code < 300:
            response.raw = _EventStreamBody(response.raw)
        return response


@asynccontextmanager
async def sdk(
    endpoint: str, *, read: float = 600.0, session_cls: type[Any] = StreamingHttpxSession
) -> AsyncIterator[Any]:
    config = AioConfig(
        http_session_cls=session_cls,
        retries={"total_max_attempts": 1, "mode": "standard"},
        read_timeout=read,
    )
    session = get_session()
    async with session.create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=endpoint,
        config=config,
        **CREDENTIALS,
    ) as client:
        yield client


USER = [{"role": "user", "content": [{"text": "weather and time?"}]}]


async def stream(client: Any, messages: Any = USER, model: str = "anthropic.claude:0") -> list[Any]:
    answer = await client.converse_stream(modelId=model, messages=messages)
    return [event async for event in answer["stream"]]


TURN = StreamResponse(
    [
        ReasoningDelta("let me see"),
        TextDelta("Checking "),
        TextDelta("both."),
        ToolCallDelta(0, id="tool_a", name="weather", arguments='{"city":'),
        ToolCallDelta(0, arguments=' "Oslo"}'),
        ToolCallDelta(1, id="tool_b", name="time", arguments="{}"),
        Finish("tool_calls"),
        Usage(11, 7, cached_tokens=3),
    ]
)


def assistant_content(events: list[Any]) -> list[dict[str, Any]]:
    """Rebuild the assistant message from ConverseStream events, as a client does."""
    import json

    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            blocks[start["contentBlockIndex"]] = {
                "toolUse": {**start["start"]["toolUse"], "input": ""}
            }
        elif "contentBlockDelta" in event:
            delta = event["contentBlockDelta"]
            block = blocks.setdefault(delta["contentBlockIndex"], {})
            body = delta["delta"]
            if "text" in body:
                block["text"] = block.get("text", "") + body["text"]
            elif "toolUse" in body:
                block["toolUse"]["input"] += body["toolUse"]["input"]
            elif "reasoningContent" in body:
                text = block.setdefault("reasoningContent", {"reasoningText": {"text": ""}})
                reasoning = text["reasoningText"]
                if "text" in body["reasoningContent"]:
                    reasoning["text"] += body["reasoningContent"]["text"]
                if "signature" in body["reasoningContent"]:
                    reasoning["signature"] = body["reasoningContent"]["signature"]
    out = []
    for _, block in sorted(blocks.items()):
        if "toolUse" in block:
            block = {
                "toolUse": {**block["toolUse"], "input": json.loads(block["toolUse"]["input"])}
            }
        out.append(block)
    return out


async def test_the_httpx_backend_alone_cannot_read_an_event_stream() -> None:
    """The evidence for the adapter's session: aiobotocore 3.10 reads aiohttp's stream API."""
    async with (
        open_fake_bedrock_server([TURN]) as server,
        sdk(server.base_url, session_cls=HttpxSession) as client,
    ):
        with pytest.raises(httpx2.ResponseNotRead):
            await stream(client)


async def test_a_turn_streams_as_converse_events() -> None:
    async with open_fake_bedrock_server([TURN]) as server, sdk(server.base_url) as client:
        events = await stream(client)
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart"
    assert kinds[-2:] == ["messageStop", "metadata"]
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"
    usage = events[-1]["metadata"]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["totalTokens"]) == (11, 7, 18)
    assert usage["cacheReadInputTokens"] == 3
    reasoning, text, first, second = assistant_content(events)
    assert reasoning["reasoningContent"]["reasoningText"]["text"] == "let me see"
    assert reasoning["reasoningContent"]["reasoningText"]["signature"]
    assert text == {"text": "Checking both."}
    assert first["toolUse"] == {"toolUseId": "tool_a", "name": "weather", "input": {"city": "Oslo"}}
    assert second["toolUse"]["toolUseId"] == "tool_b"
    assert server.requests[0].model == "anthropic.claude:0"
    assert server.requests[0].stream is True
    assert (server.requests[0].header("authorization") or "").startswith("AWS4-HMAC-SHA256")


async def test_the_next_request_must_answer_every_tool_use_and_keep_the_signature() -> None:
    script = [TURN, StreamResponse.of_text("Sunny, 14:00.")]
    async with open_fake_bedrock_server(script) as server, sdk(server.base_url) as client:
        content = assistant_content(await stream(client))
        assistant = {"role": "assistant", "content": content}

        def result(tool_id: str) -> dict[str, Any]:
            return {"toolResult": {"toolUseId": tool_id, "content": [{"text": "ok"}]}}

        async def refused(messages: list[Any]) -> str:
            with pytest.raises(botocore.exceptions.ClientError) as caught:
                await client.converse(modelId="m", messages=messages)
            assert caught.value.response["Error"]["Code"] == "ValidationException"
            assert server.pending() == 1
            return str(caught.value.response["Error"]["Message"])

        one = {"role": "user", "content": [result("tool_a")]}
        assert "following Ids: tool_b" in await refused([*USER, assistant, one])
        three = {"role": "user", "content": [result("tool_a"), result("tool_b"), result("x")]}
        assert "exceeds the number of toolUse blocks" in await refused([*USER, assistant, three])
        assert "must alternate" in await refused([*USER, *USER])
        assert "must start with a user message" in await refused([assistant])
        altered = [
            {
                "reasoningContent": {
                    "reasoningText": {
                        **content[0]["reasoningContent"]["reasoningText"],
                        "text": "edited",
                    }
                }
            },
            *content[1:],
        ]
        both = {"role": "user", "content": [result("tool_b"), result("tool_a")]}
        assert "Invalid `signature`" in await refused(
            [*USER, {"role": "assistant", "content": altered}, both]
        )
        done = await client.converse(modelId="m", messages=[*USER, assistant, both])
    assert done["output"]["message"]["content"] == [{"text": "Sunny, 14:00."}]
    assert done["stopReason"] == "end_turn"


async def test_error_statuses_are_the_modeled_exceptions() -> None:
    script: list[FakeResponse] = [
        ErrorResponse(429, "slow down", retry_after=7),
        ErrorResponse(503, "overloaded"),
        ErrorResponse(400, "too long", code="ValidationException"),
    ]
    async with open_fake_bedrock_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(client.exceptions.ThrottlingException) as limited:
            await stream(client)
        with pytest.raises(client.exceptions.ServiceUnavailableException):
            await stream(client)
        with pytest.raises(client.exceptions.ValidationException) as invalid:
            await stream(client)
    headers = limited.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["retry-after"] == "7"
    assert invalid.value.response["Error"]["Message"] == "too long"


async def test_faults_mid_stream() -> None:
    script: list[FakeResponse] = [
        StreamResponse([TextDelta("par"), ErrorEvent("slow", type="rate_limit_error")]),
        StreamResponse([TextDelta("par"), ErrorEvent("crashed", code="modelStreamErrorException")]),
        StreamResponse([TextDelta("par"), MalformedChunk()]),
        StreamResponse([TextDelta("par"), Disconnect()]),
        CloseBeforeResponse(),
    ]
    async with open_fake_bedrock_server(script) as server, sdk(server.base_url) as client:
        with pytest.raises(botocore.exceptions.EventStreamError) as throttled:
            await stream(client)
        assert throttled.value.response["Error"]["Code"] == "throttlingException"
        with pytest.raises(botocore.exceptions.EventStreamError) as crashed:
            await stream(client)
        assert crashed.value.response["Error"]["Code"] == "modelStreamErrorException"
        with pytest.raises(botocore.eventstream.ChecksumMismatch):
            await stream(client)
        with pytest.raises(httpx2.RemoteProtocolError):
            await stream(client)
        with pytest.raises(botocore.exceptions.HTTPClientError, match="without sending a response"):
            await stream(client)
    async with sdk(server.refused_base_url) as client:
        with pytest.raises(botocore.exceptions.EndpointConnectionError):
            await stream(client)


@pytest.mark.parametrize("response", STALLS)
async def test_stalls_end_in_the_read_timeout_at_the_exact_time(response: StreamResponse) -> None:
    await check_the_stall_ends_at_the_read_timeout(
        response,
        open_fake_bedrock_server,
        sdk,
        stream,
        (botocore.exceptions.ReadTimeoutError, httpx2.ReadTimeout),
    )


def test_sync_botocore_reads_the_same_stream_with_nothing_adapted() -> None:
    with fake_bedrock_env([TURN]) as server:
        client = botocore.session.get_session().create_client(
            "bedrock-runtime",
            config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        )
        try:
            answer = client.converse_stream(modelId="m", messages=USER)
            events = list(answer["stream"])
        finally:
            client.close()
    assert [next(iter(e)) for e in events][-2:] == ["messageStop", "metadata"]
    assert assistant_content(events)[1] == {"text": "Checking both."}
    assert server.requests[0].model == "m"


@given(
    headers=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode()) < 128),
            st.text(max_size=40),
        ),
        max_size=4,
        unique_by=lambda pair: pair[0],
    ),
    payload=st.binary(max_size=300),
)
def test_botocore_decodes_every_message_the_fake_encodes(
    headers: list[tuple[str, str]], payload: bytes
) -> None:
    buffer = botocore.eventstream.EventStreamBuffer()
    buffer.add_data(encode_message(headers, payload))
    (message,) = list(buffer)
    assert message.payload == payload
    assert message.headers == dict(headers)


def test_a_flipped_bit_is_caught_by_botocore() -> None:
    message = bytearray(encode_message([(":event-type", "x")], b"{}"))
    message[-5] ^= 1
    buffer = botocore.eventstream.EventStreamBuffer()
    buffer.add_data(bytes(message))
    with pytest.raises(botocore.eventstream.ChecksumMismatch):
        list(buffer)
    assert struct.unpack(">I", bytes(message[8:12]))[0] == zlib.crc32(bytes(message[:8]))
