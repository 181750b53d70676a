"""The Responses lean stream path against its SDK path: same stream, same turn, same error.

``stream_path="lean"`` splits the event stream itself (the chat path's
reader) into plain dicts; ``"sdk"`` lets the SDK build a pydantic event per
event. What is compared (all a caller or routing can observe) is
``lean_diff.py``'s; here, what is the Responses API's own: reasoning items
kept with their encrypted content, failure events raised as ``APIError``, the
exception's ``body``, ``status_code``, ``type``, ``code`` and its response's
status, and the fault matrix of the fake, which goes through both paths, then
a random corpus.
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

from conftest import run_on
from juno_bind_trio.completion import TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers import RoutedModel
from juno_bind_trio.providers.openai import (
    OpenAIResponsesAdapter,
    classify_responses_error,
    open_openai_client,
)
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
    open_fake_responses_server,
)

pytestmark = pytest.mark.anyio

CURSOR = RouteCursor(0, 0, 1, 1, "gpt-test")
NEXT = RouteAction.NEXT_CANDIDATE


async def _turn(
    client: openai.AsyncOpenAI,
    path: StreamPath,
    text_stream: TurnTextStream | None,
    **options: Any,
) -> ModelTurnResult:
    adapter = OpenAIResponsesAdapter(client, stream_path=path)
    return await adapter.stream_turn(lean_diff.request("gpt-test", text_stream, **options))


WIRE = lean_diff.Wire(
    open_server=open_fake_responses_server,
    open_client=lambda url, **options: open_openai_client(base_url=url, api_key="k", **options),
    turn=_turn,
    classify=lambda error: classify_responses_error(error, Candidate("openai"), CURSOR),
    fields=("body", "status_code", "type", "code", "kind"),
    response_status=True,
)


async def _both(script: Sequence[FakeResponse], **options: Any) -> tuple[Any, ...]:
    return await lean_diff.both(WIRE, script, **options)


def _event(data: object) -> RawEvent:
    # The fake sends a RawEvent as one `data:` line; the SDK reads no event name.
    return RawEvent(json.dumps(data))


def _text_delta(delta: object, index: object = 0) -> RawEvent:
    return _event(
        {
            "type": "response.output_text.delta",
            "item_id": "msg_x",
            "output_index": index,
            "content_index": 0,
            "delta": delta,
            "sequence_number": 9,
        }
    )


_RESPONSE = {"id": "resp_x", "object": "response", "status": "completed", "output": []}


FAULTS: list[tuple[str, list[FakeResponse]]] = [
    ("healthy", [StreamResponse.of_text("Hel", "lo", usage=Usage(12, 2, cached_tokens=3))]),
    ("tool-calls", [StreamResponse.of_tool_calls(("c1", "t", '{"a": 1}'), ("c2", "u", "{}"))]),
    (
        "reasoning",
        [
            StreamResponse(
                [ReasoningDelta("let me "), ReasoningDelta("see"), TextDelta("x"), Finish()]
            )
        ],
    ),
    (
        "reasoning-then-tool",
        [
            StreamResponse(
                [
                    ReasoningDelta("hm"),
                    ToolCallDelta(0, id="c1", name="t", arguments='{"a"'),
                    ToolCallDelta(0, arguments=": 2}"),
                    Finish("tool_calls"),
                ]
            )
        ],
    ),
    ("429", [ErrorResponse(429, retry_after=2)]),
    ("500", [ErrorResponse(500)]),
    ("503", [ErrorResponse(503)]),
    ("401", [ErrorResponse(401)]),
    ("400", [ErrorResponse(400)]),
    ("400-too-long", [ErrorResponse(400, "too long", code="context_length_exceeded")]),
    ("404", [ErrorResponse(404)]),
    ("408", [ErrorResponse(408)]),
    ("close-before-response", [CloseBeforeResponse()]),
    ("disconnect", [StreamResponse([TextDelta("par"), Disconnect()])]),
    ("disconnect-at-once", [StreamResponse([Disconnect()])]),
    ("error-event", [StreamResponse([TextDelta("par"), ErrorEvent()])]),
    ("error-event-code", [StreamResponse([ErrorEvent("slow down", code="rate_limit_exceeded")])]),
    (
        "error-event-too-long",
        [StreamResponse([ErrorEvent("too long", code="context_length_exceeded")])],
    ),
    ("response-failed", [StreamResponse([TextDelta("par"), ErrorEvent(type="response.failed")])]),
    (
        "response-failed-request",
        [StreamResponse([ErrorEvent("bad", type="response.failed", code="invalid_prompt")])],
    ),
    (
        "response-failed-no-error",
        [StreamResponse([_event({"type": "response.failed", "response": dict(_RESPONSE)})])],
    ),
    (
        "response-failed-error-a-string",
        [
            StreamResponse(
                [_event({"type": "response.failed", "response": {**_RESPONSE, "error": "x"}})]
            )
        ],
    ),
    ("error-key-data", [StreamResponse([RawEvent('{"error": {"message": "boom"}}')])]),
    (
        "error-false",
        [StreamResponse([RawEvent('{"type": "x", "error": false}'), TextDelta("a"), Finish()])],
    ),
    ("malformed-event", [StreamResponse([TextDelta("par"), MalformedChunk()])]),
    ("empty-data", [StreamResponse([RawEvent("")])]),
    ("done", [StreamResponse([TextDelta("a"), RawEvent("[DONE]"), TextDelta("b"), Finish()])]),
    ("null-event", [StreamResponse([TextDelta("a"), RawEvent("null"), Finish()])]),
    ("a-list", [StreamResponse([TextDelta("a"), RawEvent("[1, 2]")])]),
    ("a-string", [StreamResponse([RawEvent('"text"')])]),
    ("type-missing", [StreamResponse([RawEvent('{"delta": "a"}')])]),
    ("delta-not-a-string", [StreamResponse([TextDelta("a"), _text_delta(5), Finish()])]),
    (
        "delta-missing",
        [StreamResponse([TextDelta("a"), _event({"type": "response.output_text.delta"})])],
    ),
    (
        "unknown-event",
        [StreamResponse([_event({"type": "response.later"}), TextDelta("a"), Finish()])],
    ),
    (
        "thread-event",
        [
            StreamResponse(
                [RawEvent('{"a": 1}\nevent: thread.run.created'), TextDelta("a"), Finish()]
            )
        ],
    ),
    (
        "usage-odd",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    _event(
                        {
                            "type": "response.completed",
                            "response": {
                                **_RESPONSE,
                                "usage": {
                                    "input_tokens": "3",
                                    "output_tokens": 2.0,
                                    "input_tokens_details": {"cached_tokens": True},
                                    "output_tokens_details": None,
                                },
                            },
                        }
                    ),
                ]
            )
        ],
    ),
    (
        "usage-not-a-count",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    _event(
                        {
                            "type": "response.completed",
                            "response": {**_RESPONSE, "usage": {"input_tokens": "x"}},
                        }
                    ),
                ]
            )
        ],
    ),
    (
        "index-a-string",
        [
            StreamResponse(
                [
                    ToolCallDelta(0, id="c1", name="t", arguments="{"),
                    _event(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": "fc_0",
                            "output_index": "0",
                            "delta": "}",
                        }
                    ),
                    Finish("tool_calls"),
                ]
            )
        ],
    ),
    (
        "incomplete-filtered",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    _event(
                        {
                            "type": "response.incomplete",
                            "response": {
                                **_RESPONSE,
                                "status": "incomplete",
                                "incomplete_details": {"reason": "content_filter"},
                            },
                        }
                    ),
                ]
            )
        ],
    ),
    (
        "refusal",
        [
            StreamResponse(
                [
                    _event({"type": "response.refusal.delta", "delta": "no", "output_index": 0}),
                    Finish(),
                ]
            )
        ],
    ),
    ("no-completed", [StreamResponse([TextDelta("half")], done=False)]),
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
                    _event(
                        {
                            "type": "response.output_item.added",
                            "output_index": 0,
                            "item": {"type": "function_call", "call_id": "c2", "name": "b"},
                        }
                    ),
                    Finish("tool_calls"),
                ]
            )
        ],
    ),
    ("stall-first-token", [StreamResponse.of_text("late", first_byte_delay=math.inf)]),
    ("stall-reasoning", [StreamResponse([ReasoningDelta("hm"), Pause(math.inf)])]),
    (
        "stall-between-deltas",
        [StreamResponse([TextDelta("a"), Pause(2), TextDelta("b"), Pause(math.inf)])],
    ),
    ("paced", [StreamResponse.of_text("a", "b", "c", first_byte_delay=1, chunk_delay=2)]),
]


@pytest.mark.one_backend_by_default  # a heavy matrix: nox runs it on both
@pytest.mark.parametrize("script", [pytest.param(s, id=name) for name, s in FAULTS])
async def test_every_fault_ends_the_same_on_both_paths(script: list[FakeResponse]) -> None:
    await _both(script)


async def test_reasoning_items_keep_their_encrypted_content_on_both_paths() -> None:
    outcome = (await _both(dict(FAULTS)["reasoning-then-tool"]))[0]
    state = json.loads(outcome[4])
    [item] = next(iter(state.values()))["reasoning"]
    assert item["type"] == "reasoning"
    assert item["encrypted_content"]


@pytest.mark.parametrize(
    "name",
    ["null-event", "a-list", "a-string", "type-missing", "delta-not-a-string", "usage-not-a-count"],
)
async def test_an_event_of_the_wrong_shape_moves_to_the_next_candidate(name: str) -> None:
    outcome = (await _both(dict(FAULTS)[name]))[0]
    assert (outcome[1], outcome[10]) == (openai.APIResponseValidationError, NEXT)


@pytest.mark.parametrize(
    ("name", "action"),
    [
        ("error-event", NEXT),
        ("response-failed", NEXT),
        ("error-event-too-long", RouteAction.NEXT_STAGE),
        ("response-failed-request", RouteAction.PROPAGATE),
    ],
)
async def test_failure_events_are_api_errors_judged_by_their_code(
    name: str, action: RouteAction
) -> None:
    outcome = (await _both(dict(FAULTS)[name]))[0]
    assert (outcome[1], outcome[10]) == (openai.APIError, action)


async def test_a_refused_connection_is_the_same_on_both_paths() -> None:
    outcome = (await _both([], refused=True))[0]
    assert outcome[1] is openai.APIConnectionError


async def test_the_sdk_read_timeout_is_the_same_on_both_paths() -> None:
    script = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
    outcome, _, ended, _, _ = await _both(
        script,
        client_options={"read_timeout": 3.0},
        time_to_first_token=100.0,
        inter_chunk_timeout=100.0,
    )
    assert (outcome[1], ended) == (openai.APITimeoutError, 3.0)


async def test_a_cancel_closes_the_connection_at_once_on_both_paths() -> None:
    assert await lean_diff.cancelled(WIRE, "lean") == await lean_diff.cancelled(WIRE, "sdk")
    assert await lean_diff.cancelled(WIRE, "lean") == [2.25]


async def test_the_lean_path_reuses_the_connection() -> None:
    assert await lean_diff.connections(WIRE) == [0, 0]


def _routed(plan: RoutePlan, clients: dict[str, Any], path: StreamPath) -> RoutedModel:
    adapters = {name: OpenAIResponsesAdapter(c, stream_path=path) for name, c in clients.items()}
    return RoutedModel(
        plan=plan, adapters=adapters, time_to_first_token=5.0, inter_chunk_timeout=5.0
    )


@pytest.mark.one_backend_by_default  # a heavy matrix: nox runs it on both
async def test_routing_decides_the_same_on_both_paths() -> None:
    plan = RoutePlan(
        [
            RouteStage("gpt-a", [Candidate("a"), Candidate("b")]),
            RouteStage("gpt-b", [Candidate("b")]),
        ],
        max_retries=1,
    )
    await lean_diff.routes_the_same(WIRE, plan, FAULTS, _routed)


async def test_a_page_that_is_not_an_event_stream_is_refused_on_both_paths() -> None:
    lean = await lean_diff.refused_page(WIRE, "lean", suffix="/v1")
    assert lean == await lean_diff.refused_page(WIRE, "sdk", suffix="/v1")
    assert lean[1] is openai.APIResponseValidationError
    assert "not an event stream" in lean[2]
    assert lean[-3] is NEXT


# --- a random corpus ----------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_ODD_EVENTS = st.sampled_from(
    [
        RawEvent('{"type": "response.in_progress", "response": {}}'),
        RawEvent('{"type": "response.content_part.added", "output_index": 0}'),
        RawEvent(""),
        _text_delta(""),
        _text_delta(None),
        _text_delta("z", index=3),
        _event({"type": "response.reasoning_text.delta", "delta": "r"}),
        _event(
            {
                "type": "response.output_item.added",
                "output_index": 5,
                "item": {"type": "reasoning", "id": "rs"},
            }
        ),
        _event(
            {
                "type": "response.output_item.done",
                "output_index": 5,
                "item": {"type": "reasoning", "id": "rs", "summary": []},
            }
        ),
        _event(
            {"type": "response.output_item.done", "output_index": 1, "item": {"type": "message"}}
        ),
        _event(
            {"type": "response.function_call_arguments.delta", "output_index": 4, "delta": "{}"}
        ),
        _event({"type": "response.completed", "response": {**_RESPONSE, "usage": None}}),
        _event({"type": "error", "code": "server_error", "message": ""}),
        RawEvent('{"error": {"code": "x"}}'),
        RawEvent("[DONE]"),
    ]
)
_EVENT: st.SearchStrategy[StreamEvent] = st.one_of(
    st.builds(TextDelta, _TEXT),
    st.builds(ReasoningDelta, _TEXT),
    st.builds(
        ToolCallDelta,
        st.integers(0, 2),
        st.one_of(st.none(), st.sampled_from(["c0", "c1"])),
        st.one_of(st.none(), st.sampled_from(["f", "g"])),
        st.one_of(st.none(), st.sampled_from(['{"a"', ": 1}", "{}", ""])),
    ),
    st.builds(Finish, st.sampled_from(["stop", "length", "tool_calls", "content_filter"])),
    st.builds(Usage, st.integers(0, 9), st.integers(0, 9), cached_tokens=st.integers(0, 3)),
    st.builds(Pause, st.integers(1, 6)),
    st.builds(
        ErrorEvent,
        type=st.sampled_from(["server_error", "response.failed"]),
        code=st.one_of(st.none(), st.sampled_from(["context_length_exceeded", "invalid_prompt"])),
    ),
    st.just(MalformedChunk()),
    _ODD_EVENTS,
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


async def test_the_stream_path_is_checked_by_name_and_lean_by_default() -> None:
    async with open_openai_client(base_url="http://127.0.0.1:9/v1", api_key="k") as client:
        with pytest.raises(
            ValueError, match="OpenAIResponsesAdapter: stream_path must be 'lean' or 'sdk'"
        ):
            OpenAIResponsesAdapter(client, stream_path="fast")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="OpenAIResponsesAdapter: stream_path"):
            OpenAIResponsesAdapter(client, stream_path=None)  # type: ignore[arg-type]
        assert OpenAIResponsesAdapter(client).stream_path == "lean"
        assert OpenAIResponsesAdapter(client, stream_path="sdk").stream_path == "sdk"


@pytest.mark.parametrize("path", ["lean", "sdk"])
async def test_many_events_in_one_read_do_not_hold_the_event_loop(path: StreamPath) -> None:
    # 64 events in one write, so one read: without a checkpoint every few
    # events the whole answer would be read in one task step.
    one = _text_delta("x").data
    script = [StreamResponse([TextDelta(""), RawEvent("\n\ndata: ".join([one] * 64)), Finish()])]
    content, seen = await lean_diff.interleaved(WIRE, path, script)
    assert content == "x" * 64
    assert {n for n in seen if 0 < n < 64}, seen
