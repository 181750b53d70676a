"""How a failed tool call is classified, and the envelope its answer is written as.

A failed tool call still has to be answered in the transcript (every
``tool_call_id`` of an assistant message needs a ``tool`` message), and the
answer is read by two audiences: the model on its next turn and the host
(UI, retry policy, logs). Both need to tell failures apart *without matching
on the error string*, which is brittle and locale-dependent. So the loop
writes every failure as one small JSON envelope:

    {"success": false, "kind": "not_run", "error": "This call was never started, …"}

``kind`` is a [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind] when the failure has one
and is left out when it does not, exactly as the TypeScript package's loop does for an
ordinary failure. The two kinds the harness itself assigns are different
facts and must never be conflated: ``"not_run"`` (never started, nothing
changed, do not retry) and ``"interrupted"`` (started, cut off by a cancel,
its effect unknown: check before repeating).
"""

from __future__ import annotations

import json
from typing import Any

from juno_bind_trio._calls import tool_message
from juno_bind_trio._errors import (
    TOOL_FAILURE_KINDS,
    AbortedToolCallError,
    InterruptedToolCallError,
    ToolCallError,
    ToolFailureError,
    ToolFailureKind,
)

from ._validate import error_kind

__all__ = ["kind_for_error", "tool_error_text", "tool_failure_content", "tool_failure_message"]


def _check_kind(where: str, kind: object) -> ToolFailureKind | None:
    if kind is not None and not isinstance(kind, str):
        raise TypeError(f"{where}: kind must be None or a ToolFailureKind string, got {kind!r}")
    if kind is not None and kind not in TOOL_FAILURE_KINDS:
        raise ValueError(
            f"{where}: kind must be None or one of {sorted(TOOL_FAILURE_KINDS)}, got {kind!r}"
        )
    return kind  # type: ignore[return-value]


def tool_failure_content(error: str, kind: ToolFailureKind | None = None) -> str:
    """The JSON a failed call's ``tool`` message carries as its content.

    Key order ``success``, ``kind``, ``error``; ``kind`` is left out when it
    is ``None``. Written in ``JSON.stringify``'s compact form (no space after
    ``,`` or ``:``), byte for byte what the TypeScript package writes, so a
    host that stores or hashes transcripts from both gets the same bytes.
    Non-ASCII text is kept as it is (``ensure_ascii=False``, as
    ``JSON.stringify`` does): the reader is a model, and escapes only cost it
    tokens.

    :raises TypeError: *error* is not a string, or *kind* neither ``None`` nor a string.
    :raises ValueError: *kind* is a string but not a
        [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind].
    """
    if not isinstance(error, str):
        raise TypeError(f"tool_failure_content: error must be a string, got {error!r}")
    kind = _check_kind("tool_failure_content", kind)
    envelope: dict[str, Any] = {"success": False}
    if kind is not None:
        envelope["kind"] = kind
    envelope["error"] = error
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))


def tool_failure_message(
    tool_call_id: str, error: str, kind: ToolFailureKind | None = None
) -> dict[str, Any]:
    """The ``tool`` message answering a failed call: ``role``, ``tool_call_id``, ``content``.

    :raises TypeError: *tool_call_id* is not a string, or *error* not a string.
    :raises ValueError: *tool_call_id* is empty, or *kind* is not a
        [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind].
    """
    given: object = tool_call_id
    if not isinstance(given, str) or not given:
        raise error_kind(given, str)(
            f"tool_failure_message: tool_call_id must be a non-empty string, got {tool_call_id!r}"
        )
    if not isinstance(error, str):
        raise TypeError(f"tool_failure_message: error must be a string, got {error!r}")
    kind = _check_kind("tool_failure_message", kind)
    return tool_message(tool_call_id, tool_failure_content(error, kind))


def kind_for_error(exc: BaseException) -> ToolFailureKind | None:
    """The [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind] an exception stands for, or
    ``None`` for an ordinary failure.

    ``"not_run"`` for an [`AbortedToolCallError`][juno_bind_trio.AbortedToolCallError],
    ``"interrupted"`` for an [`InterruptedToolCallError`][juno_bind_trio.InterruptedToolCallError];
    otherwise the exception's own ``kind`` attribute if it is a valid kind
    ([`ToolFailureError`][juno_bind_trio.ToolFailureError] carries one, and so may a
    host's own exception), else ``None``. An unknown ``kind`` is ignored
    rather than trusted: a misspelt discriminant is worse than none.
    """
    if isinstance(exc, AbortedToolCallError):
        return "not_run"
    if isinstance(exc, InterruptedToolCallError):
        return "interrupted"
    try:
        kind = getattr(exc, "kind", None)
    except Exception:
        # A `kind` property that raises: the answer must still be written.
        return None
    if isinstance(kind, str) and kind in TOOL_FAILURE_KINDS:
        return kind  # type: ignore[return-value]
    return None


def tool_error_text(exc: BaseException) -> str:
    """The text a failed tool call's answer carries for *exc*: what the model reads.

    * A tool's own exception: ``"<ExceptionType>: <message>"``, for example
      ``KeyError: 'city'``. The type is half of what the model can act on;
      ``'city'`` alone says nothing.
    * An exception with an empty message: its type name alone
      (``"TimeoutError"``). The TypeScript package writes ``""`` here; this
      package differs on purpose, because an empty error leaves the model
      nothing to act on and the type is the one fact there is.
    * [`ToolFailureError`][juno_bind_trio.ToolFailureError]: its message as it is (even
      empty): the tool wrote that sentence for the model, and ``kind``
      carries the classification.
    * The harness's own [`AbortedToolCallError`][juno_bind_trio.AbortedToolCallError] and
      [`InterruptedToolCallError`][juno_bind_trio.InterruptedToolCallError]: their message as it
      is, the TypeScript package's exact sentence for a refusal.

    Never raises: an exception whose ``__str__`` fails (or returns something
    other than a string) is rendered by its type name, because the answer has
    to be written whatever the tool raised.
    """
    name = type(exc).__name__
    if isinstance(exc, ToolFailureError):
        message: object = exc.message
        return message if isinstance(message, str) else name
    try:
        text = str(exc)
    except Exception:
        return name
    if isinstance(exc, ToolCallError):
        return text
    return f"{name}: {text}" if text else name
