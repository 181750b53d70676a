"""The Responses API's failures, mapped onto the routing taxonomy.

Measured with openai 3.6x against the fake Responses API
(``juno_bind_trio.testing.open_fake_responses_server``): the SDK raises its
usual exceptions for a refused connection, an error status, a dropped
connection (``APIConnectionError``) and a malformed event (a raw
``json.JSONDecodeError``), but an ``error`` event and ``response.failed``
arrive as typed events and raise nothing. The adapter raises an
``openai.APIError`` for each, with the API's error object as its body (so
``code`` and ``message`` are the server's), and this table judges it by the
code; everything else is judged as
[`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error] judges it.
"""

from __future__ import annotations

from typing import Final

from juno_bind_trio.routing import Candidate, ClassifiedError, RouteAction, RouteCursor

from ._classify import MODEL_LIMIT_ERROR_CODES, classify_openai_error

__all__ = ["REQUEST_ERROR_CODES", "classify_responses_error"]

REQUEST_ERROR_CODES: Final = frozenset(
    {
        "invalid_prompt",
        "invalid_image",
        "invalid_image_format",
        "invalid_base64_image",
        "invalid_image_url",
        "image_too_large",
        "image_too_small",
        "image_parse_error",
        "image_content_policy_violation",
        "invalid_image_mode",
        "image_file_too_large",
        "unsupported_image_media_type",
        "empty_image_file",
        "failed_to_download_image",
        "image_file_not_found",
    }
)
"""Codes of a failed response that blame the request (any provider would refuse it): propagated."""


def classify_responses_error(
    error: Exception, candidate: Candidate, cursor: RouteCursor
) -> ClassifiedError:
    """Classify an exception raised while streaming a turn from the Responses API.

    | fault | exception | routing |
    |---|---|---|
    | ``error`` event or ``response.failed`` (``server_error``, ``rate_limit_exceeded``, ...) | ``APIError`` | next candidate |
    | the same with ``context_length_exceeded`` | ``APIError`` | next stage |
    | the same blaming the request (``invalid_prompt``, an image's ``invalid_*``) | ``APIError`` | propagate |
    | anything else | as [`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error] | |
    """  # noqa: E501
    if not isinstance(error, Exception):
        raise TypeError(
            "classify_responses_error: error must be an Exception (cancellation is never "
            f"classified), got {error!r}"
        )
    import openai

    in_stream = not isinstance(
        error,
        openai.APIStatusError | openai.APIConnectionError | openai.APIResponseValidationError,
    )
    if isinstance(error, openai.APIError) and in_stream:
        code = error.code or ""
        if code in MODEL_LIMIT_ERROR_CODES:
            return ClassifiedError(
                RouteAction.NEXT_STAGE, error, reason=f"model cannot take the request ({code})"
            )
        if code in REQUEST_ERROR_CODES:
            return ClassifiedError(
                RouteAction.PROPAGATE, error, reason=f"response failed: request rejected ({code})"
            )
        return ClassifiedError(
            RouteAction.NEXT_CANDIDATE, error, reason=f"response failed ({code or 'unknown'})"
        )
    return classify_openai_error(error, candidate, cursor)
