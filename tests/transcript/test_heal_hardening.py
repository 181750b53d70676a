"""heal_transcript on hostile input, on very wide turns, and the details its report promises."""

from __future__ import annotations

from typing import Any

import pytest
from transcript_checks import assert_provider_rule, assistant, synthesized, tool, user

from juno_bind_trio.transcript import HealChange, HealResult, TranscriptError, heal_transcript


@pytest.mark.parametrize(
    "role", [["x"], {"r": 1}, {"tool"}, bytearray(b"user"), 3, b"user", ("user",)]
)
def test_a_role_of_any_type_is_a_transcript_error_naming_the_index(role: Any) -> None:
    with pytest.raises(TranscriptError) as info:
        heal_transcript([user(), {"role": role, "content": "x"}])
    assert info.value.index == 1
    assert "heal_transcript: messages[1] has role " in str(info.value)


@pytest.mark.parametrize("entry", ["call_1", 7, None, ["id", "a"], ("a",)])
def test_a_tool_call_that_is_not_a_mapping_is_a_transcript_error(entry: Any) -> None:
    calls = [{"id": "a", "type": "function"}, entry]
    with pytest.raises(TranscriptError) as info:
        heal_transcript([user(), {"role": "assistant", "content": None, "tool_calls": calls}])
    assert info.value.index == 1
    assert "messages[1].tool_calls[1] must be a tool call dict" in str(info.value)


@pytest.mark.parametrize("bad_id", [["a"], {"a": 1}, 7, "", None])
def test_an_unusable_call_id_among_thousands_is_named_by_position(bad_id: Any) -> None:
    calls: list[Any] = [{"id": f"c{k}"} for k in range(5_000)]
    calls[4_321] = {"id": bad_id}
    with pytest.raises(TranscriptError) as info:
        heal_transcript([{"role": "assistant", "tool_calls": calls}])
    assert "messages[0].tool_calls[4321] must be" in str(info.value)


def test_a_repeated_call_id_among_thousands_is_refused_by_name() -> None:
    calls = [{"id": f"c{k}"} for k in range(5_000)] + [{"id": "c17"}]
    with pytest.raises(TranscriptError, match="two calls with id 'c17'") as info:
        heal_transcript([user(), {"role": "assistant", "tool_calls": calls}])
    assert info.value.index == 1


def test_a_message_nested_thousands_deep_is_named_without_recursing() -> None:
    deep: Any = "x"
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(TranscriptError) as info:
        heal_transcript([{"role": "assistant", "tool_calls": [deep]}])
    assert info.value.index == 0
    with pytest.raises(TranscriptError):
        heal_transcript([{"role": deep}])


def test_a_turn_of_forty_thousand_calls_heals_whole() -> None:
    ids = [f"call_{k}" for k in range(40_000)]
    messages = [
        user(),
        assistant(*ids),
        *(tool(i) for i in ids[0::2]),
        user("still there?"),
        *(tool(i, "late") for i in ids[1::4]),
    ]
    result = heal_transcript(messages)
    assert_provider_rule(result.messages)
    actions = [c.action for c in result.changes]
    assert actions.count("moved") == 10_000
    assert actions.count("synthesized") == 10_000
    # The block keeps the answers that were there, then the late ones and the
    # synthesized ones in the order the calls were made.
    block = result.messages[2 : 2 + 40_000]
    assert [m["tool_call_id"] for m in block[:20_000]] == ids[0::2]
    rest = [m["tool_call_id"] for m in block[20_000:]]
    assert rest == [i for k, i in enumerate(ids) if k % 2 == 1]
    assert block[20_000]["content"] == "late"
    assert block[20_001] == synthesized(ids[3], "interrupted")


# --- what the report promises -------------------------------------------------------


def test_of_two_late_answers_the_first_is_moved_and_the_second_dropped() -> None:
    first, second = tool("a", "first"), tool("a", "second")
    messages = [assistant("a"), user("hurry"), first, second]
    result = heal_transcript(messages)
    assert result.messages == [assistant("a"), first, user("hurry")]
    assert result.messages[1] is first
    assert result.changes == (
        HealChange(action="moved", tool_call_id="a", index=2, healed_index=1),
        HealChange(action="dropped_duplicate", tool_call_id="a", index=3, healed_index=None),
    )


def test_describe_says_where_a_moved_answer_was_and_went() -> None:
    result = heal_transcript([assistant("a", "b"), tool("b"), user(), tool("a")])
    (moved,) = result.changes
    assert moved.describe() == (
        "the answer to 'a' at messages[3] came after another message: "
        "moved beside its call, to healed[2]"
    )


def test_describe_says_which_duplicate_was_dropped() -> None:
    result = heal_transcript([assistant("a"), tool("a"), tool("a", "again")])
    (dropped,) = result.changes
    assert dropped.describe() == "messages[2] is a second answer to 'a': dropped"


def test_describe_says_what_was_synthesized_and_where() -> None:
    result = heal_transcript([assistant("a")])
    assert result.changes[0].describe() == (
        "call 'a' of messages[0] had no answer: added a 'interrupted' answer at healed[1]"
    )


def test_changed_is_true_exactly_when_something_changed() -> None:
    healed = heal_transcript([assistant("a")])
    assert healed.changed is True
    assert heal_transcript(healed.messages).changed is False
    assert HealResult(messages=[], changes=()).changed is False
