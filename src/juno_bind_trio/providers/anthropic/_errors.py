"""The ``anthropic`` SDK's exceptions, mapped onto the routing taxonomy.

Measured with anthropic 2.15 (on httpx2) against the fake Messages API
(``juno_bind_trio.testing.open_fake_anthropic_server``): a refused or dropped
connection, mid-stream included, is an ``APIConnectionError``; an error status
is an ``APIStatusError`` subclass by status (``RateLimitError`` 429,
``OverloadedError`` 529, ``InternalServerError`` 5xx, ...). Up to 2.16 it did
not wrap a connection dropped *mid-stream*: the HTTP library's own
``httpx2.RemoteProtocolError`` ("incomplete chunked read") escaped the
iteration; 2.17 wraps it in ``APIConnectionError``. Both are read as a failed
connection, so transport errors of the HTTP library are classified too. An ``event: error``
mid-stream is an ``APIStatusError`` too, with the *stream's* status, 200, and
the error's ``type`` (``overloaded_error``, ``api_error``, ...), so it is
judged by that type; a malformed event's data is a raw ``json.JSONDecodeError``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from juno_bind_trio._errors import CompletionDefectError, StreamStallError
from juno_bind_trio.routing import (
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    parse_retry_after,
)

if TYPE_CHECKING:
    import anthropic

__all__ = ["PROMPT_TOO_LONG_MARKERS", "classify_anthropic_error"]

PROMPT_TOO_LONG_MARKERS: Final = ("prompt is too long", "exceeds the context window")
"""Phrases of a 400 that mean the *model* cannot take the prompt: the next stage is tried."""

_RETRY = RouteAction.RETRY_SAME_ENDPOINT
_NEXT = RouteAction.NEXT_CANDIDATE
_STAGE = RouteAction.NEXT_STAGE
_STOP = RouteAction.PROPAGATE

# Error types of the API's error object that are the endpoint's state, not the request's.
_ENDPOINT_TYPES: Final = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)


def _decide(
    action: RouteAction, error: Exception, reason: str, retry_after: float | None = None
) -> ClassifiedError:
    return ClassifiedError(action, error, retry_after=retry_after, reason=reason)


def classify_anthropic_error(
    error: Exception, candidate: Candidate, cursor: RouteCursor
) -> ClassifiedError:
    """Classify an exception raised while streaming from the ``anthropic`` SDK.

    | fault | exception | routing |
    |---|---|---|
    | refused, closed, dropped mid-stream, read timeout | ``APIConnectionError`` | next candidate |
    | 429 (with ``retry-after``), 529 overloaded, 5xx | the status error | next candidate |
    | ``event: error`` mid-stream (overloaded) | ``APIStatusError`` (200) | next candidate |
    | 401 / 403 / 404 / 408 | the status error | next candidate |
    | 400 "prompt is too long" | ``BadRequestError`` | next stage |
    | other 400, 413, 422 | the status error | propagate |
    | malformed event | ``json.JSONDecodeError`` | retry the endpoint |
    | cut off, empty, bad tool arguments | ``CompletionDefectError`` | retry the endpoint |
    | silence past a budget | ``StreamStallError`` | next candidate |

    Anything else propagates (most likely a bug of the host's). *candidate*
    and *cursor* are not consulted; they give a classifier of your own the
    same shape.
    """
    if not isinstance(error, Exception):
        raise TypeError(
            "classify_anthropic_error: error must be an Exception (cancellation is never "
            f"classified), got {error!r}"
        )
    if isinstance(error, StreamStallError):
        return _decide(_NEXT, error, f"stream stalled ({error.budget})")
    if isinstance(error, CompletionDefectError):
        return _decide(_RETRY, error, f"completion defect ({error.kind})")
    if isinstance(error, json.JSONDecodeError):
        return _decide(_RETRY, error, "malformed stream event")

    import anthropic

    if isinstance(error, anthropic.APIConnectionError):  # APITimeoutError included
        return _decide(_NEXT, error, "connection failed")
    if _is_transport_error(error):
        return _decide(_NEXT, error, "connection failed")
    if isinstance(error, anthropic.APIResponseValidationError):
        return _decide(_NEXT, error, "endpoint returned a malformed response")
    if isinstance(error, anthropic.APIStatusError):
        return _classify_status(error)
    if isinstance(error, anthropic.AnthropicError):
        # Client-side configuration of this endpoint (no key): the next has its own.
        return _decide(_NEXT, error, "endpoint client misconfigured")
    return _decide(_STOP, error, f"not a transport error ({type(error).__name__})")


def _is_transport_error(error: Exception) -> bool:
    # The SDK's HTTP library (httpx2 for anthropic 2.x, httpx before), found by
    # what the SDK itself imports rather than by a name this package pins.
    import sys

    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        transport = getattr(module, "TransportError", None)
        if isinstance(transport, type) and isinstance(error, transport):
            return True
    return False


def _too_long(error: anthropic.APIStatusError) -> bool:
    message = (error.api_message or str(error)).lower()
    return any(marker in message for marker in PROMPT_TOO_LONG_MARKERS)


def _classify_status(error: anthropic.APIStatusError) -> ClassifiedError:
    status = error.status_code
    kind = error.type or ""
    retry_after = parse_retry_after(error.response.headers)
    if status < 400:
        # An `event: error` mid-stream: the status is the stream's own (200).
        if kind in _ENDPOINT_TYPES:
            return _decide(_NEXT, error, f"error event mid-stream ({kind})", retry_after)
        if _too_long(error):
            return _decide(_STAGE, error, "model cannot take the prompt (too long)")
        return _decide(_STOP, error, f"error event mid-stream ({kind or 'unknown'})")
    if status == 429:
        return _decide(_NEXT, error, f"rate limited ({kind or 429})", retry_after)
    if status >= 500:
        return _decide(
            _NEXT, error, f"server error ({status}{', ' + kind if kind else ''})", retry_after
        )
    if status in (401, 402, 403):
        return _decide(_NEXT, error, f"endpoint refused our credentials ({status})")
    if status in (404, 408):
        return _decide(_NEXT, error, f"endpoint cannot serve the request ({status})")
    if status == 409:
        return _decide(_RETRY, error, "conflict (409), retryable", retry_after)
    if _too_long(error):
        return _decide(_STAGE, error, "model cannot take the prompt (too long)")
    return _decide(_STOP, error, f"request rejected ({status}{', ' + kind if kind else ''})")
