"""What the per-provider adapter tests share: the conversation, the tool, the fault matrix's body.

Each of ``test_anthropic.py``, ``test_bedrock.py``, ``test_gemini.py`` and
``test_openai_responses.py`` drives one adapter through its real SDK against
its fake, and asks the same questions of it: does a fault mid-answer get the
verdict it should, and does the reader end with the winner's text; does
thinking keep a stream alive without counting as its first token. The
questions and the steps live here; each file keeps its wire: its table of
faults and the exception its SDK raises for each, the shapes of its requests,
and what its classifier adds (a wait, an adjusted verdict).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeAlias

import anyio
import attrs
import pydantic
import pytest

from juno_bind_trio import StreamStallError
from juno_bind_trio.completion import ListSink, ResetEvent, TextEvent, TurnTextStream
from juno_bind_trio.loop import LoopState, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers import ProviderAdapter, RoutedModel
from juno_bind_trio.routing import Candidate, RouteAction, RoutePlan, RouteResult, RouteStage
from juno_bind_trio.testing import (
    ErrorResponse,
    FakeResponse,
    Finish,
    Pause,
    ReasoningDelta,
    StreamResponse,
    TextDelta,
    ToolCallDelta,
)

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hi"},
]
NEXT = RouteAction.NEXT_CANDIDATE
RETRY = RouteAction.RETRY_SAME_ENDPOINT
STAGE = RouteAction.NEXT_STAGE
STOP = RouteAction.PROPAGATE


Opener: TypeAlias = Callable[
    [Sequence[FakeResponse]], AbstractAsyncContextManager[tuple[Any, ProviderAdapter]]
]
"""Opens a provider's fake with a script, and an adapter of a client pointed at it."""


@asynccontextmanager
async def open_routed(
    open_wire: Opener,
    provider: str,
    model_name: str,
    script: Sequence[FakeResponse],
    *,
    max_retries: int = 0,
    **options: Any,
) -> AsyncIterator[tuple[RoutedModel, Any]]:
    """A model routing to *model_name* on *provider* alone, and the fake it talks to."""
    async with open_wire(script) as (server, adapter):
        model = RoutedModel(
            plan=RoutePlan(
                [RouteStage(model_name, [Candidate(provider)])], max_retries=max_retries
            ),
            adapters={provider: adapter},
            **options,
        )
        yield model, server


def texts(sink: ListSink) -> list[str | None]:
    """The text of each event the reader got, ``None`` for a reset."""
    return [e.text if isinstance(e, TextEvent) else None for e in sink.events]


def accepted(server: Any) -> bool:
    """Whether the validating fake took every request (none answered with its refusal)."""
    return all(
        r.response is not None and not isinstance(r.response, ErrorResponse)
        for r in server.requests
    )


# --- the one tool ---------------------------------------------------------------------


def add_call(call_id: str, a: int, b: int) -> tuple[str, str, str]:
    return call_id, "add", json.dumps({"a": a, "b": b})


async def run_add(call: Any) -> ToolCallOutcome:
    args = json.loads(call["function"]["arguments"])
    await anyio.sleep(1)
    return ToolCallOutcome.from_content(call["id"], str(args["a"] + args["b"]))


ADD_PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def add_tool(parameters: dict[str, Any] = ADD_PARAMETERS) -> dict[str, Any]:
    """The ``add`` tool in the chat-completions shape, with *parameters* as its schema."""
    return {
        "type": "function",
        "function": {"name": "add", "description": "Add two integers.", "parameters": parameters},
    }


ADD_TOOL = add_tool()


def tool_loop(
    model: RoutedModel,
    state: LoopState,
    *,
    tool: dict[str, Any] = ADD_TOOL,
    max_iterations: int = 4,
    **options: Any,
) -> ToolLoop:
    """A loop that offers *tool* and answers its calls with [run_add][]."""
    return ToolLoop(
        state=state,
        max_iterations=max_iterations,
        call_model=model,
        run_tool_call=run_add,
        build_tools=lambda: [tool],
        **options,
    )


def reasoning_then_call(thought: str, call: tuple[str, str, str]) -> StreamResponse:
    """A turn that thinks *thought* in two deltas, then makes *call* in two fragments."""
    call_id, name, arguments = call
    return StreamResponse(
        [
            ReasoningDelta(thought[:5]),
            ReasoningDelta(thought[5:]),
            ToolCallDelta(0, id=call_id, name=name, arguments=arguments[:4]),
            ToolCallDelta(0, arguments=arguments[4:]),
            Finish("tool_calls"),
        ]
    )


# --- structured output ------------------------------------------------------------------

PLACE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def place_format(schema: dict[str, Any] = PLACE_SCHEMA, **extra: Any) -> dict[str, Any]:
    """A chat-completions ``response_format`` asking for a ``Place`` of *schema*."""
    return {"type": "json_schema", "json_schema": {"name": "Place", "schema": schema, **extra}}


class Place(pydantic.BaseModel):
    city: str


async def ask_for_a_place(model: str, **options: Any) -> Any:
    """What an [Agent][juno_bind_trio.agent.Agent] of *model* answers with ``output_type=Place``."""
    from juno_bind_trio.agent import Agent

    agent = Agent(model, output_type=Place, **options)
    result = await agent.run("Where?")
    await agent.aclose()
    return result.output


