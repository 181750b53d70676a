"""Fuzz entries for `juno_bind_trio.routing`."""

from __future__ import annotations

import math
from typing import Any

import hypothesis.strategies as st
from fuzz_support import JUNK, Call, Entry, call, register_example

from juno_bind_trio.routing import (
    AttemptFailure,
    AttemptRecord,
    AttemptSuccess,
    BreakerPermit,
    Candidate,
    CircuitBreaker,
    CircuitBreakerStatistics,
    ClassifiedError,
    EndpointStatistics,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteResult,
    RouteStage,
    SkippedCandidate,
    execute_route_plan,
    parse_retry_after,
)

# Valid routing records, so the records (and the errors that carry them) are
# fuzzed with the values the executor really builds.
_candidates = st.builds(Candidate, st.sampled_from(["openai", "groq"]), model=st.just("m"))
_cursors = st.builds(
    RouteCursor,
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(1, 3),
    st.integers(1, 9),
    st.text(max_size=4),
)
_classified = st.builds(
    ClassifiedError,
    st.sampled_from(list(RouteAction)),
    st.builds(RuntimeError, st.text(max_size=5)),
)
register_example(Candidate, _candidates)
register_example(RouteCursor, _cursors)
register_example(
    AttemptRecord,
    st.builds(
        AttemptRecord,
        _cursors,
        _candidates,
        st.one_of(st.builds(AttemptSuccess, st.integers()), st.builds(AttemptFailure, _classified)),
        st.one_of(st.none(), st.sampled_from(list(RouteAction))),
        st.none(),
    ),
)
register_example(
    SkippedCandidate, st.builds(SkippedCandidate, st.integers(0, 2), st.integers(0, 2), _candidates)
)

HEADER_VALUES = st.one_of(
    st.sampled_from(["1", "1.5", "-1", "nan", "inf", "1e400", "Wed, 21 Oct 2015 07:28:00 GMT", ""]),
    st.text(max_size=8),
    JUNK,
)
HEADERS = st.one_of(
    st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "x"]), HEADER_VALUES),
    JUNK,
)
RETRY_AFTER_CALLS = st.builds(
    lambda headers, now: call(headers) if now is None else call(headers, now=now),
    HEADERS,
    st.one_of(st.none(), st.just(lambda: 1.0e9), JUNK),
)


def no_wait_or_a_finite_wait(arguments: Call, seconds: Any) -> None:
    assert seconds is None or (isinstance(seconds, float) and math.isfinite(seconds))
    assert seconds is None or seconds >= 0


ENTRIES = [
    Entry(AttemptFailure),
    Entry(AttemptRecord),
    Entry(AttemptSuccess),
    Entry(BreakerPermit),
    Entry(Candidate),
    Entry(CircuitBreaker),
    Entry(CircuitBreakerStatistics),
    Entry(ClassifiedError),
    Entry(EndpointStatistics),
    Entry(RouteAction, args=st.one_of(st.sampled_from(list(RouteAction)), JUNK).map(call)),
    Entry(RouteCursor),
    Entry(RoutePlan),
    Entry(RouteResult),
    Entry(RouteStage),
    Entry(SkippedCandidate),
    Entry(execute_route_plan),
    Entry(
        parse_retry_after,
        args=RETRY_AFTER_CALLS,
        check=no_wait_or_a_finite_wait,
    ),
]
