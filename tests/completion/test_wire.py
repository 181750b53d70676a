"""The wire form: exactly the TypeScript package's JSON, and a strict parser."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio import WireFormatError
from juno_bind_trio.completion import ResetEvent, TextEvent, event_from_wire


def test_text_event_wire_is_the_ts_object_key_for_key() -> None:
    event = TextEvent(turn_id="m1", epoch=0, seq=3, text="Hé")
    assert json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":")) == (
        '{"kind":"text","turnId":"m1","epoch":0,"seq":3,"text":"Hé"}'
    )


def test_reset_event_wire_is_the_ts_object_key_for_key() -> None:
    event = ResetEvent(turn_id="m1", epoch=1, seq=4, reason="structured_output_retry")
    assert json.dumps(event.to_wire(), separators=(",", ":")) == (
        '{"kind":"reset","turnId":"m1","epoch":1,"seq":4,"reason":"structured_output_retry"}'
    )


def test_kind_is_a_class_constant() -> None:
    assert TextEvent(turn_id="a", epoch=0, seq=0, text="").kind == "text"
    assert ResetEvent(turn_id="a", epoch=0, seq=0, reason="attempt_failed").kind == "reset"


events = st.one_of(
    st.builds(
        TextEvent,
        turn_id=st.text(min_size=1),
        epoch=st.integers(0, 2**40),
        seq=st.integers(0, 2**40),
        text=st.text(),
    ),
    st.builds(
        ResetEvent,
        turn_id=st.text(min_size=1),
        epoch=st.integers(0, 2**40),
        seq=st.integers(0, 2**40),
        reason=st.sampled_from(["attempt_failed", "structured_output_retry"]),
    ),
)


@given(events)
def test_round_trip_through_json(event: TextEvent | ResetEvent) -> None:
    encoded = json.dumps(event.to_wire())
    assert event_from_wire(json.loads(encoded)) == event
    assert type(event).from_wire(json.loads(encoded)) == event


GOOD: dict[str, Any] = {"kind": "text", "turnId": "m1", "epoch": 0, "seq": 0, "text": "x"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "delta"}, r"'kind' must be 'text' or 'reset', got 'delta'"),
        ({"turnId": ""}, r"'turnId' must be a non-empty string, got ''"),
        ({"turnId": 5}, r"'turnId' must be a non-empty string, got 5"),
        ({"epoch": -1}, r"'epoch' must be >= 0, got -1"),
        ({"seq": True}, r"'seq' must be an integer, got True \(bool\)"),
        ({"seq": 1.0}, r"'seq' must be an integer, got 1.0 \(float\)"),
        ({"epoch": math.nan}, r"'epoch' must be an integer, got nan"),
        ({"text": None}, r"'text' must be a string, got None"),
        ({"extra": 1}, r"unknown keys \['extra'\]"),
    ],
)
def test_malformed_input_is_rejected_naming_the_value(change: dict[str, Any], message: str) -> None:
    with pytest.raises(WireFormatError, match=message):
        event_from_wire({**GOOD, **change})


def test_missing_keys_and_bad_reason_and_non_objects() -> None:
    with pytest.raises(WireFormatError, match=r"missing \['seq'\]"):
        event_from_wire({k: v for k, v in GOOD.items() if k != "seq"})
    bad_reset = {"kind": "reset", "turnId": "m", "epoch": 0, "seq": 0, "reason": "because"}
    with pytest.raises(WireFormatError, match=r"'reason' must be one of .* got 'because'"):
        event_from_wire(bad_reset)
    with pytest.raises(WireFormatError, match=r"expected a JSON object, got list"):
        event_from_wire([1, 2])  # type: ignore[arg-type]
    with pytest.raises(WireFormatError, match=r"expected kind 'reset'"):
        ResetEvent.from_wire(GOOD)
    with pytest.raises(WireFormatError, match=r"expected kind 'text'"):
        TextEvent.from_wire({**bad_reset, "reason": "attempt_failed"})


def test_wire_format_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        event_from_wire({})
