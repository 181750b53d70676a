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

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, NoReturn, TypeAlias, TypeVar

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


# The facts of one attempt as the executor notes them: (cursor, candidate,
# outcome, action, adjusted), an AttemptRecord's fields in its order.
_Facts: TypeAlias = tuple[
    RouteCursor,
    Candidate,
    AttemptSuccess[Any] | AttemptFailure,
    RouteAction | None,
    AdjustmentReason | None,
]


class _LazyTrail:
    """The slot a [`RouteResult`][juno_bind_trio.routing.RouteResult] keeps its trail's facts in.

    Not an attrs field (so not in the result's equality, repr, hash or
    pickle): the executor fills it and leaves ``attempts`` unset, and the
    records are built from it the first time the trail is read.
    """

    __slots__ = ("_facts",)


@attrs.frozen
class RouteResult(_LazyTrail, Generic[T]):
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

    if not TYPE_CHECKING:  # at run time only: to mypy, a missing attribute stays an error

        def __getattr__(self, name: str) -> Any:
            # Python calls this only when the ordinary lookup failed: here, a
            # result from the executor whose trail (and, if exhausted, error)
            # has not been read yet. Built once, then read from the slots. Under
            # a lock: a result read from two threads at once must not be built
            # twice (the second build would replace the first's records and find
            # the facts gone); the one that waited finds the fields filled.
            if name in _LAZY_FIELDS:
                with _TRAIL_LOCK:
                    try:
                        facts = _FACTS_GET(self)
                    except AttributeError:
                        pass
                    else:
                        _fill_trail(self, facts)
                    try:
                        return _FIELD_GET[name](self)
                    except AttributeError:
                        pass  # not from the executor, and the field unset: as Python says
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _bad_outcome(value: object) -> NoReturn:
    raise TypeError(
        "execute_route_plan: the attempt function must return AttemptSuccess or "
        f"AttemptFailure, got {value!r}"
    )


# A route notes plain facts per attempt and hands them to its result unbuilt:
# the AttemptRecords, and an exhausted route's AllRoutesFailedError, are made
# on the first read of the trail (most callers read only the value). attrs'
# frozen __init__ writes each slot through object.__setattr__; writing the
# slots through their descriptors is the same fully built, frozen value at a
# fraction of the cost (benchmarks/bench_routing.py).
_new: Final = object.__new__


def _slot(cls: type, name: str) -> Any:
    return cls.__dict__[name]


_RECORD_SET: Final = tuple(
    _slot(AttemptRecord, name).__set__
    for name in ("cursor", "candidate", "outcome", "action", "adjusted")
)
_SET_STATUS: Final = _slot(RouteResult, "status").__set__
_SET_VALUE: Final = _slot(RouteResult, "value").__set__
_GET_ERROR: Final = _slot(RouteResult, "error").__get__
_SET_ERROR: Final = _slot(RouteResult, "error").__set__
_SET_ATTEMPTS: Final = _slot(RouteResult, "attempts").__set__
_GET_SKIPPED: Final = _slot(RouteResult, "skipped").__get__
_SET_SKIPPED: Final = _slot(RouteResult, "skipped").__set__
_FACTS_GET: Final = _LazyTrail.__dict__["_facts"].__get__
_SET_FACTS: Final = _LazyTrail.__dict__["_facts"].__set__
_DEL_FACTS: Final = _LazyTrail.__dict__["_facts"].__delete__
_LAZY_FIELDS: Final = frozenset({"attempts", "error", "skipped"})
# Taken only on a result's first read of its trail, never by the executor; re-entrant, so
# that a build which ever came to read another result's trail could not hang on itself.
_TRAIL_LOCK: Final = threading.RLock()
_FIELD_GET: Final = {name: _slot(RouteResult, name).__get__ for name in _LAZY_FIELDS}


def _records(facts: list[_Facts]) -> tuple[AttemptRecord[Any], ...]:
    """The trail's records, built from the facts noted per attempt, in order."""
    set_cursor, set_candidate, set_outcome, set_action, set_adjusted = _RECORD_SET
    records = []
    for cursor, candidate, outcome, action, adjusted in facts:
        record: AttemptRecord[Any] = _new(AttemptRecord)
        set_cursor(record, cursor)
        set_candidate(record, candidate)
        set_outcome(record, outcome)
        set_action(record, action)
        set_adjusted(record, adjusted)
        records.append(record)
    return tuple(records)


