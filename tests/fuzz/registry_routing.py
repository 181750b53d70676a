"""Fuzz entries for `juno_bind_trio.routing`."""

from __future__ import annotations

import math
from typing import Any

import hypothesis.strategies as st
from fuzz_support import JUNK, Call, Entry, call

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
    classify_openai_error,
    execute_route_plan,
    parse_retry_after,
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
    Entry(classify_openai_error),
    Entry(execute_route_plan),
    Entry(
        parse_retry_after,
        args=RETRY_AFTER_CALLS,
        check=no_wait_or_a_finite_wait,
    ),
]
