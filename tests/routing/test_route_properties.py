"""Properties of the executor over random plans, failure schedules and breaker states.

Each example plays a random schedule of attempt outcomes against a random
plan, on a fresh virtual clock, and checks the executor against the rules
that define it rather than against a second implementation of it.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from route_scripts import connection_error

from conftest import run_on
from juno_bind_trio.routing import (
    AllRoutesFailedError,
    AttemptFailure,
    AttemptSuccess,
    Candidate,
    CircuitBreaker,
    ClassifiedError,
    NoViableEndpointError,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteResult,
    RouteStage,
    execute_route_plan,
)

ACTIONS = list(RouteAction)


@st.composite
def plans(draw: st.DrawFn) -> RoutePlan:
    stages = []
    for i in range(draw(st.integers(1, 3))):
        candidates = [
            Candidate(
                f"p{draw(st.integers(0, 3))}",  # endpoints repeat across stages
                model=f"m{i}-{j}",
                max_retries=draw(st.none() | st.integers(0, 2)),
            )
            for j in range(draw(st.integers(1, 3)))
        ]
        stages.append(RouteStage(f"model-{i}", candidates))
    return RoutePlan(
        stages, max_retries=draw(st.integers(0, 2)), max_retry_wait=draw(st.sampled_from([0, 2]))
    )


# One step of a schedule: (succeed?, action, produced_output, retry_after, duration)
steps = st.tuples(
    st.sampled_from([False, False, False, True]),  # mostly failures
    st.sampled_from(ACTIONS),
    st.booleans(),
    st.none() | st.sampled_from([0.0, 1.0, 3.0]),
    st.sampled_from([0.0, 0.5, 1.0]),
)


async def play(
    route: RoutePlan, schedule: list[Any], open_endpoints: list[str]
) -> tuple[RouteResult[int], list[RouteCursor], list[float], float]:
    breaker = CircuitBreaker(failure_threshold=1000, reset_timeout=1e6)
    for endpoint in open_endpoints:  # held open for the whole example
        permit = breaker.admit(endpoint)
        assert permit is not None
        breaker.record_failure(permit, retry_after=1e6)
    calls: list[RouteCursor] = []
    starts: list[float] = []
    start = anyio.current_time()

    async def attempt(
        candidate: Candidate, cursor: RouteCursor
    ) -> AttemptSuccess[int] | AttemptFailure:
        assert candidate is route.stages[cursor.stage_index].candidates[cursor.candidate_index]
        calls.append(cursor)
        starts.append(anyio.current_time() - start)
        succeed, action, produced, retry_after, duration = schedule[
            (cursor.attempt - 1) % len(schedule)
        ]
        await anyio.sleep(duration)
        if succeed:
            return AttemptSuccess(cursor.attempt)
        verdict = ClassifiedError(action, connection_error(), retry_after=retry_after)
        return AttemptFailure(verdict, produced_output=produced)

    result = await execute_route_plan(route, attempt, breaker=breaker)
    return result, calls, starts, anyio.current_time() - start


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    route=plans(),
    schedule=st.lists(steps, min_size=1, max_size=30),
    open_endpoints=st.lists(st.sampled_from(["p0", "p1", "p2", "p3"]), unique=True, max_size=4),
)
def test_executor_rules_hold_for_any_failure_schedule(
    backend: str, route: RoutePlan, schedule: list[Any], open_endpoints: list[str]
) -> None:
    result, calls, starts, elapsed = run_on(backend, play, route, schedule, open_endpoints)
    trail = result.attempts

    # The result holds the full trail: every call, in order, numbered 1..n.
    assert [r.cursor for r in trail] == calls
    assert [c.attempt for c in calls] == list(range(1, len(calls) + 1))

    # Plan order: never backwards; an open endpoint is never tried.
    positions = [(c.stage_index, c.candidate_index) for c in calls]
    assert positions == sorted(positions)
    for c in calls:
        candidate = route.stages[c.stage_index].candidates[c.candidate_index]
        assert candidate.endpoint not in open_endpoints
        # No candidate is tried beyond its budget, and retries count up from 1.
        assert c.candidate_attempt <= 1 + route.retry_budget(candidate)
        assert c.model == (candidate.model or route.stages[c.stage_index].model)

    # Each move follows from the previous attempt's (adjusted) action.
    for record, following in itertools.pairwise(trail):
        here, there = record.cursor, following.cursor
        assert record.action not in (None, RouteAction.PROPAGATE)
        if record.action is RouteAction.RETRY_SAME_ENDPOINT:
            assert (there.stage_index, there.candidate_index) == (
                here.stage_index,
                here.candidate_index,
            )
            assert there.candidate_attempt == here.candidate_attempt + 1
        elif record.action is RouteAction.NEXT_CANDIDATE:
            assert (there.stage_index, there.candidate_index) > (
                here.stage_index,
                here.candidate_index,
            )
            assert there.candidate_attempt == 1
        else:
            assert there.stage_index > here.stage_index

    # Nothing traverses after a produced-output clamp.
    for i, record in enumerate(trail):
        if isinstance(record.outcome, AttemptFailure) and record.outcome.produced_output:
            assert i == len(trail) - 1
            assert record.action is RouteAction.PROPAGATE
            assert result.status in ("clamped", "propagated")

    # The status agrees with the trail, and the error carries it.
    if result.status == "succeeded":
        assert isinstance(trail[-1].outcome, AttemptSuccess)
        assert result.value == trail[-1].cursor.attempt
    elif result.status in ("propagated", "clamped"):
        assert result.error is trail[-1].error
    elif result.status == "exhausted":
        assert isinstance(result.error, AllRoutesFailedError)
        assert result.error.attempts == trail
    else:
        assert isinstance(result.error, NoViableEndpointError)
        assert trail == ()
        assert {s.candidate.endpoint for s in result.skipped} <= set(open_endpoints)

    # Virtual time is exactly the attempts' durations plus the retry waits honoured.
    waits = sum(
        r.outcome.error.retry_after or 0.0
        for r in trail
        if r.action is RouteAction.RETRY_SAME_ENDPOINT and isinstance(r.outcome, AttemptFailure)
    )
    durations = sum(schedule[(c.attempt - 1) % len(schedule)][4] for c in calls)
    assert abs(elapsed - (durations + waits)) < 1e-9
    # ...and each attempt started when the previous one (and its wait) ended.
    for k in range(1, len(calls)):
        previous = trail[k - 1]
        wait = 0.0
        if previous.action is RouteAction.RETRY_SAME_ENDPOINT:
            assert isinstance(previous.outcome, AttemptFailure)
            wait = previous.outcome.error.retry_after or 0.0
        duration = schedule[(k - 1) % len(schedule)][4]
        assert abs(starts[k] - (starts[k - 1] + duration + wait)) < 1e-9


@settings(max_examples=60, deadline=None)
@given(route=plans(), schedule=st.lists(steps, min_size=1, max_size=30))
def test_same_plan_and_same_failures_make_the_same_attempts(
    backend: str, route: RoutePlan, schedule: list[Any]
) -> None:
    first = run_on(backend, play, route, schedule, [])
    second = run_on(backend, play, route, schedule, [])
    assert first[1] == second[1]
    assert [(r.action, r.adjusted) for r in first[0].attempts] == [
        (r.action, r.adjusted) for r in second[0].attempts
    ]
    assert first[0].status == second[0].status
    assert first[3] == second[3]
