"""heal_transcript's invariants over any transcript, and over transcripts a cancel cut short."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import hypothesis.strategies as st
from hypothesis import given, settings
from transcript_checks import (
    assert_provider_rule,
    assistant,
    call_ids,
    envelope,
    synthesized,
    system,
    tool,
    user,
)

from conftest import run_on
from juno_bind_trio.transcript import heal_transcript

IDS = ["a", "b", "c", "d"]  # few, so duplicates, reuse and orphans are common


@st.composite
def any_message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "system", "assistant", "assistant", "tool", "tool"]))
    if role == "user":
        return user(draw(st.text(max_size=3)))
    if role == "system":
        return system()
    if role == "assistant":
        if draw(st.integers(0, 5)) == 0:  # an empty list, which the API refuses
            return {"role": "assistant", "content": "x", "tool_calls": []}
        return assistant(*draw(st.lists(st.sampled_from(IDS), unique=True, max_size=3)))
    return tool(draw(st.sampled_from([*IDS, "stray"])), draw(st.text(max_size=3)))


any_transcript = st.lists(any_message(), max_size=14)


@st.composite
def well_formed(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A transcript a clean run writes: every call answered right away, in any order."""
    messages: list[dict[str, Any]] = [user()]
    for turn in range(draw(st.integers(0, 4))):
        ids = [f"t{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
        messages.append(assistant(*ids))
        messages.extend(tool(i) for i in draw(st.permutations(ids)))
        if draw(st.booleans()):
            messages.append(user())
    return messages


# No deadline: these are pure functions, and a loaded CI machine is not a failure.
@settings(deadline=None)
@given(any_transcript, st.sets(st.sampled_from(IDS)))
def test_any_transcript_heals_to_the_provider_rule_and_healing_is_idempotent(
    messages: list[dict[str, Any]], not_started: set[str]
) -> None:
    before = copy.deepcopy(messages)
    result = heal_transcript(messages, not_started=not_started)
    assert messages == before  # input never mutated
    assert_provider_rule(result.messages)

    again = heal_transcript(result.messages, not_started=not_started)
    assert again.changes == ()
    assert all(a is b for a, b in zip(again.messages, result.messages, strict=True))

    # User, system and assistant messages: the same objects, in the same order, but
    # for an empty tool_calls list removed (a copy of its message, reported).
    emptied = {c.index for c in result.changes if c.action == "removed_empty_tool_calls"}
    assert emptied == {i for i, m in enumerate(messages) if m.get("tool_calls") == []}
    spoken = [(i, m) for i, m in enumerate(messages) if m["role"] != "tool"]
    healed_spoken = [m for m in result.messages if m["role"] != "tool"]
    assert len(healed_spoken) == len(spoken)
    for (i, m), out in zip(spoken, healed_spoken, strict=True):
        if i in emptied:
            assert out == {k: v for k, v in m.items() if k != "tool_calls"}
        else:
            assert out is m

    # Every tool message out is one of ours or one the report accounts for as synthesized.
    synthesized_at = {c.healed_index: c for c in result.changes if c.action == "synthesized"}
    for position, message in enumerate(result.messages):
        if message["role"] != "tool":
            continue
        if position in synthesized_at:
            change = synthesized_at[position]
            assert change.tool_call_id is not None
            assert change.tool_call_id == message["tool_call_id"]
            expected = "not_run" if change.tool_call_id in not_started else "interrupted"
            assert message == synthesized(change.tool_call_id, expected)
        else:
            assert any(message is m for m in messages)

    # The report balances: out = in - dropped + synthesized.
    dropped = [c for c in result.changes if c.action.startswith("dropped")]
    assert len(result.messages) == len(messages) - len(dropped) + len(synthesized_at)
    for change in dropped:
        assert messages[change.index]["role"] == "tool"
        assert all(m is not messages[change.index] for m in result.messages)
    for change in result.changes:
        if change.action == "moved":
            assert result.messages[change.healed_index or 0] is messages[change.index]


@settings(deadline=None)
@given(well_formed())
def test_a_clean_transcript_is_left_alone(messages: list[dict[str, Any]]) -> None:
    assert heal_transcript(messages).changes == ()


@settings(deadline=None)
@given(well_formed(), st.data())
def test_a_cut_transcript_only_gains_answers_for_its_last_turn(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    cut = messages[: data.draw(st.integers(0, len(messages)), label="cut")]
    result = heal_transcript(cut)
    assert_provider_rule(result.messages)
    assert {c.action for c in result.changes} <= {"synthesized"}
    kept = [
        m
        for i, m in enumerate(result.messages)
        if i not in {c.healed_index for c in result.changes}
    ]
    assert kept == cut
    last_calls = next((call_ids(m) for m in reversed(cut) if m["role"] == "assistant"), [])
    assert {c.tool_call_id for c in result.changes} <= set(last_calls)
    assert all(envelope(m)["kind"] == "interrupted" for m in result.messages[len(cut) :])


# --- a real cancel, at any virtual instant ------------------------------------


async def cancelled_run(
    cancel_at: float, starts: list[float], durations: list[float]
) -> tuple[list[dict[str, Any]], set[str], set[str], float]:
    """A tool batch writing into a transcript, cancelled from outside at *cancel_at*.

    Call ``k`` is claimed at ``starts[k]`` and answers ``durations[k]`` later,
    as the loop's workers do. Returns the transcript as the cancel left it, the
    ids that never started, the ids that were answered, and the elapsed time.
    """
    ids = [f"call_{k}" for k in range(len(starts))]
    messages: list[dict[str, Any]] = [user("go"), assistant(*ids)]
    started: set[str] = set()
    begin = anyio.current_time()

    async def run_call(call_id: str, start: float, duration: float) -> None:
        await anyio.sleep(start)
        started.add(call_id)
        await anyio.sleep(duration)
        messages.append(tool(call_id, f"{call_id} done"))

    with anyio.move_on_after(cancel_at):
        async with anyio.create_task_group() as tg:
            for call_id, start, duration in zip(ids, starts, durations, strict=True):
                tg.start_soon(run_call, call_id, start, duration)
        messages.append(assistant(text="all done"))
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return messages, set(ids) - started, answered, anyio.current_time() - begin


@settings(max_examples=40, deadline=None)
@given(
    cancel_at=st.integers(0, 12),
    timing=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5)), min_size=1, max_size=4),
)
def test_a_batch_cancelled_at_any_instant_heals_with_honest_kinds(
    backend: str, cancel_at: int, timing: list[tuple[int, int]]
) -> None:
    starts = [float(s) for s, _ in timing]
    durations = [float(d) for _, d in timing]
    messages, never_started, answered, elapsed = run_on(
        backend, cancelled_run, float(cancel_at), starts, durations
    )
    finish = max(s + d for s, d in zip(starts, durations, strict=True))
    assert elapsed == min(float(cancel_at), finish)

    result = heal_transcript(messages, not_started=never_started)
    assert_provider_rule(result.messages)
    assert heal_transcript(result.messages, not_started=never_started).changes == ()
    # Real answers survive; each missing one says exactly what is known about it.
    by_id = {m["tool_call_id"]: m for m in result.messages if m["role"] == "tool"}
    for call_id, message in by_id.items():
        if call_id in answered:
            assert message["content"] == f"{call_id} done"
        elif call_id in never_started:
            assert envelope(message)["kind"] == "not_run"
        else:
            assert envelope(message)["kind"] == "interrupted"
    assert len(result.changes) == len(by_id) - len(answered)
