"""The lean stream path against the SDK's: the same stream, the same turn, the same exception.

``stream_path="lean"`` reads the event stream itself; ``"sdk"`` lets the SDK
build a model per chunk. What is compared (all a caller or routing can
observe) is ``lean_diff.py``'s; here, in three layers, what is the chat wire's:

* the event-stream decoder against the SDK's ``SSEDecoder``, on random bytes
  cut at random places;
* the whole fault matrix, each fault through both paths;
* a random corpus of streams through both paths.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import lean_diff
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder  # the reference the lean decoder follows

from conftest import run_on
from juno_bind_trio.completion import TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers.openai import (
    OpenAIChatAdapter,
    OpenAIChatModel,
    classify_openai_error,
    open_openai_client,
    stream_chat_completion,
)
from juno_bind_trio.providers.openai._sse import SSEDataDecoder
from juno_bind_trio.providers.openai._stream import StreamPath
from juno_bind_trio.routing import Candidate, RouteAction, RouteCursor, RoutePlan, RouteStage
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
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

MESSAGES = lean_diff.MESSAGES
CURSOR = RouteCursor(0, 0, 1, 1, "m")
NEXT = RouteAction.NEXT_CANDIDATE


# --- the event-stream decoder -------------------------------------------------------------


def _reference(pieces: Sequence[bytes]) -> tuple[list[tuple[str | None, str]], str | None]:
    events: list[tuple[str | None, str]] = []
    try:
        for sse in SSEDecoder().iter_bytes(iter(pieces)):
            events.append((sse.event, sse.data))
    except UnicodeDecodeError as error:
        return events, type(error).__name__
    return events, None


def _lean(pieces: Sequence[bytes]) -> tuple[list[tuple[str | None, str]], str | None]:
    events: list[tuple[str | None, str]] = []
    decoder = SSEDataDecoder()
    try:
        for piece in pieces:
            events.extend(decoder.feed(piece))
        decoder.finish()
    except UnicodeDecodeError as error:
        return events, type(error).__name__
    return events, None


_FIELD = st.sampled_from(["data", "event", "id", "retry", "", "dat", ":", "data:"])
_VALUE = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_characters="\r\n", codec="utf-8"),
        max_size=8,
    ),
    st.sampled_from(["[DONE]", " 5", "7", "thread.run", "a\0b", '{"a": 1}']),
)
_LINE = st.one_of(
    st.builds(
        lambda f, sep, v: f"{f}{sep}{v}".encode(), _FIELD, st.sampled_from([":", ": ", ""]), _VALUE
    ),
    st.just(b""),
    st.sampled_from([b"\xff", b"\xe2\x82", b"caf\xc3\xa9", b": comment"]),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.tuples(_LINE, lean_diff.ENDING), max_size=14),
    tail=st.one_of(st.just(b""), _LINE),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_the_decoder_dispatches_what_the_sdk_dispatches(
    lines: list[tuple[bytes, bytes]], tail: bytes, cuts: list[int]
) -> None:
    for pieces in lean_diff.cut(lines, tail, cuts):
        assert _lean(pieces) == _reference(pieces)


def test_a_crlf_split_between_two_reads_ends_one_line() -> None:
    pieces = [b"data: a\r", b"\n", b"\r", b"\ndata: b\r\n\r\n"]
    assert _lean(pieces) == _reference(pieces) == ([(None, "a"), (None, "b")], None)


@pytest.mark.parametrize(
    "pieces",
    [
        [b"event: x\n", b"data: a\n\n"],
        [b"data: a\n", b"data: b\n\n"],
        [b"retry: 5\n", b"data: a\n\n", b"data: b\n\n"],
        [b"data: a\r", b"data: b\n\n"],
        [b"data: a\n\n", b"data: \xff\n\n"],
        [b"data: [DONE]\n\n"],
        [b"data: \n\n"],
        [b"data: a\nb\n\n"],
    ],
)
def test_a_whole_event_in_one_piece_is_read_as_the_sdk_reads_it(pieces: list[bytes]) -> None:
    assert _lean(pieces) == _reference(pieces)


def test_an_id_makes_every_later_blank_line_an_event() -> None:
    # The SDK's quirk, kept: the last event id is never reset.
    pieces = [b"id: 1\n\n\n\n"]
    assert _lean(pieces) == _reference(pieces) == ([(None, "")] * 3, None)


# --- one attempt through both paths -------------------------------------------------------


async def _turn(
    client: openai.AsyncOpenAI,
    path: StreamPath,
    text_stream: TurnTextStream | None,
    **options: Any,
) -> ModelTurnResult:
    options.setdefault("time_to_first_token", 5.0)
    options.setdefault("inter_chunk_timeout", 4.0)
    return await stream_chat_completion(
        client, model="m", messages=MESSAGES, text_stream=text_stream, stream_path=path, **options
    )


WIRE = lean_diff.Wire(
    open_server=open_fake_openai_server,
    open_client=lambda url, read_timeout=600.0: open_openai_client(
        base_url=url, api_key="k", read_timeout=read_timeout
    ),
    turn=_turn,
    classify=lambda error: classify_openai_error(error, Candidate("a"), CURSOR),
    fields=("body", "code", "kind"),
)


async def _both(script: Sequence[FakeResponse], **options: Any) -> tuple[Any, ...]:
    return await lean_diff.both(WIRE, script, **options)


def _chunk(delta: object = None, **fields: Any) -> RawEvent:
    choice: dict[str, Any] = {"index": 0, "delta": {} if delta is None else delta}
    choice.update(fields)
    return RawEvent(json.dumps({"id": "x", "model": "m", "choices": [choice]}))


FAULTS: list[tuple[str, list[FakeResponse]]] = [
    ("healthy", [StreamResponse.of_text("Hel", "lo", usage=Usage(3, 2, cached_tokens=1))]),
    ("tool-calls", [StreamResponse.of_tool_calls(("c1", "t", '{"a": 1}'), ("c2", "u", "{}"))]),
    ("reasoning", [StreamResponse([ReasoningDelta("hm"), TextDelta("x"), Finish()])]),
    ("429", [ErrorResponse(429, retry_after=2)]),
    ("500", [ErrorResponse(500)]),
    ("401", [ErrorResponse(401)]),
    ("400", [ErrorResponse(400)]),
    ("404", [ErrorResponse(404)]),
    ("408", [ErrorResponse(408)]),
    ("close-before-response", [CloseBeforeResponse()]),
    ("disconnect", [StreamResponse([TextDelta("par"), Disconnect()])]),
    ("error-event", [StreamResponse([TextDelta("par"), ErrorEvent()])]),
    (
        "error-event-model-limit",
        [StreamResponse([ErrorEvent("too long", code="context_length_exceeded")])],
    ),
    ("error-event-no-message", [StreamResponse([RawEvent('{"error": {"code": "x"}}')])]),
    ("error-event-string", [StreamResponse([RawEvent('{"error": "boom"}')])]),
    ("error-false", [StreamResponse([RawEvent('{"error": false}'), TextDelta("a"), Finish()])]),
    ("malformed-chunk", [StreamResponse([TextDelta("par"), MalformedChunk()])]),
    ("empty-data", [StreamResponse([RawEvent("")])]),
    ("not-an-object", [StreamResponse([TextDelta("a"), RawEvent("[1, 2]")])]),
    ("null-chunk", [StreamResponse([RawEvent("null")])]),
    ("choices-not-a-list", [StreamResponse([RawEvent('{"choices": {"a": 1}}')])]),
    ("content-not-a-string", [StreamResponse([_chunk({"content": 5}), Finish()])]),
    ("delta-missing", [StreamResponse([_chunk(None, finish_reason="stop")])]),
    (
        "usage-odd",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    Finish(),
                    RawEvent('{"choices": [], "usage": {"prompt_tokens": "3"}}'),
                ]
            )
        ],
    ),
    (
        "provider-fields",
        [
            StreamResponse(
                [_chunk({"content": "a", "x_note": "n"}), _chunk({"x_note": "m"}), Finish()]
            )
        ],
    ),
    ("no-done", [StreamResponse([TextDelta("half")], done=False)]),
    ("empty", [StreamResponse([Finish("stop")])]),
    ("length", [StreamResponse([TextDelta("cut"), Finish("length")])]),
    ("filtered", [StreamResponse([Finish("content_filter")])]),
    ("bad-arguments", [StreamResponse.of_tool_calls(("c1", "t", '{"a": '))]),
    (
        "contradictory-deltas",
        [
            StreamResponse(
                [
                    ToolCallDelta(0, id="c1", name="a", arguments="{}"),
                    ToolCallDelta(0, id="c2"),
                    Finish("tool_calls"),
                ]
            )
        ],
    ),
    ("refusal", [StreamResponse([_chunk({"refusal": "no"}, finish_reason="stop")])]),
    ("stall-first-token", [StreamResponse.of_text("late", first_byte_delay=math.inf)]),
    ("stall-reasoning", [StreamResponse([ReasoningDelta("hm"), Pause(math.inf)])]),
    (
        "stall-between-chunks",
        [StreamResponse([TextDelta("a"), Pause(2), TextDelta("b"), Pause(math.inf)])],
    ),
    ("paced", [StreamResponse.of_text("a", "b", "c", first_byte_delay=1, chunk_delay=2)]),
]


@pytest.mark.one_backend_by_default  # a heavy matrix: nox runs it on both
@pytest.mark.parametrize("script", [pytest.param(s, id=name) for name, s in FAULTS])
async def test_every_fault_ends_the_same_on_both_paths(script: list[FakeResponse]) -> None:
    await _both(script)


@pytest.mark.parametrize(
    "name", ["not-an-object", "null-chunk", "choices-not-a-list", "content-not-a-string"]
)
async def test_a_chunk_of_the_wrong_shape_moves_to_the_next_candidate(name: str) -> None:
    outcome = (await _both(dict(FAULTS)[name]))[0]
    assert (outcome[1], outcome[7]) == (openai.APIResponseValidationError, NEXT)


async def test_a_refused_connection_is_the_same_on_both_paths() -> None:
    outcome = (await _both([], refused=True))[0]
    assert outcome[1] is openai.APIConnectionError


async def test_the_sdk_read_timeout_is_the_same_on_both_paths() -> None:
    script = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    outcome, _, ended, _, _ = await _both(
        script, client_options={"read_timeout": 3.0}, inter_chunk_timeout=math.inf
    )
    assert (outcome[1], ended) == (openai.APITimeoutError, 3.0)


async def test_a_cancel_closes_the_connection_at_once_on_both_paths() -> None:
    assert await lean_diff.cancelled(WIRE, "lean") == await lean_diff.cancelled(WIRE, "sdk")
    assert await lean_diff.cancelled(WIRE, "lean") == [2.25]


async def test_the_lean_path_reuses_the_connection() -> None:
    # After [DONE] the rest of the body is read, so keep-alive holds.
    assert await lean_diff.connections(WIRE) == [0, 0]


def _routed(plan: RoutePlan, clients: dict[str, Any], path: StreamPath) -> OpenAIChatModel:
    return OpenAIChatModel(
        plan=plan,
        clients=clients,
        time_to_first_token=5.0,
        inter_chunk_timeout=5.0,
        stream_path=path,
    )


@pytest.mark.one_backend_by_default  # a heavy matrix: nox runs it on both
async def test_routing_decides_the_same_on_both_paths() -> None:
    plan = RoutePlan(
        [RouteStage("m1", [Candidate("a"), Candidate("b")]), RouteStage("m2", [Candidate("b")])],
        max_retries=1,
    )
    await lean_diff.routes_the_same(WIRE, plan, FAULTS, _routed)


# --- a random corpus ----------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_ODD_CHUNKS = st.sampled_from(
    [
        '{"choices": []}',
        '{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}',
        '{"choices": [{"index": 0, "delta": {"content": null, "reasoning": "r"}}]}',
        '{"choices": [{"index": 0}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": "1"}}]}}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": -1}]}}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]}',
        '{"choices": [{"index": 0, "delta": {"extra_field": [1]}, "finish_reason": 3}]}',
        '{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 1, '
        '"completion_tokens_details": {"reasoning_tokens": 1}}}',
        '{"choices": [], "usage": 7}',
        '"text"',
        '{"error": {"message": "", "type": "x"}}',
    ]
)
_EVENT: st.SearchStrategy[StreamEvent] = st.one_of(
    st.builds(TextDelta, _TEXT),
    st.builds(ReasoningDelta, _TEXT, st.sampled_from(["reasoning_content", "reasoning"])),
    st.builds(
        ToolCallDelta,
        st.integers(0, 2),
        st.one_of(st.none(), st.sampled_from(["c0", "c1", ""])),
        st.one_of(st.none(), st.sampled_from(["f", "g"])),
        st.one_of(st.none(), st.sampled_from(['{"a"', ": 1}", "{}", ""])),
    ),
    st.builds(Finish, st.sampled_from(["stop", "length", "tool_calls", "content_filter"])),
    st.builds(Usage, st.integers(0, 9), st.integers(0, 9), cached_tokens=st.integers(0, 3)),
    st.builds(Pause, st.integers(1, 6)),
    st.builds(ErrorEvent, code=st.one_of(st.none(), st.just("context_length_exceeded"))),
    st.just(MalformedChunk()),
    st.builds(RawEvent, _ODD_CHUNKS),
)


@pytest.mark.one_backend_by_default  # a heavy matrix: nox runs it on both
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(_EVENT, max_size=10),
    ending=st.sampled_from(["done", "no-done", "disconnect", "stall"]),
)
def test_a_random_stream_ends_the_same_on_both_paths(
    backend: str, events: list[StreamEvent], ending: str
) -> None:
    run_on(backend, _both, lean_diff.random_script(events, ending))


# --- the keyword ----------------------------------------------------------------------------


async def test_the_stream_path_is_checked_by_name() -> None:
    async with open_openai_client(base_url="http://127.0.0.1:9/v1", api_key="k") as client:
        with pytest.raises(ValueError, match="stream_path must be 'lean' or 'sdk'"):
            OpenAIChatAdapter(client, stream_path="fast")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="stream_path"):
            OpenAIChatAdapter(client, stream_path=None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="OpenAIChatModel: stream_path"):
            OpenAIChatModel(
                plan=RoutePlan([RouteStage("m", [Candidate("a")])]),
                clients={"a": client},
                stream_path="x",  # type: ignore[arg-type]
            )
        with pytest.raises(ValueError, match="stream_chat_completion: stream_path"):
            await stream_chat_completion(
                client,
                model="m",
                messages=MESSAGES,
                stream_path="x",  # type: ignore[arg-type]
            )
        assert OpenAIChatAdapter(client).stream_path == "lean"
        assert OpenAIChatAdapter(client, stream_path="sdk").stream_path == "sdk"


@pytest.mark.parametrize("path", ["lean", "sdk"])
async def test_many_chunks_in_one_read_do_not_hold_the_event_loop(path: StreamPath) -> None:
    # 64 events in one write, so one read: without a checkpoint every few
    # chunks the whole answer would be read in one task step, and a task
    # beside it would see either none of the text or all of it.
    events = "\n\ndata: ".join(
        json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}}]}) for _ in range(64)
    )
    script = [StreamResponse([RawEvent(events), Finish()])]
    content, seen = await lean_diff.interleaved(WIRE, path, script)
    assert content == "x" * 64
    assert {n for n in seen if 0 < n < 64}, seen
