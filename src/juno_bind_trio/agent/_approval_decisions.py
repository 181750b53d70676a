"""What was decided for a waiting tool call: the keywords read as decisions, and each one's answer.

``approvals=``, ``results=`` and ``errors=`` (given to
[Agent.run][juno_bind_trio.agent.Agent.run] or
[Agent.resume][juno_bind_trio.agent.Agent.resume]) become one decision per call id
here; the gate (``_approvals``) applies them, and a decision other than an
approval is answered with the message built here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pydantic_core

from juno_bind_trio._errors import UsageError
from juno_bind_trio._pending import CallDecision
from juno_bind_trio._validate import error_kind
from juno_bind_trio.plugins import tool_failure_message
from juno_bind_trio.run import tool_message

from ._approval_types import Approve, Deny

__all__ = [
    "APPROVAL_DENIED_MESSAGE",
    "APPROVAL_TIMED_OUT_MESSAGE",
    "Decision",
    "decision_message",
    "read_decisions",
]


APPROVAL_DENIED_MESSAGE: Final = "The call was denied by the person reviewing it, and was not run"
"""What a denied call's answer says before the reason (``kind: "authz"``)."""

APPROVAL_TIMED_OUT_MESSAGE: Final = (
    "The call was denied: no decision was made before its deadline, and it was not run"
)
"""What a call whose approval deadline passed is answered (``kind: "authz"``)."""


Decision = CallDecision  # the agent's name for it: what was decided for one waiting call


def decision_message(decision: CallDecision, call_id: str) -> dict[str, Any]:
    """The tool message answering a decided call (for every kind but ``"approved"``)."""
    if decision.kind == "denied":
        return tool_failure_message(
            call_id, f"{APPROVAL_DENIED_MESSAGE}: {decision.answer}", "authz"
        )
    if decision.kind == "expired":
        return tool_failure_message(call_id, f"{APPROVAL_TIMED_OUT_MESSAGE}.", "authz")
    if decision.kind == "error":
        return tool_failure_message(call_id, str(decision.answer), "external")
    assert decision.kind == "result"
    value = decision.answer
    content = value if type(value) is str else pydantic_core.to_json(value).decode()
    return tool_message(call_id, content)


def read_decisions(
    owner: str,
    approvals: object,
    results: object,
    errors: object,
    principal: object,
) -> dict[str, Decision]:
    """The keywords ``approvals=``, ``results=``, ``errors=`` as one decision per call id."""
    if principal is not None and (not isinstance(principal, str) or not principal):
        raise error_kind(principal, str)(
            f"{owner}: principal must be a non-empty str or None, got {principal!r:.80}"
        )
    who = principal
    decided: dict[str, Decision] = {}

    def add(call_id: object, decision: Decision, keyword: str) -> None:
        if not isinstance(call_id, str) or not call_id:
            raise error_kind(call_id, str)(
                f"{owner}: {keyword} keys must be tool call ids, got {call_id!r:.80}"
            )
        if call_id in decided:
            raise UsageError(f"{owner}: call {call_id!r} is decided twice ({keyword} and another)")
        decided[call_id] = decision

    for keyword, given in (("approvals", approvals), ("results", results), ("errors", errors)):
        if given is not None and not isinstance(given, Mapping):
            raise TypeError(f"{owner}: {keyword} must be a dict by call id, got {given!r:.80}")
    for call_id, value in (approvals or {}).items():  # type: ignore[attr-defined]
        if value is True:
            decision = Decision(kind="approved", principal=who)
        elif value is False:
            decision = Decision(kind="denied", answer="denied", principal=who)
        elif isinstance(value, Approve):
            decision = Decision(kind="approved", arguments=value.arguments, principal=who)
        elif isinstance(value, Deny):
            decision = Decision(kind="denied", answer=value.reason, principal=who)
        else:
            raise TypeError(
                f"{owner}: approvals[{call_id!r}] must be True, False, Approve(...) or "
                f"Deny(...), got {value!r:.80}"
            )
        add(call_id, decision, "approvals")
    for call_id, value in (results or {}).items():  # type: ignore[attr-defined]
        try:
            pydantic_core.to_json(value)
        except pydantic_core.PydanticSerializationError as exc:
            raise TypeError(
                f"{owner}: results[{call_id!r}] cannot be written as JSON ({exc})"
            ) from None
        add(call_id, Decision(kind="result", answer=value, principal=who), "results")
    for call_id, value in (errors or {}).items():  # type: ignore[attr-defined]
        if not isinstance(value, str) or not value:
            raise error_kind(value, str)(
                f"{owner}: errors[{call_id!r}] must be a non-empty str, got {value!r:.80}"
            )
        add(call_id, Decision(kind="error", answer=value, principal=who), "errors")
    return decided
