"""The vocabulary of waiting tool calls: Approve, Deny, PendingToolCall, a tool's approval options.

``_approvals`` holds the gate that uses them.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, final

import attrs

from juno_bind_trio._pending import PendingKind, PendingToolCall, json_dict

if TYPE_CHECKING:
    from ._context import RunContext

__all__ = [
    "ApprovalPredicate",
    "Approve",
    "Deny",
    "PendingKind",
    "PendingToolCall",
    "check_approval_options",
]

ApprovalPredicate: TypeAlias = Callable[["RunContext[Any]", dict[str, Any]], bool | Awaitable[bool]]
"""``(ctx, arguments) -> bool`` (sync or async): whether this call needs an approval."""


def _approve_arguments(value: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else json_dict("Approve", value)


def _deny_reason(value: str) -> str:
    given: object = value
    if not isinstance(given, str) or not given.strip():
        raise TypeError(f"Deny: reason must be a non-blank string, got {given!r:.80}")
    return value


@final
@attrs.frozen
class Approve:
    """Approve a waiting call, optionally with corrected *arguments* (validated again).

    ``approvals={"c1": True}`` is ``approvals={"c1": Approve()}``. With
    *arguments*, the tool runs with them instead of the model's (they must
    validate against the tool's schema, or the decision is refused before
    anything changes), and its answer tells the model which arguments ran.
    """

    arguments: dict[str, Any] | None = attrs.field(default=None, converter=_approve_arguments)


@final
@attrs.frozen
class Deny:
    """Deny a waiting call: it is answered as a failure of kind ``"authz"`` with *reason*.

    ``approvals={"c1": False}`` is ``approvals={"c1": Deny()}``.
    """

    reason: str = attrs.field(default="denied", converter=_deny_reason)


def check_approval_options(
    owner: str,
    requires_approval: object,
    external: object,
    approval_timeout: object,
    repeatable: object,
) -> tuple[bool | ApprovalPredicate, bool, float | None, bool]:
    """The tool's approval options checked, and its repeatability resolved.

    ``requires_approval`` implies non-repeatable unless the tool says
    ``repeatable=True`` (given as ``None``: not said).
    """
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        raise TypeError(
            f"{owner}: requires_approval must be a bool or a predicate (ctx, arguments) -> bool, "
            f"got {requires_approval!r:.80}"
        )
    if not isinstance(external, bool):
        raise TypeError(f"{owner}: external must be a bool, got {external!r:.80}")
    if external and requires_approval is not False:
        raise ValueError(
            f"{owner}: a tool is either external (the host runs it) or requires_approval "
            "(it runs here once approved), not both"
        )
    timeout: float | None = None
    if approval_timeout is not None:
        if isinstance(approval_timeout, bool) or not isinstance(approval_timeout, int | float):
            raise TypeError(
                f"{owner}: approval_timeout must be a number of seconds or None, "
                f"got {approval_timeout!r:.80}"
            )
        if not math.isfinite(approval_timeout) or approval_timeout <= 0:
            raise ValueError(
                f"{owner}: approval_timeout must be a positive number of seconds, "
                f"got {approval_timeout!r}"
            )
        if requires_approval is False and not external:
            raise ValueError(
                f"{owner}: approval_timeout is for a tool that waits (requires_approval or "
                "external)"
            )
        timeout = float(approval_timeout)
    if repeatable is None:
        resolved = requires_approval is False
    elif isinstance(repeatable, bool):
        resolved = repeatable
    else:
        raise TypeError(f"{owner}: repeatable must be a bool, got {repeatable!r:.80}")
    predicate: bool | ApprovalPredicate = requires_approval
    return predicate, external, timeout, resolved
