"""The Gemini adapter through the real ``google-genai`` SDK against the fake Gemini API.

Every test runs on both backends; the fake validates each
conversation as the real API (Gemini 3) does (a function response per
function call, in the turn right after; the first call of the current turn
back with the exact signature it came with), so a request it accepts is one
the real API would accept.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import httpx2
import provider_cases as cases
import pytest
from google import genai
from google.genai import errors, types
from provider_cases import MESSAGES, NEXT, RETRY, STAGE, STALLS, STOP, Fault, Kind

from juno_bind_trio import CompletionDefectError
from juno_bind_trio.completion import ListSink, TurnTextStream
from juno_bind_trio.loop import LoopState
from juno_bind_trio.providers import PROVIDER_STATE_KEY, RoutedModel
from juno_bind_trio.providers.google import (
    FOREIGN_CALL_SIGNATURE,
    GeminiAdapter,
    classify_gemini_error,
    open_gemini_client,
)
from juno_bind_trio.routing import Candidate, RouteAction, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeProviderServer,
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
    open_fake_gemini_server,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def gemini_wire(
    script: Sequence[FakeResponse],
) -> AsyncIterator[tuple[FakeProviderServer, GeminiAdapter]]:
    async with (
        open_fake_gemini_server(script) as server,
        open_gemini_client(base_url=server.base_url, api_key="k") as client,
    ):
        yield server, GeminiAdapter(client)


def gemini(
    script: Sequence[FakeResponse], **options: Any
) -> AbstractAsyncContextManager[tuple[RoutedModel, FakeProviderServer]]:
    return cases.open_routed(gemini_wire, "google", "gemini-test", script, **options)


async def test_text_streams_to_the_reader_and_the_request_is_gemini_shaped() -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t")
    usage = Usage(prompt_tokens=12, completion_tokens=2, cached_tokens=4, reasoning_tokens=3)
    script = [StreamResponse.of_text("Hel", "lo", usage=usage)]
    async with gemini(script) as (model, server):
        result = await model.route(MESSAGES, text_stream=stream)
    turn = result.unwrap()
    assert turn.content == "Hello"
    assert cases.texts(sink) == ["Hel", "lo"]
    # Thoughts are counted apart by Gemini; the harness's output is both.
    assert (turn.input_tokens, turn.output_tokens) == (12, 5)
    assert (turn.cached_tokens, turn.reasoning_tokens) == (4, 3)
    request = server.requests[0]
    assert (request.model, request.stream) == ("gemini-test", True)
    assert request.header("x-goog-api-key") == "k"
    body = request.json
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    # A text turn's signature (on its last text part) is kept for the next request.
    assert turn.extra[PROVIDER_STATE_KEY]["provider"] == "google"
    assert set(turn.extra[PROVIDER_STATE_KEY]) == {"provider", "text"}


ADD_TOOL = cases.add_tool(
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": ["integer", "null"]}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
)


async def test_parallel_calls_are_answered_in_one_user_turn_by_name() -> None:
    script = [
        StreamResponse.of_tool_calls(
            cases.add_call("c1", 1, 2), cases.add_call("c2", 3, 4), text="Adding."
        ),
        StreamResponse.of_text("3 and 7"),
    ]
    async with gemini(script) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(model, state, tool=ADD_TOOL).run()
    assert result.reason == "completed"
    assert result.content == "3 and 7"
    assert cases.accepted(server)
    first, second = (r.json for r in server.requests)
    # The schema in the gemini dialect: no $schema, no additionalProperties, nullable.
    assert first["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {
                            "a": {"type": "INTEGER"},
                            "b": {"type": "INTEGER", "nullable": True},
                        },
                        "required": ["a", "b"],
                    },
                }
            ]
        }
    ]
    model_turn, answers = second["contents"][1:]
    assert model_turn["role"] == "model"
    assert [p.get("text") for p in model_turn["parts"]] == ["Adding.", None, None]
    assert [p["functionCall"] for p in model_turn["parts"][1:]] == [
        {"name": "add", "args": {"a": 1, "b": 2}},
        {"name": "add", "args": {"a": 3, "b": 4}},
    ]
    assert answers == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "add", "response": {"result": "3"}}},
            {"functionResponse": {"name": "add", "response": {"result": "7"}}},
        ],
    }
    # The transcript stays the chat-completions shape, ids made up for Gemini's id-less calls.
    assistant = state.messages[2]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == 2
    assert all(i.startswith("call_") for i in ids)
    assert [m["tool_call_id"] for m in state.messages[3:5]] == ids
    assert set(assistant[PROVIDER_STATE_KEY]["calls"]) == {ids[0]}  # the first call's signature


def signed_parts(body: dict[str, Any]) -> list[tuple[int, str | None, str]]:
    return [
        (at, part.get("functionCall", {}).get("name") or part.get("text"), part["thoughtSignature"])
        for at, content in enumerate(body["contents"])
        for part in content["parts"]
        if "thoughtSignature" in part
    ]


async def test_thought_signatures_go_back_byte_for_byte_over_two_tool_turns() -> None:
    def thinking_then_call(thought: str, call: tuple[str, str, str]) -> StreamResponse:
        call_id, name, arguments = call
        return StreamResponse(
            [
                ReasoningDelta(thought),
                ToolCallDelta(0, id=call_id, name=name, arguments=arguments),
                Finish("tool_calls"),
            ]
        )

    script = [
        thinking_then_call("First one and two.", cases.add_call("c1", 1, 2)),
        thinking_then_call("Now three and four.", cases.add_call("c2", 3, 4)),
        StreamResponse.of_text("10"),
    ]
    sink = ListSink()
    async with gemini(script) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(
            model, state, tool=ADD_TOOL, text_sink=sink, run_id="r"
        ).run()
        # Every request was accepted by the validating fake: each call came
        # back with the signature it was issued, unchanged.
        assert result.content == "10"
        assert cases.accepted(server)
        issued = [base64.b64encode(f"fake-thought:{i}:call0".encode()).decode() for i in range(2)]
        assert signed_parts(server.requests[2].json) == [
            (1, "add", issued[0]),
            (3, "add", issued[1]),
        ]
        states: list[Any] = [
            m.get(PROVIDER_STATE_KEY) for m in state.messages if m["role"] == "assistant"
        ]
        assert [list(s["calls"].values()) for s in states[:2]] == [[issued[0]], [issued[1]]]
        # Thoughts were the readers' reasoning, never the answer text.
        assert state.messages[2].get("content") is None

        # The same transcript with one signature altered is refused as the API refuses it.
        altered = [dict(m) for m in state.messages[:-1]]
        forged = dict(altered[2][PROVIDER_STATE_KEY])
        forged["calls"] = {k: base64.b64encode(b"forged").decode() for k in forged["calls"]}
        altered[2][PROVIDER_STATE_KEY] = forged
        failed = await model.route(altered)
    assert not failed.ok
    assert isinstance(failed.error, errors.ClientError)
    assert "Thought signature is not valid" in str(failed.error)


async def test_calls_of_another_provider_get_the_documented_dummy_signature() -> None:
    """Gemini 3 refuses an unsigned call in the current turn; a foreign one is signed as allowed."""
    transcript: list[dict[str, Any]] = [
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": "{}"},
                },
                {
                    "id": "toolu_2",
                    "type": "function",
                    "function": {"name": "add", "arguments": "{}"},
                },
            ],
            PROVIDER_STATE_KEY: {"provider": "anthropic", "thinking": []},
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "1"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "2"},
    ]
    async with gemini([StreamResponse.of_text("done")]) as (model, server):
        turn = (await model.route(transcript)).unwrap()
    assert turn.content == "done"
    dummy = base64.b64encode(FOREIGN_CALL_SIGNATURE).decode()
    assert signed_parts(server.requests[0].json) == [(1, "add", dummy)]


async def test_structured_output_is_gemini_s_own_json_mode() -> None:
    response_format = cases.place_format({**cases.PLACE_SCHEMA, "additionalProperties": False})
    script = [StreamResponse.of_text('{"city": ', '"Lisbon"}')]
    async with gemini(script, request_options={"response_format": response_format}) as (
        model,
        server,
    ):
        turn = (await model.route(MESSAGES)).unwrap()
    assert turn.content == '{"city": "Lisbon"}'
    config = server.requests[0].json["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"] == {
        "type": "OBJECT",
        "properties": {"city": {"type": "STRING"}},
        "required": ["city"],
    }


async def test_request_options_map_onto_the_generation_config() -> None:
    options = {
        "max_tokens": 64,
        "temperature": 0.2,
        "stop": "END",
        "seed": 7,
        "parallel_tool_calls": False,  # OpenAI's only: not sent
        "tool_choice": {"type": "function", "function": {"name": "add"}},
        "thinking_config": {"include_thoughts": True},
    }
    async with gemini([StreamResponse.of_text("ok")], request_options=options) as (
        model,
        server,
    ):
        await model.route(MESSAGES, tools=[ADD_TOOL])
    body = server.requests[0].json
    config = dict(body["generationConfig"])
    # The SDK sends a nested config under its Python field names (the API takes both).
    assert list(config.pop("thinkingConfig").values()) == [True]
    assert config == {
        "maxOutputTokens": 64,
        "temperature": 0.2,
        "stopSequences": ["END"],
        "seed": 7,
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}
    }


@cases.THOUGHTS
async def test_thoughts_keep_the_stream_alive_but_are_not_the_first_token(
    thoughts: int, ok: bool
) -> None:
    stream = TurnTextStream(sink=ListSink(), turn_id="t")
    result, took = await cases.route_through_thoughts(gemini, thoughts, text_stream=stream)
    if ok:
        turn = result.unwrap()
        assert turn.content == "done"
        assert turn.reasoning == "t0 t1 t2 t3 "
    else:
        cases.check_stalled_before_the_first_token(result, took)


# --- every fault, classified, on a retractable and a permanent reader -------------------

# (id, fault, verdict, exception, whether the reader was shown text before it)
FAULTS: list[Fault] = [
    ("429 with retry info", ErrorResponse(429, retry_after=3), RETRY, errors.ClientError, False),
    ("429 without", ErrorResponse(429), NEXT, errors.ClientError, False),
    ("503 unavailable", ErrorResponse(503), NEXT, errors.ServerError, False),
    ("500", ErrorResponse(500), NEXT, errors.ServerError, False),
    ("403", ErrorResponse(403), NEXT, errors.ClientError, False),
    ("closed before the answer", CloseBeforeResponse(), NEXT, httpx2.RemoteProtocolError, False),
    (
        "dropped mid-stream",
        StreamResponse([TextDelta("Half"), Disconnect()]),
        NEXT,
        httpx2.RemoteProtocolError,
        True,
    ),
    (
        "error chunk mid-stream",
        StreamResponse([TextDelta("Half"), ErrorEvent("crashed")]),
        NEXT,
        errors.ServerError,
        True,
    ),
    (
        "malformed chunk",
        StreamResponse([TextDelta("Half"), MalformedChunk()]),
        RETRY,
        errors.UnknownApiResponseError,
        True,
    ),
    *STALLS,
    (
        "cut off without a finish reason",
        StreamResponse([TextDelta("Half")], done=False),
        RETRY,
        CompletionDefectError,
        True,
    ),
    (
        "prompt too long",
        ErrorResponse(
            400,
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
        STAGE,
        errors.ClientError,
        False,
    ),
    ("bad request", ErrorResponse(400, "bad schema"), STOP, errors.ClientError, False),
]


@cases.every_fault(FAULTS)
async def test_every_fault_is_classified_and_the_reader_ends_with_the_winner(
    fault: FakeResponse, action: RouteAction, kind: Kind, shown: bool, retractable: bool
) -> None:
    models = ("gemini-a", "gemini-b")
    run = await cases.play_fault(gemini_wire, "google", models, fault, retractable=retractable)
    first = run.result.attempts[0]
    assert isinstance(first.error, kind)
    assert first.action is action or (first.adjusted is not None)
    verdict = classify_gemini_error(first.error, first.candidate, first.cursor)
    assert verdict.action is action
    reached = cases.check_the_reader_ends_with_the_winner(
        run, models, action=action, kind=kind, shown=shown, retractable=retractable
    )
    if reached and verdict.retry_after is not None:
        # The RetryInfo's wait, on the virtual clock, before the same endpoint again.
        assert run.took == pytest.approx(verdict.retry_after)


async def test_a_refused_connection_is_the_next_candidate() -> None:
    async with open_fake_gemini_server([]) as server:
        url = server.refused_base_url
    async with open_gemini_client(base_url=url, api_key="k") as client:
        model = RoutedModel(
            plan=RoutePlan([RouteStage("g", [Candidate("google")])], max_retries=0),
            adapters={"google": GeminiAdapter(client)},
        )
        result = await model.route(MESSAGES)
    error = result.attempts[0].error
    assert isinstance(error, httpx2.ConnectError)
    assert result.attempts[0].action is NEXT


async def test_a_429_retry_delay_is_the_wait() -> None:
    async with gemini([ErrorResponse(429, retry_after=7)]) as (model, _):
        result = await model.route(MESSAGES)
    error = result.attempts[0].error
    assert isinstance(error, errors.ClientError)
    verdict = classify_gemini_error(error, result.attempts[0].candidate, result.attempts[0].cursor)
    assert (verdict.action, verdict.retry_after) == (RETRY, 7.0)


async def test_a_client_that_retries_or_has_no_http_client_is_refused() -> None:
    async with httpx2.AsyncClient() as http:
        retrying = genai.Client(
            api_key="k",
            http_options=types.HttpOptions(
                httpx_async_client=http, retry_options=types.HttpRetryOptions(attempts=3)
            ),
        )
        with pytest.raises(ValueError, match="attempts=1"):
            GeminiAdapter(retrying)
    bare = genai.Client(api_key="k")
    with pytest.raises(ValueError, match="httpx_async_client"):
        GeminiAdapter(bare)
    with pytest.raises(TypeError, match=r"google\.genai\.Client"):
        GeminiAdapter(object())  # type: ignore[arg-type]


async def test_cancellation_mid_stream_closes_the_connection() -> None:
    script = [StreamResponse([TextDelta("a"), Pause(math.inf), TextDelta("b")])]
    async with gemini(script, inter_chunk_timeout=1000.0) as (model, server):
        with anyio.move_on_after(3):
            await model.route(MESSAGES)
        await anyio.sleep(0.01)
        assert server.requests[0].client_gone_at == pytest.approx(3.0, abs=0.01)


async def test_an_agent_output_type_is_answered_in_gemini_s_json_mode() -> None:
    async with open_fake_gemini_server([StreamResponse.of_text('{"city": "Porto"}')]) as server:
        output = await cases.ask_for_a_place(
            "google:gemini-test", base_url=server.base_url, api_key="k"
        )
    assert output == cases.Place(city="Porto")
    body = server.requests[0].json
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert "tools" not in body


def raw_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> RawEvent:
    candidate: dict[str, Any] = {"index": 0, "content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    return RawEvent(json.dumps({"candidates": [candidate]}))


async def test_signed_thoughts_and_gemini_s_own_call_ids_go_back_as_they_came() -> None:
    """A signed thought part, and a call with an id of Gemini's: both come back unchanged."""
    dummy = base64.b64encode(FOREIGN_CALL_SIGNATURE).decode()
    first = StreamResponse(
        [
            raw_chunk([{"text": "Adding.", "thought": True, "thoughtSignature": dummy}]),
            raw_chunk(
                [
                    {
                        "functionCall": {"id": "fc-7", "name": "add", "args": {"a": 1, "b": 2}},
                        "thoughtSignature": dummy,
                    }
                ],
                finish="STOP",
            ),
        ]
    )
    async with gemini([first, StreamResponse.of_text("3")]) as (model, server):
        state = LoopState(messages=list(MESSAGES))
        result = await cases.tool_loop(model, state, tool=ADD_TOOL).run()
    assert result.content == "3"
    assert cases.accepted(server)
    assistant = state.messages[2]
    assert assistant["tool_calls"][0]["id"] == "fc-7"
    assert assistant[PROVIDER_STATE_KEY] == {
        "provider": "google",
        "calls": {"fc-7": dummy},
        "thoughts": [{"text": "Adding.", "signature": dummy}],
        "ids": ["fc-7"],
    }
    model_turn, answers = server.requests[1].json["contents"][1:]
    assert model_turn["parts"] == [
        {"text": "Adding.", "thought": True, "thoughtSignature": dummy},
        {
            "functionCall": {"id": "fc-7", "name": "add", "args": {"a": 1, "b": 2}},
            "thoughtSignature": dummy,
        },
    ]
    assert answers["parts"] == [
        {"functionResponse": {"id": "fc-7", "name": "add", "response": {"result": "3"}}}
    ]


async def test_no_signature_is_made_up_for_a_turn_gemini_left_unsigned() -> None:
    """The dummy is for other providers' calls; Gemini's own turn goes back as it came."""
    transcript: list[dict[str, Any]] = [
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
            PROVIDER_STATE_KEY: {"provider": "google"},
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
    ]
    async with gemini([StreamResponse.of_text("done")]) as (model, server):
        result = await model.route(transcript)
    assert "thoughtSignature" not in server.requests[0].json["contents"][1]["parts"][-1]
    # So the validating fake (as Gemini 3) refuses it, as the real API would.
    assert isinstance(result.error, errors.ClientError)
    assert "missing a thought_signature" in str(result.error)
