"""heal_transcript: one test per repair, per refusal, and per promise about what it leaves alone."""

from __future__ import annotations

import copy
import pickle
import types
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessageParam
from transcript_checks import (
    assert_provider_rule,
    assistant,
    envelope,
    synthesized,
    system,
    tool,
    user,
)

from juno_bind_trio import ABORTED_TOOL_CALL_MESSAGE, INTERRUPTED_TOOL_CALL_MESSAGE
from juno_bind_trio.testing import ToolCallHistoryError, check_tool_call_history
from juno_bind_trio.transcript import HealChange, TranscriptError, heal_transcript


def test_a_well_formed_transcript_comes_back_unchanged_and_identical() -> None:
    messages = [
        system(),
        user(),
        assistant("a", "b"),
        tool("b"),
        tool("a"),
        assistant(text="done"),
        user("more"),
        assistant("c"),
        tool("c"),
    ]
    result = heal_transcript(messages)
    assert result.changes == ()
    assert not result.changed
    assert result.messages == messages
    assert result.messages is not messages
    assert all(h is m for h, m in zip(result.messages, messages, strict=True))


def test_dangling_calls_of_a_cut_transcript_are_answered_interrupted_in_call_order() -> None:
    messages = [user(), assistant("a", "b", "c"), tool("b")]
    result = heal_transcript(messages)
    assert result.messages == [
        user(),
        assistant("a", "b", "c"),
        tool("b"),
        synthesized("a", "interrupted"),
        synthesized("c", "interrupted"),
    ]
    assert result.changes == (
        HealChange(
            action="synthesized", tool_call_id="a", index=1, healed_index=3, kind="interrupted"
        ),
        HealChange(
            action="synthesized", tool_call_id="c", index=1, healed_index=4, kind="interrupted"
        ),
    )
    assert_provider_rule(result.messages)


def test_the_synthesized_answer_is_the_loops_envelope_with_unescaped_text() -> None:
    result = heal_transcript([assistant("a")])
    answer = result.messages[1]
    assert list(envelope(answer)) == ["success", "kind", "error"]
    assert envelope(answer) == {
        "success": False,
        "kind": "interrupted",
        "error": INTERRUPTED_TOOL_CALL_MESSAGE,
    }
    # ensure_ascii=False, as the loop writes it: no "\u2014" escapes in stored text.
    assert "\\u" not in answer["content"]


def test_not_started_ids_are_answered_not_run_and_the_rest_interrupted() -> None:
    result = heal_transcript([assistant("a", "b")], not_started={"b", "zzz"})
    assert result.messages[1:] == [synthesized("a", "interrupted"), synthesized("b", "not_run")]
    assert [c.kind for c in result.changes] == ["interrupted", "not_run"]


def test_a_block_closed_by_a_user_message_is_answered_before_it() -> None:
    messages = [assistant("a"), user("are you there?"), assistant(text="yes")]
    result = heal_transcript(messages)
    assert result.messages == [
        assistant("a"),
        synthesized("a", "interrupted"),
        user("are you there?"),
        assistant(text="yes"),
    ]
    assert result.changes[0].healed_index == 1


def test_a_late_real_answer_in_the_same_turn_is_moved_up_not_replaced() -> None:
    late = tool("a", "42 rows written")
    messages = [assistant("a", "b"), tool("b"), user("hurry"), system("note"), late]
    result = heal_transcript(messages)
    assert result.messages == [assistant("a", "b"), tool("b"), late, user("hurry"), system("note")]
    assert result.messages[2] is late
    assert result.changes == (
        HealChange(action="moved", tool_call_id="a", index=4, healed_index=2),
    )
    assert "messages[4]" in result.changes[0].describe()


def test_an_answer_after_the_next_assistant_message_is_dropped_and_its_call_synthesized() -> None:
    messages = [assistant("a"), user(), assistant(text="moving on"), tool("a")]
    result = heal_transcript(messages)
    assert result.messages == [
        assistant("a"),
        synthesized("a", "interrupted"),
        user(),
        assistant(text="moving on"),
    ]
    assert [(c.action, c.index, c.healed_index) for c in result.changes] == [
        ("synthesized", 0, 1),
        ("dropped_orphan", 3, None),
    ]


def test_orphans_are_dropped_wherever_they_are() -> None:
    messages = [
        tool("x"),
        user(),
        assistant("a"),
        tool("a"),
        tool("nobody"),
        assistant(),
        tool("y"),
    ]
    result = heal_transcript(messages)
    assert result.messages == [user(), assistant("a"), tool("a"), assistant()]
    assert [(c.action, c.tool_call_id, c.index) for c in result.changes] == [
        ("dropped_orphan", "x", 0),
        ("dropped_orphan", "nobody", 4),
        ("dropped_orphan", "y", 6),
    ]


def test_a_duplicate_answer_is_dropped_and_the_first_kept() -> None:
    first, second, third = tool("a", "first"), tool("a", "second"), tool("a", "third")
    messages = [assistant("a", "b"), first, second, tool("b"), user(), third]
    result = heal_transcript(messages)
    assert result.messages == [assistant("a", "b"), first, tool("b"), user()]
    assert result.messages[1] is first
    assert [(c.action, c.index) for c in result.changes] == [
        ("dropped_duplicate", 2),
        ("dropped_duplicate", 5),
    ]


def test_an_id_reused_by_a_later_turn_is_answered_per_turn() -> None:
    # Some servers number calls per turn ("call_0" every time): each turn is its own scope.
    messages = [assistant("call_0"), tool("call_0"), assistant("call_0"), tool("call_0", "2nd")]
    result = heal_transcript(messages)
    assert result.changes == ()


