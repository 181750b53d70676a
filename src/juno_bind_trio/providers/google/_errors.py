"""``google-genai``'s exceptions, mapped onto the routing taxonomy.

Measured with google-genai 3.6 (on httpx2) against the fake Gemini API
(``juno_bind_trio.testing.open_fake_gemini_server``): an error status is an
``errors.APIError`` subclass by status (``ClientError`` 4xx, ``ServerError``
5xx) with the API's gRPC ``status`` (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``,
``INVALID_ARGUMENT``, ...) and its body in ``details``, where a 429's
``RetryInfo`` says when to come back; an error chunk *mid-stream* is an
``APIError`` too, its code the chunk's own (``ServerError`` for 500); a
malformed chunk is ``errors.UnknownApiResponseError``; the SDK does not wrap
transport errors, so a refused connection is httpx2's ``ConnectError``, one
closed or dropped mid-stream its ``RemoteProtocolError``, an idle read past
the SDK's timeout its ``ReadTimeout``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from juno_bind_trio._errors import CompletionDefectError, StreamStallError
from juno_bind_trio.routing import (
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    parse_retry_after,
)

__all__ = ["PROMPT_TOO_LONG_MARKERS", "classify_gemini_error", "retry_delay"]

PROMPT_TOO_LONG_MARKERS: Final = (
    "exceeds the maximum number of tokens",
    "input token count",
    "prompt is too long",
    "exceeds the context window",
)
"""Phrases of an ``INVALID_ARGUMENT`` that mean the *model* cannot take the prompt: next stage."""

_RETRY = RouteAction.RETRY_SAME_ENDPOINT
_NEXT = RouteAction.NEXT_CANDIDATE
_STAGE = RouteAction.NEXT_STAGE
_STOP = RouteAction.PROPAGATE

# gRPC statuses that are the endpoint's state, not the request's.
_ENDPOINT_STATUSES: Final = frozenset({"UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "UNKNOWN"})
# This endpoint will not serve us (key, project, region, model).
_REFUSED_STATUSES: Final = frozenset(
    {"UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "FAILED_PRECONDITION"}
)
_DELAY: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _decide(
    action: RouteAction, error: Exception, reason: str, retry_after: float | None = None
) -> ClassifiedError:
    return ClassifiedError(action, error, retry_after=retry_after, reason=reason)


def retry_delay(details: object) -> float | None:
    """The seconds of a ``google.rpc.RetryInfo`` in an error body (``"7s"``), or ``None``."""
    error = details.get("error") if isinstance(details, Mapping) else None
    items = error.get("details") if isinstance(error, Mapping) else None
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("@type")
        if isinstance(kind, str) and kind.endswith("google.rpc.RetryInfo"):
            delay = item.get("retryDelay")
            match = _DELAY.match(delay) if isinstance(delay, str) else None
            if match is not None:
                return float(match.group(1))
    return None


def classify_gemini_error(
    error: Exception, candidate: Candidate, cursor: RouteCursor
) -> ClassifiedError:
    """Classify an exception raised while streaming from ``google-genai``.

    | fault | exception | routing |
    |---|---|---|
    | 429 ``RESOURCE_EXHAUSTED`` with ``RetryInfo`` (or ``Retry-After``) | ``ClientError`` | retry the endpoint after that wait; past the plan's retries or ``max_retry_wait``, the next candidate |
    | 429 without a wait | ``ClientError`` | next candidate |
    | ``UNAVAILABLE``, ``INTERNAL``, ``DEADLINE_EXCEEDED``, 5xx, an error chunk mid-stream | ``ServerError`` | next candidate |
    | ``UNAUTHENTICATED``, ``PERMISSION_DENIED``, ``NOT_FOUND``, ``FAILED_PRECONDITION`` | ``ClientError`` | next candidate |
    | ``INVALID_ARGUMENT`` saying the input is too long | ``ClientError`` | next stage |
    | other ``INVALID_ARGUMENT``, 4xx | ``ClientError`` | propagate |
    | ``ABORTED`` (409) | ``ClientError`` | retry the endpoint |
    | refused, closed, dropped mid-stream, read timeout | httpx2's ``TransportError`` | next candidate |
    | malformed chunk | ``UnknownApiResponseError`` | retry the endpoint |
    | cut off, empty, bad tool arguments | ``CompletionDefectError`` | retry the endpoint |
    | silence past a budget | ``StreamStallError`` | next candidate |

    Anything else propagates (most likely a bug of the host's). *candidate*
    and *cursor* are not consulted; they give a classifier of your own the
    same shape.
    """
    if not isinstance(error, Exception):
        raise TypeError(
            "classify_gemini_error: error must be an Exception (cancellation is never "
            f"classified), got {error!r}"
        )
    if isinstance(error, StreamStallError):
        return _decide(_NEXT, error, f"stream stalled ({error.budget})")
    if isinstance(error, CompletionDefectError):
        return _decide(_RETRY, error, f"completion defect ({error.kind})")

    from google.genai import errors

    if isinstance(error, errors.UnknownApiResponseError):
        return _decide(_RETRY, error, "malformed stream chunk")
    if isinstance(error, errors.APIError):
        return _classify_status(error)
    if _is_transport_error(error):
        return _decide(_NEXT, error, f"connection failed ({type(error).__name__})")
    return _decide(_STOP, error, f"not a transport error ({type(error).__name__})")


def _is_transport_error(error: Exception) -> bool:
    # httpx2, which the adapter's client is made of; httpx for a client of the host's.
    import sys

    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        transport = getattr(module, "TransportError", None)
        if isinstance(transport, type) and isinstance(error, transport):
            return True
    return False


def _message(error: Any) -> str:
    message = error.message if isinstance(error.message, str) else str(error)
    return message.lower()


def _classify_status(error: Any) -> ClassifiedError:
    code = error.code if isinstance(error.code, int) else 0
    status = error.status if isinstance(error.status, str) else ""
    shown = f"{code}{', ' + status if status else ''}"
    headers = getattr(error.response, "headers", None)
    wait = retry_delay(error.details)
    if wait is None:
        wait = parse_retry_after(headers if isinstance(headers, Mapping) else None)
    if code == 429 or status == "RESOURCE_EXHAUSTED":
        if wait is not None:
            return _decide(_RETRY, error, f"rate limited ({shown})", wait)
        return _decide(_NEXT, error, f"quota exhausted ({shown})")
    if code >= 500 or status in _ENDPOINT_STATUSES:
        return _decide(_NEXT, error, f"server error ({shown})", wait)
    if status in _REFUSED_STATUSES or code in (401, 403, 404, 408):
        return _decide(_NEXT, error, f"endpoint cannot serve the request ({shown})")
    if status == "ABORTED" or code == 409:
        return _decide(_RETRY, error, f"aborted ({shown}), retryable", wait)
    message = _message(error)
    if any(marker in message for marker in PROMPT_TOO_LONG_MARKERS):
        return _decide(_STAGE, error, "model cannot take the prompt (too long)")
    return _decide(_STOP, error, f"request rejected ({shown})")
