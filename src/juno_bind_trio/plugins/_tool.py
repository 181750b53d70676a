"""What a tool is, how its failure is classified, and the envelope a failure is written as.

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

import copy
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal, cast, get_args

import attrs

from juno_bind_trio._calls import tool_message
from juno_bind_trio._errors import (
    AbortedToolCallError,
    InterruptedToolCallError,
    ToolCallError,
    ToolFailureError,
)
from juno_bind_trio._validate import is_async_callable

__all__ = [
    "TOOL_FAILURE_KINDS",
    "ToolDef",
    "ToolFailureKind",
    "ToolHandler",
    "kind_for_error",
    "tool_error_text",
    "tool_failure_content",
    "tool_failure_message",
]

ToolFailureKind = Literal[
    "authz", "validation", "not_found", "conflict", "external", "not_run", "system", "interrupted"
]
"""Why a tool call failed, as a discriminant a model or a host can act on.

* ``"authz"``: the caller may not do this.
* ``"validation"``: the arguments are wrong; fixing them may help.
* ``"not_found"``: what the call names does not exist.
* ``"conflict"``: the target's state forbids it now (a version mismatch, a duplicate).
* ``"external"``: a service the tool depends on failed.
* ``"not_run"``: the harness refused the call before it started; nothing
  happened and nothing changed ([`AbortedToolCallError`][juno_bind_trio.AbortedToolCallError]).
* ``"system"``: the tool or the harness is broken.
* ``"interrupted"``: this port's addition: the call started and a cancel cut
  it off, so whether it took effect is unknown
  ([`InterruptedToolCallError`][juno_bind_trio.InterruptedToolCallError]). Not ``"not_run"``:
  a resumed run must check before repeating it, not assume nothing happened.

Tools should set it explicitly, by raising
[`ToolFailureError`][juno_bind_trio.ToolFailureError].
"""

TOOL_FAILURE_KINDS: Final[frozenset[str]] = frozenset(get_args(ToolFailureKind))
"""Every [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind], for checking a value at run
time."""

ToolHandler = Callable[..., Awaitable[Any]]
"""An async callable that executes a tool; the host's dispatcher decides its arguments
(typically the parsed call arguments)."""

# The function-name rule of OpenAI-compatible APIs. Checked here so a bad name
# fails where the tool is defined, not as a 400 on the first request that
# offers it, far from the code that named it.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


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

    :raises TypeError: *tool_call_id* is not a non-empty string, or *error* not a string.
    :raises ValueError: *kind* is not a [`ToolFailureKind`][juno_bind_trio.plugins.ToolFailureKind].
    """
    given: object = tool_call_id
    if not isinstance(given, str) or not given:
        raise TypeError(
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


def _check_name(given: str) -> str:
    name: object = given  # checked at run time, whatever the type says
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(
            "ToolDef: name must be 1 to 64 letters, digits, '_' or '-' "
            f"(the function-name rule of OpenAI-compatible APIs), got {name!r}"
        )
    return name


def _check_description(given: str) -> str:
    description: object = given  # checked at run time, whatever the type says
    if not isinstance(description, str):
        raise TypeError(f"ToolDef: description must be a string, got {description!r}")
    return description


def _check_parameters(given: Mapping[str, Any]) -> dict[str, Any]:
    parameters: object = given  # checked at run time, whatever the type says
    if not isinstance(parameters, Mapping):
        raise TypeError(f"ToolDef: parameters must be a JSON-schema mapping, got {parameters!r}")
    # Function parameters are always an object: a schema of any other type is
    # rejected by every provider, at request time.
    if parameters.get("type", "object") != "object":
        raise ValueError(
            "ToolDef: parameters must describe an object "
            f'(type "object"), got type {parameters.get("type")!r}'
        )
    # A JSON round trip both proves the schema can be sent and detaches it
    # from the caller's dict, so a later edit there cannot change this tool.
    try:
        copied: dict[str, Any] = json.loads(json.dumps(parameters, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"ToolDef: parameters must be JSON-serialisable ({exc}), got {parameters!r}"
        ) from None
    return copied


def _check_handler(given: ToolHandler) -> ToolHandler:
    handler: object = given  # checked at run time, whatever the type says
    if not is_async_callable(handler):
        # A sync function that slips through would fail on every call, as a
        # tool failure far from here; refuse it where the tool is defined.
        raise TypeError(f"ToolDef: handler must be an async function, got {handler!r}")
    return cast("ToolHandler", handler)


def _check_runs_serially(given: bool) -> bool:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, bool):
        raise TypeError(f"ToolDef: runs_serially must be a bool, got {value!r}")
    return value


def _check_idempotent(given: bool) -> bool:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, bool):
        raise TypeError(f"ToolDef: idempotent must be a bool, got {value!r}")
    return value


@attrs.frozen(kw_only=True, eq=False)
class ToolDef:
    """A tool a model may call: its name, description, argument schema and handler.

    ``ToolDef(name=..., description=..., parameters=..., handler=...,
    runs_serially=False, idempotent=False)``, every field checked here.

    *parameters* is the JSON schema of the arguments (an ``"object"``
    schema); a detached copy is kept. *handler* is an async callable.

    *runs_serially*: calls to this tool must run one at a time, before the
    rest of the batch (an activation that changes which tools exist, a tool
    that is not safe to run alongside itself). The loop's ``runs_serially``
    predicate can read it.

    *idempotent*: its effect is safe to repeat. What a resumed run may do
    with a call left ``"interrupted"``: repeat an idempotent one, and check
    any other before repeating it.

    Compared and hashed by identity: two definitions with equal fields are
    still two tools.
    """

    name: str = attrs.field(converter=_check_name)
    description: str = attrs.field(converter=_check_description)
    parameters: dict[str, Any] = attrs.field(converter=_check_parameters)
    handler: ToolHandler = attrs.field(converter=_check_handler)
    runs_serially: bool = attrs.field(default=False, converter=_check_runs_serially)
    idempotent: bool = attrs.field(default=False, converter=_check_idempotent)

    def to_openai_tool(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry, ``{"type": "function", "function": {…}}``.

        Built fresh each time (the schema is copied too), so a caller may
        edit the result; provider dialects are ``juno_bind_trio.schema``'s job.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }
