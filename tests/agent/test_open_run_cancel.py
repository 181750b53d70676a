"""open_run cancelled at random points, on both backends: the transcript is always whole.

The invariants are the kernel's: every tool call of every assistant message
is answered exactly once (healing the transcript changes nothing); a call
that never started is answered ``not_run``, one cut off ``interrupted``, one
that finished with its result; no call starts after the cancel; no model call
starts after it either.
"""

from __future__ import annotations

import json

import anyio
from agent_scripts import Say, ScriptedModel, call
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.agent import Agent, AgentEvent, RunEndedEvent, ToolCallEndedEvent, tool
from juno_bind_trio.transcript import heal_transcript

turns = st.lists(
    st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=4),
    min_size=1,
    max_size=3,
)
# Cancel either after the reader's n-th event (it leaves the block), or at a virtual time.
cancels = st.one_of(
    st.tuples(st.just("event"), st.integers(min_value=0, max_value=30)),
    st.tuples(st.just("time"), st.integers(min_value=0, max_value=12)),
)


async def scenario(script: list[list[int]], how: tuple[str, int]) -> None:
    log: list[tuple[str, str]] = []

    @tool
    async def work(n: int) -> str:
        log.append(("start", f"{n}"))
        await anyio.sleep(n)
        log.append(("end", f"{n}"))
        return f"did {n}"

    says = []
    counter = 0
    for turn, delays in enumerate(script):
        calls = []
        for delay in delays:
            calls.append(call(f"c{counter}", "work", n=delay))
            counter += 1
        says.append(Say(text=f"turn {turn}", chunks=["turn ", f"{turn}"], calls=calls, delay=1))
    says.append(Say(text="the end"))
    # A turn without calls is the answer.
    answer = next(say.text for say in says if not say.calls)
    model = ScriptedModel(says)
    agent = Agent(model, tools=[work], per_tool_limit=2)
    events: list[AgentEvent] = []
    mode, amount = how
    started_at_cancel: int | None = None
    models_at_cancel: int | None = None
    with anyio.move_on_after(amount if mode == "time" else 1_000) as scope:
        async with agent.open_run("go") as run:
            async for event in run:
                events.append(event)
                if mode == "event" and len(events) > amount:
                    break
    if mode == "event" or scope.cancelled_caught:
        started_at_cancel = len([e for e in log if e[0] == "start"])
        models_at_cancel = len(model.seen)
    messages = list(run.messages)
    # Whole: healing has nothing to do.
    assert heal_transcript(messages).changed is False
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    calls_made = [c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]]
    assert sorted(answers) == sorted(calls_made)
    starts = [name for kind, name in log if kind == "start"]
    ends = [name for kind, name in log if kind == "end"]
    for call_id in calls_made:
        content = answers[call_id]
        if content.startswith("did "):
            continue
        envelope = json.loads(content)
        assert envelope["kind"] in ("not_run", "interrupted")
    interrupted = sum(1 for c in answers.values() if '"interrupted"' in c)
    not_run = sum(1 for c in answers.values() if '"not_run"' in c)
    finished = sum(1 for c in answers.values() if c.startswith("did "))
    assert finished == len(ends)
    assert interrupted == len(starts) - len(ends)
    assert interrupted + not_run + finished == len(calls_made)
    if run.result is not None:
        assert run.result.output == answer
        assert not_run == interrupted == 0
    else:
        # Nothing started after the cancel: no tool, no model call.
        await anyio.sleep(100)
        assert len([e for e in log if e[0] == "start"]) == started_at_cancel
        assert len(model.seen) == models_at_cancel
        ended = [e for e in events if isinstance(e, ToolCallEndedEvent)]
        assert all(e.status in ("finished", "failed", "not_run", "interrupted") for e in ended)
    if events and isinstance(events[-1], RunEndedEvent):
        assert events[-1].reason == ("completed" if run.result is not None else "cancelled")


@settings(max_examples=60, deadline=None)
@given(script=turns, how=cancels)
def test_open_run_cancelled_anywhere_leaves_a_whole_transcript(
    backend: str, script: list[list[int]], how: tuple[str, int]
) -> None:
    run_on(backend, scenario, script, how)


def test_a_cancel_while_the_model_streams_leaves_no_dangling_call(backend: str) -> None:
    run_on(backend, scenario, [[3, 3], [1]], ("event", 1))
    run_on(backend, scenario, [[3, 3], [1]], ("time", 1))
    run_on(backend, scenario, [[3, 3, 3], [1]], ("time", 3))
