"""The fake server refuses a tool-call history the real Chat Completions API refuses.

Each rule once by hand (the error body the real ``openai`` SDK gets, the
index and the id it names), then the two invariants as properties: whatever
[heal_transcript][juno_bind_trio.transcript.heal_transcript] returns is
accepted, and every corruption of a well-formed history is refused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio.providers.openai._client import prime_openai_client
from juno_bind_trio.testing import (
    CompletionResponse,
    ToolCallHistoryError,
    check_tool_call_history,
    fake_openai_env,
    open_fake_openai_server,
)
from juno_bind_trio.transcript import heal_transcript

pytestmark = pytest.mark.anyio


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def asks(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def answer(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


USER = {"role": "user", "content": "go"}
SAID = {"role": "assistant", "content": "done"}

# (name, messages, index, tool_call_id, param, words of the real API's message)
REFUSED: list[tuple[str, list[Any], int, str | None, str, str]] = [
    (
        "an answer to no call at all",
        [USER, answer("a")],
        1,
        "a",
        "messages.[1].role",
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    ),
    (
        "an answer after the block closed",
        [USER, asks("a"), answer("a"), SAID, answer("a")],
        4,
        "a",
        "messages.[4].role",
        "must be a response to a preceeding message with 'tool_calls'",
    ),
    (
        "an orphan: an id the assistant did not call",
        [USER, asks("a"), answer("a"), answer("b")],
        3,
        "b",
        "messages.[3].tool_call_id",
        "'tool_call_id' of 'b' not found in 'tool_calls' of previous message",
    ),
    (
        "an answer to an earlier turn's call",
        [USER, asks("a"), answer("a"), asks("b"), answer("a"), answer("b")],
        4,
        "a",
        "messages.[4].tool_call_id",
        "not found in 'tool_calls' of previous message",
    ),
    (
        "a call left unanswered before the next message",
        [USER, asks("a", "b"), answer("a"), USER],
        1,
        "b",
        "messages.[1].role",
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: b",
    ),
    (
        "calls left unanswered at the end",
        [USER, asks("a", "b")],
        1,
        "a",
        "messages.[1].role",
        "did not have response messages: a, b",
    ),
    (
        "a call answered twice",
        [USER, asks("a", "b"), answer("a"), answer("a"), answer("b")],
        3,
        "a",
        "messages.[3].tool_call_id",
        "Duplicate value for 'tool_call_id' of 'a' in messages[2] and messages[3]",
    ),
    (
        "two calls with one id",
        [USER, asks("a", "a"), answer("a")],
        1,
        "a",
        "messages.[1].tool_calls.[1].id",
        "Duplicate value for 'id' of 'a'",
    ),
    (
        "a message with no role",
        [USER, {"content": "x"}],
        1,
        None,
        "messages[1].role",
        "Missing required parameter: 'messages[1].role'",
    ),
    (
        "a role the API does not know",
        [{"role": "robot", "content": "x"}],
        0,
        None,
        "messages[0].role",
        "Invalid value: 'robot'. Supported values are",
    ),
    (
        "a tool message with no tool_call_id",
        [USER, asks("a"), {"role": "tool", "content": "ok"}],
        2,
        None,
        "messages[2].tool_call_id",
        "Missing required parameter: 'messages[2].tool_call_id'",
    ),
    (
        "an empty tool_calls list",
        [USER, {"role": "assistant", "content": "x", "tool_calls": []}],
        1,
        None,
        "messages[1].tool_calls",
        "empty array",
    ),
    (
        "a call with no id",
        [USER, {"role": "assistant", "tool_calls": [{"type": "function"}]}],
        1,
        None,
        "messages[1].tool_calls[0].id",
        "Missing required parameter: 'messages[1].tool_calls[0].id'",
    ),
    (
        "a message that is not an object",
        [USER, "hello"],
        1,
        None,
        "messages[1]",
        "expected an object, but got string instead",
    ),
]

ACCEPTED: list[tuple[str, list[Any]]] = [
    ("no tools at all", [USER, SAID]),
    ("answers in any order within their block", [USER, asks("a", "b"), answer("b"), answer("a")]),
    ("tool_calls null", [USER, {"role": "assistant", "content": "x", "tool_calls": None}]),
    (
        "an id reused by a later turn",
        [USER, asks("a"), answer("a"), asks("a"), answer("a"), SAID],
    ),
    ("an empty transcript", []),
]


@pytest.mark.parametrize(
    ("messages", "index", "call_id", "param", "words"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_the_checker_refuses_each_broken_rule_naming_where(
    messages: list[Any], index: int, call_id: str | None, param: str, words: str
) -> None:
    with pytest.raises(ToolCallHistoryError) as caught:
        check_tool_call_history(messages)
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.index, error.tool_call_id, error.param) == (index, call_id, param)
    assert words in str(error)
    assert f"messages[{index}]" in str(error)
    if call_id is not None:
        assert repr(call_id) in str(error)
    assert str(error).startswith("check_tool_call_history: ")


@pytest.mark.parametrize("messages", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_the_checker_accepts_what_the_api_accepts(messages: list[Any]) -> None:
    check_tool_call_history(messages)


def test_the_checker_refuses_a_non_list_by_type() -> None:
    for bad in ({"role": "user"}, "messages", None, 3):
        with pytest.raises(TypeError, match="check_tool_call_history: messages must be a list"):
            check_tool_call_history(bad)  # type: ignore[arg-type]


def test_the_error_survives_pickling() -> None:
    import pickle

    with pytest.raises(ToolCallHistoryError) as caught:
        check_tool_call_history([USER, answer("a")])
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.index, copy.tool_call_id, copy.param, str(copy)) == (
        1,
        "a",
        "messages.[1].role",
        str(caught.value),
    )


# --- the server --------------------------------------------------------------------


@asynccontextmanager
async def sdk(base_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0) as client:
        await prime_openai_client(client)
        yield client


@pytest.mark.parametrize(
    ("messages", "index", "call_id", "param", "words"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
async def test_the_server_answers_a_broken_history_with_the_apis_400(
    messages: list[Any], index: int, call_id: str | None, param: str, words: str
) -> None:
    async with open_fake_openai_server([CompletionResponse(content="never sent")]) as server:
        async with sdk(server.base_url) as client:
            with pytest.raises(openai.BadRequestError) as caught:
                await client.chat.completions.create(model="m", messages=messages)
        assert server.pending() == 1  # refused before the script was consulted
        assert len(server.requests) == 1
    error = caught.value
    assert error.status_code == 400
    body = json.loads(error.response.content)
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == param
    assert words in body["error"]["message"]
    assert f"messages[{index}]" in body["error"]["message"]
    if call_id is not None:
        assert repr(call_id) in body["error"]["message"]
        assert body["error"]["code"] is None  # the tool-call rules carry no code


async def test_the_server_answers_a_good_history_from_its_script() -> None:
    messages: Any = [USER, asks("a", "b"), answer("b"), answer("a")]
    async with (
        open_fake_openai_server([CompletionResponse(content="fine")]) as server,
        sdk(server.base_url) as client,
    ):
        completion = await client.chat.completions.create(model="m", messages=messages)
    assert completion.choices[0].message.content == "fine"


async def test_the_server_takes_a_history_whose_empty_tool_calls_healing_removed() -> None:
    messages: Any = [USER, {"role": "assistant", "content": "x", "tool_calls": []}, USER]
    async with (
        open_fake_openai_server([CompletionResponse(content="fine")]) as server,
        sdk(server.base_url) as client,
    ):
        with pytest.raises(openai.BadRequestError, match="empty array"):
            await client.chat.completions.create(model="m", messages=messages)
        healed: Any = heal_transcript(messages).messages
        completion = await client.chat.completions.create(model="m", messages=healed)
    assert completion.choices[0].message.content == "fine"
    assert json.loads(server.requests[-1].body)["messages"][1] == {
        "role": "assistant",
        "content": "x",
    }


async def test_validation_can_be_switched_off_and_on() -> None:
    broken: Any = [USER, answer("a")]
    script = [CompletionResponse(content="one"), CompletionResponse(content="two")]
    async with open_fake_openai_server(script, validate_history=False) as server:
        assert server.validate_history is False
        async with sdk(server.base_url) as client:
            first = await client.chat.completions.create(model="m", messages=broken)
            assert first.choices[0].message.content == "one"
            server.validate_history = True
            with pytest.raises(openai.BadRequestError):
                await client.chat.completions.create(model="m", messages=broken)
        assert server.pending() == 1


async def test_a_request_without_messages_is_refused() -> None:
    async with open_fake_openai_server([CompletionResponse(content="x")]) as server:
        async with sdk(server.base_url) as client:
            with pytest.raises(openai.BadRequestError, match="Missing required parameter"):
                await client.post("/chat/completions", body={"model": "m"}, cast_to=object)
            with pytest.raises(openai.BadRequestError, match="expected an array"):
                await client.post(
                    "/chat/completions", body={"model": "m", "messages": {}}, cast_to=object
                )
        assert server.pending() == 1


async def test_validate_history_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="open_fake_openai_server: validate_history must be a bool"):
        async with open_fake_openai_server(validate_history=1):  # type: ignore[arg-type]
            pass


def test_fake_openai_env_wants_a_bool_too() -> None:
    with (
        pytest.raises(TypeError, match="fake_openai_env: validate_history must be a bool"),
        fake_openai_env(validate_history="yes"),  # type: ignore[arg-type]
    ):
        pass


# --- properties --------------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Anything heal_transcript reads: calls, answers, late, duplicated and orphaned ones."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "system", "said", "asks", "tool", "tool"]))
        if kind == "asks":
            # max_size 0 too: an empty tool_calls list, which the API refuses
            out.append(asks(*draw(st.lists(IDS, max_size=3, unique=True))))
        elif kind == "tool":
            out.append(answer(draw(IDS)))
        elif kind == "said":
            out.append(dict(SAID))
        else:
            out.append({"role": kind, "content": "x"})
    return out


@given(transcripts(), st.sets(IDS))
def test_whatever_healing_returns_is_accepted(messages: list[Any], not_started: set[str]) -> None:
    healed = heal_transcript(messages, not_started=not_started).messages
    check_tool_call_history(healed)


@given(transcripts())
def test_the_checker_and_healing_agree_on_what_is_well_formed(messages: list[Any]) -> None:
    try:
        check_tool_call_history(messages)
    except ToolCallHistoryError:
        assert heal_transcript(messages).changed
    else:
        assert not heal_transcript(messages).changed


@st.composite
def well_formed(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A healthy history with at least one call; every id unique in the transcript."""
    out: list[dict[str, Any]] = [dict(USER)]
    turns = draw(st.integers(1, 4))
    for turn in range(turns):
        ids = [f"call_{turn}_{k}" for k in range(draw(st.integers(1, 3)))]
        out.append(asks(*ids))
        out.extend(answer(i) for i in draw(st.permutations(ids)))
        if draw(st.booleans()):
            out.append(dict(USER))
    out.append(dict(SAID))
    return out


