"""The routing taxonomy: what an attempt reports, and what routing does about it.

Routing never guesses at an exception. An attempt function catches what its
transport raised, *classifies* it (with
[`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error], or a
classifier of your own for another SDK) and returns the verdict. Keeping the judgement in
one pure function, outside the executor, is what makes the executor deterministic and the
judgement testable on its own: the table in "How to map your transport errors onto the
routing taxonomy" is that function's whole specification.
"""

from __future__ import annotations

import enum
import math
from typing import Generic, TypeVar

import attrs

__all__ = ["AttemptFailure", "AttemptSuccess", "ClassifiedError", "RouteAction"]

T_co = TypeVar("T_co", covariant=True)


class RouteAction(enum.Enum):
    """What routing does after a failed attempt, from the narrowest move to the widest."""

    RETRY_SAME_ENDPOINT = "retry_same_endpoint"
    """Ask the same endpoint again, within its retry budget.

    For a completion that arrived but cannot be used (no finish reason, unparsable
    arguments, a garbled chunk): the endpoint is healthy and the next sample is
    likely fine. Once the budget is spent this becomes
    [`NEXT_CANDIDATE`][juno_bind_trio.routing.RouteAction.NEXT_CANDIDATE].
    """

    NEXT_CANDIDATE = "next_candidate"
    """Try the next provider of the same model: this endpoint failed.

    Connection refused or dropped, 429, 5xx, a stall, the endpoint's own
    credentials refused. The only verdict that counts against its circuit
    breaker.
    """

    NEXT_STAGE = "next_stage"
    """Skip this model's remaining providers and fall back to the next model.

    The model itself cannot take the request (its context window is too small,
    it does not support a parameter the request uses), so every provider of it
    would say the same.
    """

    PROPAGATE = "propagate"
    """Stop routing and hand the error to the caller.

    The request itself is wrong (a 400, a 422), or the error is not a transport
    failure at all. Replaying it elsewhere would only fail again, or shop a
    refused request around until some provider accepts it.
    """


def _check_action(given: RouteAction) -> RouteAction:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, RouteAction):
        raise TypeError(f"ClassifiedError: action must be a RouteAction, got {value!r}")
    return value


def _check_cause(given: Exception) -> Exception:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, Exception):
        # Cancellation (trio.Cancelled, asyncio.CancelledError) and
        # KeyboardInterrupt are BaseExceptions: they are never routing failures,
        # and a host that classified one would turn "stop now" into "try the
        # next provider".
        raise TypeError(
            "ClassifiedError: cause must be an Exception (cancellation is never classified; "
            f"let it propagate), got {value!r}"
        )
    return value


def _check_retry_after(given: float | None) -> float | None:
    value: object = given  # checked at run time, whatever the type says
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"ClassifiedError: retry_after must be seconds or None, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(
            f"ClassifiedError: retry_after must be finite and non-negative, got {value!r}"
        )
    return seconds


def _check_reason(given: str) -> str:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, str):
        raise TypeError(f"ClassifiedError: reason must be a string, got {value!r}")
    return value


@attrs.frozen
class ClassifiedError:
    """An attempt's failure together with the verdict on it.

    ``ClassifiedError(action, cause, retry_after=None, reason="")``

    *cause* is the exception the transport raised, untouched: it is what the
    caller receives when routing propagates, and what the trail of a failed
    route carries. *retry_after* is the server's own request to wait, in
    seconds, when it sent one. *reason* is a short human explanation for logs.

    A record, not an exception: it is never raised. The error a failed route
    raises is its [`cause`][juno_bind_trio.routing.ClassifiedError], or an
    [`AllRoutesFailedError`][juno_bind_trio.AllRoutesFailedError] carrying every one of them.
    """

    action: RouteAction = attrs.field(converter=_check_action)
    cause: Exception = attrs.field(converter=_check_cause)
    retry_after: float | None = attrs.field(
        default=None, kw_only=True, converter=_check_retry_after
    )
    reason: str = attrs.field(default="", kw_only=True, converter=_check_reason)


@attrs.frozen
class AttemptSuccess(Generic[T_co]):
    """An attempt that produced the value the route was for."""

    value: T_co


def _check_failure_error(given: ClassifiedError) -> ClassifiedError:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, ClassifiedError):
        raise TypeError(
            "AttemptFailure: error must be a ClassifiedError (classify the exception first, "
            f"e.g. with classify_openai_error), got {value!r}"
        )
    return value


def _check_produced_output(given: bool) -> bool:
    # Not truthiness: `produced_output=stream` (the stream, not its flag) is an
    # easy slip, and an object is always truthy, so it would clamp every
    # failure and silently turn off fallback.
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, bool):
        raise TypeError(f"AttemptFailure: produced_output must be a bool, got {value!r}")
    return value


@attrs.frozen
class AttemptFailure:
    """An attempt that failed, classified.

    ``AttemptFailure(error, produced_output=False)``

    Set *produced_output* when the attempt emitted something the caller
    cannot take back; with a [`TurnTextStream`][juno_bind_trio.completion.TurnTextStream]
    that is exactly ``stream.produced_output``. It clamps routing to
    propagate-only: no retry, no next provider, no fallback model, because each
    of those would replay a turn somebody has already received.
    """

    error: ClassifiedError = attrs.field(converter=_check_failure_error)
    produced_output: bool = attrs.field(default=False, converter=_check_produced_output)
