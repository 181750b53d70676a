"""Gemini's lean stream path against the SDK's: the same request, the same turn, the same exception.

``GeminiAdapter(stream_path="lean")`` has the SDK build the request and reads
the event stream itself; ``"sdk"`` lets the SDK build a
``GenerateContentResponse`` per chunk. What is compared (all a caller or
routing can observe) is ``lean_diff.py``'s, and for Gemini the request the
server received too (body and headers). Three layers:

* the line reader against the SDK's own (``HttpResponse._iter_response_stream``),
  on random bytes cut at random places;
* the fault matrix, each fault through both paths;
* a random corpus of streams through both paths.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from typing import Any

import httpx2
import lean_diff
import pytest
from google import genai
from google.genai import errors
from google.genai._api_client import HttpResponse  # the reference the lean reader follows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.completion import TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers.google import GeminiAdapter, classify_gemini_error, open_gemini_client
from juno_bind_trio.providers.google._lean import _Lines
from juno_bind_trio.providers.openai._stream import StreamPath
from juno_bind_trio.routing import Candidate, RouteAction, RouteCursor
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
    StreamEvent,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
    Usage,
    open_fake_gemini_server,
)

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "t",
            "description": "A tool.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]
CURSOR = RouteCursor(0, 0, 1, 1, "m")


# --- the line reader ----------------------------------------------------------------------


def _reference(pieces: Sequence[bytes]) -> list[str]:
    response = httpx2.Response(200, content=iter(pieces))
    return list(HttpResponse({}, response)._iter_response_stream())


def _lean(pieces: Sequence[bytes]) -> list[str]:
    lines = _Lines()
    out: list[str] = []
    for piece in pieces:
        out.extend(lines.feed(piece))
    out.extend(lines.finish())
    return out


_LINE = st.one_of(
    st.builds(
        lambda field, value: f"{field}{value}".encode(),
        st.sampled_from(["data: ", "data:", "event: ", ": ", "", "{", "}", '{"a": "}', "x"]),
        st.text(
            alphabet=st.characters(blacklist_characters="\r\n", codec="utf-8"),
            max_size=8,
        ),
    ),
    st.just(b""),
    st.sampled_from([b"\xff", b"\xe2\x82", b"caf\xc3\xa9", b'{"error": {', b'"s": "{"', b"}"]),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.tuples(_LINE, lean_diff.ENDING), max_size=14),
    tail=st.one_of(st.just(b""), _LINE),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_the_reader_yields_the_chunks_the_sdk_yields(
    lines: list[tuple[bytes, bytes]], tail: bytes, cuts: list[int]
) -> None:
    for pieces in lean_diff.cut(lines, tail, cuts):
        assert _lean(pieces) == _reference(pieces)


@pytest.mark.parametrize(
    "pieces",
    [
        [b'data: {"a": 1}\r\n\r\n'],
        [b'data: {"a": 1}\r', b"\n\r\n"],
        [b"data: a\r\n", b"data: b\r\n\r\n"],
        [b'{"error": {\n', b'  "code": 500\n', b"}}\n"],
        [b"event: x\r\n\r\n"],
        [b"data: tail"],
        [b"data: \xff\r\n\r\n"],
    ],
)
def test_a_body_is_read_as_the_sdk_reads_it(pieces: list[bytes]) -> None:
    assert _lean(pieces) == _reference(pieces)


# --- one attempt through both paths -------------------------------------------------------


async def _turn(
    client: genai.Client, path: StreamPath, text_stream: TurnTextStream | None, **options: Any
) -> ModelTurnResult:
    adapter = GeminiAdapter(client, stream_path=path)
    assert adapter.stream_path == path
    request = lean_diff.request(
        "gemini-test",
        text_stream,
        messages=MESSAGES,
        options={"max_tokens": 64, "temperature": 0.5},
        **options,
    )
    return await adapter.stream_turn(request)


def _calls(result: ModelTurnResult) -> object:
    # made-up call ids differ between any two runs: compared by name and arguments
    return [(c.name, c.arguments) for c in result.tool_calls]


def _extra_without_ids(result: ModelTurnResult) -> object:
    shown = json.dumps(dict(result.extra), sort_keys=True)
    for index, call in enumerate(result.tool_calls):
        shown = shown.replace(call.id, f"<call {index}>")
    return shown


def _sent(server: Any) -> object:
    return [
        (r.target, r.json, {k: v for k, v in r.headers if k not in ("content-length", "host")})
        for r in server.requests
    ]


WIRE = lean_diff.Wire(
    open_server=open_fake_gemini_server,
    open_client=lambda url: open_gemini_client(base_url=url, api_key="k"),
    turn=_turn,
    classify=lambda error: classify_gemini_error(error, Candidate("g"), CURSOR),
    fields=("code", "status", "details", "kind"),
    calls=_calls,
    extra=_extra_without_ids,
    received=_sent,
)


async def _both(script: Sequence[FakeResponse], **options: Any) -> tuple[Any, ...]:
    return await lean_diff.both(WIRE, script, **options)


def _chunk(body: object) -> RawEvent:
    return RawEvent(json.dumps(body))


FAULTS: list[tuple[str, list[FakeResponse]]] = [
    ("healthy", [StreamResponse.of_text("Hel", "lo", usage=Usage(3, 2, cached_tokens=1))]),
    ("tool-calls", [StreamResponse.of_tool_calls(("c1", "t", '{"a": 1}'), ("c2", "t", "{}"))]),
    ("reasoning", [StreamResponse([ReasoningDelta("hm"), TextDelta("x"), Finish()])]),
    ("429", [ErrorResponse(429, retry_after=2)]),
    ("429-no-wait", [ErrorResponse(429)]),
    ("500", [ErrorResponse(500)]),
    ("503", [ErrorResponse(503)]),
    ("400", [ErrorResponse(400)]),
    ("400-too-long", [ErrorResponse(400, "The input token count exceeds the maximum")]),
    ("401", [ErrorResponse(401)]),
    ("404", [ErrorResponse(404)]),
    ("409", [ErrorResponse(409)]),
    ("close-before-response", [CloseBeforeResponse()]),
    ("disconnect", [StreamResponse([TextDelta("par"), Disconnect()])]),
    ("error-event", [StreamResponse([TextDelta("par"), ErrorEvent()])]),
    ("error-event-unavailable", [StreamResponse([ErrorEvent("busy", code="UNAVAILABLE")])]),
    ("error-event-string", [StreamResponse([RawEvent('{"error": {"code": 429}}')])]),
    ("malformed-chunk", [StreamResponse([TextDelta("par"), MalformedChunk()])]),
    ("empty-data", [StreamResponse([TextDelta("a"), RawEvent("")])]),
    ("empty-object", [StreamResponse([RawEvent("{}"), TextDelta("a"), Finish()])]),
    (
        "blocked",
        [StreamResponse([_chunk({"promptFeedback": {"blockReason": "SAFETY"}})], done=False)],
    ),
    (
        "signature-only-part",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    _chunk(
                        {"candidates": [{"content": {"parts": [{"thoughtSignature": "c2ln"}]}}]}
                    ),
                    Finish(),
                ]
            )
        ],
    ),
    (
        "gemini-call-ids-and-signed-thought",
        [
            StreamResponse(
                [
                    _chunk(
                        {
                            "candidates": [
                                {
                                    "content": {
                                        "role": "model",
                                        "parts": [
                                            {
                                                "text": "hm",
                                                "thought": True,
                                                "thoughtSignature": "dA==",
                                            },
                                            {
                                                "functionCall": {
                                                    "id": "g1",
                                                    "name": "t",
                                                    "args": {"a": 1},
                                                },
                                                "thoughtSignature": "Y2FsbA==",
                                            },
                                        ],
                                    },
                                    "finishReason": "STOP",
                                }
                            ],
                            "usageMetadata": {
                                "promptTokenCount": 4,
                                "candidatesTokenCount": 3,
                                "thoughtsTokenCount": 2,
                            },
                        }
                    )
                ]
            )
        ],
    ),
    ("no-finish", [StreamResponse([TextDelta("half")], done=False)]),
    ("empty", [StreamResponse([Finish("stop")])]),
    ("length", [StreamResponse([TextDelta("cut"), Finish("length")])]),
    ("filtered", [StreamResponse([TextDelta("x"), Finish("content_filter")])]),
    ("unknown-finish", [StreamResponse([TextDelta("x"), Finish("OTHER")])]),
    ("stall-first-token", [StreamResponse.of_text("late", first_byte_delay=math.inf)]),
    ("stall-reasoning", [StreamResponse([ReasoningDelta("hm"), Pause(math.inf)])]),
    (
        "stall-between-chunks",
        [StreamResponse([TextDelta("a"), Pause(2), TextDelta("b"), Pause(math.inf)])],
    ),
    ("paced", [StreamResponse.of_text("a", "b", "c", first_byte_delay=1, chunk_delay=2)]),
]


@pytest.mark.parametrize("script", [pytest.param(s, id=name) for name, s in FAULTS])
async def test_every_fault_ends_the_same_on_both_paths(script: list[FakeResponse]) -> None:
    await _both(script, tools=TOOLS)


async def test_the_faults_are_what_they_say() -> None:
    """The matrix is not vacuous: errors raise the SDK's types with their verdicts."""
    cases = dict(FAULTS)
    outcome = (await _both(cases["429"]))[0]
    assert (outcome[1], outcome[4], outcome[8], outcome[10]) == (
        errors.ClientError,
        "RESOURCE_EXHAUSTED",
        RouteAction.RETRY_SAME_ENDPOINT,
        2.0,
    )
    outcome = (await _both(cases["error-event-unavailable"]))[0]
    assert (outcome[1], outcome[4], outcome[8]) == (
        errors.ServerError,
        "UNAVAILABLE",
        RouteAction.NEXT_CANDIDATE,
    )
    outcome = (await _both(cases["400"]))[0]
    assert (outcome[1], outcome[4], outcome[8]) == (
        errors.ClientError,
        "INVALID_ARGUMENT",
        RouteAction.PROPAGATE,
    )
    outcome = (await _both(cases["malformed-chunk"]))[0]
    assert (outcome[1], outcome[8]) == (
        errors.UnknownApiResponseError,
        RouteAction.RETRY_SAME_ENDPOINT,
    )
    outcome = (await _both(cases["disconnect"]))[0]
    assert (outcome[1], outcome[8]) == (httpx2.RemoteProtocolError, RouteAction.NEXT_CANDIDATE)
    outcome = (await _both(cases["gemini-call-ids-and-signed-thought"]))[0]
    assert outcome[0] == "returned"
    assert "Y2FsbA==" in outcome[4]
    assert "dA==" in outcome[4]