CORRUPTIONS = ["drop", "duplicate", "change_id", "before_its_call", "after_the_next_message"]


@given(well_formed(), st.sampled_from(CORRUPTIONS), st.data())
def test_every_corruption_of_a_good_history_is_refused(
    messages: list[dict[str, Any]], corruption: str, data: st.DataObject
) -> None:
    check_tool_call_history(messages)  # the starting point is accepted
    answers = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    at = data.draw(st.sampled_from(answers))
    victim = messages[at]
    broken = list(messages)
    if corruption == "drop":
        del broken[at]
    elif corruption == "duplicate":
        broken.insert(at + 1, dict(victim))
    elif corruption == "change_id":
        broken[at] = {**victim, "tool_call_id": "call_nobody_made"}
    elif corruption == "before_its_call":
        del broken[at]
        asked = max(i for i in range(at) if messages[i]["role"] == "assistant")
        broken.insert(asked, victim)
    else:  # moved past the first message after its block
        end = next(i for i in range(at, len(messages)) if messages[i]["role"] != "tool")
        del broken[at]
        broken.insert(end, victim)
    with pytest.raises(ToolCallHistoryError) as caught:
        check_tool_call_history(broken)
    assert caught.value.tool_call_id is not None
    assert f"messages[{caught.value.index}]" in str(caught.value)
    # And healing repairs each one into a history the checker accepts.
    healed = heal_transcript(broken)
    assert healed.changed
    check_tool_call_history(healed.messages)
