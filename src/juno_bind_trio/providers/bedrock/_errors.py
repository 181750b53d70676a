"""``botocore``'s exceptions for ``bedrock-runtime``, mapped onto the routing taxonomy.

Measured with aiobotocore 3.10 (botocore 1.43, httpx2 backend) against the
fake Bedrock runtime (``juno_bind_trio.testing.open_fake_bedrock_server``): an
error status is a ``ClientError`` (the modeled subclass of the client:
``ThrottlingException``, ``ServiceUnavailableException``, ...) whose
``response["Error"]["Code"]`` names it; an *exception message* mid-stream is an
``EventStreamError`` (a ``ClientError`` too) whose code is the event's type in
lower camel case (``throttlingException``, ``modelStreamErrorException``); a
frame whose CRC does not match is ``botocore.eventstream.ChecksumMismatch``
(a ``ParserError``); a connection refused ``EndpointConnectionError``, closed
before the answer ``HTTPClientError``, dropped mid-stream httpx's own
``RemoteProtocolError`` (the event-stream reader does not wrap it), an idle
read past the client's timeout ``ReadTimeoutError``.
"""

from __future__ import annotations

from typing import Any, Final

from juno_bind_trio._errors import CompletionDefectError, StreamStallError
from juno_bind_trio.routing import (
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    parse_retry_after,
)

__all__ = [
    "INPUT_TOO_LONG_MARKERS",
    "THROTTLE_BACKOFF",
    "classify_bedrock_error",
    "error_code",
]

INPUT_TOO_LONG_MARKERS: Final = (
    "input is too long",
    "prompt is too long",
    "exceeds the context window",
    "context length",
    "too many input tokens",
    "maximum context",
)
"""Phrases of a ``ValidationException`` that mean the *model* cannot take the input: next stage."""

THROTTLE_BACKOFF: Final = 1.0
"""Seconds before the first same-endpoint retry of a throttled request, doubled per retry.

Bedrock's ``ThrottlingException`` rarely says when to come back; when it
does (``Retry-After``), that wins. Past the plan's retries, or past its
``max_retry_wait``, routing moves to the next candidate.
"""

_RETRY = RouteAction.RETRY_SAME_ENDPOINT
_NEXT = RouteAction.NEXT_CANDIDATE
_STAGE = RouteAction.NEXT_STAGE
_STOP = RouteAction.PROPAGATE

# The endpoint's state, not the request's: another endpoint (region, account) may serve it.
_ENDPOINT_CODES: Final = frozenset(
    {
        "serviceunavailableexception",
        "modelnotreadyexception",
        "internalserverexception",
        "modelstreamerrorexception",
        "modeltimeoutexception",
        "modelerrorexception",
        "servicequotaexceededexception",
    }
)
# This endpoint will not serve us (credentials, access, the model not there).
_REFUSED_CODES: Final = frozenset(
    {
        "accessdeniedexception",
        "unrecognizedclientexception",
        "expiredtokenexception",
        "invalidsignatureexception",
        "resourcenotfoundexception",
        "incompletesignature",
        "missingauthenticationtokenexception",
    }
)


def _decide(
    action: RouteAction, error: Exception, reason: str, retry_after: float | None = None
) -> ClassifiedError:
    return ClassifiedError(action, error, retry_after=retry_after, reason=reason)


