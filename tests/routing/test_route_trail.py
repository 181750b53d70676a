"""The route's trail, built lazily, against an eager reference executor.

``execute_route_plan`` notes plain facts per attempt and builds the
``AttemptRecord``s (and an exhausted route's ``AllRoutesFailedError``) the
first time the trail is read. ``eager_route`` below states the same routing
rules the plain way, building every record and the result through their
public constructors as it goes; for any plan, breaker state, schedule of
outcomes and cancellation, both must make the same attempts and hand back
results no reader can tell apart.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from route_scripts import fail, plan

from conftest import run_on
from juno_bind_trio.routing import (
    AdjustmentReason,
    AllRoutesFailedError,
    AttemptFailure,
    AttemptFn,
    AttemptRecord,
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
    RouteStatus,
    SkippedCandidate,
    _executor,
    execute_route_plan,
)

RETRY = RouteAction.RETRY_SAME_ENDPOINT
NEXT = RouteAction.NEXT_CANDIDATE
STAGE = RouteAction.NEXT_STAGE
STOP = RouteAction.PROPAGATE


async def eager_route(
    route: RoutePlan, attempt: AttemptFn[Any], breaker: CircuitBreaker | None
) -> RouteResult[Any]:
    """The executor's rules, stated plainly, with every record built as it happens."""
    trail: list[AttemptRecord[Any]] = []
    skipped: list[SkippedCandidate] = []
    overall = 0
    for stage_index, stage in enumerate(route.stages):
        action: RouteAction | None = None
        for candidate_index, candidate in enumerate(stage.candidates):
            action = None
            on_candidate = 0
            while True:
                if overall:
                    await anyio.lowlevel.checkpoint_if_cancelled()
                permit = None
                if breaker is not None:
                    permit = breaker.admit(candidate.endpoint)
                    if permit is None:
                        skipped.append(SkippedCandidate(stage_index, candidate_index, candidate))
                        break
                on_candidate += 1
                overall += 1
                model = candidate.model or stage.model
                cursor = RouteCursor(stage_index, candidate_index, on_candidate, overall, model)
                outcome = await attempt(candidate, cursor)
                if isinstance(outcome, AttemptSuccess):
                    if breaker is not None and permit is not None:
                        breaker.record_success(permit)
                    trail.append(AttemptRecord(cursor, candidate, outcome, None, None))
                    return RouteResult(
                        "succeeded", outcome.value, None, tuple(trail), tuple(skipped)
                    )
                verdict = outcome.error
                action = verdict.action
                adjusted: AdjustmentReason | None = None
                if action is RETRY and on_candidate > route.retry_budget(candidate):
                    action, adjusted = NEXT, "retry_budget_spent"
                elif action is RETRY and (verdict.retry_after or 0) > route.max_retry_wait:
                    action, adjusted = NEXT, "retry_wait_too_long"
                if breaker is not None and permit is not None:
                    if action is NEXT:
                        breaker.record_failure(permit, retry_after=verdict.retry_after)
                    else:
                        breaker.release(permit)
                if outcome.produced_output and action is not STOP:
                    action, adjusted = STOP, "produced_output"
                trail.append(AttemptRecord(cursor, candidate, outcome, action, adjusted))
                if action is STOP:
                    status: RouteStatus = (
                        "clamped" if adjusted == "produced_output" else "propagated"
                    )
                    return RouteResult(status, None, verdict.cause, tuple(trail), tuple(skipped))
                if action is not RETRY:
                    break
                if verdict.retry_after:
                    await anyio.sleep(verdict.retry_after)
            if action is STAGE:
                break
    attempts, skips = tuple(trail), tuple(skipped)
    if not attempts:
        await anyio.lowlevel.checkpoint()
        return RouteResult("no_viable_endpoint", None, NoViableEndpointError(skips), (), skips)
    return RouteResult("exhausted", None, AllRoutesFailedError(attempts, skips), attempts, skips)


