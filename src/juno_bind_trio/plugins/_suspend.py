"""The human-in-the-loop suspend directive: a tool ends the run to wait for an answer.

Some calls cannot finish inside a run: an approval, a question only a person
can answer, a payment confirmed out of band. The tool returns a
[`SuspendDirective`][juno_bind_trio.plugins.SuspendDirective] on a *successful* result; the loop
records the batch's results as usual and ends the run as ``"suspended"``, and the host
persists the open call as awaiting an answer. When the answer arrives, the
host resumes the run by answering that ``tool_call_id`` in the transcript.

The directive ends the run; it does not cancel the batch. Other calls of the
same batch finish and are answered, because the transcript must be complete
before anything is persisted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from juno_bind_trio._validate import error_kind

__all__ = ["SuspendDirective"]


def _check_id(given: str) -> str:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, str) or not value:
        raise error_kind(value, str)(
            f"SuspendDirective: tool_call_id must be a non-empty string, got {value!r}"
        )
    return value


def _check_reason(given: str) -> str:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, str) or not value:
        raise error_kind(value, str)(
            f"SuspendDirective: reason must be a non-empty string, got {value!r}"
        )
    return value


def _check_payload(given: Mapping[str, Any]) -> dict[str, Any]:
    value: object = given  # checked at run time, whatever the type says
    if not isinstance(value, Mapping):
        raise TypeError(f"SuspendDirective: payload must be a mapping, got {value!r}")
    # It is persisted with the run and read back on resume: prove that now, and
    # keep a detached copy so the tool cannot change it after returning it.
    try:
        copied: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"SuspendDirective: payload must be JSON-serialisable ({exc}), got {value!r}"
        ) from None
    return copied


@attrs.frozen(kw_only=True)
class SuspendDirective:
    """End the run and record the call *tool_call_id* as awaiting an answer.

    ``SuspendDirective(tool_call_id=..., reason=..., payload={})``.

    *tool_call_id* is the open call whose answer the run waits for (usually
    the call that returned the directive). *reason* says why, for the person
    or system that must answer (for example ``"approval required: transfer
    of 500 EUR"``). *payload* is what the host needs to ask and to resume
    (the question, the choices, a form id): a JSON-serialisable mapping,
    kept as a detached copy.
    """

    tool_call_id: str = attrs.field(converter=_check_id)
    reason: str = attrs.field(converter=_check_reason)
    # Left out of the hash (a dict is unhashable) but compared by ==, so equal
    # directives still hash alike.
    payload: dict[str, Any] = attrs.field(factory=dict, converter=_check_payload, hash=False)
