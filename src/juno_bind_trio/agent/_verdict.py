"""What a guardrail answers: [GuardrailResult][juno_bind_trio.agent.GuardrailResult]."""

from __future__ import annotations

from typing import Any

import attrs

from juno_bind_trio._validate import a_bool, a_str, optional

__all__ = ["GuardrailResult"]


@attrs.frozen
class GuardrailResult:
    """What a guardrail found: ``GuardrailResult(tripwire=True, info=..., message=...)``.

    * *tripwire*: ``True`` ends the run (or, for an output guardrail with
      ``on_trip="reask"``, asks the model again).
    * *info*: anything the host wants back on
      [GuardrailTripped][juno_bind_trio.GuardrailTripped] (a score, the rule that matched).
    * *message*: what the error says, and what a re-ask tells the model.
    """

    tripwire: bool = attrs.field(validator=a_bool())
    info: Any = None
    message: str | None = attrs.field(default=None, validator=optional(a_str()), kw_only=True)