async def test_a_refused_connection_is_the_same_on_both_paths() -> None:
    outcome = (await _both([], refused=True))[0]
    assert outcome[1] is httpx2.ConnectError


@pytest.mark.parametrize(
    "body",
    ['{"candidates": {"a": 1}}', '{"candidates": [{"content": {"parts": [5]}}]}', "[1, 2]"],
)
async def test_a_chunk_of_the_wrong_shape_is_the_endpoint_s_fault_on_the_lean_path(
    body: str,
) -> None:
    # Where the paths differ, by design: the SDK path raises pydantic's error
    # (a host bug to routing); the lean one calls it a malformed chunk.
    outcome = (await lean_diff.attempt(WIRE, [StreamResponse([RawEvent(body)])], "lean"))[0]
    assert (outcome[1], outcome[8]) == (
        errors.UnknownApiResponseError,
        RouteAction.RETRY_SAME_ENDPOINT,
    )


# --- a random corpus ----------------------------------------------------------------------

_EVENT: st.SearchStrategy[StreamEvent] = st.one_of(
    st.builds(TextDelta, st.text(max_size=6)),
    st.builds(ReasoningDelta, st.text(min_size=1, max_size=6)),
    st.builds(Pause, st.sampled_from([0.5, 1.0, 4.5])),
)


