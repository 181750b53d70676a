"""End to end: the real SDK, the fake server, routing, the text stream and the tool loop.

Every fault the server can inject, each ending in the routing outcome the
taxonomy prescribes, with the retractable surface showing only the winning
attempt's text.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import openai
import pytest

from juno_bind_trio import CompletionDefectError, StreamStallError
from juno_bind_trio.completion import ListSink, ResetEvent, TextEvent, TurnTextStream, TurnTextView
from juno_bind_trio.loop import LoopState, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import (
    AllRoutesFailedError,
    Candidate,
    CircuitBreaker,
    RouteAction,
    RoutePlan,
    RouteResult,
    RouteStage,
)
from juno_bind_trio.testing import (
    CloseBeforeResponse,
    Disconnect,
    ErrorEvent,
    ErrorResponse,
    FakeOpenAIServer,
    FakeResponse,
    Finish,
    MalformedChunk,
    Pause,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "user", "content": "hi"}]
NEXT = RouteAction.NEXT_CANDIDATE
RETRY = RouteAction.RETRY_SAME_ENDPOINT
STAGE = RouteAction.NEXT_STAGE
STOP = RouteAction.PROPAGATE

# Provider "a" serves model m1 first; "b" serves m1 second; then m2 from "b".
PLAN = RoutePlan(
    [
        RouteStage("m1", [Candidate("a"), Candidate("b")]),
        RouteStage("m2", [Candidate("b")]),
    ],
    max_retries=1,
)


@asynccontextmanager
async def providers(
    script_a: Sequence[FakeResponse],
    script_b: Sequence[FakeResponse],
    *,
    refuse_a: bool = False,
    **model_options: Any,
) -> AsyncIterator[tuple[OpenAIChatModel, FakeOpenAIServer, FakeOpenAIServer]]:
    async with (
        open_fake_openai_server(script_a) as server_a,
        open_fake_openai_server(script_b) as server_b,
        open_openai_client(
            base_url=server_a.refused_base_url if refuse_a else server_a.base_url, api_key="a"
        ) as client_a,
        open_openai_client(base_url=server_b.base_url, api_key="b") as client_b,
    ):
        model_options.setdefault("time_to_first_token", 5.0)
        model_options.setdefault("inter_chunk_timeout", 5.0)
        model = OpenAIChatModel(
            plan=model_options.pop("plan", PLAN),
            clients={"a": client_a, "b": client_b},
            **model_options,
        )
        yield model, server_a, server_b


def trail(result: RouteResult[ModelTurnResult]) -> list[tuple[str, str, RouteAction | None]]:
    return [(r.candidate.provider, r.cursor.model, r.action) for r in result.attempts]


OK_FROM_B = StreamResponse.of_text("from ", "b")

FAULTS: list[tuple[str, FakeResponse, RouteAction, type[Exception]]] = [
    ("429", ErrorResponse(429, retry_after=1), NEXT, openai.RateLimitError),
    ("500", ErrorResponse(500), NEXT, openai.InternalServerError),
    ("401", ErrorResponse(401), NEXT, openai.AuthenticationError),
    ("404", ErrorResponse(404), NEXT, openai.NotFoundError),
    ("close-before-response", CloseBeforeResponse(), NEXT, openai.APIConnectionError),
    (
        "disconnect-mid-stream",
        StreamResponse([TextDelta("partial"), Disconnect()]),
        NEXT,
        openai.APIConnectionError,
    ),
    ("error-event", StreamResponse([TextDelta("partial"), ErrorEvent()]), NEXT, openai.APIError),
    (
        "stall-first-token",
        StreamResponse.of_text("late", first_byte_delay=math.inf),
        NEXT,
        StreamStallError,
    ),
    (
        "stall-between-chunks",
        StreamResponse([TextDelta("partial"), Pause(math.inf)]),
        NEXT,
        StreamStallError,
    ),
]


@pytest.mark.parametrize(
    ("fault", "action", "error_type"),
    [pytest.param(f, a, e, id=name) for name, f, a, e in FAULTS],
)
async def test_an_endpoint_failure_moves_to_the_next_provider(
    fault: FakeResponse, action: RouteAction, error_type: type[Exception]
) -> None:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id="t1")
    async with providers([fault], [OK_FROM_B]) as (model, server_a, server_b):
        result = await model.route(MESSAGES, text_stream=stream)
    stream.finish("succeeded" if result.ok else "failed")
    assert result.status == "succeeded"
    assert result.unwrap().content == "from b"
    assert trail(result) == [("a", "m1", action), ("b", "m1", None)]
    assert isinstance(result.attempts[0].error, error_type)
    assert len(server_a.requests) == len(server_b.requests) == 1
    # The reader ends up with exactly the winning attempt's text.
    view = TurnTextView("t1")
    for event in sink.events:
        view.apply(event)
    assert view.text == "from b"
    partial = any(isinstance(e, TextEvent) and e.text == "partial" for e in sink.events)
    assert partial == any(isinstance(e, ResetEvent) for e in sink.events)


async def test_refused_connection_moves_to_the_next_provider() -> None:
    async with providers([], [OK_FROM_B], refuse_a=True) as (model, _, _):
        result = await model.route(MESSAGES)
    assert trail(result) == [("a", "m1", NEXT), ("b", "m1", None)]
    assert isinstance(result.attempts[0].error, openai.APIConnectionError)


@pytest.mark.parametrize(
    "fault",
    [
        StreamResponse([TextDelta("gar"), MalformedChunk()]),
        StreamResponse([TextDelta("cut sho")], done=False),
        StreamResponse([Finish("stop")]),
        StreamResponse([TextDelta("cut"), Finish("length")]),
    ],
    ids=["malformed-chunk", "no-done", "empty", "length"],
)
async def test_a_defective_completion_retries_the_same_endpoint(fault: FakeResponse) -> None:
    async with providers([fault, StreamResponse.of_text("fine")], []) as (model, server_a, _):
        result = await model.route(MESSAGES)
    assert trail(result) == [("a", "m1", RETRY), ("a", "m1", None)]
    assert result.unwrap().content == "fine"
    assert len(server_a.requests) == 2


async def test_defects_past_the_retry_budget_move_on() -> None:
    empty = StreamResponse([Finish("stop")])
    async with providers([empty, empty], [OK_FROM_B]) as (model, _, _):
        result = await model.route(MESSAGES)
    assert [a for _, _, a in trail(result)] == [RETRY, NEXT, None]
    assert result.attempts[1].adjusted == "retry_budget_spent"
    assert isinstance(result.attempts[0].error, CompletionDefectError)


async def test_a_bad_request_propagates_at_once() -> None:
    async with providers([ErrorResponse(400, "bad tool schema")], [OK_FROM_B]) as (model, _, b):
        result = await model.route(MESSAGES)
    assert result.status == "propagated"
    assert trail(result) == [("a", "m1", STOP)]
    assert isinstance(result.error, openai.BadRequestError)
    assert b.requests == []


async def test_a_model_limit_skips_to_the_fallback_model() -> None:
    too_long = ErrorResponse(400, "too long", code="context_length_exceeded")
    async with providers([too_long], [StreamResponse.of_text("m2 here")]) as (model, _, b):
        result = await model.route(MESSAGES)
    assert trail(result) == [("a", "m1", STAGE), ("b", "m2", None)]
    assert [r.model for r in b.requests] == ["m2"]


async def test_every_route_failing_is_one_error_with_the_whole_trail() -> None:
    async with providers([ErrorResponse(503)], [ErrorResponse(429), ErrorResponse(500)]) as (
        model,
        _,
        _,
    ):
        result = await model.route(MESSAGES)
        assert result.status == "exhausted"
        with pytest.raises(AllRoutesFailedError) as caught:
            result.unwrap()
    assert len(caught.value.attempts) == 3
    assert trail(result) == [("a", "m1", NEXT), ("b", "m1", NEXT), ("b", "m2", NEXT)]


async def test_a_permanent_surface_clamps_after_text_was_shown() -> None:
    sink = ListSink(retractable=False)
    stream = TurnTextStream(sink=sink, turn_id="t")
    cut = StreamResponse([TextDelta("shown"), Disconnect()])
    async with providers([cut], [OK_FROM_B]) as (model, _, b):
        result = await model.route(MESSAGES, text_stream=stream)
    assert result.status == "clamped"
    assert isinstance(result.error, openai.APIConnectionError)
    assert b.requests == []


async def test_a_stall_hands_over_at_the_exact_budget() -> None:
    start = anyio.current_time()
    stall = StreamResponse([TextDelta("a"), Pause(1), TextDelta("b"), Pause(math.inf)])
    async with providers([stall], [OK_FROM_B], inter_chunk_timeout=3.0) as (model, a, b):
        result = await model.route(MESSAGES)
        await anyio.sleep(1)
    assert result.ok
    # The stall fires 3 s after the last chunk (t=1); the connection to "a" is
    # closed then, and "b" is asked at the same instant.
    assert a.requests[0].client_gone_at == start + 4.0
    assert b.requests[0].received_at == start + 4.0


async def test_the_circuit_breaker_skips_a_dead_endpoint_on_later_turns() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60.0)
    script_b = [OK_FROM_B, OK_FROM_B]
    async with providers([ErrorResponse(500)], script_b, breaker=breaker) as (model, a, _):
        first = await model.route(MESSAGES)
        second = await model.route(MESSAGES)
    assert trail(first) == [("a", "m1", NEXT), ("b", "m1", None)]
    assert trail(second) == [("b", "m1", None)]
    assert [s.candidate.provider for s in second.skipped] == ["a"]
    assert len(a.requests) == 1


async def test_candidate_options_reach_the_request() -> None:
    plan = RoutePlan(
        [RouteStage("m1", [Candidate("a", model="a/m1", options={"temperature": 0.25})])]
    )
    async with providers([StreamResponse.of_text("x")], [], plan=plan) as (model, a, _):
        await model.route(MESSAGES)
    assert a.requests[0].model == "a/m1"
    assert a.requests[0].json["temperature"] == 0.25


async def test_construction_is_checked() -> None:
    async with open_openai_client(base_url="http://127.0.0.1:9/v1", api_key="k") as client:
        with pytest.raises(ValueError, match=r"no client for provider\(s\) \['b'\]"):
            OpenAIChatModel(plan=PLAN, clients={"a": client})
        with pytest.raises(TypeError, match="OpenAIChatModel: plan must be a RoutePlan"):
            OpenAIChatModel(plan="m1", clients={"a": client})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="time_to_first_token must be a positive"):
            OpenAIChatModel(plan=PLAN, clients={"a": client, "b": client}, time_to_first_token=0)
        # None is no classifier: refused here, not as a TypeError at the first failure.
        with pytest.raises(TypeError, match="OpenAIChatModel: classify must be callable, got None"):
            OpenAIChatModel(plan=PLAN, clients={"a": client, "b": client}, classify=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="on_route must be callable or None, got 3"):
            OpenAIChatModel(plan=PLAN, clients={"a": client, "b": client}, on_route=3)  # type: ignore[arg-type]
    retrying = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=2)
    async with retrying:
        with pytest.raises(ValueError, match=r"clients\['a'\].*max_retries=0"):
            OpenAIChatModel(plan=PLAN, clients={"a": retrying, "b": retrying})


# --- the tool loop ------------------------------------------------------------------------


def add_tool_call(call_id: str, a: int, b: int) -> tuple[str, str, str]:
    return (call_id, "add", f'{{"a": {a}, "b": {b}}}')


async def run_add(call: Any) -> ToolCallOutcome:
    import json

    args = json.loads(call["function"]["arguments"])
    await anyio.sleep(1)
    return ToolCallOutcome.from_content(call["id"], str(args["a"] + args["b"]))


async def test_a_tool_loop_over_routed_turns() -> None:
    """First provider dies mid-stream, the second answers with tool calls, then the answer."""
    sink = ListSink()
    routes: list[RouteResult[ModelTurnResult]] = []
    script_a = [StreamResponse([TextDelta("Let me th"), Disconnect()])]
    script_b = [
        StreamResponse.of_tool_calls(add_tool_call("c1", 1, 2), add_tool_call("c2", 3, 4)),
        StreamResponse.of_text("3 and 7"),
    ]
    async with providers(script_a, script_b, on_route=routes.append) as (model, _, b):
        state = LoopState(messages=list(MESSAGES))
        loop = ToolLoop(
            state=state,
            max_iterations=4,
            call_model=model,
            run_tool_call=run_add,
            text_sink=sink,
            run_id="r",
        )
        result = await loop.run()
    assert result.reason == "completed"
    assert result.content == "3 and 7"
    assert [trail(r) for r in routes] == [
        [("a", "m1", NEXT), ("b", "m1", None)],
        [("a", "m1", NEXT), ("b", "m1", None)],
    ]
    tool_messages = [m for m in state.messages if m.get("role") == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [("c1", "3"), ("c2", "7")]
    # The second turn's request carried the tool answers to "b".
    assert b.requests[1].json["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": "7",
    }
    view = TurnTextView("r:1")
    for event in sink.events:
        if event.turn_id == "r:1":
            view.apply(event)
    assert view.text == ""  # the partial narration was retracted; the winner sent none


async def test_cancelling_a_run_mid_stream_closes_the_connection_at_once() -> None:
    start = anyio.current_time()
    script_a = [StreamResponse([TextDelta("thinking"), Pause(math.inf)])]
    async with providers(script_a, [], inter_chunk_timeout=100.0) as (model, a, _):
        loop = ToolLoop(
            state=LoopState(messages=list(MESSAGES)),
            max_iterations=2,
            call_model=model,
            run_tool_call=run_add,
        )
        with anyio.move_on_after(2.5) as scope:
            await loop.run()
        assert scope.cancelled_caught
        await anyio.sleep(1)
    assert a.requests[0].client_gone_at == start + 2.5