@st.composite
def plans(draw: st.DrawFn) -> RoutePlan:
    stages = [
        RouteStage(
            f"model-{i}",
            [
                Candidate(
                    f"p{draw(st.integers(0, 3))}",  # endpoints repeat across stages
                    # One candidate at most sends the stage's model; no endpoint twice.
                    model=None if j == 0 and draw(st.booleans()) else f"m{i}-{j}",
                    max_retries=draw(st.none() | st.integers(0, 2)),
                )
                for j in range(draw(st.integers(1, 3)))
            ],
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    return RoutePlan(
        stages, max_retries=draw(st.integers(0, 2)), max_retry_wait=draw(st.sampled_from([0, 2]))
    )


# One attempt's outcome: a success, or a failure of any kind, with or without
# retry_after and output. Built once per example, so that both executors are
# handed the very same objects.
failures = st.builds(
    lambda action, retry_after, produced, n: fail(
        action, retry_after=retry_after, produced_output=produced, cause=ConnectionError(n)
    ),
    st.sampled_from([RETRY, RETRY, NEXT, NEXT, NEXT, STAGE, STAGE, STOP]),
    st.none() | st.sampled_from([0.0, 1.0, 3.0]),
    st.sampled_from([False, False, False, True]),
    st.integers(0, 99),
)
outcomes = st.one_of(st.integers(0, 9).map(AttemptSuccess), *[failures] * 5)


async def play(
    executor: Any,
    route: RoutePlan,
    schedule: list[AttemptSuccess[int] | AttemptFailure],
    open_endpoints: list[str] | None,
    cancel_at: int | None,
) -> tuple[RouteResult[int] | None, list[tuple[Candidate, RouteCursor]], Any]:
    """Route once; *cancel_at* is the attempt that cancels the turn and returns unnoticing."""
    breaker = None
    if open_endpoints is not None:
        breaker = CircuitBreaker(failure_threshold=2, reset_timeout=1e6)
        for endpoint in open_endpoints:  # held open for the whole example
            permit = breaker.admit(endpoint)
            assert permit is not None
            breaker.record_failure(permit, retry_after=1e6)
    calls: list[tuple[Candidate, RouteCursor]] = []
    result = None
    with anyio.CancelScope() as scope:

        async def attempt(
            candidate: Candidate, cursor: RouteCursor
        ) -> AttemptSuccess[int] | AttemptFailure:
            calls.append((candidate, cursor))
            await anyio.sleep(0.5)
            if cursor.attempt == cancel_at:
                scope.cancel()  # no checkpoint after this: only the executor's probe sees it
            return schedule[(cursor.attempt - 1) % len(schedule)]

        result = await executor(route, attempt, breaker=breaker)
    stats = None if breaker is None else breaker.statistics()
    return result, calls, stats


def same_error(lazy: BaseException | None, eager: BaseException | None) -> None:
    if isinstance(eager, AllRoutesFailedError | NoViableEndpointError):
        assert type(lazy) is type(eager)
        assert isinstance(lazy, AllRoutesFailedError | NoViableEndpointError)
        assert lazy.attempts == eager.attempts
        assert lazy.skipped == eager.skipped
        assert str(lazy) == str(eager)
        assert repr(lazy) == repr(eager)
        assert lazy.__cause__ is eager.__cause__
    else:
        assert lazy is eager  # the failure's own exception, or None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    route=plans(),
    schedule=st.lists(outcomes, min_size=1, max_size=12),
    open_endpoints=st.none()
    | st.lists(st.sampled_from(["p0", "p1", "p2", "p3"]), unique=True, max_size=2),
    cancel_at=st.none() | st.integers(1, 3),
    read_error_first=st.booleans(),
)
# Cancelled between attempts, with and without a breaker (rare in random draws).
@example(
    route=plan([3]), schedule=[fail(NEXT)], open_endpoints=None, cancel_at=1, read_error_first=False
)
@example(
    route=plan([2, 2], max_retries=1),
    schedule=[fail(RETRY), fail(STAGE)],
    open_endpoints=["p11"],
    cancel_at=2,
    read_error_first=True,
)
def test_the_lazy_trail_is_the_trail_an_eager_executor_builds(
    backend: str,
    route: RoutePlan,
    schedule: list[AttemptSuccess[int] | AttemptFailure],
    open_endpoints: list[str] | None,
    cancel_at: int | None,
    read_error_first: bool,
) -> None:
    args = (route, schedule, open_endpoints, cancel_at)
    result, calls, stats = run_on(backend, play, execute_route_plan, *args)
    reference, reference_calls, reference_stats = run_on(backend, play, eager_route, *args)

    # The same attempts, in the same order, and the same verdicts on the endpoints.
    assert calls == reference_calls
    assert stats == reference_stats
    event("cancelled" if reference is None else reference.status)
    if reference is None:  # cancelled between attempts: neither result exists
        assert result is None
        assert cancel_at is not None
        assert calls[-1][1].attempt == cancel_at
        return
    assert result is not None
    assert type(result) is RouteResult

    if read_error_first:  # whichever lazy field is read first builds the others alike
        same_error(result.error, reference.error)
    assert result.status == reference.status
    assert result.value == reference.value
    assert type(result.attempts) is tuple
    assert all(type(record) is AttemptRecord for record in result.attempts)
    assert result.attempts == reference.attempts
    assert [attrs.astuple(r, recurse=False) for r in result.attempts] == [
        attrs.astuple(r, recurse=False) for r in reference.attempts
    ]
    assert result.skipped == reference.skipped
    same_error(result.error, reference.error)
    if isinstance(result.error, AllRoutesFailedError):
        assert result.error.attempts is result.attempts
        assert result.error.retry_after == reference.error.retry_after  # type: ignore[union-attr]
    assert repr(result) == repr(reference)
    if reference.status not in ("exhausted", "no_viable_endpoint"):  # else each its own error
        assert result == reference
        assert hash(result) == hash(reference)
    assert repr(copy.copy(result)) == repr(reference)  # through attrs' __getstate__


async def exhausted_route() -> RouteResult[str]:
    route = plan([2, 1], max_retries=0)
    script = iter([fail(NEXT), fail(STAGE), fail(NEXT)])

    async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
        await anyio.lowlevel.checkpoint()
        return next(script)

    return await execute_route_plan(route, attempt)


@pytest.mark.anyio
@pytest.mark.parametrize("first", ["attempts", "error", "skipped", "repr", "eq", "state"])
async def test_the_trail_is_built_once_whichever_read_comes_first(first: str) -> None:
    result = await exhausted_route()
    if first == "repr":
        repr(result)
    elif first == "eq":
        assert result != await exhausted_route()  # each has its own AllRoutesFailedError
    elif first == "state":  # what copy and pickle read
        state: Any = result.__getstate__()
        assert state["attempts"] is result.attempts
    else:
        getattr(result, first)
    attempts, error = result.attempts, result.error
    assert result.attempts is attempts
    assert [id(r) for r in result.attempts] == [id(r) for r in attempts]
    assert result.error is error
    assert result.skipped is result.skipped == ()
    assert isinstance(error, AllRoutesFailedError)
    assert error.attempts is attempts
    assert error.__cause__ is attempts[-1].error
    assert [r.cursor.attempt for r in attempts] == [1, 2, 3]
    assert [r.action for r in attempts] == [NEXT, STAGE, NEXT]


@pytest.mark.anyio
async def test_a_lazily_built_result_is_an_ordinary_frozen_result() -> None:
    result = await exhausted_route()
    assert [f.name for f in attrs.fields(RouteResult)] == [
        "status",
        "value",
        "error",
        "attempts",
        "skipped",
    ]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.attempts = ()  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.attempts[0].action = None  # type: ignore[misc]
    with pytest.raises(AttributeError, match="'RouteResult' object has no attribute 'atempts'"):
        result.atempts  # type: ignore[attr-defined]  # noqa: B018
    assert copy.copy(result).attempts is result.attempts
    evolved = attrs.evolve(result, status="propagated")
    assert evolved.attempts is result.attempts
    assert evolved.error is result.error
    assert attrs.asdict(result, recurse=False)["attempts"] is result.attempts
    # A result built by hand is as it always was: nothing lazy about it.
    by_hand: RouteResult[str] = RouteResult("succeeded", "ok", None, ())
    assert by_hand.attempts == ()
    assert by_hand.skipped == ()
    with pytest.raises(AttributeError, match="has no attribute 'attempt'"):
        by_hand.attempt  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.anyio
async def test_a_propagated_route_hands_back_the_failure_itself() -> None:
    cause = ConnectionError("refused")
    failure = AttemptFailure(ClassifiedError(STOP, cause))

    async def attempt(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
        return failure

    result: RouteResult[object] = await execute_route_plan(plan([2]), attempt)
    assert result.error is cause
    assert result.status == "propagated"
    (record,) = result.attempts
    assert record.outcome is failure
    assert record.error is cause


@pytest.mark.anyio
async def test_a_trail_read_from_two_threads_at_once_is_built_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A result handed to a worker thread (anyio.to_thread, a sync callback) may be
    # read there while this thread's first read is still building the records. The
    # other thread's read here falls inside that window: it must wait for the one
    # build, not make a second trail (or find the facts gone and the fields unset).
    result = await exhausted_route()
    real = _executor._records
    seen: dict[str, Any] = {}

    def other_read() -> None:
        try:
            seen["error"] = result.error
        except BaseException as exc:  # shown in the assertion below
            seen["raised"] = exc

    other = threading.Thread(target=other_read)

    def records_while_another_thread_reads(facts: Any) -> Any:
        if not other.is_alive() and "error" not in seen:
            other.start()
            # Long enough for the other read to run to its end if nothing holds it
            # back; with the build held by one reader, it waits the whole time.
            other.join(timeout=0.05)
        return real(facts)

    monkeypatch.setattr(_executor, "_records", records_while_another_thread_reads)
    attempts = result.attempts
    other.join()
    assert "raised" not in seen, seen
    assert seen["error"] is result.error
    error = result.error
    assert isinstance(error, AllRoutesFailedError)
    assert error.attempts is attempts is result.attempts
