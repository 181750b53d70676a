"""A per-endpoint circuit breaker on the event loop's clock.

Routing within one turn already steps around a failing endpoint. The breaker
is the memory *across* turns: once an endpoint has failed several times in a
row, every turn stops paying a connect timeout to rediscover that it is down.

Three states per endpoint:

* **closed**: admit everything; count consecutive failures; at
  ``failure_threshold`` open.
* **open**: admit nothing until ``reset_timeout`` has passed (or the server's
  own ``retry_after``, when that is later).
* **half-open**: admit at most ``half_open_max_probes`` calls at a time. A
  probe that succeeds closes the breaker; one that fails opens it again, for
  a fresh ``reset_timeout``. Everything else is turned away meanwhile, so a
  recovering endpoint is not flattened by the whole backlog at once.

What counts against an endpoint is decided by the executor, and only one
verdict does: a failure whose (possibly escalated) action is
[`NEXT_CANDIDATE`][juno_bind_trio.routing.RouteAction.NEXT_CANDIDATE]. A completion defect retried
on the same endpoint is the model's sampling, not the endpoint's health, and counts only
when its retry budget runs out and routing leaves. A "next stage" or
"propagate" verdict came from an endpoint that answered properly, so it is
neutral. A cancelled attempt is neutral too: the caller stopped, not the
endpoint.

Because a [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream] whose reset
budget is spent clamps routing, that budget also shapes how many endpoints
record a failure for one user turn: a clamped turn stops at the endpoint that
failed mid-stream and never reaches the others.

Time is ``anyio.current_time()`` by default: the event loop's clock, so the
breaker runs on trio's autojump ``MockClock`` in tests and needs no wall clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, Literal, final

import anyio
import attrs

from juno_bind_trio._errors import UsageError
from juno_bind_trio._validate import (
    a_callable,
    a_str,
    count,
    instance_of,
    optional,
    positive_seconds,
)

__all__ = [
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_RESET_TIMEOUT",
    "BreakerPermit",
    "BreakerState",
    "CircuitBreaker",
    "CircuitBreakerStatistics",
    "EndpointStatistics",
]

BreakerState = Literal["closed", "open", "half_open"]

DEFAULT_FAILURE_THRESHOLD: Final = 5
"""Consecutive failures that open an endpoint's breaker."""

DEFAULT_RESET_TIMEOUT: Final = 30.0
"""Seconds an open breaker waits before it admits a probe."""


_POSITIVE: Final = count(minimum=1)
_RESET_TIMEOUT: Final = positive_seconds()
_RETRY_AFTER: Final = optional(positive_seconds(zero=True))
_CLOCK: Final = a_callable()


def _failure_threshold(value: int) -> int:
    return _POSITIVE.check("CircuitBreaker: failure_threshold", value)


def _half_open_max_probes(value: int) -> int:
    return _POSITIVE.check("CircuitBreaker: half_open_max_probes", value)


def _check_reset_timeout(value: float) -> float:
    return _RESET_TIMEOUT.check("CircuitBreaker: reset_timeout", value)


def _check_clock(value: Callable[[], float]) -> Callable[[], float]:
    return _CLOCK.check("CircuitBreaker: clock", value)


@final
@attrs.define(eq=False)
class BreakerPermit:
    """Admission for one call to one endpoint, from
    [`CircuitBreaker.admit()`][juno_bind_trio.routing.CircuitBreaker.admit].

    Settle it exactly once:
    [`record_success()`][juno_bind_trio.routing.CircuitBreaker.record_success],
    [`record_failure()`][juno_bind_trio.routing.CircuitBreaker.record_failure], or
    [`release()`][juno_bind_trio.routing.CircuitBreaker.release] when the call ended with no verdict
    on the endpoint (cancelled, or a neutral failure). A probe permit that is never settled holds
    its probe slot for good, so settle in a ``finally``.
    """

    endpoint: str
    """The endpoint admitted."""
    probe: bool
    """Whether this call is a half-open probe whose outcome decides the state."""
    _episode: int = attrs.field(alias="episode", repr=False)
    _settled: bool = attrs.field(default=False, init=False, repr=False)


_PERMIT: Final = instance_of(BreakerPermit)


@attrs.frozen
class EndpointStatistics:
    """One endpoint's breaker, as of the call to
    [`CircuitBreaker.statistics()`][juno_bind_trio.routing.CircuitBreaker.statistics]."""

    state: BreakerState
    consecutive_failures: int
    """Failures since the last success (what the threshold compares against)."""
    failures: int
    """Failures recorded in total."""
    successes: int
    """Successes recorded in total."""
    rejected: int
    """Admissions refused because the breaker was open or its probe slots were taken."""
    times_opened: int
    """How many times the breaker has opened."""
    probes_in_flight: int
    """Half-open probes admitted and not yet settled."""
    open_until: float | None
    """When an open breaker starts admitting probes (clock time); ``None`` unless open."""