def error_code(error: BaseException) -> str | None:
    """The AWS error code of a ``ClientError`` (``"ThrottlingException"``, ...), or ``None``."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    detail = response.get("Error")
    code = detail.get("Code") if isinstance(detail, dict) else None
    return code if isinstance(code, str) and code else None


def _message(error: Exception) -> str:
    response: Any = getattr(error, "response", None)
    detail = response.get("Error") if isinstance(response, dict) else None
    message = detail.get("Message") if isinstance(detail, dict) else None
    return (message if isinstance(message, str) else str(error)).lower()


def _headers(error: Exception) -> dict[str, str] | None:
    response: Any = getattr(error, "response", None)
    metadata = response.get("ResponseMetadata") if isinstance(response, dict) else None
    headers = metadata.get("HTTPHeaders") if isinstance(metadata, dict) else None
    if not isinstance(headers, dict):
        return None
    return {str(k).lower(): v for k, v in headers.items() if isinstance(v, str)}


def _status(error: Exception) -> int | None:
    response: Any = getattr(error, "response", None)
    metadata = response.get("ResponseMetadata") if isinstance(response, dict) else None
    status = metadata.get("HTTPStatusCode") if isinstance(metadata, dict) else None
    return status if isinstance(status, int) else None


def classify_bedrock_error(
    error: Exception, candidate: Candidate, cursor: RouteCursor
) -> ClassifiedError:
    """Classify an exception raised while streaming ``converse_stream`` through aiobotocore.

    | fault | exception | routing |
    |---|---|---|
    | ``ThrottlingException`` (429, or mid-stream) | ``ClientError`` / ``EventStreamError`` | retry the endpoint after ``Retry-After`` or a doubling backoff (1 s, 2 s, ...); then the next candidate |
    | ``ServiceUnavailableException``, ``ModelNotReadyException``, ``InternalServerException``, ``ModelStreamErrorException``, ``ModelTimeoutException``, 5xx | the same | next candidate |
    | ``AccessDeniedException``, expired or unknown credentials, ``ResourceNotFoundException`` | ``ClientError`` | next candidate |
    | ``ValidationException`` saying the input is too long | ``ClientError`` | next stage |
    | another ``ValidationException``, 4xx | ``ClientError`` | propagate |
    | refused, closed, dropped mid-stream, read timeout | ``EndpointConnectionError``, ``HTTPClientError``, httpx's ``TransportError``, ``ReadTimeoutError`` | next candidate |
    | no credentials found | ``NoCredentialsError`` | next candidate |
    | a frame that fails its CRC, or cannot be parsed | ``ChecksumMismatch`` / ``ParserError`` | retry the endpoint |
    | cut off, empty, bad tool arguments | ``CompletionDefectError`` | retry the endpoint |
    | silence past a budget | ``StreamStallError`` | next candidate |

    Anything else propagates (most likely a bug of the host's). *candidate*
    is not consulted; *cursor* sets the throttling backoff
    (``THROTTLE_BACKOFF * 2 ** (cursor.candidate_attempt - 1)``).
    """
    if not isinstance(error, Exception):
        raise TypeError(
            "classify_bedrock_error: error must be an Exception (cancellation is never "
            f"classified), got {error!r}"
        )
    if not isinstance(cursor, RouteCursor):
        raise TypeError(f"classify_bedrock_error: cursor must be a RouteCursor, got {cursor!r}")
    if isinstance(error, StreamStallError):
        return _decide(_NEXT, error, f"stream stalled ({error.budget})")
    if isinstance(error, CompletionDefectError):
        return _decide(_RETRY, error, f"completion defect ({error.kind})")

    import botocore.eventstream
    import botocore.exceptions

    if isinstance(error, botocore.eventstream.ParserError):
        return _decide(_RETRY, error, f"malformed stream frame ({type(error).__name__})")
    if isinstance(error, botocore.exceptions.ClientError):
        return _classify_client_error(error, cursor)
    if isinstance(
        error,
        botocore.exceptions.ConnectionError
        | botocore.exceptions.HTTPClientError
        | botocore.exceptions.ReadTimeoutError,
    ):
        return _decide(_NEXT, error, f"connection failed ({type(error).__name__})")
    if _is_transport_error(error):
        return _decide(_NEXT, error, f"connection failed ({type(error).__name__})")
    if isinstance(
        error,
        botocore.exceptions.NoCredentialsError
        | botocore.exceptions.PartialCredentialsError
        | botocore.exceptions.CredentialRetrievalError,
    ):
        return _decide(_NEXT, error, "endpoint client has no usable credentials")
    return _decide(_STOP, error, f"not a transport error ({type(error).__name__})")


def _is_transport_error(error: Exception) -> bool:
    # httpx2 for aiobotocore's httpx2 extra, httpx before; found by what is imported.
    import sys

    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        transport = getattr(module, "TransportError", None)
        if isinstance(transport, type) and isinstance(error, transport):
            return True
    return False


def _too_long(error: Exception) -> bool:
    message = _message(error)
    return any(marker in message for marker in INPUT_TOO_LONG_MARKERS)


def _classify_client_error(error: Exception, cursor: RouteCursor) -> ClassifiedError:
    code = error_code(error) or ""
    key = code.lower()
    status = _status(error)
    retry_after = parse_retry_after(_headers(error))
    where = "mid-stream " if status is not None and status < 400 else ""
    if key == "throttlingexception" or status == 429:
        wait = retry_after
        if wait is None:
            wait = THROTTLE_BACKOFF * 2 ** max(0, cursor.candidate_attempt - 1)
        return _decide(_RETRY, error, f"throttled {where}({code or 429})", wait)
    if key in _ENDPOINT_CODES:
        return _decide(_NEXT, error, f"endpoint unavailable {where}({code})", retry_after)
    if key in _REFUSED_CODES:
        return _decide(_NEXT, error, f"endpoint cannot serve us ({code})")
    if key == "validationexception":
        if _too_long(error):
            return _decide(_STAGE, error, "model cannot take the input (too long)")
        return _decide(_STOP, error, f"request rejected ({code})")
    if status is not None and status >= 500:
        return _decide(_NEXT, error, f"server error ({status}, {code or 'unknown'})", retry_after)
    if status in (401, 403, 404, 408):
        return _decide(_NEXT, error, f"endpoint cannot serve the request ({status})")
    return _decide(_STOP, error, f"request rejected ({code or status or 'unknown'})")