@st.composite
def _streams(draw: st.DrawFn) -> StreamResponse:
    events: list[StreamEvent] = draw(st.lists(_EVENT, max_size=8))
    for index in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(events)))
        events.insert(at, ToolCallDelta(index, name="t", arguments=json.dumps({"a": index})))
    if draw(st.booleans()):
        events.append(Usage(draw(st.integers(0, 9)), draw(st.integers(0, 9))))
    ending = draw(st.sampled_from(["stop", "tool_calls", "length", None, "disconnect"]))
    if ending == "disconnect":
        events.append(Disconnect())
    elif ending is not None:
        events.append(Finish(ending))
    return StreamResponse(events, done=ending is not None)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(response=_streams())
def test_a_random_stream_ends_the_same_on_both_paths(response: StreamResponse) -> None:
    run_on("trio", functools.partial(_both, tools=TOOLS), [response])


def test_the_corpus_strategy_reaches_every_ending() -> None:
    seen: set[str] = set()

    @settings(max_examples=60, database=None)
    @given(response=_streams())
    def probe(response: StreamResponse) -> None:
        last = response.events[-1] if response.events else None
        seen.add(type(last).__name__)

    probe()
    assert {"Finish", "Disconnect"} <= seen


# --- the keyword ----------------------------------------------------------------------------


async def test_the_stream_path_is_checked_and_falls_back_where_the_sdk_lacks_the_builder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.genai import models

    async with open_gemini_client(base_url="http://127.0.0.1:9", api_key="k") as client:
        assert GeminiAdapter(client).stream_path == "lean"
        assert GeminiAdapter(client, stream_path="sdk").stream_path == "sdk"
        with pytest.raises(ValueError, match="stream_path must be 'lean' or 'sdk'"):
            GeminiAdapter(client, stream_path="fast")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="stream_path must be 'lean' or 'sdk'"):
            GeminiAdapter(client, stream_path=None)  # type: ignore[arg-type]
        monkeypatch.delattr(models, "_GenerateContentParameters_to_mldev")
        assert GeminiAdapter(client).stream_path == "sdk"
