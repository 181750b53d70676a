"""Tool calls that wait, as plain values: a waiting call, and what was decided for it.

A root module, below every subpackage: the agent makes these values (its
approval gate holds calls and reads decisions) and the store keeps them
(``RunStore.pending_calls``, ``RunStore.decide_calls``), and neither layer
may import the other. The public homes are ``juno_bind_trio.agent``
([PendingToolCall][juno_bind_trio.agent.PendingToolCall]) and
``juno_bind_trio.store`` ([CallDecision][juno_bind_trio.store.CallDecision]).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, final

import attrs

__all__ = [
    "DECISION_KINDS",
    "CallDecision",
    "DecisionKind",
    "PendingKind",
    "PendingToolCall",
    "json_dict",
]


def json_dict(owner: str, value: object) -> dict[str, Any]:
    """*value*, a mapping, as a JSON-compatible ``dict`` (a copy). :raises TypeError:"""
    if not isinstance(value, Mapping):
        raise TypeError(f"{owner}: arguments must be a dict, got {value!r:.80}")
    try:
        copied: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{owner}: arguments must be JSON-serialisable ({exc})") from None
    return copied


PendingKind: TypeAlias = Literal["approval", "external"]
"""Why a call waits: ``"approval"`` (a person decides) or ``"external"`` (the host runs it)."""


def _check_expiry(value: float | None) -> float | None:
    given: object = value
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, int | float) or not math.isfinite(given):
        raise TypeError(
            f"PendingToolCall: expires_at must be a finite number or None, got {given!r}"
        )
    return float(given)


def _check_kind(value: str) -> PendingKind:
    if value not in ("approval", "external"):
        raise ValueError(f"PendingToolCall: kind must be 'approval' or 'external', got {value!r}")
    return value  # type: ignore[return-value]  # checked just above


def _text(field: str, value: str) -> str:
    given: object = value
    if not isinstance(given, str) or not given:
        raise TypeError(f"PendingToolCall: {field} must be a non-empty string, got {given!r}")
    return value


def _check_id(value: str) -> str:
    return _text("id", value)


def _check_name(value: str) -> str:
    return _text("name", value)


def _pending_arguments(value: dict[str, Any]) -> dict[str, Any]:
    return json_dict("PendingToolCall", value)


@final
@attrs.frozen
class PendingToolCall:
    """A tool call the run waits on: ``PendingToolCall(id, name, arguments, kind, expires_at)``.

    * *id*: the call's id: the key of ``approvals=``, ``results=``, ``errors=``;
    * *name*: the tool;
    * *arguments*: the validated arguments, a JSON-compatible ``dict``;
    * *kind*: ``"approval"`` (a person decides) or ``"external"`` (the host
      runs it and supplies its result);
    * *expires_at*: when an undecided approval is answered as denied (timed
      out) on the next continuation, in seconds of the store's clock (of
      ``time.time()`` for a run without a store); ``None``: never.
    """

    id: str = attrs.field(converter=_check_id)
    name: str = attrs.field(converter=_check_name)
    arguments: dict[str, Any] = attrs.field(converter=_pending_arguments, hash=False)
    kind: PendingKind = attrs.field(default="approval", converter=_check_kind)
    expires_at: float | None = attrs.field(default=None, converter=_check_expiry)

    def to_json(self) -> dict[str, Any]:
        """The call as a JSON object (what the placeholder answer and the store keep)."""
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "kind": self.kind,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PendingToolCall:
        """The call written by ``to_json``."""
        return cls(
            value["id"], value["name"], value["arguments"], value["kind"], value.get("expires_at")
        )


DecisionKind: TypeAlias = Literal["approved", "denied", "result", "error", "expired"]
"""What became of a waiting call: ``"approved"`` (it runs), ``"denied"``, ``"result"`` or
``"error"`` (an external call answered by the host), ``"expired"`` (its deadline passed)."""

DECISION_KINDS: frozenset[str] = frozenset(DecisionKind.__args__)  # type: ignore[attr-defined]


def _check_decision_kind(value: str) -> DecisionKind:
    given: object = value
    if not isinstance(given, str) or given not in DECISION_KINDS:
        raise ValueError(
            f"CallDecision: kind must be one of {sorted(DECISION_KINDS)}, got {value!r}"
        )
    return value  # type: ignore[return-value]  # checked just above


def _decided_arguments(value: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else json_dict("CallDecision", value)


def _check_principal(value: str | None) -> str | None:
    given: object = value
    if given is not None and (not isinstance(given, str) or not given):
        raise TypeError(f"CallDecision: principal must be a non-empty str or None, got {given!r}")
    return value


def _check_decided_at(value: float | None) -> float | None:
    given: object = value
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, int | float) or not math.isfinite(given):
        raise TypeError(f"CallDecision: decided_at must be a finite number or None, got {given!r}")
    return float(given)


@final
@attrs.frozen(kw_only=True)
class CallDecision:
    """What was decided for one waiting call, by whom and when: the audit a store keeps.

    * *kind*: a [DecisionKind][juno_bind_trio.store.DecisionKind];
    * *arguments*: the corrected arguments an approval ran with (validated),
      or ``None`` (the model's ran);
    * *answer*: a denial's reason, an external result's value (any JSON
      value), an external error's text; ``None`` otherwise;
    * *principal*: who decided (``Agent.resume(..., principal=...)``), or
      ``None`` when nobody said (and for an expiry);
    * *decided_at*: when, in seconds of the store's clock (an expiry: the
      deadline); ``None`` until a store records it.
    """

    kind: DecisionKind = attrs.field(converter=_check_decision_kind)
    arguments: dict[str, Any] | None = attrs.field(
        default=None, converter=_decided_arguments, hash=False
    )
    answer: Any = attrs.field(default=None, hash=False)
    principal: str | None = attrs.field(default=None, converter=_check_principal)
    decided_at: float | None = attrs.field(default=None, converter=_check_decided_at)
