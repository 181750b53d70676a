"""The openai SDK's exceptions, mapped onto the routing taxonomy.

The facts this table rests on were measured against openai 3.x running under
trio and asyncio (shared notes, "The openai SDK under Trio"); the how-to
"Map your transport errors onto the routing taxonomy" prints the table. The
order of the checks below matters, because the SDK's classes nest:
``APITimeoutError`` is an ``APIConnectionError``, and every status error and
the status-less mid-stream error are ``APIError``.
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
    import openai

__all__ = ["MODEL_LIMIT_ERROR_CODES", "classify_openai_error"]

MODEL_LIMIT_ERROR_CODES: Final = frozenset(
    {
        "context_length_exceeded",
        "string_above_max_length",
        "unsupported_parameter",
        "unsupported_value",
        "model_not_supported",
    }
)
"""Error codes that mean *the model* cannot take this request, so the next stage is tried.

Every provider of the same model would refuse it the same way; a different
model (a larger context window, tool support) may not.
"""

_RETRY = RouteAction.RETRY_SAME_ENDPOINT
_NEXT = RouteAction.NEXT_CANDIDATE
_STAGE = RouteAction.NEXT_STAGE
_STOP = RouteAction.PROPAGATE


def _decide(
    action: RouteAction, error: Exception, reason: str, retry_after: float | None = None
) -> ClassifiedError:
    return ClassifiedError(action, error, retry_after=retry_after, reason=reason)


def classify_openai_error(
    error: Exception, candidate: Candidate, cursor: RouteCursor
) -> ClassifiedError:
    """Classify an exception raised while calling the openai SDK.

    Covers what an attempt over ``openai.AsyncOpenAI`` can raise, mid-stream
    cases included, and this package's own stream errors
    ([`StreamStallError`][juno_bind_trio.StreamStallError],
    [`CompletionDefectError`][juno_bind_trio.CompletionDefectError]). Anything it does not
    recognise is [`PROPAGATE`][juno_bind_trio.routing.RouteAction.PROPAGATE]: an unknown exception
    is most likely a bug in the host, and replaying a bug on every provider only hides
    it behind an "all routes failed".

    *candidate* and *cursor* are not consulted by this table. They are in the
    signature so a classifier of your own (a provider with its own quirks) has
    the same shape, and can fall back to this one.

    Cancellation is not an ``Exception`` and is never classified: let it
    propagate out of the attempt function.
    """
    if not isinstance(error, Exception):
        raise TypeError(
            "classify_openai_error: error must be an Exception (cancellation is never "
            f"classified), got {error!r}"
        )
    if not isinstance(candidate, Candidate):
        raise TypeError(f"classify_openai_error: candidate must be a Candidate, got {candidate!r}")
    if not isinstance(cursor, RouteCursor):
        raise TypeError(f"classify_openai_error: cursor must be a RouteCursor, got {cursor!r}")

    # This package's own verdicts on a stream come first: they are not SDK errors.
    if isinstance(error, StreamStallError):
        return _decide(_NEXT, error, f"stream stalled ({error.budget})")
    if isinstance(error, CompletionDefectError):
        return _decide(_RETRY, error, f"completion defect ({error.kind})")
    if isinstance(error, json.JSONDecodeError):
        # The SDK lets a malformed SSE chunk escape as a raw JSONDecodeError. The
        # response was garbled, not refused: a defect of this completion.
        return _decide(_RETRY, error, "malformed stream chunk")

    import openai  # deferred, as everywhere in this subpackage: the SDK costs half a second

    if isinstance(error, openai.APITimeoutError):
        # The SDK's timeout is an idle limit per read, so this is a stall.
        return _decide(_NEXT, error, "read timed out")
    if isinstance(error, openai.APIConnectionError):
        # Refused, reset, or closed mid-stream ("incomplete chunked read"): the
        # SDK never retries the mid-stream case, and it is the endpoint's fault.
        return _decide(_NEXT, error, "connection failed")
    if isinstance(error, openai.APIResponseValidationError):
        return _decide(_NEXT, error, "endpoint returned a malformed response")
    if isinstance(error, openai.APIStatusError):
        return _classify_status(error)
    if isinstance(error, openai.APIError):
        # `data: {"error": ...}` mid-stream: no status code, the server gave up
        # on the generation. Its code may still say the model refused the request.
        code = error.code or ""
        if code in MODEL_LIMIT_ERROR_CODES:
            return _decide(_STAGE, error, f"model cannot take the request ({code})")
        return _decide(_NEXT, error, "error event mid-stream")
    if isinstance(error, openai.LengthFinishReasonError):
        return _decide(_RETRY, error, "completion defect (truncated at the length limit)")
    if isinstance(error, openai.ContentFilterFinishReasonError):
        # The *output* was filtered: another sample of the same request may pass.
        # (A 400 for the *input* propagates: see _classify_status.)
        return _decide(_RETRY, error, "completion defect (output filtered)")
    if isinstance(error, openai.OpenAIError):
        # Client-side configuration of this endpoint (no API key, a token
        # provider that failed): the next candidate has its own.
        return _decide(_NEXT, error, "endpoint client misconfigured")
    return _decide(_STOP, error, f"not a transport error ({type(error).__name__})")


def _classify_status(error: openai.APIStatusError) -> ClassifiedError:
    status = error.status_code
    code = error.code or ""
    retry_after = parse_retry_after(error.response.headers)
    if status == 429:
        # Quota exhausted or rate limited: either way this account on this
        # endpoint is saying no, and the next provider has its own limits.
        return _decide(_NEXT, error, f"rate limited ({code or 429})", retry_after)
    if status >= 500:
        return _decide(_NEXT, error, f"server error ({status})", retry_after)
    if status in (401, 403):
        # An endpoint's own credentials or permissions: the next provider has
        # different ones. (If every key is wrong, every candidate says so and
        # the trail shows it.)
        return _decide(_NEXT, error, f"endpoint refused our credentials ({status})")
    if status in (404, 408):
        # 404: this endpoint does not serve the path or the model name it was
        # given (providers spell model names differently). 408: it timed out.
        return _decide(_NEXT, error, f"endpoint cannot serve the request ({status})")
    if status == 409:
        # A lock timeout on the server: the SDK's own retry policy retries it.
        return _decide(_RETRY, error, "conflict (409), retryable", retry_after)
    if code in MODEL_LIMIT_ERROR_CODES:
        return _decide(_STAGE, error, f"model cannot take the request ({code})")
    # 400, 413, 422 and the rest: the request is wrong, or refused for its
    # content. Another provider would refuse it too, and shopping a refused
    # request around until one accepts it is not routing's call to make.
    return _decide(_STOP, error, f"request rejected ({status}{', ' + code if code else ''})")
