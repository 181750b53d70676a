"""The transcript reader's less common shapes: read like the common ones, or refused by index.

Each test pins a branch that the mutation run (docs/explanation/testing.md) found
unguarded: the reader's fast paths must not swallow a shape they cannot read,
and the slow path must read every shape a host may legitimately pass.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from juno_bind_trio import TranscriptError
from juno_bind_trio.transcript import heal_transcript


def call(call_id: object) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def answer(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def test_a_user_message_that_is_not_a_dict_never_carries_calls() -> None:
    # Only an assistant message asks for tools; a stray `tool_calls` key on a
    # user message (read through the non-dict path) must not demand answers.
    user = MappingProxyType({"role": "user", "content": "hi", "tool_calls": [call("c1")]})
    result = heal_transcript([user])
    assert not result.changed
    assert [m.get("role") for m in result.messages] == ["user"]


def test_tool_calls_given_as_a_tuple_are_read_call_by_call() -> None:
    assistant = {"role": "assistant", "content": None, "tool_calls": (call("c1"), call("c2"))}
    result = heal_transcript([assistant, answer("c1")])
    assert result.changed
    answered = [m["tool_call_id"] for m in result.messages if m.get("role") == "tool"]
    assert answered == ["c1", "c2"]


def test_a_call_list_mixing_a_dict_with_junk_is_refused_at_the_junk() -> None:
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("c1"), "junk"]}
    with pytest.raises(TranscriptError, match=r"messages\[0\]\.tool_calls\[1\]"):
        heal_transcript([assistant])


def test_call_ids_mixing_strings_with_others_are_refused_at_the_first_bad_one() -> None:
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("c1"), call(5)]}
    with pytest.raises(TranscriptError, match=r"messages\[0\]\.tool_calls\[1\]"):
        heal_transcript([assistant])


def test_a_call_that_is_a_mapping_but_not_a_dict_is_read() -> None:
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [MappingProxyType(call("c1"))],
    }
    result = heal_transcript([assistant])
    answered = [m["tool_call_id"] for m in result.messages if m.get("role") == "tool"]
    assert answered == ["c1"]
