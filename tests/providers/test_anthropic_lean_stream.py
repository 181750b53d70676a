"""The Anthropic lean stream path against its SDK path: same stream, same turn, same error.

``stream_path="lean"`` reads the body as the SDK's stream of plain objects;
``"sdk"`` lets the SDK build a pydantic event per event. What is compared (all
a caller or routing can observe) is ``lean_diff.py``'s; here, what is
Anthropic's own: thinking blocks kept with their signatures, the exception's
``body``, ``status_code``, ``type`` and its response's status, and the fault
matrix of the fake, which goes through both paths, then a random corpus.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import anthropic
import anyio
import lean_diff
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.completion import TurnTextStream
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers import ProviderRequest, RoutedModel
from juno_bind_trio.providers.anthropic import (
    AnthropicAdapter,
    classify_anthropic_error,
    open_anthropic_client,
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
    open_fake_anthropic_server,
)

pytestmark = pytest.mark.anyio

CURSOR = RouteCursor(0, 0, 1, 1, "claude-test")
NEXT = RouteAction.NEXT_CANDIDATE


async def _turn(
    client: anthropic.AsyncAnthropic,
    path: StreamPath,
    text_stream: TurnTextStream | None,
    **options: Any,
) -> ModelTurnResult:
    adapter = AnthropicAdapter(client, stream_path=path)
    return await adapter.stream_turn(lean_diff.request("claude-test", text_stream, **options))


WIRE = lean_diff.Wire(
    open_server=open_fake_anthropic_server,
    open_client=lambda url: open_anthropic_client(base_url=url, api_key="k"),
    turn=_turn,
    classify=lambda error: classify_anthropic_error(error, Candidate("anthropic"), CURSOR),
    fields=("body", "status_code", "type", "kind"),
    response_status=True,
)


async def _both(script: Sequence[FakeResponse], **options: Any) -> tuple[Any, ...]:
    return await lean_diff.both(WIRE, script, **options)


def _event(name: str, data: object) -> RawEvent:
    return RawEvent(f"event: {name}\ndata: {json.dumps(data)}")


def _delta(delta: object, index: object = 0) -> RawEvent:
    return _event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def _start(block: object, index: int = 0) -> RawEvent:
    return _event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


FAULTS: list[tuple[str, list[FakeResponse]]] = [
    ("healthy", [StreamResponse.of_text("Hel", "lo", usage=Usage(12, 2, cached_tokens=3))]),
    ("tool-calls", [StreamResponse.of_tool_calls(("c1", "t", '{"a": 1}'), ("c2", "u", "{}"))]),
    (
        "thinking",
        [
            StreamResponse(
                [ReasoningDelta("let me "), ReasoningDelta("see"), TextDelta("x"), Finish()]
            )
        ],
    ),
    (
        "thinking-then-tool",
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
    ("529", [ErrorResponse(529)]),
    ("500", [ErrorResponse(500)]),
    ("401", [ErrorResponse(401)]),
    ("403", [ErrorResponse(403)]),
    ("400", [ErrorResponse(400)]),
    ("400-too-long", [ErrorResponse(400, "prompt is too long: 210000 tokens > 200000")]),
    ("404", [ErrorResponse(404)]),
    ("408", [ErrorResponse(408)]),
    ("409", [ErrorResponse(409)]),
    ("413", [ErrorResponse(413)]),
    ("close-before-response", [CloseBeforeResponse()]),
    ("disconnect", [StreamResponse([TextDelta("par"), Disconnect()])]),
    ("disconnect-at-once", [StreamResponse([Disconnect()])]),
    (
        "error-event-overloaded",
        [StreamResponse([TextDelta("par"), ErrorEvent(type="overloaded_error")])],
    ),
    ("error-event-api", [StreamResponse([ErrorEvent()])]),
    ("error-event-invalid", [StreamResponse([ErrorEvent("nope", type="invalid_request_error")])]),
    (
        "error-event-too-long",
        [StreamResponse([ErrorEvent("prompt is too long", type="invalid_request_error")])],
    ),
    ("error-event-no-data", [StreamResponse([RawEvent("event: error")])]),
    ("error-event-not-json", [StreamResponse([RawEvent("event: error\ndata: oops")])]),
    ("error-event-a-list", [StreamResponse([RawEvent("event: error\ndata: [1]")])]),
    ("malformed-event", [StreamResponse([TextDelta("par"), MalformedChunk()])]),
    (
        "ping",
        [
            StreamResponse(
                [RawEvent('event: ping\ndata: {"type": "ping"}'), TextDelta("a"), Finish()]
            )
        ],
    ),
    (
        "no-event-name",
        [StreamResponse([RawEvent('data: {"type": "oops"}'), TextDelta("a"), Finish()])],
    ),
    ("comment", [StreamResponse([RawEvent(": keep-alive"), TextDelta("a"), Finish()])]),
    (
        "empty-data",
        [
            StreamResponse(
                [RawEvent("event: content_block_delta\ndata: "), TextDelta("a"), Finish()]
            )
        ],
    ),
    (
        "null-event",
        [
            StreamResponse(
                [TextDelta("a"), RawEvent("event: content_block_delta\ndata: null"), Finish()]
            )
        ],
    ),
    (
        "a-list",
        [StreamResponse([TextDelta("a"), RawEvent("event: content_block_delta\ndata: [1, 2]")])],
    ),
    ("a-string", [StreamResponse([RawEvent('event: message_start\ndata: "text"')])]),
    (
        "type-missing",
        [StreamResponse([RawEvent('event: content_block_delta\ndata: {"index": 0}')])],
    ),
    (
        "delta-missing",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    _event("content_block_delta", {"type": "content_block_delta", "index": 0}),
                ]
            )
        ],
    ),
    (
        "text-not-a-string",
        [StreamResponse([TextDelta("a"), _delta({"type": "text_delta", "text": 5}), Finish()])],
    ),
    ("text-missing", [StreamResponse([TextDelta("a"), _delta({"type": "text_delta"}), Finish()])]),
    (
        "unknown-delta",
        [
            StreamResponse(
                [TextDelta("a"), _delta({"type": "citations_delta", "citation": {}}), Finish()]
            )
        ],
    ),
    (
        "unknown-block",
        [
            StreamResponse(
                [_start({"type": "server_tool_use", "id": "s"}), TextDelta("a"), Finish()]
            )
        ],
    ),
    (
        "unknown-event",
        [
            StreamResponse(
                [_event("later_event", {"type": "later_event"}), TextDelta("a"), Finish()]
            )
        ],
    ),
    (
        "tool-use-whole",
        [
            StreamResponse(
                [
                    _start({"type": "tool_use", "id": "c9", "name": "t", "input": {"a": [1, 2]}}),
                    Finish("tool_calls"),
                ]
            )
        ],
    ),
    (
        "tool-use-no-name",
        [
            StreamResponse(
                [_start({"type": "tool_use", "id": "c9", "input": {}}), Finish("tool_calls")]
            )
        ],
    ),
    (
        "redacted-thinking",
        [
            StreamResponse(
                [_start({"type": "redacted_thinking", "data": "opaque"}), TextDelta("a"), Finish()]
            )
        ],
    ),
    (
        "text-block-with-text",
        [StreamResponse([_start({"type": "text", "text": "whole"}), Finish()])],
    ),
    (
        "usage-odd",
        [
            StreamResponse(
                [
                    TextDelta("a"),
                    _event(
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": "3"},
                        },
                    ),
                ]
            )
        ],
    ),
    (
        "usage-cache-null",
        [
            StreamResponse(
                [
                    _event(
                        "message_start",
                        {
                            "type": "message_start",
                            "message": {
                                "id": "m",
                                "usage": {
                                    "input_tokens": 4,
                                    "output_tokens": 1,
                                    "cache_read_input_tokens": None,
                                },
                            },
                        },
                    ),
                    TextDelta("a"),
                    Finish(),
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
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": "x"},
                        },
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
                    _start({"type": "tool_use", "id": "c1", "name": "t", "input": {}}),
                    _delta({"type": "input_json_delta", "partial_json": "{}"}, index="0"),
                    Finish("tool_calls"),
                ]
            )
        ],
    ),
    ("no-message-stop", [StreamResponse([TextDelta("half")], done=False)]),
    ("empty", [StreamResponse([Finish("stop")])]),
    ("max-tokens", [StreamResponse([TextDelta("cut"), Finish("length")])]),
    ("refusal", [StreamResponse([Finish("content_filter")])]),
    ("pause-turn", [StreamResponse([TextDelta("a"), Finish("pause_turn")])]),
    ("bad-arguments", [StreamResponse.of_tool_calls(("c1", "t", '{"a": '))]),
    ("stall-first-token", [StreamResponse.of_text("late", first_byte_delay=math.inf)]),
    ("stall-thinking", [StreamResponse([ReasoningDelta("hm"), Pause(math.inf)])]),
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


async def test_thinking_blocks_keep_their_signatures_on_both_paths() -> None:
    script = [StreamResponse([ReasoningDelta("a"), ReasoningDelta("b"), TextDelta("x"), Finish()])]
    outcome = (await _both(script))[0]
    state = json.loads(outcome[4])
    [block] = next(iter(state.values()))["thinking"]
    assert block["thinking"] == "ab"
    assert block["signature"]  # the fake signs the block it streamed


@pytest.mark.parametrize(
    "name",
    ["null-event", "a-list", "a-string", "type-missing", "text-not-a-string", "usage-not-a-count"],
)
async def test_an_event_of_the_wrong_shape_moves_to_the_next_candidate(name: str) -> None:
    outcome = (await _both(dict(FAULTS)[name]))[0]
    assert (outcome[1], outcome[9]) == (anthropic.APIResponseValidationError, NEXT)


async def test_an_overloaded_error_event_is_the_sdks_status_error_on_both_paths() -> None:
    outcome = (await _both(dict(FAULTS)["error-event-overloaded"]))[0]
    assert issubclass(outcome[1], anthropic.APIStatusError)
    assert outcome[9] is NEXT


async def test_a_refused_connection_is_the_same_on_both_paths() -> None:
    outcome = (await _both([], refused=True))[0]
    assert outcome[1] is anthropic.APIConnectionError


async def test_the_sdk_read_timeout_is_the_same_on_both_paths() -> None:
    async def timed_out(path: StreamPath) -> tuple[Any, ...]:
        start = anyio.current_time()
        script = [StreamResponse([TextDelta("a"), Pause(math.inf)])]
        async with (
            open_fake_anthropic_server(script) as server,
            open_anthropic_client(base_url=server.base_url, api_key="k") as primed,
        ):
            client = primed.with_options(timeout=anthropic.Timeout(None, connect=5.0, read=3.0))
            # As open_anthropic_client does: the SDK's platform probe answered
            # already (with_options drops it), or the first request would run
            # it in a thread, which the autojump clock does not wait for.
            client._platform = primed._platform
            request = ProviderRequest(
                model="claude-test",
                messages=lean_diff.MESSAGES,
                time_to_first_token=100.0,
                inter_chunk_timeout=100.0,
            )
            try:
                await AnthropicAdapter(client, stream_path=path).stream_turn(request)
            except Exception as error:
                return WIRE.raised(error), anyio.current_time() - start
        raise AssertionError("no timeout")

    lean, sdk = await timed_out("lean"), await timed_out("sdk")
    assert lean == sdk
    assert (lean[0][1], lean[1]) == (anthropic.APITimeoutError, 3.0)


async def test_a_cancel_closes_the_connection_at_once_on_both_paths() -> None:
    assert await lean_diff.cancelled(WIRE, "lean") == await lean_diff.cancelled(WIRE, "sdk")
    assert await lean_diff.cancelled(WIRE, "lean") == [2.25]


async def test_the_lean_path_reuses_the_connection() -> None:
    assert await lean_diff.connections(WIRE) == [0, 0]


def _routed(plan: RoutePlan, clients: dict[str, Any], path: StreamPath) -> RoutedModel:
    adapters = {name: AnthropicAdapter(c, stream_path=path) for name, c in clients.items()}
    return RoutedModel(
        plan=plan, adapters=adapters, time_to_first_token=5.0, inter_chunk_timeout=5.0
    )


@pytest.mark.one_backend_by_default  # a heavy matrix: nox runs it on both
async def test_routing_decides_the_same_on_both_paths() -> None:
    plan = RoutePlan(
        [
            RouteStage("claude-a", [Candidate("a"), Candidate("b")]),
            RouteStage("claude-b", [Candidate("b")]),
        ],
        max_retries=1,
    )
    await lean_diff.routes_the_same(WIRE, plan, FAULTS, _routed)


async def test_a_page_that_is_not_an_event_stream_is_refused_on_both_paths() -> None:
    lean = await lean_diff.refused_page(WIRE, "lean")
    assert lean == await lean_diff.refused_page(WIRE, "sdk")
    assert lean[1] is anthropic.APIResponseValidationError
    assert "not an event stream" in lean[2]
    assert lean[-3] is NEXT


# --- a random corpus ----------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_ODD_EVENTS = st.sampled_from(
    [
        RawEvent('event: ping\ndata: {"type": "ping"}'),
        RawEvent('data: {"type": "content_block_delta"}'),
        RawEvent("event: content_block_delta\ndata: "),
        RawEvent('event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}'),
        _delta({"type": "text_delta", "text": ""}),
        _delta({"type": "signature_delta", "signature": "s"}, index=7),
        _delta({"type": "thinking_delta", "thinking": "t"}, index=7),
        _delta({"type": "input_json_delta", "partial_json": "{}"}, index=3),
        _delta({"type": "text_delta", "text": None}),
        _start({"type": "text", "text": ""}, index=5),
        _start({"type": "tool_use", "id": "w", "name": "t", "input": {"k": "v"}}, index=4),
        _start({"type": "redacted_thinking", "data": "d"}, index=6),
        _event(
            "message_delta", {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 2}}
        ),
        _event("message_stop", {"type": "message_stop"}),
        RawEvent('event: error\ndata: {"type": "error", "error": {"type": "api_error"}}'),
        RawEvent('event: message_start\ndata: {"type": "message_start", "message": {}}'),
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
        type=st.sampled_from(["overloaded_error", "api_error", "invalid_request_error"]),
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
    async with open_anthropic_client(base_url="http://127.0.0.1:9", api_key="k") as client:
        with pytest.raises(
            ValueError, match="AnthropicAdapter: stream_path must be 'lean' or 'sdk'"
        ):
            AnthropicAdapter(client, stream_path="fast")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="AnthropicAdapter: stream_path"):
            AnthropicAdapter(client, stream_path=None)  # type: ignore[arg-type]
        assert AnthropicAdapter(client).stream_path == "lean"
        assert AnthropicAdapter(client, stream_path="sdk").stream_path == "sdk"


@pytest.mark.parametrize("path", ["lean", "sdk"])
async def test_many_events_in_one_read_do_not_hold_the_event_loop(path: StreamPath) -> None:
    # 64 events in one write, so one read: without a checkpoint every few
    # events the whole answer would be read in one task step.
    one = _delta({"type": "text_delta", "text": "x"}).data
    script = [StreamResponse([TextDelta(""), RawEvent("\n\n".join([one] * 64)), Finish()])]
    content, seen = await lean_diff.interleaved(WIRE, path, script)
    assert content == "x" * 64
    assert {n for n in seen if 0 < n < 64}, seen
