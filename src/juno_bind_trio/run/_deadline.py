"""The run's time budget: a cancel scope that knows it is a deadline.

A run ends early for one of two outside reasons, and a host stores them as
different facts: its **budget ran out** (the run timed out) or **someone
stopped it** (the run was cancelled). Trio expresses both the same way, as a
cancelled scope, and ``trio.move_on_after`` cannot tell you afterwards which
it was. [`RunDeadline`][juno_bind_trio.run.RunDeadline] is ``anyio.fail_after`` with that
distinction made explicit: its scope raises [`RunTimeoutError`][juno_bind_trio.RunTimeoutError]
when, and only when, *its own* deadline ended the body. A cancel from an outer scope
passes through it untouched, as ``Cancelled`` always must.

The hard stop and the soft stop
-------------------------------

The budget is enforced twice, because the two stops the harness knows (the
hard cancel and the soft stop) do different jobs:

* At ``seconds``, the **soft stop** fires: [`RunDeadline.stop`][juno_bind_trio.run.RunDeadline.stop]
  (and any stop built by
  [`RunDeadline.with_external()`][juno_bind_trio.run.RunDeadline.with_external]) reads
  ``cancel_called == True``. The tool pool stops claiming queued calls, calls in flight finish, and
  the loop ends before paying for another model call. This is the TypeScript deadline's ``signal``.
* At ``seconds + grace``, the **hard stop** fires: the scope is cancelled and
  whatever is still awaiting stops at its next checkpoint; a tool cut off
  here is answered ``kind: "interrupted"``.

``grace`` defaults to zero: the budget is a budget, and at its end everything
stops, which is what a Trio user expects of a deadline. A positive grace lets
calls already in flight (a write, a payment) finish instead of being cut off
with an unknown effect, for at most that long.

Why the soft stop reads the clock instead of being a second scope
-----------------------------------------------------------------

A soft stop is only ever *read* (at claim time, between iterations), never
awaited, so it needs no task and no timer: ``cancel_called`` compares the
clock with the budget's end each time it is read. That keeps the deadline a
plain ``with`` block (it owns no task, so it is not an ``open_*``), makes it
exact on a virtual clock, and means the soft and hard stops can never
disagree about when the budget ended.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import final

import anyio
import attrs

from juno_bind_trio._errors import RunTimeoutError, UsageError
from juno_bind_trio._validate import real_number, shown

from ._calls import StopSignal

__all__ = ["RunDeadline", "RunStop"]


def _non_negative(what: str, value: object) -> float:
    # bool is an int and `True` is never a budget someone meant; nan compares
    # false against everything, so an unchecked nan would read as "never expires".
    seconds = real_number(value)
    if seconds is None or math.isnan(seconds):
        raise TypeError(f"RunDeadline: {what} must be a non-negative number, got {shown(value)}")
    if seconds < 0:
        raise ValueError(f"RunDeadline: {what} must be a non-negative number, got {shown(value)}")
    return seconds


def _check_seconds(value: float) -> float:
    return _non_negative("seconds", value)


def _check_grace(value: float) -> float:
    return _non_negative("grace", value)


@final
@attrs.define(eq=False, repr=False)
class RunDeadline:
    """A run's time budget: ``with RunDeadline(seconds) as deadline: ...``.

    *seconds* is the budget, counted from entering the ``with`` block
    (``math.inf`` for none). *grace* is how long calls already in flight may
    go on after the budget is spent before the scope cancels them (default 0).

    Leaving the block because the deadline cancelled it raises
    [`RunTimeoutError`][juno_bind_trio.RunTimeoutError]. Leaving it because an outer
    scope was cancelled re-raises that cancellation unchanged. A body that
    finishes on its own, even after the soft stop fired, raises nothing: it
    ended the way the soft stop asked it to, and [`expired`][juno_bind_trio.run.RunDeadline.expired]
    says why.

    Single use: a deadline is entered once.
    """

    _seconds: float = attrs.field(converter=_check_seconds, alias="seconds")
    _grace: float = attrs.field(default=0.0, converter=_check_grace, alias="grace", kw_only=True)
    _scope: anyio.CancelScope | None = attrs.field(default=None, init=False)
    _expires_at: float = attrs.field(default=math.inf, init=False)
    # Set on exit: whether this deadline's cancellation is what ended the body.
    _ended_body: bool | None = attrs.field(default=None, init=False)

    def __repr__(self) -> str:
        return f"RunDeadline(seconds={self._seconds:g}, grace={self._grace:g})"

    @property
    def seconds(self) -> float:
        """The budget, in seconds."""
        return self._seconds

    @property
    def grace(self) -> float:
        """How long in-flight work may continue after the budget, in seconds."""
        return self._grace

    def __enter__(self) -> RunDeadline:
        if self._scope is not None:
            raise UsageError("RunDeadline: a deadline can be entered only once; make a new one")
        self._expires_at = anyio.current_time() + self._seconds
        scope = anyio.CancelScope(deadline=self._expires_at + self._grace)
        scope.__enter__()
        self._scope = scope
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        scope = self._scope
        if scope is None:
            raise UsageError("RunDeadline: __exit__ without __enter__")
        swallowed = scope.__exit__(exc_type, exc, tb)
        # cancelled_caught alone is not enough: it is also true if the scope was
        # cancelled by hand. Only our deadline passing makes this a timeout (the
        # same test anyio.fail_after uses).
        self._ended_body = scope.cancelled_caught and anyio.current_time() >= scope.deadline
        if self._ended_body:
            raise RunTimeoutError(self._seconds) from None
        return bool(swallowed)

    def remaining(self) -> float:
        """Seconds left of the budget (never negative); the whole budget before entry.

        Hand it to a child run's own [`RunDeadline`][juno_bind_trio.run.RunDeadline] so the child
        cannot outlive its parent's budget.
        """
        if self._scope is None:
            return self._seconds
        return max(0.0, self._expires_at - anyio.current_time())

    @property
    def expired(self) -> bool:
        """True once the budget is spent (the moment the soft stop fires)."""
        return self._scope is not None and anyio.current_time() >= self._expires_at

    @property
    def timed_out(self) -> bool:
        """True once the hard deadline has cancelled the scope (``seconds + grace``).

        The scope is private to this object, so nothing but the deadline can
        have cancelled it: this is how
        [`classify_run_failure()`][juno_bind_trio.run.classify_run_failure] tells a ``Cancelled``
        caused by this deadline from one caused by anything else. After the block, it is True only
        if the deadline is what ended it (the block raised
        [`RunTimeoutError`][juno_bind_trio.RunTimeoutError]): an outer cancel whose shielded cleanup
        outlasted the budget was still a cancel.
        """
        if self._ended_body is not None:
            return self._ended_body
        return self._scope is not None and self._scope.cancel_called

    def raise_if_expired(self) -> None:
        """Raise [`RunTimeoutError`][juno_bind_trio.RunTimeoutError] if the budget is spent.

        The TypeScript loop's ``throwIfTimedOut`` port: a loop that ended on its
        soft stop calls it to name *why* it stopped.
        """
        if self.expired:
            raise RunTimeoutError(self._seconds)

    @property
    def stop(self) -> RunStop:
        """A soft stop that fires when the budget is spent."""
        return RunStop(self, ())

    def with_external(self, *stops: StopSignal) -> RunStop:
        """A soft stop that fires when the budget is spent **or** any of *stops* is cancelled.

        Each of *stops* is anything with a ``cancel_called`` (a ``trio`` or
        ``anyio`` ``CancelScope``: the user's stop button, a parent run's
        stop). Pass the result as the pool's or the loop's ``stop``; the
        TypeScript ``deadline.withExternal(cancelSignal)``.
        """
        for stop in stops:
            if not isinstance(getattr(stop, "cancel_called", None), bool):
                raise TypeError(
                    "RunDeadline.with_external: each stop must have a bool `cancel_called` "
                    f"(a trio or anyio CancelScope), got {stop!r}"
                )
        return RunStop(self, stops)


@final
@attrs.frozen
class RunStop:
    """A soft stop made of a deadline's budget and any external stops.

    Only read, never awaited: ``cancel_called`` is computed on each read, so
    it costs no task and is exact on any clock. Build one with
    [`RunDeadline.stop`][juno_bind_trio.run.RunDeadline.stop] or
    [`RunDeadline.with_external()`][juno_bind_trio.run.RunDeadline.with_external].
    """

    _deadline: RunDeadline = attrs.field(alias="deadline")
    _external: tuple[StopSignal, ...] = attrs.field(alias="external")

    @property
    def cancel_called(self) -> bool:
        """True once the budget is spent or any external stop was cancelled."""
        return self._deadline.expired or any(stop.cancel_called for stop in self._external)
