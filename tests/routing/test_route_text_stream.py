"""End to end: the turn text stream inside the attempt function, the executor around it.

The composition the spec prescribes: one stream per turn, ``begin_attempt()``
at the top of every attempt, ``produced_output`` straight onto the failure,
``finish()`` from the route's result. A reader (``TurnTextView``) receives
every event.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest
from route_scripts import connection_error, plan, status_error

from juno_bind_trio.completion import (
    ListSink,
    ResetEvent,
    TurnStreamEvent,
    TurnTextStream,
    TurnTextView,
)
from juno_bind_trio.providers.openai import classify_openai_error
from juno_bind_trio.routing import (
    AttemptFailure,
    AttemptSuccess,
    Candidate,
    CircuitBreaker,
    RouteCursor,
    RouteResult,
    execute_route_plan,
)

pytestmark = pytest.mark.anyio

# What each endpoint streams, and how it ends: an exception to fail with, or None to succeed.
SCRIPT: dict[str, tuple[list[str], Exception | None]] = {
    "p00": (["The ans", "wer is"], connection_error()),  # drops mid-stream
    "p01": (["Hm"], status_error(500, {"error": {"message": "oops"}})),
    "p10": (["The answer ", "is 42."], None),
}


async def run_turn(sink: ListSink, breaker: CircuitBreaker | None = None) -> RouteResult[str]:
    stream = TurnTextStream(sink=sink, turn_id="turn-1")

    async def attempt(
        candidate: Candidate, cursor: RouteCursor
    ) -> AttemptSuccess[str] | AttemptFailure:
        stream.begin_attempt()
        texts, failure = SCRIPT[candidate.endpoint]
        try:
            for text in texts:
                await anyio.sleep(1.0)
                stream.observe(text)
            if failure is not None:
                raise failure
        except Exception as exc:
            return AttemptFailure(
                classify_openai_error(exc, candidate, cursor),
                produced_output=stream.produced_output,
            )
        return AttemptSuccess("".join(texts))

    result = await execute_route_plan(plan([2, 1]), attempt, breaker=breaker)
    stream.finish("succeeded" if result.ok else "failed")
    return result


def render(events: Sequence[TurnStreamEvent]) -> TurnTextView:
    view = TurnTextView("turn-1")
    for event in events:
        view.apply(event)
    return view


async def test_a_retractable_sink_keeps_the_whole_fallback_chain() -> None:
    sink = ListSink(retractable=True)
    start = anyio.current_time()
    result = await run_turn(sink)
    assert result.ok
    assert result.value == "The answer is 42."
    assert [r.candidate.endpoint for r in result.attempts] == ["p00", "p01", "p10"]
    assert anyio.current_time() - start == 5.0
    # The reader sees only the final attempt's text...
    assert render(sink.events).text == "The answer is 42."
    # ...because each retry's first byte was preceded by a reset of the screen.
    resets = [e for e in sink.events if isinstance(e, ResetEvent)]
    assert [(r.epoch, r.reason) for r in resets] == [(1, "attempt_failed"), (2, "attempt_failed")]


async def test_a_permanent_sink_clamps_routing_at_the_first_byte() -> None:
    sink = ListSink(retractable=False)
    start = anyio.current_time()
    result = await run_turn(sink)
    assert result.status == "clamped"
    assert [r.candidate.endpoint for r in result.attempts] == ["p00"]
    assert result.attempts[0].adjusted == "produced_output"
    assert result.error is SCRIPT["p00"][1]
    assert anyio.current_time() - start == 2.0
    # Nothing was replayed onto the permanent surface: only attempt 1's text, never a reset.
    assert render(sink.events).text == "The answer is"
    assert not any(isinstance(e, ResetEvent) for e in sink.events)


async def test_a_spent_reset_budget_clamps_the_next_failure() -> None:
    sink = ListSink(retractable=True)
    stream = TurnTextStream(sink=sink, turn_id="turn-1", max_resets=1)
    failures = iter([connection_error(), connection_error(), connection_error()])

    async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
        stream.begin_attempt()
        await anyio.sleep(1.0)
        stream.observe(f"try {cursor.attempt} ")
        error = next(failures)
        return AttemptFailure(
            classify_openai_error(error, candidate, cursor), produced_output=stream.produced_output
        )

    breaker = CircuitBreaker()
    result: RouteResult[str] = await execute_route_plan(plan([3]), attempt, breaker=breaker)
    stream.finish("succeeded" if result.ok else "failed")
    # Attempt 2 spent the only wipe, so its failure may not be replayed: two
    # endpoints recorded a failure for this turn, the third was never asked.
    assert result.status == "clamped"
    assert [r.cursor.attempt for r in result.attempts] == [1, 2]
    assert set(breaker.statistics().endpoints) == {"p00", "p01"}
    assert render(sink.events).text == "try 2 "


async def test_a_retry_that_dies_before_its_first_byte_leaves_the_old_text_up() -> None:
    sink = ListSink(retractable=True)
    stream = TurnTextStream(sink=sink, turn_id="turn-1")
    outcomes = iter(["text then fail", "fail at once"])

    async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
        stream.begin_attempt()
        await anyio.sleep(1.0)
        if next(outcomes) == "text then fail":
            stream.observe("partial")
        verdict = classify_openai_error(connection_error(), candidate, cursor)
        return AttemptFailure(verdict, produced_output=stream.produced_output)

    result: RouteResult[str] = await execute_route_plan(plan([2]), attempt)
    stream.finish("succeeded" if result.ok else "failed")
    assert result.status == "exhausted"
    # Partial text plus an error beats a blank space plus an error.
    assert render(sink.events).text == "partial"
