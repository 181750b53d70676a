"""A bad ``message_history`` is refused before any request, naming ``message_history[i]``.

And a list of chat messages passed as the prompt is the common mistake it
looks like: the error asks whether ``message_history=`` was meant.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_scripts import Say, ScriptedModel
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.agent import Agent

pytestmark = pytest.mark.anyio

GOOD_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def agent() -> tuple[Agent[None, str], ScriptedModel]:
    model = ScriptedModel([Say(text="ok")])
    return Agent(model), model


@pytest.mark.parametrize(
    ("history", "error", "pattern"),
    [
        ([{"role": "user"}], TypeError, r"message_history\[0\] is a user message with no content"),
        (
            [{"role": "user", "content": 5}],
            TypeError,
            r"message_history\[0\]\.content must be a string or a list of content parts, got 5",
        ),
        (
            [{"role": "system", "content": {"text": "x"}}],
            TypeError,
            r"message_history\[0\]\.content must be a string",
        ),
        (
            [{"role": "user", "content": "hi"}, "hello"],
            TypeError,
            r"message_history\[1\] must be a chat message dict, got 'hello'",
        ),
        ([{"content": "hi"}], TypeError, r"message_history\[0\] must have a string 'role'"),
        (
            [{"role": "robot", "content": "hi"}],
            ValueError,
            r"message_history\[0\] has role 'robot'",
        ),
        (
            [{"role": "user", "content": []}],
            ValueError,
            r"message_history\[0\]\.content is an empty",
        ),
        (
            [{"role": "user", "content": [{"text": "no type"}]}],
            TypeError,
            r"message_history\[0\]\.content\[0\] must be a content part dict with a string 'type'",
        ),
        (
            [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            ValueError,
            r"message_history\[0\]\.content\[0\] is a 'image_url' part; a system message's",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": 3}]}],
            TypeError,
            r"message_history\[0\]\.content\[0\] is a text part whose 'text' is not a string",
        ),
        (
            [{"role": "tool", "content": "x"}],
            TypeError,
            r"message_history\[0\] is a tool message whose tool_call_id",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": "c1"}],
            TypeError,
            r"message_history\[0\]\.tool_calls must be a list of tool calls",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}],
            TypeError,
            r"message_history\[0\]\.tool_calls\[0\] must be a tool call dict",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [GOOD_CALL, GOOD_CALL]}],
            ValueError,
            r"message_history\[0\]\.tool_calls has two calls with id 'c1'",
        ),
        ({"role": "user", "content": "hi"}, TypeError, r"message_history must be a list"),
    ],
)
async def test_a_bad_history_is_refused_before_any_request(
    history: Any, error: type[Exception], pattern: str
) -> None:
    built, model = agent()
    with pytest.raises(error, match=r"^Agent\.run: " + pattern):
        await built.run("go", message_history=history)
    assert model.seen == []


def test_every_entry_point_names_itself() -> None:
    built, model = agent()
    bad = [{"role": "user"}]
    with pytest.raises(TypeError, match=r"^Agent\.open_run: message_history\[0\]"):
        built.open_run("go", message_history=bad)
    with pytest.raises(TypeError, match=r"^Agent\.run_sync: message_history\[0\]"):
        built.run_sync("go", message_history=bad)
    assert model.seen == []


async def test_a_whole_history_is_accepted_and_sent() -> None:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "data:,"}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [GOOD_CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
    ]
    built, model = agent()
    result = await built.run("Thanks", message_history=history)
    assert result.output == "ok"
    assert model.seen[0][: len(history)] == history


async def test_a_list_of_messages_as_the_prompt_asks_for_message_history() -> None:
    built, model = agent()
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with pytest.raises(
        TypeError, match=r"prompt\[0\] is a chat message.*did you mean `message_history=`"
    ):
        await built.run(messages)
    with pytest.raises(TypeError, match=r"did you mean `message_history=`"):
        await built.run({"role": "user", "content": "hi"})  # type: ignore[arg-type]
    assert model.seen == []


messages_st = st.lists(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=3),
        st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name"]),
            st.one_of(
                st.none(),
                st.integers(),
                st.sampled_from(["user", "system", "assistant", "tool", "developer", "x"]),
                st.lists(
                    st.dictionaries(st.sampled_from(["type", "text", "id"]), st.text(max_size=3)),
                    max_size=2,
                ),
                st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
            ),
            max_size=4,
        ),
    ),
    max_size=4,
)


async def _either_refused_or_sent(history: list[Any]) -> None:
    built, model = agent()
    refused: Exception | None = None
    try:
        await built.run("go", message_history=history)
    except (TypeError, ValueError) as exc:
        refused = exc
    if refused is not None:
        assert str(refused).startswith("Agent.run: message_history")
        assert model.seen == []
    else:
        assert len(model.seen) == 1


@settings(max_examples=150, deadline=None)
@given(history=messages_st)
def test_any_history_is_refused_naming_it_or_sent(backend: str, history: list[Any]) -> None:
    run_on(backend, _either_refused_or_sent, history)
