"""The route executor: one request, tried in a fixed order until something answers.

Why sequential, and why this order
----------------------------------

Provider fallback has the same shape as connecting to a host with several
addresses, and trio's Happy Eyeballs answers that one by *racing*: start the
next address if the current one has not connected within 250 ms. Routing
deliberately does not race, for three reasons that do not apply to TCP:

1. **An attempt is not free.** A connection attempt costs a SYN; a model
   attempt costs the whole prompt in tokens, and a raced attempt that loses
   is paid for anyway.
2. **An attempt may stream to a person.** Two attempts racing would both
   write to the turn's surface. A [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream]
   can retract one attempt at a time, in order; it cannot interleave two.
3. **The order is the policy.** The plan says "this model, from these
   providers, in this order, then that model". Under a race the answer would
   depend on who was faster, so the same failures could produce a different
   trail on every run, and an incident could not be replayed.

So the executor walks the plan like nested loops. For each stage (a model),
for each candidate (a provider endpoint of it), it calls the attempt function
and reads the classified verdict on a failure:

* ``RETRY_SAME_ENDPOINT``: call the same candidate again, while its retry
  budget lasts, after the server's ``retry_after`` if it sent one no longer
  than the plan's ``max_retry_wait``. Past either limit the verdict escalates
  to ``NEXT_CANDIDATE`` (a server that asks for a minute is better answered by
  another provider now).
* ``NEXT_CANDIDATE``: the next candidate of the stage; past the last, the
  next stage.
* ``NEXT_STAGE``: the first candidate of the next stage.
* ``PROPAGATE``: stop; the route's error is the failure's own exception.

Given the same plan, the same breaker state and the same sequence of attempt
outcomes, the executor makes the same attempts in the same order: nothing in
it is random and nothing depends on timing. ``retry_after`` is waited for but
never jittered: jitter spreads a herd of independent clients, while these
retries belong to one turn that already knows exactly when the server said to
come back.

The produced-output clamp
-------------------------

A failure with ``produced_output=True`` emitted something the caller cannot
take back. Whatever its verdict, routing stops there (propagate-only):
retrying would replay a turn somebody has already received. With a
retractable surface the turn text stream keeps ``produced_output`` false, so
the whole fallback chain stays available; a permanent surface latches it on
the first byte and the clamp makes the first mid-stream failure final.

Circuit breaker
---------------

With a [`CircuitBreaker`][juno_bind_trio.routing.CircuitBreaker], each attempt is admitted first. A
candidate the breaker refuses is skipped, never waited for, and recorded in
[`RouteResult.skipped`][juno_bind_trio.routing.RouteResult]. If every candidate was refused and not
one attempt ran, the outcome is its own:
[`NoViableEndpointError`][juno_bind_trio.NoViableEndpointError], which says "nothing was tried"
where [`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError] says "everything tried failed".
A host retries the first later and investigates the second.

Cancellation
------------

Cancellation is not a failure and is never classified. After the first
attempt the executor checks for it each time it moves on to a candidate,
before asking the breaker (so a turn cancelled between attempts starts no
further attempt, even if the previous attempt returned without noticing, and
is never reported "exhausted" because the candidates left were open; the
first attempt needs no check, because its own first checkpoint raises),
waits for ``retry_after`` with an ordinary ``anyio.sleep`` (cancellable at
once), and lets the cancellation exception out untouched. A
cancelled attempt counts neither for nor against its endpoint's breaker: its
permit is released.

Results, not exceptions
-----------------------

[`execute_route_plan()`][juno_bind_trio.routing.execute_route_plan] *returns* a
[`RouteResult`][juno_bind_trio.routing.RouteResult] on every routing outcome, as the TypeScript
executor does, so that ``stream.finish(...)`` can be told how the turn ended without a ``try``.
[`RouteResult.unwrap()`][juno_bind_trio.routing.RouteResult.unwrap] gives the value or raises the
result's error. The one error for an exhausted plan is
[`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError], which carries every attempt. It is
shaped like an exception group (``exceptions`` holds every failure's cause) without being one: a
plan with one candidate that fails once would otherwise raise a group of one, and ``except*`` would
start matching ``BadRequestError`` inside a routing failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Generic, Literal, NoReturn, TypeAlias, TypeVar

import anyio
import anyio.lowlevel
import attrs

from juno_bind_trio._cancel import checkpoint_if_cancelled_fn
from juno_bind_trio._errors import AllRoutesFailedError, NoViableEndpointError

from ._breaker import BreakerPermit, CircuitBreaker
from ._plan import Candidate, RouteCursor, RoutePlan
from ._taxonomy import AttemptFailure, AttemptSuccess, RouteAction

__all__ = [
    "AdjustmentReason",
    "AttemptFn",
    "AttemptRecord",
    "RouteResult",
    "RouteStatus",
    "SkippedCandidate",
    "execute_route_plan",
]

T = TypeVar("T")

AttemptFn: TypeAlias = Callable[
    [Candidate, RouteCursor], Awaitable["AttemptSuccess[T] | AttemptFailure"]
]
"""``async def attempt(candidate, cursor) -> AttemptSuccess | AttemptFailure``."""

RouteStatus = Literal["succeeded", "propagated", "clamped", "exhausted", "no_viable_endpoint"]
"""How a route ended.

