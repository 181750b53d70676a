"""The structured-output retry loop, composed with the turn text stream.

A completion can succeed as far as routing is concerned and still be useless
to a host that asked for JSON. Re-asking is not a routing decision (the
endpoint did nothing wrong that another endpoint would do better), so it runs
in the caller's own loop, around the route executor, not inside it.

On a live surface the malformed JSON has already been streamed to the
reader. The re-ask must *replace* it, not follow it, and the reader (or the
client code) should be able to tell why the text vanished. So every re-ask
opens its attempt with ``stream.begin_attempt("structured_output_retry")``
before the routed turn runs again. The attempt function inside the executor
then opens the same attempt again, with no reason; the turn text stream keeps
the explicit reason through that second call, so the reset that reaches the
wire says ``"structured_output_retry"`` rather than ``"attempt_failed"``.

Two mistakes this helper exists to prevent:

* opening the **first** attempt with the retry reason (there is nothing to
  retract yet, and a reason armed then would be spent on the first ordinary
  routing failure, mislabelling it);
* building the stream **inside** the loop, which never sees a second attempt
  and so never resets. The stream is the caller's, passed in, and
  ``finish()`` stays the caller's too, because the turn may go on after the
  structured answer (the loop may persist it, or call tools).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

from juno_bind_trio._errors import StructuredOutputError
from juno_bind_trio._validate import count, shown

from ._defects import (
    DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES,
    CompletionOutputs,
    ResponseFormatShape,
    expects_json_output,
    structured_output_parses,
)
from ._text_stream import TurnTextStream

__all__ = ["retry_structured_output"]

OutputsT = TypeVar("OutputsT", bound=CompletionOutputs)

_PREVIEW = 120


def _check_max_retries(value: object) -> int:
    return count().check("retry_structured_output: max_retries", value)


async def retry_structured_output(
    produce: Callable[[OutputsT | None], Awaitable[OutputsT]],
    *,
    response_format: ResponseFormatShape,
    stream: TurnTextStream | None = None,
    max_retries: int = DEFAULT_STRUCTURED_OUTPUT_MAX_RETRIES,
) -> OutputsT:
    """Run a turn until its output parses as the JSON *response_format* asks for.

    *produce* runs one whole turn (typically the route executor around your
    attempt function) and returns its outputs: anything with ``content`` and
    ``tool_calls``, such as [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult]. It
    is called with ``None`` the first time and with the rejected outputs on
    each re-ask, so it can tell the model what was wrong. Its attempt
    function opens each attempt on *stream* as usual.

    Before each **re-ask** (never before the first call) this opens the
    attempt on *stream* with reason ``"structured_output_retry"``, so a
    retractable surface replaces the rejected JSON with the new answer.

    Returns the first outputs that
    [`structured_output_parses()`][juno_bind_trio.completion.structured_output_parses]; a format
    that does not ask for JSON returns the first outputs as they are. After ``max_retries`` re-asks
    (``1 + max_retries`` turns) raises
    [`StructuredOutputError`][juno_bind_trio.StructuredOutputError] carrying the last content.
    Failures of *produce* propagate unchanged, cancellation included, and end the loop. The caller
    still calls ``stream.finish(...)``.
    """
    retries = _check_max_retries(max_retries)
    if not callable(produce):
        raise TypeError(f"retry_structured_output: produce must be callable, got {produce!r}")
    if stream is not None and not isinstance(stream, TurnTextStream):
        raise TypeError(
            f"retry_structured_output: stream must be a TurnTextStream or None, got {stream!r}"
        )
    # Validates the format up front, so a typo fails before the first model call.
    if not expects_json_output(response_format):
        return await _produce(produce, None)
    rejected: OutputsT | None = None
    for _ in range(retries + 1):
        if rejected is not None and stream is not None:
            stream.begin_attempt("structured_output_retry")
        outputs = await _produce(produce, rejected)
        if structured_output_parses(outputs, response_format):
            return outputs
        rejected = outputs
    assert rejected is not None
    content = rejected.content
    if content is None:
        shown = "no content"
    elif len(content) > _PREVIEW:
        shown = f"{content[:_PREVIEW]!r}... ({len(content)} characters)"
    else:
        shown = repr(content)
    raise StructuredOutputError(
        f"no output parsed as the requested JSON in {retries + 1} attempts; the last was {shown}",
        retries + 1,
        content,
    )


def _produce(
    produce: Callable[[OutputsT | None], Awaitable[OutputsT]], rejected: OutputsT | None
) -> Awaitable[OutputsT]:
    # A produce that is not async would fail at the await with Python's own
    # "can't be used in 'await' expression", naming nothing of ours.
    result: object = produce(rejected)
    if not inspect.isawaitable(result):
        raise TypeError(
            "retry_structured_output: produce must be an async callable (its call must "
            f"return an awaitable), got {produce!r} returning {shown(result)}"
        )
    return result