@attrs.frozen
class CircuitBreakerStatistics:
    """Every endpoint the breaker has seen, by endpoint key."""

    endpoints: Mapping[str, EndpointStatistics]


@final
@attrs.define(eq=False, slots=True)
class _Endpoint:
    state: BreakerState = "closed"
    consecutive_failures: int = 0
    failures: int = 0
    successes: int = 0
    rejected: int = 0
    times_opened: int = 0
    probes_in_flight: int = 0
    open_until: float = 0.0
    # Bumped on every entry to half-open, so a permit from an earlier episode
    # cannot free a probe slot (or close the breaker) in a later one.
    episode: int = 0


def _describe(ep: _Endpoint) -> str:
    if ep.state == "open":
        return f"open until {ep.open_until:g} (clock seconds)"
    if ep.state == "half_open":
        return f"half_open, {ep.probes_in_flight} probe(s) in flight"
    if ep.consecutive_failures:
        return f"closed, {ep.consecutive_failures} consecutive failure(s)"
    return "closed"


@final
@attrs.define(eq=False, repr=False)
class CircuitBreaker:
    """Per-endpoint failure counting: closed, open, half-open.

    ``CircuitBreaker(failure_threshold=5, reset_timeout=30.0, half_open_max_probes=1)``

    Share one breaker between every turn that routes to the same endpoints;
    pass it to [`execute_route_plan()`][juno_bind_trio.routing.execute_route_plan], which admits,
    records and releases for you. Endpoints are keyed by
    [`Candidate.endpoint`][juno_bind_trio.routing.Candidate].

    Synchronous and checkpoint-free, so it is safe from any task of the event
    loop that owns it (not from other threads).
    """

    _failure_threshold: int = attrs.field(
        default=DEFAULT_FAILURE_THRESHOLD,
        converter=_failure_threshold,
        alias="failure_threshold",
        kw_only=True,
    )
    _reset_timeout: float = attrs.field(
        default=DEFAULT_RESET_TIMEOUT,
        converter=_check_reset_timeout,
        alias="reset_timeout",
        kw_only=True,
    )
    _half_open_max_probes: int = attrs.field(
        default=1,
        converter=_half_open_max_probes,
        alias="half_open_max_probes",
        kw_only=True,
    )
    _clock: Callable[[], float] = attrs.field(
        default=anyio.current_time, converter=_check_clock, alias="clock", kw_only=True, repr=False
    )
    _endpoints: dict[str, _Endpoint] = attrs.field(factory=dict, init=False, repr=False)

    @property
    def failure_threshold(self) -> int:
        """Consecutive failures that open an endpoint."""
        return self._failure_threshold

    @property
    def reset_timeout(self) -> float:
        """Seconds an endpoint stays open before a probe is admitted."""
        return self._reset_timeout

    @property
    def half_open_max_probes(self) -> int:
        """Concurrent probes admitted while half-open."""
        return self._half_open_max_probes

    def __repr__(self) -> str:
        # No clock read here: a repr must work outside an event loop and must not
        # move an endpoint from open to half-open.
        states = {key: _describe(ep) for key, ep in self._endpoints.items()}
        return (
            f"CircuitBreaker(failure_threshold={self._failure_threshold}, "
            f"reset_timeout={self._reset_timeout}, "
            f"half_open_max_probes={self._half_open_max_probes}, endpoints={states!r})"
        )

    # -- admission -------------------------------------------------------------

    def admit(self, endpoint: str) -> BreakerPermit | None:
        """Ask to call *endpoint*: a permit to settle afterwards, or ``None`` if refused."""
        ep = self._endpoints.get(endpoint)
        if ep is None:
            a_str().check("CircuitBreaker.admit: endpoint", endpoint)
            ep = self._endpoints[endpoint] = _Endpoint()
        state = ep.state
        if state == "closed":
            return BreakerPermit(endpoint, False, ep.episode)
        if state == "open":
            self._maybe_half_open(ep)
        if ep.state == "half_open" and ep.probes_in_flight < self._half_open_max_probes:
            ep.probes_in_flight += 1
            return BreakerPermit(endpoint, True, ep.episode)
        ep.rejected += 1
        return None

    def state(self, endpoint: str) -> BreakerState:
        """The state of *endpoint* now (``"closed"`` for one never seen). Admits nothing."""
        ep = self._endpoints.get(endpoint)
        if ep is None:
            return "closed"
        if ep.state == "open":
            self._maybe_half_open(ep)
        return ep.state

    # -- verdicts ------------------------------------------------------------------

    def record_success(self, permit: BreakerPermit) -> None:
        """The admitted call succeeded: reset the failure count; a probe closes the breaker."""
        ep = self._settle(permit, "record_success")
        ep.successes += 1
        if ep.state == "closed":
            ep.consecutive_failures = 0
        elif permit.probe and permit._episode == ep.episode and ep.state == "half_open":
            # Closing frees every probe slot, not just this one: another probe still
            # in flight is now an ordinary call of a closed breaker, and a count
            # left behind would say "probes in flight" of a breaker that has none.
            ep.probes_in_flight = 0
            ep.state = "closed"
            ep.consecutive_failures = 0
        # A success from a call admitted before the breaker opened says nothing
        # about the endpoint *now*: only a probe decides an open breaker.

    def record_failure(self, permit: BreakerPermit, *, retry_after: float | None = None) -> None:
        """The admitted call failed because of the endpoint.

        *retry_after* is the server's own "come back in N seconds" (a 429's
        header). It opens the breaker for at least that long even below the
        threshold: the server has said it will refuse until then, and every
        turn that asks anyway spends an attempt to hear it again.
        """
        retry_after = _RETRY_AFTER.check("CircuitBreaker.record_failure: retry_after", retry_after)
        ep = self._settle(permit, "record_failure")
        ep.failures += 1
        hint = retry_after or 0.0
        if ep.state == "closed":
            ep.consecutive_failures += 1
            if ep.consecutive_failures >= self._failure_threshold:
                self._open(ep, max(self._reset_timeout, hint))
            elif hint > 0:
                self._open(ep, hint)
        elif ep.state == "half_open":
            if permit.probe and permit._episode == ep.episode:
                ep.probes_in_flight -= 1
                ep.consecutive_failures += 1
                self._open(ep, max(self._reset_timeout, hint))
        elif hint > 0:  # already open: a later retry_after can only push it back
            ep.open_until = max(ep.open_until, self._clock() + hint)

    def release(self, permit: BreakerPermit) -> None:
        """The admitted call ended with no verdict on the endpoint: free its probe slot."""
        ep = self._settle(permit, "release")
        if permit.probe and permit._episode == ep.episode and ep.state == "half_open":
            ep.probes_in_flight -= 1

    def reset(self, endpoint: str | None = None) -> None:
        """Forget *endpoint*'s history (or every endpoint's): it starts closed again."""
        if endpoint is None:
            self._endpoints.clear()
        else:
            self._endpoints.pop(endpoint, None)

    def statistics(self) -> CircuitBreakerStatistics:
        """A snapshot of every endpoint seen so far."""
        endpoints: dict[str, EndpointStatistics] = {}
        for key, ep in self._endpoints.items():
            if ep.state == "open":
                self._maybe_half_open(ep)
            endpoints[key] = EndpointStatistics(
                state=ep.state,
                consecutive_failures=ep.consecutive_failures,
                failures=ep.failures,
                successes=ep.successes,
                rejected=ep.rejected,
                times_opened=ep.times_opened,
                probes_in_flight=ep.probes_in_flight,
                open_until=ep.open_until if ep.state == "open" else None,
            )
        return CircuitBreakerStatistics(MappingProxyType(endpoints))

    # -- internals ---------------------------------------------------------------

    def _settle(self, permit: BreakerPermit, method: str) -> _Endpoint:
        _PERMIT.check(f"CircuitBreaker.{method}: permit", permit)
        if permit._settled:
            raise UsageError(
                f"CircuitBreaker.{method}: this permit for {permit.endpoint!r} was already "
                "settled; settle each permit exactly once"
            )
        ep = self._endpoints.get(permit.endpoint)
        if ep is None:  # reset() forgot the endpoint while the call was in flight
            ep = self._endpoints[permit.endpoint] = _Endpoint()
        permit._settled = True
        return ep

    def _open(self, ep: _Endpoint, duration: float) -> None:
        ep.state = "open"
        ep.open_until = self._clock() + duration
        ep.times_opened += 1
        ep.probes_in_flight = 0

    def _maybe_half_open(self, ep: _Endpoint) -> None:
        if self._clock() >= ep.open_until:
            ep.state = "half_open"
            ep.episode += 1
            ep.probes_in_flight = 0
