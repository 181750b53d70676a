"""The two events a turn text stream sends, and their wire form.

The wire form is the TypeScript package's JSON object, key for key, so a
browser client written against ``@juno-ai/bind`` renders a Python host
unchanged:

    {"kind": "text",  "turnId": "m1", "epoch": 0, "seq": 0, "text": "Hel"}
    {"kind": "reset", "turnId": "m1", "epoch": 1, "seq": 4, "reason": "attempt_failed"}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, TypeAlias

import attrs

from juno_bind_trio._errors import WireFormatError

__all__ = [
    "RESET_REASONS",
    "ResetEvent",
    "TextEvent",
    "TurnResetReason",
    "TurnStreamEvent",
    "event_from_wire",
]

TurnResetReason: TypeAlias = Literal["attempt_failed", "structured_output_retry", "guardrail"]
"""Why the surface is told to discard what it rendered.

``"attempt_failed"``: the previous attempt failed and routing moved on (same
endpoint, next provider, fallback model). ``"structured_output_retry"``: the
previous attempt succeeded but its output was rejected and re-asked.
``"guardrail"``: an agent's guardrail tripped and withdrew the text (the
run raises ``GuardrailTripped``, or the model is asked again).
"""

RESET_REASONS: Final[frozenset[str]] = frozenset(
    {"attempt_failed", "structured_output_retry", "guardrail"}
)


@attrs.frozen
class TextEvent:
    """A piece of the current attempt's assistant text.

    ``turn_id`` scopes everything else: ``seq`` is monotonic within the turn and
    never restarts (an ordering and de-duplication key), ``epoch`` names the
    attempt that produced the text and only ever increases. Both restart on the
    next turn, which is why the turn id travels on every event.
    """

    kind: ClassVar[Literal["text"]] = "text"
    turn_id: str
    epoch: int
    seq: int
    text: str

    def to_wire(self) -> dict[str, Any]:
        """The TypeScript package's JSON object for this event."""
        return {
            "kind": "text",
            "turnId": self.turn_id,
            "epoch": self.epoch,
            "seq": self.seq,
            "text": self.text,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> TextEvent:
        """Parse the wire object of a text event; raise
        [`WireFormatError`][juno_bind_trio.WireFormatError] if malformed."""
        event = event_from_wire(data)
        if not isinstance(event, TextEvent):
            raise WireFormatError(f"TextEvent.from_wire: expected kind 'text', got {data!r}")
        return event


@attrs.frozen
class ResetEvent:
    """An instruction to discard everything rendered for this turn so far.

    Sent lazily, on the first text of the attempt that replaces the discarded
    one (or by ``finish("succeeded")`` if that attempt never produced text).
    """

    kind: ClassVar[Literal["reset"]] = "reset"
    turn_id: str
    epoch: int
    seq: int
    reason: TurnResetReason

    def to_wire(self) -> dict[str, Any]:
        """The TypeScript package's JSON object for this event."""
        return {
            "kind": "reset",
            "turnId": self.turn_id,
            "epoch": self.epoch,
            "seq": self.seq,
            "reason": self.reason,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ResetEvent:
        """Parse the wire object of a reset event; raise
        [`WireFormatError`][juno_bind_trio.WireFormatError] if malformed."""
        event = event_from_wire(data)
        if not isinstance(event, ResetEvent):
            raise WireFormatError(f"ResetEvent.from_wire: expected kind 'reset', got {data!r}")
        return event


TurnStreamEvent: TypeAlias = TextEvent | ResetEvent
"""One event bound for the user's surface."""

_TEXT_KEYS: Final = frozenset({"kind", "turnId", "epoch", "seq", "text"})
_RESET_KEYS: Final = frozenset({"kind", "turnId", "epoch", "seq", "reason"})


def _wire_int(data: Mapping[str, Any], key: str, *, minimum: int) -> int:
    value = data[key]
    # bool is an int subclass, and JSON true is never a counter; a float such
    # as 1.0 is refused too, because the TS side only ever sends integers.
    if type(value) is not int:
        if isinstance(value, float) and not math.isfinite(value):
            shown = repr(value)
        else:
            shown = f"{value!r} ({type(value).__name__})"
        raise WireFormatError(f"event_from_wire: {key!r} must be an integer, got {shown}")
    if value < minimum:
        raise WireFormatError(f"event_from_wire: {key!r} must be >= {minimum}, got {value!r}")
    return value


def event_from_wire(data: Mapping[str, Any]) -> TurnStreamEvent:
    """Parse one wire object (already JSON-decoded) into a
    [`TurnStreamEvent`][juno_bind_trio.completion.TurnStreamEvent].

    Strict on purpose: every key of the kind must be present with the right
    type, and no other key may appear, so a message from a different protocol
    (or a different version of this one) fails loudly here instead of
    rendering as garbage. Raises [`WireFormatError`][juno_bind_trio.WireFormatError]
    naming the offending key and value.
    """
    if not isinstance(data, Mapping):
        raise WireFormatError(
            f"event_from_wire: expected a JSON object, got {type(data).__name__}: {data!r}"
        )
    kind = data.get("kind")
    if kind == "text":
        expected = _TEXT_KEYS
    elif kind == "reset":
        expected = _RESET_KEYS
    else:
        raise WireFormatError(f"event_from_wire: 'kind' must be 'text' or 'reset', got {kind!r}")
    keys = set(data)
    missing = expected - keys
    if missing:
        raise WireFormatError(
            f"event_from_wire: {kind} event is missing {sorted(missing)!r}: {dict(data)!r}"
        )
    extra = keys - expected
    if extra:
        raise WireFormatError(
            f"event_from_wire: {kind} event has unknown keys {sorted(extra)!r}: {dict(data)!r}"
        )
    turn_id = data["turnId"]
    if not isinstance(turn_id, str) or turn_id == "":
        raise WireFormatError(
            f"event_from_wire: 'turnId' must be a non-empty string, got {turn_id!r}"
        )
    epoch = _wire_int(data, "epoch", minimum=0)
    seq = _wire_int(data, "seq", minimum=0)
    if kind == "text":
        text = data["text"]
        if not isinstance(text, str):
            raise WireFormatError(f"event_from_wire: 'text' must be a string, got {text!r}")
        return TextEvent(turn_id=turn_id, epoch=epoch, seq=seq, text=text)
    reason = data["reason"]
    if reason not in RESET_REASONS:
        raise WireFormatError(
            f"event_from_wire: 'reason' must be one of {sorted(RESET_REASONS)!r}, got {reason!r}"
        )
    return ResetEvent(turn_id=turn_id, epoch=epoch, seq=seq, reason=reason)