def test_an_assistant_with_null_tool_calls_opens_no_block() -> None:
    message = {"role": "assistant", "content": "hello", "tool_calls": None}
    result = heal_transcript([message, user()])
    assert result.changes == ()
    assert result.messages[0] is message


def test_an_empty_tool_calls_list_is_removed_and_its_message_kept() -> None:
    # The API refuses `tool_calls: []` (an empty array); a message that calls no
    # tool says so by having no tool_calls at all.
    message = {"role": "assistant", "content": "hello", "tool_calls": []}
    messages = [user(), message, user("more")]
    with pytest.raises(ToolCallHistoryError, match="empty array"):
        check_tool_call_history(messages)
    result = heal_transcript(messages)
    assert result.messages == [user(), {"role": "assistant", "content": "hello"}, user("more")]
    assert message["tool_calls"] == []  # the input is not mutated
    assert result.changes == (
        HealChange(action="removed_empty_tool_calls", tool_call_id=None, index=1, healed_index=1),
    )
    assert result.changes[0].describe() == (
        "messages[1] has an empty tool_calls list, which the API refuses: removed it, "
        "the message kept at healed[1]"
    )
    check_tool_call_history(result.messages)
    assert heal_transcript(result.messages).changes == ()


def test_an_empty_tool_calls_message_closes_the_block_before_it() -> None:
    empty = types.MappingProxyType({"role": "assistant", "content": None, "tool_calls": ()})
    result = heal_transcript([assistant("a"), empty, tool("a")])
    assert result.messages == [
        assistant("a"),
        synthesized("a", "interrupted"),
        {"role": "assistant", "content": None},
    ]
    assert [(c.action, c.tool_call_id, c.index, c.healed_index) for c in result.changes] == [
        ("synthesized", "a", 0, 1),
        ("removed_empty_tool_calls", None, 1, 2),
        ("dropped_orphan", "a", 2, None),
    ]
    check_tool_call_history(result.messages)


def test_healing_never_mutates_its_input() -> None:
    messages = [assistant("a", "b"), tool("a"), tool("a"), user(), tool("b"), tool("q")]
    before = copy.deepcopy(messages)
    heal_transcript(messages)
    assert messages == before


def test_a_non_dict_mapping_is_copied_into_a_dict() -> None:
    frozen = types.MappingProxyType({"role": "user", "content": "hi"})
    result = heal_transcript([frozen])
    assert result.messages == [{"role": "user", "content": "hi"}]
    assert type(result.messages[0]) is dict


def test_openai_typed_messages_are_accepted() -> None:
    # Type-checked by mypy: the SDK's TypedDicts go in without a cast.
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]
    assert len(heal_transcript(messages).messages) == 3


def test_describe_names_every_position() -> None:
    result = heal_transcript([assistant("a"), tool("zz"), tool("zz")], not_started=["a"])
    lines = [c.describe() for c in result.changes]
    assert lines == [
        "messages[1] answers 'zz', which no assistant message of its turn called: dropped",
        "messages[2] answers 'zz', which no assistant message of its turn called: dropped",
        "call 'a' of messages[0] had no answer: added a 'not_run' answer at healed[1]",
    ]


# --- refusals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (["not a dict"], "messages[2] must be a chat message dict, got list"),
        ({"content": "no role"}, "messages[2] has role None"),
        ({"role": "human", "content": "x"}, "messages[2] has role 'human'"),
        ({"role": "tool", "content": "x"}, "messages[2] is a tool message whose tool_call_id"),
        ({"role": "tool", "tool_call_id": "", "content": "x"}, "tool_call_id is not a non-empty"),
        ({"role": "assistant", "tool_calls": "a"}, "messages[2].tool_calls must be a list"),
        ({"role": "assistant", "tool_calls": [{"type": "function"}]}, "tool_calls[0] must be"),
        ({"role": "assistant", "tool_calls": [{"id": 7}]}, "tool_calls[0] must be"),
        (
            {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "a"}]},
            "messages[2].tool_calls has two calls with id 'a'",
        ),
    ],
)
def test_a_malformed_message_is_refused_naming_its_index(bad: Any, fragment: str) -> None:
    with pytest.raises(TranscriptError) as info:
        heal_transcript([user(), user(), bad, user()])
    assert info.value.index == 2
    assert fragment in str(info.value)
    assert str(info.value).startswith("heal_transcript: ")
    assert isinstance(info.value, ValueError)


def test_transcript_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(TranscriptError("heal_transcript: bad", 4)))
    assert (str(error), error.index) == ("heal_transcript: bad", 4)


@pytest.mark.parametrize("bad", ["user: hi", {"role": "user"}, 42])
def test_messages_that_are_not_a_list_are_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"^heal_transcript: messages must be a list"):
        heal_transcript(bad)


@pytest.mark.parametrize(("bad", "fragment"), [("call_1", "got str"), ([1], "got 1"), (3, "int")])
def test_not_started_must_be_a_collection_of_ids(bad: Any, fragment: str) -> None:
    with pytest.raises(TypeError, match=r"^heal_transcript: not_started") as info:
        heal_transcript([], not_started=bad)
    assert fragment in str(info.value)


def test_the_synthesized_answer_matches_the_plugins_envelope() -> None:
    """One envelope for one fact: healing writes what the loop and the plugins helper write."""
    from juno_bind_trio import plugins

    make = getattr(plugins, "tool_failure_message", None)
    if make is None:  # pragma: no cover - until the plugins vocabulary lands
        pytest.skip("juno_bind_trio.plugins.tool_failure_message is not there yet")
    result = heal_transcript([assistant("a", "b")], not_started={"b"})
    assert result.messages[1] == make("a", INTERRUPTED_TOOL_CALL_MESSAGE, "interrupted")
    assert result.messages[2] == make("b", ABORTED_TOOL_CALL_MESSAGE, "not_run")
