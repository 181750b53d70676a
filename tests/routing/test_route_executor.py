"""execute_route_plan: traversal order, budgets, clamps, waits, results and cancellation."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from route_scripts import Script, connection_error, fail, plan, status_error

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
    RouteStage,
    execute_route_plan,
)

pytestmark = pytest.mark.anyio

RETRY = RouteAction.RETRY_SAME_ENDPOINT
NEXT = RouteAction.NEXT_CANDIDATE
STAGE = RouteAction.NEXT_STAGE
STOP = RouteAction.PROPAGATE


async def test_first_attempt_success_returns_its_value_and_a_one_entry_trail() -> None:
    start = anyio.current_time()
    script = Script([AttemptSuccess("hello")], duration=2.0)
    result = await execute_route_plan(plan([2]), script)
    assert result.ok
    assert result.status == "succeeded"
    assert result.value == "hello"
    assert result.error is None
    assert result.unwrap() == "hello"
    (record,) = result.attempts
    assert record.cursor == RouteCursor(0, 0, 1, 1, "model-0")
    assert record.action is None
    assert record.adjusted is None
    assert record.error is None
    assert [c.at - start for c in script.calls] == [0.0]
    assert anyio.current_time() - start == 2.0


async def test_walks_candidates_then_stages_in_plan_order() -> None:
    route = RoutePlan(
        [
            RouteStage("big", [Candidate("a"), Candidate("b", model="vendor/big")]),
            RouteStage("small", [Candidate("a"), Candidate("c")]),
        ]
    )
    script = Script([fail(NEXT), fail(NEXT), fail(NEXT), AttemptSuccess("from c")])
    start = anyio.current_time()
    result = await execute_route_plan(route, script)
    assert result.value == "from c"
    assert [(c.endpoint, c.cursor.model) for c in script.calls] == [
        ("a", "big"),
        ("b", "vendor/big"),
        ("a", "small"),
        ("c", "small"),
    ]
    assert [c.cursor.attempt for c in script.calls] == [1, 2, 3, 4]
    assert [c.at - start for c in script.calls] == [0.0, 1.0, 2.0, 3.0]
    assert [r.action for r in result.attempts] == [NEXT, NEXT, NEXT, None]


async def test_same_endpoint_retries_stop_at_the_budget_and_escalate() -> None:
    route = RoutePlan(
        [RouteStage("m", [Candidate("a", max_retries=1), Candidate("b")])], max_retries=5
    )
    script = Script([fail(RETRY), fail(RETRY), fail(RETRY), fail(RETRY), AttemptSuccess("ok")])
    result = await execute_route_plan(route, script)
    # a: first attempt + 1 retry; b: first attempt + 2 retries (it reaches its own success).
    assert script.visited == [(0, 0, 1), (0, 0, 2), (0, 1, 1), (0, 1, 2), (0, 1, 3)]
    assert [(r.action, r.adjusted) for r in result.attempts[:3]] == [
        (RETRY, None),
        (NEXT, "retry_budget_spent"),
        (RETRY, None),
    ]
    assert result.attempts[1].cursor.is_retry
    assert not result.attempts[2].cursor.is_retry


async def test_zero_retry_budget_means_one_attempt_per_candidate() -> None:
    script = Script([fail(RETRY), fail(RETRY)])
    result = await execute_route_plan(plan([2], max_retries=0), script)
    assert script.visited == [(0, 0, 1), (0, 1, 1)]
    assert result.status == "exhausted"


async def test_next_stage_skips_the_rest_of_the_stage() -> None:
    script = Script([fail(STAGE)])
    result = await execute_route_plan(plan([3, 2]), script)
    assert script.visited == [(0, 0, 1), (1, 0, 1)]
    assert result.ok
    assert result.attempts[0].action is STAGE


async def test_next_stage_from_the_last_stage_exhausts_the_plan() -> None:
    script = Script([fail(NEXT), fail(STAGE)])
    result = await execute_route_plan(plan([1, 3]), script)
    assert script.visited == [(0, 0, 1), (1, 0, 1)]
    assert result.status == "exhausted"


async def test_propagate_stops_and_hands_back_the_cause_itself() -> None:
    bad_request = status_error(400, {"error": {"message": "bad", "type": "invalid_request_error"}})
    script = Script([fail(NEXT), fail(STOP, cause=bad_request)])
    result = await execute_route_plan(plan([3, 3]), script)
    assert result.status == "propagated"
    assert not result.ok
    assert result.error is bad_request
    assert result.value is None
    assert len(result.attempts) == 2
    with pytest.raises(type(bad_request)) as raised:
        result.unwrap()
    assert raised.value is bad_request


async def test_produced_output_clamps_any_retry_to_propagate_only() -> None:
    for action in (RETRY, NEXT, STAGE):
        cause = connection_error()
        script = Script([fail(action, produced_output=True, cause=cause)])
        result = await execute_route_plan(plan([2, 2]), script)
        assert script.visited == [(0, 0, 1)], action
        assert result.status == "clamped"
        assert result.error is cause
        assert (result.attempts[0].action, result.attempts[0].adjusted) == (
            STOP,
            "produced_output",
        )


async def test_a_propagate_verdict_with_output_is_propagated_not_clamped() -> None:
    script = Script([fail(STOP, produced_output=True)])
    result = await execute_route_plan(plan([2]), script)
    assert result.status == "propagated"
    assert result.attempts[0].adjusted is None


async def test_retry_after_is_waited_out_exactly_before_a_same_endpoint_retry() -> None:
    start = anyio.current_time()
    script = Script([fail(RETRY, retry_after=3.0), AttemptSuccess("ok")], duration=1.0)
    result = await execute_route_plan(plan([2]), script)
    assert script.visited == [(0, 0, 1), (0, 0, 2)]
    assert [c.at - start for c in script.calls] == [0.0, 4.0]
    assert result.attempts[1].cursor.candidate_attempt == 2


async def test_retry_after_longer_than_max_retry_wait_moves_on_at_once() -> None:
    start = anyio.current_time()
    script = Script([fail(RETRY, retry_after=30.0), AttemptSuccess("ok")], duration=1.0)
    result = await execute_route_plan(plan([2], max_retry_wait=5.0), script)
    assert script.visited == [(0, 0, 1), (0, 1, 1)]
    assert [c.at - start for c in script.calls] == [0.0, 1.0]
    assert (result.attempts[0].action, result.attempts[0].adjusted) == (
        NEXT,
        "retry_wait_too_long",
    )


async def test_next_candidate_never_waits_for_retry_after() -> None:
    start = anyio.current_time()
    script = Script([fail(NEXT, retry_after=60.0), AttemptSuccess("ok")], duration=1.0)
    await execute_route_plan(plan([2]), script)
    assert [c.at - start for c in script.calls] == [0.0, 1.0]


async def test_exhausted_plan_is_one_error_carrying_the_whole_trail() -> None:
    causes = [
        status_error(429, {"error": {"message": "slow"}}, {"retry-after": "20"}),
        status_error(503, {"error": {"message": "down"}}, {"retry-after": "7"}),
        connection_error(),
    ]
    script = Script([fail(NEXT, cause=causes[0], retry_after=20.0)])
    script.outcomes += [fail(NEXT, cause=causes[1], retry_after=7.0), fail(NEXT, cause=causes[2])]
    result = await execute_route_plan(plan([2, 1]), script)
    assert result.status == "exhausted"
    error = result.error
    assert isinstance(error, AllRoutesFailedError)
    assert error.attempts == result.attempts
    assert len(error.attempts) == 3
    assert error.exceptions == tuple(causes)
    assert error.__cause__ is causes[-1]
    assert error.retry_after == 7.0
    message = str(error)
    for endpoint in ("p00", "p01", "p10"):
        assert endpoint in message
    assert "RateLimitError" in message
    assert "-> next_candidate" in message
    with pytest.raises(AllRoutesFailedError):
        result.unwrap()


async def test_exhausted_without_any_retry_after_reports_none() -> None:
    result = await execute_route_plan(plan([1]), Script([fail(NEXT)]))
    assert isinstance(result.error, AllRoutesFailedError)
    assert result.error.retry_after is None


# -- cancellation ------------------------------------------------------------------


async def test_cancel_during_an_attempt_propagates_untouched_and_starts_nothing_else() -> None:
    start = anyio.current_time()
    script = Script([fail(NEXT)] * 5, duration=1.0)
    seen: list[BaseException] = []
    with anyio.move_on_after(1.5) as scope:
        try:
            await execute_route_plan(plan([5]), script)
        except BaseException as exc:
            seen.append(exc)
            raise
    assert scope.cancelled_caught
    assert [type(e) for e in seen] == [anyio.get_cancelled_exc_class()]
    assert script.visited == [(0, 0, 1), (0, 1, 1)]
    assert anyio.current_time() - start == 1.5


async def test_a_cancel_the_attempt_did_not_notice_still_stops_the_next_attempt() -> None:
    with anyio.CancelScope() as scope:

        def cancel_then_fail(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
            scope.cancel()  # returns without reaching another checkpoint
            return fail(NEXT)

        script = Script([cancel_then_fail, fail(NEXT)], duration=0.0)
        await execute_route_plan(plan([3]), script)
    assert scope.cancelled_caught
    assert script.visited == [(0, 0, 1)]


async def test_a_cancel_the_attempt_did_not_notice_is_not_turned_into_a_routing_failure() -> None:
    # The next candidate's breaker is open, so no further attempt would start: the
    # cancellation must still leave the executor, not an "exhausted" result whose
    # unwrap() raises AllRoutesFailedError out of the cancelled scope.
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60.0)
    permit = breaker.admit("p01")
    assert permit is not None
    breaker.record_failure(permit)
    results: list[object] = []
    with anyio.CancelScope() as scope:

        def cancel_then_fail(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
            scope.cancel()  # returns without reaching another checkpoint
            return fail(NEXT)

        script = Script([cancel_then_fail], duration=0.0)
        results.append(await execute_route_plan(plan([2]), script, breaker=breaker))
    assert scope.cancelled_caught
    assert results == []
    assert script.visited == [(0, 0, 1)]
    # Refused only because the turn was still routing, not counted after the cancel.
    assert breaker.statistics().endpoints["p01"].rejected == 0


@pytest.mark.parametrize(
    ("first", "with_breaker"),
    [
        (NEXT, False),  # the straight path, without a breaker
        (RETRY, False),  # handed from the straight path to the full walk
        (NEXT, True),  # the full walk from the start
    ],
)
async def test_a_cancel_made_while_the_attempt_was_resuming_stops_the_next_attempt(
    first: RouteAction, with_breaker: bool
) -> None:
    # Another task wakes the attempt and cancels its scope in the same step: the
    # attempt resumes normally (it was scheduled already; on asyncio anyio holds
    # the cancel back from a task whose wait is over) and returns without another
    # checkpoint. The scope has no deadline, so only its cancel says it.
    started: list[RouteCursor] = []
    wake = anyio.Event()
    with anyio.CancelScope() as scope:
        assert scope.deadline == float("inf")

        async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
            started.append(cursor)
            await wake.wait()
            return fail(first)

        async def wake_then_cancel() -> None:
            await anyio.lowlevel.checkpoint()
            wake.set()
            scope.cancel()

        breaker = CircuitBreaker() if with_breaker else None
        async with anyio.create_task_group() as group:
            group.start_soon(wake_then_cancel)
            await execute_route_plan(plan([3]), attempt, breaker=breaker)
    assert scope.cancelled_caught
    assert [cursor.attempt for cursor in started] == [1]


async def test_a_scope_cancelled_before_the_call_stops_at_the_first_checkpoint() -> None:
    start = anyio.current_time()
    script = Script([fail(NEXT)] * 3, duration=1.0)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await execute_route_plan(plan([3]), script)
    assert scope.cancelled_caught
    # The first attempt is entered, as any async call is, and cannot get past its
    # first await; nothing after it starts.
    assert script.visited == [(0, 0, 1)]
    assert anyio.current_time() == start


async def test_cancel_during_a_retry_after_wait_ends_it_at_once() -> None:
    start = anyio.current_time()
    script = Script([fail(RETRY, retry_after=8.0)], duration=1.0)
    with anyio.move_on_after(4.0) as scope:
        await execute_route_plan(plan([1]), script)
    assert scope.cancelled_caught
    assert script.visited == [(0, 0, 1)]
    assert anyio.current_time() - start == 4.0


async def test_an_exception_raised_by_the_attempt_function_propagates_as_itself() -> None:
    boom = RuntimeError("host bug")

    async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptSuccess[str]:
        await anyio.lowlevel.checkpoint()
        raise boom

    with pytest.raises(RuntimeError) as raised:
        await execute_route_plan(plan([3]), attempt)
    assert raised.value is boom


async def test_an_attempt_function_returning_something_else_is_a_type_error() -> None:
    async def attempt(candidate: Candidate, cursor: RouteCursor) -> object:
        await anyio.lowlevel.checkpoint()
        return "ok"

    with pytest.raises(TypeError, match=r"execute_route_plan: .* got 'ok'"):
        await execute_route_plan(plan([1]), attempt)  # type: ignore[arg-type]


async def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"execute_route_plan: plan must be a RoutePlan, got \[\]"):
        await execute_route_plan([], Script([]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="attempt must be an async callable, got None"):
        await execute_route_plan(plan([1]), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="breaker must be a CircuitBreaker or None, got 3"):
        await execute_route_plan(plan([1]), Script([]), breaker=3)  # type: ignore[arg-type]


# -- with a circuit breaker ----------------------------------------------------------


async def test_only_endpoint_failures_count_against_the_breaker() -> None:
    breaker = CircuitBreaker(failure_threshold=10)
    route = RoutePlan(
        [
            RouteStage("m", [Candidate("a", max_retries=1), Candidate("b"), Candidate("c")]),
            RouteStage("n", [Candidate("d")]),
        ]
    )
    # a: defect, defect (budget spent -> counts once); b: next stage (neutral);
    # d: success.
    script = Script([fail(RETRY), fail(RETRY), fail(STAGE), AttemptSuccess("ok")])
    result = await execute_route_plan(route, script, breaker=breaker)
    assert result.ok
    stats = breaker.statistics().endpoints
    assert (stats["a"].failures, stats["a"].consecutive_failures) == (1, 1)
    assert (stats["b"].failures, stats["b"].successes) == (0, 0)
    assert "c" not in stats  # never reached
    assert (stats["d"].successes, stats["d"].failures) == (1, 0)


async def test_open_endpoints_are_skipped_and_listed() -> None:
    breaker = CircuitBreaker(failure_threshold=1)
    for endpoint in ("p00", "p10"):
        permit = breaker.admit(endpoint)
        assert permit is not None
        breaker.record_failure(permit)
    script = Script([fail(NEXT)])
    result = await execute_route_plan(plan([2, 2]), script, breaker=breaker)
    assert [c.endpoint for c in script.calls] == ["p01", "p11"]
    assert [(s.stage_index, s.candidate_index) for s in result.skipped] == [(0, 0), (1, 0)]
    assert result.ok
    # the cursor numbers attempts actually made, not candidates skipped
    assert [c.cursor.attempt for c in script.calls] == [1, 2]


async def test_when_every_breaker_is_open_the_outcome_is_no_viable_endpoint() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=60.0)
    for endpoint in ("p00", "p01"):
        permit = breaker.admit(endpoint)
        assert permit is not None
        breaker.record_failure(permit)
    script = Script([])
    result = await execute_route_plan(plan([2]), script, breaker=breaker)
    assert script.calls == []
    assert result.status == "no_viable_endpoint"
    assert result.attempts == ()
    assert isinstance(result.error, NoViableEndpointError)
    assert not isinstance(result.error, AllRoutesFailedError)
    assert "p00, p01" in str(result.error)
    assert len(result.error.skipped) == 2


async def test_a_cancelled_probe_releases_its_slot_and_counts_nothing() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=5.0)
    permit = breaker.admit("p00")
    assert permit is not None
    breaker.record_failure(permit)
    await anyio.sleep(5.0)
    assert breaker.state("p00") == "half_open"
    script = Script([fail(NEXT)], duration=10.0)
    with anyio.move_on_after(1.0):
        await execute_route_plan(plan([1]), script, breaker=breaker)
    stats = breaker.statistics().endpoints["p00"]
    assert (stats.state, stats.probes_in_flight, stats.failures) == ("half_open", 0, 1)
    assert breaker.admit("p00") is not None  # the slot is free again


async def test_a_probe_whose_attempt_raises_releases_its_slot() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=5.0)
    permit = breaker.admit("p00")
    assert permit is not None
    breaker.record_failure(permit)
    await anyio.sleep(5.0)

    async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptSuccess[str]:
        await anyio.lowlevel.checkpoint()
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await execute_route_plan(plan([1]), attempt, breaker=breaker)
    assert breaker.statistics().endpoints["p00"].probes_in_flight == 0


async def test_rate_limit_retry_after_keeps_the_endpoint_closed_to_later_turns() -> None:
    breaker = CircuitBreaker(failure_threshold=5, reset_timeout=30.0)
    start = anyio.current_time()
    first = Script([fail(NEXT, retry_after=12.0)], duration=1.0)
    assert (await execute_route_plan(plan([2]), first, breaker=breaker)).ok
    second = Script([], duration=1.0)
    result = await execute_route_plan(plan([2]), second, breaker=breaker)
    assert [c.endpoint for c in second.calls] == ["p01"]
    assert [s.candidate.endpoint for s in result.skipped] == ["p00"]
    await anyio.sleep(start + 13.0 - anyio.current_time())
    third = Script([], duration=1.0)
    await execute_route_plan(plan([2]), third, breaker=breaker)
    assert [c.endpoint for c in third.calls] == ["p00"]  # half-open probe, and it closes


async def test_classified_error_refuses_cancellation_as_a_cause() -> None:
    caught: list[BaseException] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException as exc:
            caught.append(exc)
            raise
    assert isinstance(caught[0], anyio.get_cancelled_exc_class())
    with pytest.raises(TypeError, match="cancellation is never classified"):
        ClassifiedError(NEXT, caught[0])  # type: ignore[arg-type]
