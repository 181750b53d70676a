"""Why a run ended without finishing, as the one status a host stores.

A host records a run's terminal status, shows it, bills on it and decides
whether to resume it, and each of those wants a different answer for each way
a run can fail:

``"timed_out"``
    its own [`RunDeadline`][juno_bind_trio.run.RunDeadline] ran out. Resumable with a fresh budget;
    the user did nothing wrong.
``"cancelled"``
    someone stopped it (a stop button, a parent run, shutdown). Not a failure
    to alert on, and not to be resumed without being asked.
``"fatal_tool_error"``
    a tool failed in a way the host declared fatal (a write it could not
    record). Resuming it blindly repeats the problem.
``"providers_exhausted"``
    routing found no answer ([`RoutingError`][juno_bind_trio.RoutingError]: every
    route failed, or circuit breakers left nothing to try): an outage, not a
    bug in the run. Resumable once a provider is back.
``"failed"``
    anything else: a bug to look at.

Exception groups
----------------

A run that fails inside a task group can surface as an exception group with
more than one leaf. The group itself is checked first (the host's
``is_fatal_tool_error`` may claim a group of its own), then every leaf, and the most
telling status wins, in the order above: a timeout or a cancellation explains
why everything else in the group happened, and a fatal tool error or an
outage is more specific than "failed". The leaf that decided is returned as
the [`RunFailure.cause`][juno_bind_trio.run.RunFailure].

Cancellation is recognised as "anything that is a ``BaseException`` but not
an ``Exception``": ``trio.Cancelled``, asyncio's ``CancelledError``,
``KeyboardInterrupt`` and ``SystemExit`` all mean the run was stopped from
outside. That test needs no event loop, so a run can be classified after its
loop has gone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias, final

import attrs

from juno_bind_trio._errors import RoutingError, RunTimeoutError

from ._deadline import RunDeadline

__all__ = ["RunFailure", "RunFailureStatus", "classify_run_failure"]

RunFailureStatus: TypeAlias = Literal[
    "timed_out", "cancelled", "fatal_tool_error", "providers_exhausted", "failed"
]
"""The terminal status of a run that did not finish, most telling first."""

_RANK: dict[RunFailureStatus, int] = {
    "timed_out": 0,
    "cancelled": 1,
    "fatal_tool_error": 2,
    "providers_exhausted": 3,
    "failed": 4,
}


@final
@attrs.frozen
class RunFailure:
    """The classification of one run failure.

    ``status`` is what to store. ``cause`` is the exception that decided it
    (the exception itself, or one leaf of a group). ``exception`` is what was
    classified, for logging the whole of it.
    """

    status: RunFailureStatus
    cause: BaseException
    exception: BaseException


def classify_run_failure(
    exc: BaseException,
    *,
    deadline: RunDeadline | None = None,
    is_fatal_tool_error: Callable[[BaseException], bool] | None = None,
) -> RunFailure:
    """Say how a run that raised *exc* ended, as a [`RunFailure`][juno_bind_trio.run.RunFailure].

    Call it where the run's exception is caught, record the status, and
    re-raise: classifying is not handling, and a cancellation must still
    propagate:

        try:
            with RunDeadline(300) as deadline:
                await loop.run(...)
        except BaseException as exc:
            failure = classify_run_failure(exc, deadline=deadline)
            with anyio.CancelScope(shield=True):
                await store.set_status(run_id, failure.status)
            raise

    *deadline*: pass the run's deadline when classifying **inside** its
    ``with`` block, where its timeout still looks like a plain cancellation;
    a cancellation that deadline caused is then ``"timed_out"``. Outside the
    block it has already become [`RunTimeoutError`][juno_bind_trio.RunTimeoutError].

    *is_fatal_tool_error*: the host's own test for a tool error that must end
    the run (the loop's ``is_fatal_tool_error`` port); a
    [`RunTimeoutError`][juno_bind_trio.RunTimeoutError] or cancellation is never asked.

    :raises TypeError: *exc* is not an exception, *deadline* not a
        [`RunDeadline`][juno_bind_trio.run.RunDeadline], or *is_fatal_tool_error* not callable.
    """
    if not isinstance(exc, BaseException):
        raise TypeError(f"classify_run_failure: exc must be an exception, got {exc!r}")
    if deadline is not None and not isinstance(deadline, RunDeadline):
        raise TypeError(
            f"classify_run_failure: deadline must be a RunDeadline or None, got {deadline!r}"
        )
    if is_fatal_tool_error is not None and not callable(is_fatal_tool_error):
        raise TypeError(
            "classify_run_failure: is_fatal_tool_error must be callable, "
            f"got {is_fatal_tool_error!r}"
        )

    def status_of(node: BaseException) -> RunFailureStatus | None:
        if isinstance(node, RunTimeoutError):
            return "timed_out"
        if not isinstance(node, Exception):
            if isinstance(node, BaseExceptionGroup):
                return None  # a group of cancellations and errors: decided by its leaves
            return "timed_out" if deadline is not None and deadline.timed_out else "cancelled"
        if is_fatal_tool_error is not None and is_fatal_tool_error(node):
            return "fatal_tool_error"
        if isinstance(node, RoutingError):
            return "providers_exhausted"
        if isinstance(node, BaseExceptionGroup):
            return None
        return "failed"

    best: list[tuple[RunFailureStatus, BaseException]] = []

    def walk(node: BaseException) -> None:
        status = status_of(node)
        if status is None:
            # Only a group has no status of its own: its leaves decide.
            for inner in node.exceptions:  # type: ignore[attr-defined]
                walk(inner)
        elif not best or _RANK[status] < _RANK[best[0][0]]:
            # A group that answered for itself is not descended into: its
            # leaves are its trail (every route's failure), not new facts.
            best[:] = [(status, node)]

    walk(exc)
    status, cause = best[0]
    return RunFailure(status, cause, exc)