* ``"succeeded"``: an attempt returned a value.
* ``"propagated"``: a failure was classified ``PROPAGATE``; the error is its cause.
* ``"clamped"``: a failure that would have been retried had produced output;
  the error is its cause.
* ``"exhausted"``: every stage was tried and failed;
  [`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError].
* ``"no_viable_endpoint"``: the breaker refused every candidate, nothing ran;
  [`NoViableEndpointError`][juno_bind_trio.NoViableEndpointError].
"""

AdjustmentReason = Literal["retry_budget_spent", "retry_wait_too_long", "produced_output"]
"""Why routing did something other than the failure's own verdict."""

_RETRY = RouteAction.RETRY_SAME_ENDPOINT
_NEXT = RouteAction.NEXT_CANDIDATE
_STAGE = RouteAction.NEXT_STAGE
_STOP = RouteAction.PROPAGATE


@attrs.frozen
class AttemptRecord(Generic[T]):
    """One attempt in a route's trail: where it ran, what it returned, what routing did next."""

    cursor: RouteCursor
    candidate: Candidate
    outcome: AttemptSuccess[T] | AttemptFailure
    action: RouteAction | None
    """What routing did after this attempt; ``None`` after a success."""
    adjusted: AdjustmentReason | None
    """Why [`action`][juno_bind_trio.routing.AttemptRecord.action] differs from the failure's own
    verdict, or ``None`` if it does not."""

    @property
    def error(self) -> Exception | None:
        """The failure's exception (its classified cause), or ``None`` after a success."""
        outcome = self.outcome
        return outcome.error.cause if isinstance(outcome, AttemptFailure) else None


@attrs.frozen
class SkippedCandidate:
    """A candidate the circuit breaker refused, so it was never attempted."""

    stage_index: int
    candidate_index: int
    candidate: Candidate


@attrs.frozen
class RouteResult(Generic[T]):
    """What [`execute_route_plan()`][juno_bind_trio.routing.execute_route_plan] returns, however the
    route ended.

    [`attempts`][juno_bind_trio.routing.RouteResult] is the whole trail, in order, whatever the
    outcome.
    """

    status: RouteStatus
    value: T | None
    """The successful attempt's value; ``None`` unless
    [`ok`][juno_bind_trio.routing.RouteResult.ok]."""
    error: Exception | None
    """Why the route failed; ``None`` if [`ok`][juno_bind_trio.routing.RouteResult.ok]."""
    attempts: tuple[AttemptRecord[T], ...]
    skipped: tuple[SkippedCandidate, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether an attempt succeeded."""
        return self.status == "succeeded"

    def unwrap(self) -> T:
        """The value, or raise [`error`][juno_bind_trio.routing.RouteResult.error]."""
        if self.status == "succeeded":
            return self.value  # type: ignore[return-value]
        assert self.error is not None
        raise self.error


def _bad_outcome(value: object) -> NoReturn:
    raise TypeError(
        "execute_route_plan: the attempt function must return AttemptSuccess or "
        f"AttemptFailure, got {value!r}"
    )


# The per-attempt path builds a record, and the route a result.
# attrs' frozen __init__ writes each slot through object.__setattr__; writing
# the slots through their descriptors is the same fully built, frozen value at
# a fraction of the cost, and it is what keeps the executor within 1.5x of
# calling the attempt function directly (benchmarks/bench_routing.py).
_new: Final = object.__new__


def _slot_setters(cls: type, *names: str) -> tuple[Callable[[object, object], None], ...]:
    return tuple(cls.__dict__[name].__set__ for name in names)


_RECORD_SET: Final = _slot_setters(
    AttemptRecord, "cursor", "candidate", "outcome", "action", "adjusted"
)
_RESULT_SET: Final = _slot_setters(RouteResult, "status", "value", "error", "attempts", "skipped")


def _result(
    status: RouteStatus,
    value: T | None,
    error: Exception | None,
    attempts: tuple[AttemptRecord[T], ...],
    skipped: tuple[SkippedCandidate, ...],
) -> RouteResult[T]:
    result: RouteResult[T] = _new(RouteResult)
    s0, s1, s2, s3, s4 = _RESULT_SET
    s0(result, status)
    s1(result, value)
    s2(result, error)
    s3(result, attempts)
    s4(result, skipped)
    return result


async def execute_route_plan(
    plan: RoutePlan,
    attempt: AttemptFn[T],
    *,
    breaker: CircuitBreaker | None = None,
) -> RouteResult[T]:
    """Try *plan* in order until an attempt succeeds or routing must stop.

    ``attempt(candidate, cursor)`` makes one attempt and returns
    [`AttemptSuccess`][juno_bind_trio.routing.AttemptSuccess] or a classified
    [`AttemptFailure`][juno_bind_trio.routing.AttemptFailure]. An exception it *raises* is not a
    routing failure: it propagates at once, unchanged, and no further attempt is made (classify what
    you mean routing to act on). Cancellation likewise propagates at once.

    Returns a [`RouteResult`][juno_bind_trio.routing.RouteResult] for every routing outcome; see
    [`RouteStatus`][juno_bind_trio.routing.RouteStatus]. With *breaker*, candidates whose breaker is
    open are skipped and every attempt's verdict is recorded against its endpoint.
    """
    if not isinstance(plan, RoutePlan):
        raise TypeError(f"execute_route_plan: plan must be a RoutePlan, got {plan!r}")
    if not callable(attempt):
        raise TypeError(f"execute_route_plan: attempt must be an async callable, got {attempt!r}")
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise TypeError(
            f"execute_route_plan: breaker must be a CircuitBreaker or None, got {breaker!r}"
        )

    trail: list[AttemptRecord[T]] = []
    skipped: list[SkippedCandidate] = []
    # The record's slot setters as locals: one record per attempt, built inline.
    set_cursor, set_candidate, set_outcome, set_action, set_adjusted = _RECORD_SET
    cursors = plan._cursors
    overall = 0
    # Resolved on the second attempt, once per route: the cheapest probe for
    # the running backend (a route that succeeds at once never needs it).
    checkpoint_if_cancelled: Callable[[], Awaitable[None]] | None = None

    for stage_index, stage in enumerate(plan._schedule):
        next_stage = False
        for candidate_index, candidate, budget, model in stage:
            on_candidate = 0
            while True:
                if overall:
                    # Routing moves on only if the turn is not cancelled, even when
                    # the previous attempt returned without reaching a checkpoint.
                    # Checked before the breaker is asked, so that an open breaker
                    # cannot turn a cancelled turn into an "exhausted" result. (The
                    # first attempt needs no check: its own first checkpoint raises.)
                    if checkpoint_if_cancelled is None:
                        checkpoint_if_cancelled = checkpoint_if_cancelled_fn()
                    await checkpoint_if_cancelled()
                permit: BreakerPermit | None = None
                if breaker is not None:
                    permit = breaker.admit(candidate.endpoint)
                    if permit is None:
                        skipped.append(SkippedCandidate(stage_index, candidate_index, candidate))
                        break
                on_candidate += 1
                overall += 1
                key = (stage_index, candidate_index, on_candidate, overall)
                cursor = cursors.get(key)
                if cursor is None:
                    cursor = cursors[key] = RouteCursor(*key, model)
                try:
                    outcome: object = await attempt(candidate, cursor)
                except BaseException:
                    # Cancelled, or the attempt function raised: no verdict on the
                    # endpoint. Released, never recorded as a failure, and re-raised
                    # untouched.
                    if permit is not None and breaker is not None:
                        breaker.release(permit)
                    raise

                if isinstance(outcome, AttemptSuccess):
                    if permit is not None and breaker is not None:
                        breaker.record_success(permit)
                    record: AttemptRecord[T] = _new(AttemptRecord)
                    set_cursor(record, cursor)
                    set_candidate(record, candidate)
                    set_outcome(record, outcome)
                    set_action(record, None)
                    set_adjusted(record, None)
                    return _result(
                        "succeeded",
                        outcome.value,
                        None,
                        (*trail, record) if trail else (record,),
                        tuple(skipped) if skipped else (),
                    )
                if not isinstance(outcome, AttemptFailure):
                    if permit is not None and breaker is not None:
                        breaker.release(permit)
                    _bad_outcome(outcome)

                verdict = outcome.error
                action = verdict.action
                adjusted: AdjustmentReason | None = None
                if action is _RETRY:
                    if on_candidate > budget:
                        action, adjusted = _NEXT, "retry_budget_spent"
                    elif (
                        verdict.retry_after is not None
                        and verdict.retry_after > plan.max_retry_wait
                    ):
                        action, adjusted = _NEXT, "retry_wait_too_long"
                if permit is not None and breaker is not None:
                    # Only "this endpoint failed" counts against it; see _breaker.
                    if action is _NEXT:
                        breaker.record_failure(permit, retry_after=verdict.retry_after)
                    else:
                        breaker.release(permit)
                if outcome.produced_output and action is not _STOP:
                    action, adjusted = _STOP, "produced_output"
                record = _new(AttemptRecord)
                set_cursor(record, cursor)
                set_candidate(record, candidate)
                set_outcome(record, outcome)
                set_action(record, action)
                set_adjusted(record, adjusted)
                trail.append(record)

                if action is _STOP:
                    status: RouteStatus = (
                        "clamped" if adjusted == "produced_output" else "propagated"
                    )
                    return _result(status, None, verdict.cause, tuple(trail), tuple(skipped))
                if action is _RETRY:
                    if verdict.retry_after:
                        await anyio.sleep(verdict.retry_after)
                    continue
                if action is _STAGE:
                    next_stage = True
                break  # _NEXT, or _STAGE out of this candidate
            if next_stage:
                break

    attempts = tuple(trail)
    skips = tuple(skipped)
    if not attempts:
        # Every endpoint refused by its breaker. Still a checkpoint: a caller
        # looping on a plan whose breakers are all open must not spin forever
        # without letting the rest of the program run.
        await anyio.lowlevel.checkpoint()
        return _result("no_viable_endpoint", None, NoViableEndpointError(skips), attempts, skips)
    return _result("exhausted", None, AllRoutesFailedError(attempts, skips), attempts, skips)
