"""A model's reasoning as it streams: the event a surface shows its thinking from.

Reasoning is not the answer: routing's fallback decision is about text the
reader cannot be shown twice, and a model's thinking is withdrawn with the
text when an attempt is abandoned (a reset retracts it too). So it travels as
its own event, to a sink that asks for it (one with an ``emit_reasoning``
method), under the text's attempt rules: the next attempt's first byte sends
the reset that withdraws it, and on a *permanent* sink it is output like
text (shown there, it cannot be taken back, so it latches
``produced_output``). For the stream watchdog a reasoning delta is liveness,
never the answer's first token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

import attrs

from juno_bind_trio._errors import WireFormatError

__all__ = ["ReasoningEvent"]

_KEYS: Final = frozenset({"kind", "turnId", "epoch", "text"})


@attrs.frozen
class ReasoningEvent:
    """A piece of the current attempt's reasoning (thinking) for turn *turn_id*.

    *epoch* names the attempt, as on a [TextEvent][juno_bind_trio.completion.TextEvent]; a
    [ResetEvent][juno_bind_trio.completion.ResetEvent] of the turn withdraws every earlier
    reasoning event with its text.
    """

    kind: ClassVar[Literal["reasoning"]] = "reasoning"
    turn_id: str
    epoch: int
    text: str

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "reasoning", "turnId", "epoch", "text"}``."""
        return {"kind": "reasoning", "turnId": self.turn_id, "epoch": self.epoch, "text": self.text}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ReasoningEvent:
        """Parse the wire object of a reasoning event; raise
        [`WireFormatError`][juno_bind_trio.WireFormatError] naming what is wrong."""
        if not isinstance(data, Mapping):
            raise WireFormatError(f"ReasoningEvent.from_wire: expected a JSON object, got {data!r}")
        if data.get("kind") != "reasoning":
            raise WireFormatError(
                f"ReasoningEvent.from_wire: expected kind 'reasoning', got {data.get('kind')!r}"
            )
        keys = set(data)
        if keys != _KEYS:
            raise WireFormatError(
                f"ReasoningEvent.from_wire: expected the keys {sorted(_KEYS)!r}, "
                f"got {sorted(keys)!r}"
            )
        turn_id, epoch, text = data["turnId"], data["epoch"], data["text"]
        if not isinstance(turn_id, str) or not turn_id:
            raise WireFormatError(
                f"ReasoningEvent.from_wire: 'turnId' must be a non-empty string, got {turn_id!r}"
            )
        if type(epoch) is not int or epoch < 0:
            raise WireFormatError(
                f"ReasoningEvent.from_wire: 'epoch' must be a non-negative integer, got {epoch!r}"
            )
        if not isinstance(text, str):
            raise WireFormatError(
                f"ReasoningEvent.from_wire: 'text' must be a string, got {text!r}"
            )
        return cls(turn_id=turn_id, epoch=epoch, text=text)