def _fill_trail(result: RouteResult[Any], facts: list[_Facts]) -> None:
    """Build what the executor left unbuilt: the records, and the fields they imply."""
    attempts = _records(facts)
    _SET_ATTEMPTS(result, attempts)
    try:
        skipped = _GET_SKIPPED(result)
    except AttributeError:  # set only if a breaker refused something
        skipped = ()
        _SET_SKIPPED(result, skipped)
    try:
        _GET_ERROR(result)
    except AttributeError:
        status = result.status
        error: Exception | None = None
        if status == "exhausted":
            # The same tuple in the error as in the result, as an eager build gave.
            error = AllRoutesFailedError(attempts, skipped)
        elif status != "succeeded":  # propagated or clamped: the last failure's cause
            error = attempts[-1].error
        _SET_ERROR(result, error)
    _DEL_FACTS(result)


def _result(
    status: RouteStatus, facts: list[_Facts], skipped: list[SkippedCandidate] | None
) -> RouteResult[Any]:
    """A failed route's result, its trail and error unbuilt."""
    result: RouteResult[Any] = _new(RouteResult)
    _SET_STATUS(result, status)
    _SET_VALUE(result, None)
    if skipped:
        _SET_SKIPPED(result, tuple(skipped))
    _SET_FACTS(result, facts)
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

    facts: list[_Facts] = []
    note = facts.append
    skipped: list[SkippedCandidate] | None = None  # made on the first candidate refused
    overall = 0
    skip_stage = -1
    # Resolved on the second attempt, once per route: the cheapest probe for
    # the running backend (a route that succeeds at once never needs it).
    checkpoint_if_cancelled: Callable[[], Awaitable[None]] | None = None

    for stage_index, candidate_index, candidate, budget, model, position, first in plan._flat:
        if stage_index == skip_stage:
            continue
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
                    if skipped is None:
                        skipped = []
                    skipped.append(SkippedCandidate(stage_index, candidate_index, candidate))
                    break
            on_candidate += 1
            if overall == position and on_candidate == 1:
                cursor = first  # on the plan's straight path: nothing skipped or retried yet
            else:
                key = (stage_index, candidate_index, on_candidate, overall + 1)
                cursor = plan._cursors.get(key) or plan._cursors.setdefault(
                    key, RouteCursor(*key, model)
                )
            overall += 1
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
                note((cursor, candidate, outcome, None, None))
                # Built here, not by _result, for the one path most routes take.
                result: RouteResult[T] = _new(RouteResult)
                _SET_STATUS(result, "succeeded")
                _SET_VALUE(result, outcome.value)
                if skipped:
                    _SET_SKIPPED(result, tuple(skipped))
                _SET_FACTS(result, facts)
                return result
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
                elif verdict.retry_after is not None and verdict.retry_after > plan.max_retry_wait:
                    action, adjusted = _NEXT, "retry_wait_too_long"
            if permit is not None and breaker is not None:
                # Only "this endpoint failed" counts against it; see _breaker.
                if action is _NEXT:
                    breaker.record_failure(permit, retry_after=verdict.retry_after)
                else:
                    breaker.release(permit)
            if outcome.produced_output and action is not _STOP:
                action, adjusted = _STOP, "produced_output"
            note((cursor, candidate, outcome, action, adjusted))

            if action is _NEXT:
                break
            if action is _RETRY:
                if verdict.retry_after:
                    await anyio.sleep(verdict.retry_after)
                continue
            if action is _STOP:
                status: RouteStatus = "clamped" if adjusted == "produced_output" else "propagated"
                return _result(status, facts, skipped)
            skip_stage = stage_index  # _STAGE: on to the first candidate of the next
            break

    if not facts:
        # Every endpoint refused by its breaker. Still a checkpoint: a caller
        # looping on a plan whose breakers are all open must not spin forever
        # without letting the rest of the program run.
        await anyio.lowlevel.checkpoint()
        result = _result("no_viable_endpoint", facts, skipped)
        _SET_ERROR(result, NoViableEndpointError(result.skipped))
        return result
    # The AllRoutesFailedError is built with the trail, when either is first read.
    return _result("exhausted", facts, skipped)
