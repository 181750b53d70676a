"""Fuzz entries for `juno_bind_trio.transcript`: transcripts torn, malformed and huge."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from fuzz_support import JUNK, Call, Entry, call

from juno_bind_trio.transcript import (
    HealChange,
    HealResult,
    TranscriptError,
    heal_transcript,
)

IDS = st.sampled_from(["a", "b", "c"])
ROLES = st.sampled_from(["user", "system", "developer", "assistant", "tool", "function"])


@st.composite
def message(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(JUNK)  # not a message at all
    role = draw(st.one_of(ROLES, ROLES, ROLES, JUNK))
    out: dict[Any, Any] = {"role": role, "content": draw(st.one_of(st.text(max_size=3), JUNK))}
    if role == "assistant" and draw(st.booleans()):
        entry = st.one_of(
            st.builds(lambda i: {"id": i, "type": "function"}, IDS),
            st.builds(lambda i: {"id": i}, st.one_of(IDS, JUNK)),
            JUNK,
        )
        out["tool_calls"] = draw(st.one_of(st.lists(entry, max_size=3), JUNK))
    if role == "tool" or draw(st.integers(0, 9)) == 0:
        out["tool_call_id"] = draw(st.one_of(IDS, IDS, IDS, JUNK))
    return out


HEAL_CALLS = st.builds(
    lambda messages, not_started: call(messages, not_started=not_started),
    st.one_of(st.lists(message(), max_size=10), JUNK),
    st.one_of(st.sets(IDS).map(frozenset), st.lists(IDS).map(tuple), JUNK),
)


def keeps_the_provider_rule(arguments: Call, result: Any) -> None:
    assert isinstance(result, HealResult)
    healed = result.messages
    i = 0
    while i < len(healed):
        assert healed[i]["role"] != "tool", i
        calls = (
            [c["id"] for c in healed[i].get("tool_calls") or ()]
            if (healed[i]["role"] == "assistant")
            else []
        )
        i += 1
        answered = []
        while i < len(healed) and healed[i]["role"] == "tool":
            answered.append(healed[i]["tool_call_id"])
            i += 1
        assert sorted(answered) == sorted(calls)
    assert heal_transcript(healed, not_started=arguments.kwargs["not_started"]).changes == ()
    assert result.changed == bool(result.changes)


def names_the_message(arguments: Call, error: BaseException) -> None:
    assert isinstance(error, TranscriptError)
    assert 0 <= error.index < len(arguments.args[0])
    assert f"messages[{error.index}]" in str(error)


ENTRIES = [
    Entry(
        heal_transcript,
        args=HEAL_CALLS,
        raises=(TranscriptError,),
        check=keeps_the_provider_rule,
        check_error=names_the_message,
    ),
    Entry(HealChange),
    Entry(HealResult),
]
