"""``_transfers.in_charge`` (the store's quick read) agrees with ``last_handoff`` everywhere."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio._transfers import in_charge, last_handoff

_IDS = st.sampled_from(["a", "b", "c"])
_NAMES = st.sampled_from(["triage", "billing", None])


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "call", "marker", "answer", "odd"]))
    if kind == "user":
        return {"role": "user", "content": "hi"}
    if kind == "call":
        named = draw(st.booleans())
        function: Any = {"name": "transfer_to_x", "arguments": "{}"} if named else "x"
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": draw(_IDS), "type": "function", "function": function}],
        }
    if kind == "marker":
        data: dict[str, Any] = {
            "transferred_to": draw(_NAMES) or "billing",
            "transferred_from": draw(_NAMES),
        }
        if draw(st.booleans()):
            data["in_charge"] = True
        return {"role": "tool", "tool_call_id": draw(_IDS), "content": json.dumps(data)}
    if kind == "answer":
        return {"role": "tool", "tool_call_id": draw(_IDS), "content": '{"transferred_to": 3}'}
    return {"role": "tool", "tool_call_id": draw(_IDS), "content": "{not json transferred_to"}


@given(st.lists(_message(), max_size=12))
def test_in_charge_is_the_last_handoffs_agent(messages: list[dict[str, Any]]) -> None:
    last = last_handoff(messages)
    expected = None if last is None else (last.to_agent if last.switched else last.from_agent)
    assert in_charge(messages) == expected
