"""The Bedrock adapter through the real ``aiobotocore`` SDK against the fake Bedrock runtime.

Every test runs on both backends; the fake validates each conversation as
the real API does (roles alternating from a user message, every ``toolUse``
answered by a ``toolResult`` in the next user message, reasoning blocks back
with the signature they were issued), so a second turn it accepts is a
transcript the real API would accept. botocore signs, serializes, parses the
binary event stream and checks its CRCs: nothing of the wire is faked here.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import botocore.eventstream
import botocore.exceptions
import httpx2
import provider_cases as cases
import pytest
from provider_cases import ADD_TOOL, MESSAGES, NEXT, RETRY, STAGE, STALLS, STOP, Fault, Kind

from juno_bind_trio import CompletionDefectError, UsageError
from juno_bind_trio.completion import (
    ListSink,
    ReasoningEvent,
    ToolCallDeltaEvent,
    TurnTextStream,
)
from juno_bind_trio.loop import LoopState
from juno_bind_trio.providers import PROVIDER_STATE_KEY, ProviderRequest, RoutedModel
from juno_bind_trio.providers.bedrock import (
    STRUCTURED_OUTPUT_TOOL,
    THROTTLE_BACKOFF,
    BedrockAdapter,
    BedrockCredentials,
    classify_bedrock_error,
    open_bedrock_client,
    resolve_credentials,
)
from juno_bind_trio.routing import (
    Candidate,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteStage,
)
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeProviderServer,
    FakeResponse,
    MalformedChunk,
    Pause,
    StreamResponse,
    TextDelta,
    Usage,
    open_fake_bedrock_server,
)

pytestmark = pytest.mark.anyio

KEYS: dict[str, Any] = {"aws_access_key_id": "AKIDTEST", "aws_secret_access_key": "secret"}


@asynccontextmanager
async def bedrock_wire(
    script: Sequence[FakeResponse],
) -> AsyncIterator[tuple[FakeProviderServer, BedrockAdapter]]:
    async with (
        open_fake_bedrock_server(script) as server,
        open_bedrock_client(endpoint_url=server.base_url, **KEYS) as client,
    ):
        yield server, BedrockAdapter(client)


def bedrock(
    script: Sequence[FakeResponse], **options: Any
) -> AbstractAsyncContextManager[tuple[RoutedModel, FakeProviderServer]]:
    return cases.open_routed(bedrock_wire, "bedrock", "anthropic.claude-test", script, **options)


class FullSink:
    """A retractable sink that also asks for reasoning and tool-call deltas."""

    retractable = True

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any, /) -> None:
        self.events.append(event)

    def emit_reasoning(self, event: ReasoningEvent, /) -> None:
        self.events.append(event)

    def emit_tool_call_delta(self, event: ToolCallDeltaEvent, /) -> None:
        self.events.append(event)


async def test_text_streams_to_the_reader_and_the_request_is_the_converse_shape() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    usage = Usage(prompt_tokens=12, completion_tokens=2, cached_tokens=5)
    script = [StreamResponse.of_text("Hel", "lo", usage=usage)]
    async with bedrock(script, request_options={"max_tokens": 300, "temperature": 0.2}) as (
        model,
        server,
    ):
        result = await model.route(MESSAGES, text_stream=stream)
    turn = result.unwrap()
    assert turn.content == "Hello"
    assert cases.texts(sink) == ["Hel", "lo"]
    # Converse counts cached input apart from inputTokens: the turn's input is the sum.
    assert (turn.input_tokens, turn.output_tokens, turn.cached_tokens) == (17, 2, 5)
    request = server.requests[0]
    assert request.model == "anthropic.claude-test"
    assert request.stream is True
    assert request.json == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 300, "temperature": 0.2},
    }
    assert (request.header("authorization") or "").startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDTEST/"
    )
    assert PROVIDER_STATE_KEY not in turn.extra


async def test_parallel_tool_calls_are_answered_in_one_user_message() -> None:
    script = [
        StreamResponse.of_tool_calls(
            cases.add_call("c1", 1, 2), cases.add_call("c2", 3, 4), text="Adding.", fragments=3
        ),
        StreamResponse.of_text("3 and 7"),
    ]
    sink = FullSink()
    async with bedrock(script) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(model, state, max_iterations=3, text_sink=sink).run()
    assert result.reason == "completed"
    assert result.content == "3 and 7"
    first, second = (r.json for r in server.requests)
    assert first["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "add",
                    "description": "Add two integers.",
                    "inputSchema": {
                        "json": {
                            "type": "object",
                            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                            "required": ["a", "b"],
                        }
                    },
                }
            }
        ]
    }
    # The assistant turn as blocks, then both answers in the next user message.
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"text": "Adding."},
                {"toolUse": {"toolUseId": "c1", "name": "add", "input": {"a": 1, "b": 2}}},
                {"toolUse": {"toolUseId": "c2", "name": "add", "input": {"a": 3, "b": 4}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "c1", "content": [{"text": "3"}]}},
                {"toolResult": {"toolUseId": "c2", "content": [{"text": "7"}]}},
            ],
        },
    ]
    # The input deltas reached the reader as they arrived, and rebuild each call.
    deltas = [e for e in sink.events if isinstance(e, ToolCallDeltaEvent)]
    assert len(deltas) > 2
    by_index: dict[int, str] = {}
    for event in deltas:
        by_index[event.index] = by_index.get(event.index, "") + event.delta
    assert [json.loads(v) for _, v in sorted(by_index.items())] == [
        {"a": 1, "b": 2},
        {"a": 3, "b": 4},
    ]
    assert {e.tool_call_id for e in deltas if e.tool_call_id} == {"c1", "c2"}
    assistant = state.messages[2]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert PROVIDER_STATE_KEY not in assistant


async def test_reasoning_goes_back_unchanged_over_two_tool_turns() -> None:
    script = [
        cases.reasoning_then_call("First I add one and two.", cases.add_call("c1", 1, 2)),
        cases.reasoning_then_call("Now three and four.", cases.add_call("c2", 3, 4)),
        StreamResponse.of_text("10"),
    ]
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    sink = FullSink()
    async with bedrock(script, request_options=thinking) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(model, state, text_sink=sink).run()
    assert result.content == "10"
    reasoning = [e.text for e in sink.events if isinstance(e, ReasoningEvent)]
    assert reasoning == ["First", " I add one and two.", "Now t", "hree and four."]
    # Every request was accepted by the validating fake: the reasoning blocks
    # went back at the head of their turns, text and signature intact.
    assert cases.accepted(server)
    first = server.requests[0].json
    assert first["additionalModelRequestFields"] == thinking
    third = server.requests[2].json["messages"]
    heads = [m["content"][0] for m in third if m["role"] == "assistant"]
    assert [h["reasoningContent"]["reasoningText"]["text"] for h in heads] == [
        "First I add one and two.",
        "Now three and four.",
    ]
    assert all(
        h["reasoningContent"]["reasoningText"]["signature"].startswith("fake-signature-")
        for h in heads
    )
    states: list[Any] = [
        m.get(PROVIDER_STATE_KEY) for m in state.messages if m["role"] == "assistant"
    ]
    assert states[0]["provider"] == "bedrock"
    assert states[0]["reasoning"][0] == heads[0]
    assert states[2] is None  # the answer had no reasoning


async def test_a_changed_reasoning_block_is_refused_as_the_api_refuses_it() -> None:
    script = [
        cases.reasoning_then_call("real thought", cases.add_call("c1", 1, 2)),
        StreamResponse.of_text("x"),
    ]
    async with bedrock(script) as (model, _):
        first = (await model.route(MESSAGES, tools=[ADD_TOOL])).unwrap()
        state = first.extra[PROVIDER_STATE_KEY]
        edited = json.loads(json.dumps(state))
        edited["reasoning"][0]["reasoningContent"]["reasoningText"]["text"] = "edited"
        transcript: list[dict[str, Any]] = [
            *MESSAGES,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    }
                ],
                PROVIDER_STATE_KEY: edited,
            },
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
        ]
        result = await model.route(transcript, tools=[ADD_TOOL])
    assert not result.ok
    error = result.error
    assert isinstance(error, botocore.exceptions.ClientError)
    assert "Invalid `signature`" in str(error)


async def test_another_providers_state_is_not_sent() -> None:
    transcript: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Hello.",
            PROVIDER_STATE_KEY: {"provider": "anthropic", "thinking": [{"type": "thinking"}]},
        },
        {"role": "user", "content": "again"},
    ]
    async with bedrock([StreamResponse.of_text("ok")]) as (model, server):
        assert (await model.route(transcript)).unwrap().content == "ok"
    assert server.requests[0].json["messages"][1] == {
        "role": "assistant",
        "content": [{"text": "Hello."}],
    }


async def test_structured_output_is_a_forced_tool_whose_input_is_the_content() -> None:
    response_format = cases.place_format()
    script = [
        StreamResponse.of_tool_calls(
            ("s1", STRUCTURED_OUTPUT_TOOL, '{"city": "Lisbon"}'), fragments=3
        )
    ]
    async with bedrock(script, request_options={"response_format": response_format}) as (
        model,
        server,
    ):
        turn = (await model.route(MESSAGES)).unwrap()
    assert turn.content == '{"city":"Lisbon"}'
    assert turn.tool_calls == ()
    body = server.requests[0].json
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": STRUCTURED_OUTPUT_TOOL}}
    assert body["toolConfig"]["tools"][-1]["toolSpec"]["inputSchema"]["json"] == cases.PLACE_SCHEMA
    assert "response_format" not in body
    assert "additionalModelRequestFields" not in body


async def test_with_thinking_on_the_structured_tool_is_offered_not_forced() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    options = {
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    script = [StreamResponse.of_tool_calls(("s1", STRUCTURED_OUTPUT_TOOL, '{"n": 3}'))]
    async with bedrock(script, request_options=options) as (model, server):
        turn = (await model.route(MESSAGES)).unwrap()
    assert turn.content == '{"n":3}'
    assert server.requests[0].json["toolConfig"]["toolChoice"] == {"auto": {}}


async def test_an_agent_output_type_is_answered_through_the_forced_tool() -> None:
    from juno_bind_trio.agent import Agent

    script = [StreamResponse.of_tool_calls(("s1", STRUCTURED_OUTPUT_TOOL, '{"city": "Porto"}'))]
    async with open_fake_bedrock_server(script) as server:
        agent = Agent(
            "bedrock:anthropic.claude-test", output_type=cases.Place, base_url=server.base_url
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
            patch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
            # Opening the client loads botocore's service model in a worker thread: no
            # deadline around it, since the autojump clock jumps while a thread works.
            await agent.prepare()
            with anyio.fail_after(30):
                result = await agent.run("Where?")
        await agent.aclose()
    assert result.output == cases.Place(city="Porto")
    assert server.requests[0].json["toolConfig"]["toolChoice"] == {
        "tool": {"name": STRUCTURED_OUTPUT_TOOL}
    }


# --- every fault, classified, on a retractable and a permanent reader -------------------

# (id, fault, verdict, exception, whether the reader was shown text before it)
FAULTS: list[Fault] = [
    (
        "throttled (429)",
        ErrorResponse(429, "Too many requests", retry_after=3),
        RETRY,
        botocore.exceptions.ClientError,
        False,
    ),
    (
        "service unavailable (503)",
        ErrorResponse(503),
        NEXT,
        botocore.exceptions.ClientError,
        False,
    ),
    (
        "model not ready",
        ErrorResponse(429, "Model is not ready", code="ModelNotReadyException"),
        RETRY,
        botocore.exceptions.ClientError,
        False,
    ),
    ("500", ErrorResponse(500), NEXT, botocore.exceptions.ClientError, False),
    (
        "closed before the answer",
        CloseBeforeResponse(),
        NEXT,
        botocore.exceptions.HTTPClientError,
        False,
    ),
    (
        "dropped mid-stream",
        StreamResponse([TextDelta("Half"), Disconnect()]),
        NEXT,
        httpx2.RemoteProtocolError,
        True,
    ),
    (
        "throttled mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("slow down", type="rate_limit_error")]),
        RETRY,
        botocore.exceptions.EventStreamError,
        True,
    ),
    (
        "model stream error mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("crashed", type="model_stream_error")]),
        NEXT,
        botocore.exceptions.EventStreamError,
        True,
    ),
    (
        "service unavailable mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("busy", type="overloaded_error")]),
        NEXT,
        botocore.exceptions.EventStreamError,
        True,
    ),
    (
        "broken frame",
        StreamResponse([TextDelta("Half"), MalformedChunk()]),
        RETRY,
        botocore.eventstream.ChecksumMismatch,
        True,
    ),
    *STALLS,
    (
        "cut off without messageStop",
        StreamResponse([TextDelta("Half")], done=False),
        RETRY,
        CompletionDefectError,
        True,
    ),
    (
        "input too long",
        ErrorResponse(400, "Input is too long for requested model.", code="ValidationException"),
        STAGE,
        botocore.exceptions.ClientError,
        False,
    ),
    (
        "bad request",
        ErrorResponse(400, "Malformed input request", code="ValidationException"),
        STOP,
        botocore.exceptions.ClientError,
        False,
    ),
    (
        "access denied",
        ErrorResponse(403, "no access to this model"),
        NEXT,
        botocore.exceptions.ClientError,
        False,
    ),
]


@cases.every_fault(FAULTS)
async def test_every_fault_is_classified_and_the_reader_ends_with_the_winner(
    fault: FakeResponse, action: RouteAction, kind: Kind, shown: bool, retractable: bool
) -> None:
    models = ("model-a", "model-b")
    run = await cases.play_fault(
        bedrock_wire, "bedrock", models, fault, retractable=retractable, max_retry_wait=10.0
    )
    first = run.result.attempts[0]
    assert isinstance(first.error, kind)
    verdict = classify_bedrock_error(first.error, first.candidate, first.cursor)
    assert verdict.action is action
    reached = cases.check_the_reader_ends_with_the_winner(
        run, models, action=action, kind=kind, shown=shown, retractable=retractable
    )
    if reached and action is RETRY and isinstance(first.error, botocore.exceptions.ClientError):
        # Throttled: the retry waited Retry-After (3 s) or the first backoff.
        assert verdict.retry_after in (3.0, THROTTLE_BACKOFF)
        assert run.took >= verdict.retry_after


def cursor(attempt: int) -> RouteCursor:
    return RouteCursor(
        stage_index=0, candidate_index=0, candidate_attempt=attempt, attempt=attempt, model="m"
    )


def throttled(headers: dict[str, str] | None = None) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {
            "Error": {"Code": "ThrottlingException", "Message": "slow"},
            "ResponseMetadata": {"HTTPStatusCode": 429, "HTTPHeaders": headers or {}},
        },
        "ConverseStream",
    )


def test_throttling_backs_off_doubling_unless_the_server_says_when() -> None:
    candidate = Candidate("bedrock")
    waits = [
        classify_bedrock_error(throttled(), candidate, cursor(n)).retry_after for n in (1, 2, 3)
    ]
    assert waits == [THROTTLE_BACKOFF, 2 * THROTTLE_BACKOFF, 4 * THROTTLE_BACKOFF]
    told = classify_bedrock_error(throttled({"retry-after": "7"}), candidate, cursor(3))
    assert (told.action, told.retry_after) == (RETRY, 7.0)


async def test_a_throttled_endpoint_is_left_for_the_next_candidate_when_retries_run_out() -> None:
    script: list[FakeResponse] = [
        ErrorResponse(429, "slow"),
        ErrorResponse(429, "slow"),
        StreamResponse.of_text("elsewhere"),
    ]
    async with (
        open_fake_bedrock_server(script) as server,
        open_bedrock_client(endpoint_url=server.base_url, **KEYS) as client,
    ):
        model = RoutedModel(
            plan=RoutePlan(
                [RouteStage("m", [Candidate("bedrock"), Candidate("bedrock", model="m-2")])],
                max_retries=1,
            ),
            adapters={"bedrock": BedrockAdapter(client)},
        )
        start = anyio.current_time()
        result = await model.route(MESSAGES)
        took = anyio.current_time() - start
    assert result.unwrap().content == "elsewhere"
    assert [r.model for r in server.requests] == ["m", "m", "m-2"]
    assert took == pytest.approx(THROTTLE_BACKOFF)


async def test_cancelled_mid_stream_the_connection_is_closed() -> None:
    script = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    async with (
        open_fake_bedrock_server(script) as server,
        open_bedrock_client(endpoint_url=server.base_url, **KEYS) as client,
    ):
        adapter = BedrockAdapter(client)
        request = ProviderRequest(
            model="m", messages=MESSAGES, time_to_first_token=60.0, inter_chunk_timeout=60.0
        )
        with anyio.move_on_after(3) as scope:
            await adapter.stream_turn(request)
        assert scope.cancelled_caught
        await anyio.sleep(0.1)
        assert server.requests[0].client_gone_at == pytest.approx(3.0, abs=0.2)


async def test_no_credentials_anywhere_is_refused_when_the_client_opens(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(botocore.exceptions.NoCredentialsError):
        async with open_bedrock_client(endpoint_url="http://127.0.0.1:9"):
            pass
    from juno_bind_trio.providers import StringModel

    model = StringModel("bedrock:m", owner="Agent")
    with pytest.raises(UsageError, match="no AWS credentials"):
        await model.prepare()
    assert not model.is_open()
    with pytest.raises(UsageError, match="api_key"):
        StringModel("bedrock:m", api_key="k", owner="Agent")


async def test_credentials_come_from_the_arguments_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "envtoken")
    assert await resolve_credentials() == BedrockCredentials("ENVKEY", "envsecret", "envtoken")
    given = await resolve_credentials(aws_access_key_id="A", aws_secret_access_key="s3cr3t")
    assert given == BedrockCredentials("A", "s3cr3t", None)
    assert "s3cr3t" not in repr(given)
    with pytest.raises(ValueError, match="go together"):
        await resolve_credentials(aws_access_key_id="A")


async def test_a_client_that_retries_or_is_not_bedrock_is_refused() -> None:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        config=AioConfig(retries={"total_max_attempts": 3}),
        **KEYS,
    ) as client:
        with pytest.raises(ValueError, match="total_max_attempts"):
            BedrockAdapter(client)
    with pytest.raises(TypeError, match="bedrock-runtime"):
        BedrockAdapter(object())
    async with open_bedrock_client(endpoint_url="http://127.0.0.1:9", **KEYS) as client:
        with pytest.raises(TypeError, match="max_tokens"):
            BedrockAdapter(client, max_tokens="10")  # type: ignore[arg-type]
        adapter = BedrockAdapter(client, max_tokens=64)
        assert adapter.server == ("127.0.0.1", 9)
        assert adapter.name == "bedrock"


async def test_clients_share_one_loader_of_botocores_models_per_data_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # What botocore read from disk (endpoints, partitions, the service model) is read
    # once a process: a second client's session takes the first one's loader.
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    async with (
        open_bedrock_client(endpoint_url="http://127.0.0.1:9", **KEYS) as first,
        open_bedrock_client(region="eu-west-1", **KEYS) as second,
    ):
        assert first._loader is second._loader
        assert second.meta.region_name == "eu-west-1"
        assert second.meta.endpoint_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    # Another data path is another set of models: a loader of its own.
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    async with open_bedrock_client(endpoint_url="http://127.0.0.1:9", **KEYS) as third:
        assert third._loader is not first._loader
        assert str(tmp_path) in third._loader.search_paths


@cases.THOUGHTS
async def test_reasoning_keeps_the_stream_alive_but_is_not_the_first_token(
    thoughts: int, ok: bool
) -> None:
    result, took = await cases.route_through_thoughts(bedrock, thoughts)
    if ok:
        assert result.unwrap().content == "done"
    else:
        cases.check_stalled_before_the_first_token(result, took)
