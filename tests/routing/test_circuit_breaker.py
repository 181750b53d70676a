"""CircuitBreaker: closed / open / half-open on the event loop's virtual clock."""

from __future__ import annotations

import math

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from juno_bind_trio import UsageError
from juno_bind_trio.routing import BreakerPermit, CircuitBreaker

pytestmark = pytest.mark.anyio


def fail_once(breaker: CircuitBreaker, endpoint: str, retry_after: float | None = None) -> None:
    permit = breaker.admit(endpoint)
    assert permit is not None
    breaker.record_failure(permit, retry_after=retry_after)


async def test_opens_at_the_threshold_of_consecutive_failures() -> None:
    breaker = CircuitBreaker(failure_threshold=3)
    fail_once(breaker, "a")
    fail_once(breaker, "a")
    assert breaker.state("a") == "closed"
    fail_once(breaker, "a")
    assert breaker.state("a") == "open"
    assert breaker.admit("a") is None
    assert breaker.state("b") == "closed"  # endpoints are independent


async def test_a_success_resets_the_consecutive_count() -> None:
    breaker = CircuitBreaker(failure_threshold=2)
    fail_once(breaker, "a")
    permit = breaker.admit("a")
    assert permit is not None
    breaker.record_success(permit)
    fail_once(breaker, "a")
    assert breaker.state("a") == "closed"
    stats = breaker.statistics().endpoints["a"]
    assert (stats.consecutive_failures, stats.failures, stats.successes) == (1, 2, 1)


async def test_half_opens_exactly_at_reset_timeout_on_the_loop_clock() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=10.0)
    start = anyio.current_time()
    fail_once(breaker, "a")
    assert breaker.statistics().endpoints["a"].open_until == start + 10.0
    await anyio.sleep(9.999)
    assert breaker.admit("a") is None
    await anyio.sleep(0.001)
    assert breaker.state("a") == "half_open"


async def test_half_open_admits_only_the_configured_number_of_probes() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=1.0, half_open_max_probes=2)
    fail_once(breaker, "a")
    await anyio.sleep(1.0)
    first, second = breaker.admit("a"), breaker.admit("a")
    assert first is not None
    assert second is not None
    assert first.probe
    assert second.probe
    assert breaker.admit("a") is None
    stats = breaker.statistics().endpoints["a"]
    assert (stats.probes_in_flight, stats.rejected) == (2, 1)
    breaker.release(first)
    assert breaker.admit("a") is not None


async def test_a_successful_probe_closes_the_breaker() -> None:
    breaker = CircuitBreaker(failure_threshold=2, reset_timeout=1.0)
    fail_once(breaker, "a")
    fail_once(breaker, "a")
    await anyio.sleep(1.0)
    probe = breaker.admit("a")
    assert probe is not None
    breaker.record_success(probe)
    stats = breaker.statistics().endpoints["a"]
    assert (stats.state, stats.consecutive_failures, stats.open_until) == ("closed", 0, None)
    permit = breaker.admit("a")
    assert permit is not None
    assert not permit.probe


async def test_a_failed_probe_reopens_for_a_fresh_reset_timeout() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=5.0)
    start = anyio.current_time()
    fail_once(breaker, "a")
    await anyio.sleep(7.0)
    probe = breaker.admit("a")
    assert probe is not None
    breaker.record_failure(probe)
    stats = breaker.statistics().endpoints["a"]
    assert (stats.state, stats.open_until, stats.times_opened) == ("open", start + 12.0, 2)


async def test_retry_after_opens_below_the_threshold_for_exactly_that_long() -> None:
    breaker = CircuitBreaker(failure_threshold=5, reset_timeout=30.0)
    start = anyio.current_time()
    fail_once(breaker, "a", retry_after=4.0)
    assert breaker.statistics().endpoints["a"].open_until == start + 4.0
    await anyio.sleep(4.0)
    assert breaker.state("a") == "half_open"


async def test_retry_after_longer_than_reset_timeout_wins_at_the_threshold() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=3.0)
    start = anyio.current_time()
    fail_once(breaker, "a", retry_after=8.0)
    assert breaker.statistics().endpoints["a"].open_until == start + 8.0


async def test_a_later_retry_after_pushes_an_open_breaker_back() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=3.0)
    start = anyio.current_time()
    stale = breaker.admit("a")  # admitted while closed, settles after it opened
    assert stale is not None
    fail_once(breaker, "a")
    await anyio.sleep(1.0)
    breaker.record_failure(stale, retry_after=10.0)
    assert breaker.statistics().endpoints["a"].open_until == start + 11.0


async def test_a_stale_success_does_not_close_an_open_breaker() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=3.0)
    stale = breaker.admit("a")
    assert stale is not None
    fail_once(breaker, "a")
    breaker.record_success(stale)
    assert breaker.state("a") == "open"


async def test_a_permit_from_an_earlier_half_open_episode_frees_no_slot() -> None:
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=1.0, half_open_max_probes=2)
    fail_once(breaker, "a")
    await anyio.sleep(1.0)
    failing, straggler = breaker.admit("a"), breaker.admit("a")
    assert failing is not None
    assert straggler is not None
    breaker.record_failure(failing)  # reopens; the straggler is still out
    await anyio.sleep(1.0)
    fresh = breaker.admit("a")
    assert fresh is not None
    breaker.release(straggler)  # from the previous episode: must not free fresh's slot
    assert breaker.statistics().endpoints["a"].probes_in_flight == 1
    assert breaker.admit("a") is not None
    assert breaker.admit("a") is None