# --- every fault, classified, on a retractable and a permanent reader -------------------

Kind: TypeAlias = type[Exception] | tuple[type[Exception], ...]
Fault: TypeAlias = tuple[str, FakeResponse, RouteAction, Kind, bool]
"""(id, fault, verdict, exception, whether the reader was shown text before it)."""

STALLS: list[Fault] = [
    (
        "stall before the first token",
        StreamResponse([Pause(math.inf), TextDelta("late")]),
        NEXT,
        StreamStallError,
        False,
    ),
    (
        "stall between chunks",
        StreamResponse([TextDelta("Half"), Pause(math.inf)]),
        NEXT,
        StreamStallError,
        True,
    ),
]
"""The two stalls, which every wire's watchdog turns into the same verdict."""


def every_fault(faults: Sequence[Fault]) -> Callable[[Any], Any]:
    """Parametrize a test over *faults* (ids from the table) and over both kinds of reader."""

    def decorate(test: Any) -> Any:
        test = pytest.mark.parametrize(
            ("fault", "action", "kind", "shown"),
            [pytest.param(f, a, k, s, id=i) for i, f, a, k, s in faults],
        )(test)
        return pytest.mark.parametrize(
            "retractable", [True, False], ids=["retractable", "permanent"]
        )(test)

    return decorate


@attrs.frozen
class FaultRun:
    """One fault played, then the winner: what the route returned and what the reader saw."""

    result: RouteResult[ModelTurnResult]
    sink: ListSink
    stream: TurnTextStream
    requests: list[Any]
    took: float
    """Virtual seconds the route took."""


async def play_fault(
    open_wire: Opener,
    provider: str,
    models: tuple[str, str],
    fault: FakeResponse,
    *,
    retractable: bool,
    **plan_options: Any,
) -> FaultRun:
    """Route through *fault* then a whole answer, over two stages of one *provider*."""
    sink = ListSink(retractable=retractable)
    stream = TurnTextStream(sink=sink, turn_id="t")
    async with open_wire([fault, StreamResponse.of_text("Whole")]) as (server, adapter):
        plan = RoutePlan(
            [RouteStage(model, [Candidate(provider)]) for model in models],
            max_retries=1,
            **plan_options,
        )
        model = RoutedModel(
            plan=plan,
            adapters={provider: adapter},
            time_to_first_token=5.0,
            inter_chunk_timeout=2.0,
        )
        start = anyio.current_time()
        result = await model.route(MESSAGES, text_stream=stream)
        took = anyio.current_time() - start
        stream.finish("succeeded" if result.ok else "failed")
    return FaultRun(result, sink, stream, server.requests, took)


def check_the_reader_ends_with_the_winner(
    run: FaultRun,
    models: tuple[str, str],
    *,
    action: RouteAction,
    kind: Kind,
    shown: bool,
    retractable: bool,
) -> bool:
    """What follows the verdict, alike on every wire; whether the winner was reached."""
    result, sink = run.result, run.sink
    if action is STOP:
        assert not result.ok
        assert isinstance(result.error, kind)
        return False
    if shown and not retractable:
        # A permanent reader was shown the failed attempt's text: routing stops,
        # and the reader keeps what it was shown.
        assert not result.ok
        assert texts(sink) == ["Half"]
        assert len(run.requests) == 1
        return False
    assert result.ok
    assert result.unwrap().content == "Whole"
    assert run.stream.text == "Whole"
    # The reader saw the failed attempt's text, the reset, the winner; or the winner alone.
    assert texts(sink) == (["Half", None, "Whole"] if shown else ["Whole"])
    if shown:
        assert isinstance(sink.events[1], ResetEvent)
    asked = [r.model for r in run.requests]
    assert asked[-1] == (models[1] if action in (NEXT, STAGE) else models[0])
    return True


# --- thinking keeps a stream alive but is not its first token ----------------------------

THOUGHTS = pytest.mark.parametrize(("thoughts", "ok"), [(4, True), (20, False)])
"""Four thoughts end within the first-token budget; twenty do not."""


async def route_through_thoughts(
    open_model: Callable[..., AbstractAsyncContextManager[tuple[RoutedModel, Any]]],
    thoughts: int,
    **route_options: Any,
) -> tuple[RouteResult[ModelTurnResult], float]:
    """Route a turn that thinks *thoughts* times before its text; the result and the time."""
    # A thought every 1.5 s: within the 2 s between-chunk budget every time;
    # the 10 s first-token budget still runs, so 20 of them (30 s) stall.
    events: list[Any] = []
    for i in range(thoughts):
        events += [ReasoningDelta(f"t{i} "), Pause(1.5)]
    script = [StreamResponse([*events, TextDelta("done"), Finish("stop")])]
    async with open_model(script, time_to_first_token=10.0, inter_chunk_timeout=2.0) as (model, _):
        start = anyio.current_time()
        result = await model.route(MESSAGES, **route_options)
    return result, anyio.current_time() - start


def check_stalled_before_the_first_token(result: RouteResult[ModelTurnResult], took: float) -> None:
    error = result.attempts[0].error
    assert isinstance(error, StreamStallError)
    assert error.budget == "time_to_first_token"
    assert took == pytest.approx(10.0)