async def test_a_permit_settles_once() -> None:
    breaker = CircuitBreaker()
    permit = breaker.admit("a")
    assert permit is not None
    breaker.record_success(permit)
    for settle in (breaker.record_success, breaker.record_failure, breaker.release):
        with pytest.raises(UsageError, match="already settled"):
            settle(permit)


async def test_reset_forgets_an_endpoint() -> None:
    breaker = CircuitBreaker(failure_threshold=1)
    fail_once(breaker, "a")
    fail_once(breaker, "b")
    breaker.reset("a")
    assert (breaker.state("a"), breaker.state("b")) == ("closed", "open")
    breaker.reset()
    assert breaker.statistics().endpoints == {}


def test_a_custom_clock_needs_no_event_loop() -> None:
    now = [100.0]
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=2.0, clock=lambda: now[0])
    fail_once(breaker, "a")
    assert breaker.state("a") == "open"
    now[0] = 102.0
    assert breaker.state("a") == "half_open"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"failure_threshold": 0},
            ValueError,
            "failure_threshold must be a positive integer, got 0",
        ),
        ({"failure_threshold": True}, TypeError, "failure_threshold must be a positive integer"),
        (
            {"failure_threshold": 2.0},
            TypeError,
            "failure_threshold must be a positive integer, got 2.0",
        ),
        (
            {"reset_timeout": 0},
            ValueError,
            "reset_timeout must be a positive finite number of seconds, got 0",
        ),
        (
            {"reset_timeout": math.inf},
            ValueError,
            "reset_timeout must be a positive finite number of seconds, got inf",
        ),
        ({"reset_timeout": "5"}, TypeError, "reset_timeout must be a positive finite number"),
        ({"half_open_max_probes": -1}, ValueError, "half_open_max_probes"),
        ({"clock": 3}, TypeError, "clock must be callable, got 3"),
    ],
)
def test_construction_refuses_bad_settings_by_name(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"CircuitBreaker: {message}"):
        CircuitBreaker(**kwargs)  # type: ignore[arg-type]


def test_bad_verdict_arguments_are_refused() -> None:
    breaker = CircuitBreaker(clock=lambda: 0.0)
    permit = breaker.admit("a")
    assert permit is not None
    with pytest.raises(ValueError, match=r"record_failure: retry_after .* got -1"):
        breaker.record_failure(permit, retry_after=-1)
    with pytest.raises(TypeError, match="record_success: permit must be a BreakerPermit"):
        breaker.record_success("a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="admit: endpoint must be a str, got 3"):
        breaker.admit(3)  # type: ignore[arg-type]


# -- a reference model over random event sequences ------------------------------------

events = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.none()),
        st.tuples(st.just("success"), st.integers(0, 5)),
        st.tuples(st.just("failure"), st.integers(0, 5)),
        st.tuples(st.just("release"), st.integers(0, 5)),
        st.tuples(st.just("tick"), st.sampled_from([0.5, 1.0, 2.5])),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(events=events, threshold=st.integers(1, 3), probes=st.integers(1, 2))
# Found by this property: a probe's success closed the breaker while a second
# probe was still in flight, and the closed breaker went on counting it.
@example(
    events=[
        ("admit", None),
        ("failure", 0),
        ("tick", 2.5),
        ("admit", None),
        ("admit", None),
        ("success", 0),
    ],
    threshold=1,
    probes=2,
)
def test_breaker_invariants_hold_for_any_event_sequence(
    events: list[tuple[str, object]], threshold: int, probes: int
) -> None:
    """Probes never exceed the limit, nothing is admitted while open, state follows the rules."""
    now = [0.0]
    breaker = CircuitBreaker(
        failure_threshold=threshold,
        reset_timeout=2.0,
        half_open_max_probes=probes,
        clock=lambda: now[0],
    )
    outstanding: list[BreakerPermit] = []
    for kind, arg in events:
        before = breaker.state("e")
        if kind == "admit":
            permit = breaker.admit("e")
            if before == "open":
                assert permit is None
            if before == "closed":
                assert permit is not None
                assert not permit.probe
            if permit is not None:
                outstanding.append(permit)
        elif kind == "tick":
            assert isinstance(arg, float)
            now[0] += arg
        elif outstanding:
            assert isinstance(arg, int)
            permit = outstanding.pop(arg % len(outstanding))
            if kind == "success":
                breaker.record_success(permit)
                if permit.probe and before == "half_open":
                    assert breaker.state("e") in ("closed", "half_open")
            elif kind == "failure":
                breaker.record_failure(permit)
                if before == "closed":
                    stats = breaker.statistics().endpoints["e"]
                    assert (stats.state == "open") == (stats.consecutive_failures >= threshold)
            else:
                breaker.release(permit)
        snapshot = breaker.statistics().endpoints.get("e")
        if snapshot is not None:
            assert 0 <= snapshot.probes_in_flight <= probes
            if snapshot.state != "half_open":
                assert snapshot.probes_in_flight == 0
