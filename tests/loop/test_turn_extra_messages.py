"""`ModelTurn.with_extra_messages`: a re-ask inside one turn, the transcript untouched.

A ``call_model`` port asks, rejects the answer, asks again with the rejected
answer and a correction after the transcript, and returns the answer it
accepts. What the model saw each time, and what the transcript holds after
(also under a cancel at any moment), are the contract.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_scripts import Log, ScriptedTools, assert_answers_match_log, call, cancel_at

from conftest import run_on
from juno_bind_trio import UsageError
from juno_bind_trio.completion import ResetEvent, TextEvent, open_memory_sink
from juno_bind_trio.loop import (
    LoopEvent,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    OutputProgressEvent,
    ToolLoop,
)

pytestmark = pytest.mark.anyio

HELLO = {"role": "user", "content": "hello"}


def _bad(turn: int, ask: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"bad {turn}.{ask}"}


def _again(turn: int, ask: int) -> dict[str, Any]:
    return {"role": "user", "content": f"again {turn}.{ask}"}


@attrs.define
class Reasker:
    """A port that rejects each turn's first ``reasks[t]`` answers, re-asking each time.

    Each re-ask derives from the previous asked turn, so the extras pile up
    in order; ``seen`` keeps a copy of every message list the model was sent.
    """

    reasks: list[int]
    calls: list[list[dict[str, Any]]]
    delay: float = 1.0
    log: Log = attrs.field(factory=Log)
    seen: list[tuple[int, list[dict[str, Any]]]] = attrs.field(factory=list)
    at_start: list[list[dict[str, Any]]] = attrs.field(factory=list)

    async def ask(self, turn: ModelTurn) -> None:
        self.seen.append((turn.iteration, [dict(m) for m in turn.messages]))
        self.log.note("model", turn.iteration, anyio.current_time())
        if turn.text_stream is not None:
            turn.text_stream.begin_attempt()
        await anyio.sleep(self.delay)

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        t = turn.iteration - 1
        self.at_start.append([dict(m) for m in turn.messages])
        asked = turn
        for ask in range(self.reasks[t] if t < len(self.reasks) else 0):
            await self.ask(asked)
            if asked.text_stream is not None:
                asked.text_stream.observe(f"bad {t}.{ask}")
            asked = asked.with_extra_messages([_bad(t, ask), _again(t, ask)])
        await self.ask(asked)
        if asked.text_stream is not None:
            asked.text_stream.observe(f"good {t}")
        asked.report_progress(3)
        calls = self.calls[t] if t < len(self.calls) else []
        return ModelTurnResult(content=f"good {t}", tool_calls=calls)


def _loop(model: Reasker, tools: ScriptedTools, state: LoopState, **more: Any) -> ToolLoop:
    return ToolLoop(
        state=state,
        call_model=model,
        run_tool_call=tools,
        max_iterations=10,
        run_id="run",
        **more,
    )


async def test_the_model_sees_the_extras_and_the_transcript_keeps_only_the_answer() -> None:
    model = Reasker(reasks=[2, 0], calls=[[call("c1")], []])
    tools = ScriptedTools(model.log)
    state = LoopState([HELLO])
    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    with send, receive:
        result = await _loop(model, tools, state, events=send).run()
        events = []
        while True:
            try:
                events.append(receive.receive_nowait())
            except anyio.WouldBlock:
                break
    assert result.reason == "completed"
    first_turn = [m for i, m in model.seen if i == 1]
    assert first_turn == [
        [HELLO],
        [HELLO, _bad(0, 0), _again(0, 0)],
        [HELLO, _bad(0, 0), _again(0, 0), _bad(0, 1), _again(0, 1)],
    ]
    assistant = {"role": "assistant", "content": "good 0", "tool_calls": [call("c1")]}
    (second_turn,) = [m for i, m in model.seen if i == 2]
    assert second_turn[:2] == [HELLO, assistant]
    assert second_turn[2]["role"] == "tool"
    assert len(second_turn) == 3
    assert [m["content"] for m in state.messages if m["role"] == "assistant"] == [
        "good 0",
        "good 1",
    ]
    assert not any(
        "bad" in str(m.get("content")) or "again" in str(m.get("content")) for m in state.messages
    )
    # report_progress on a derived turn reaches the same run's events.
    assert [e for e in events if isinstance(e, OutputProgressEvent)] == [
        OutputProgressEvent(1, 3, 0),
        OutputProgressEvent(2, 3, 0),
    ]


async def test_a_reader_sees_each_reask_replace_the_rejected_text() -> None:
    seen: list[object] = []

    class Recorder:
        retractable = True

        def emit(self, event: object) -> None:
            seen.append(event)

    model = Reasker(reasks=[1], calls=[])
    state = LoopState([HELLO])
    await _loop(model, ScriptedTools(model.log), state, text_sink=Recorder()).run()
    texts = [item.text for item in seen if isinstance(item, TextEvent)]
    resets = [i for i, item in enumerate(seen) if isinstance(item, ResetEvent)]
    assert texts == ["bad 0.0", "good 0"]
    (reset,) = resets
    before = seen[reset - 1]
    assert isinstance(before, TextEvent)
    assert before.text == "bad 0.0"


async def test_a_turn_kept_past_its_call_refuses_a_reask() -> None:
    kept: list[ModelTurn] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        kept.append(turn)
        kept.append(turn.with_extra_messages([_again(0, 0)]))
        return ModelTurnResult(content="ok")

    await ToolLoop(state=LoopState([HELLO]), call_model=model, run_id="r", max_iterations=3).run()
    for turn in kept:
        with pytest.raises(
            UsageError, match=r"ModelTurn.with_extra_messages: turn 'r:1' has ended"
        ):
            turn.with_extra_messages([_again(0, 1)])


async def test_a_turn_whose_call_failed_refuses_a_reask_too() -> None:
    kept: list[ModelTurn] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        kept.append(turn)
        raise RuntimeError("provider down")

    with pytest.raises(RuntimeError, match="provider down"):
        await ToolLoop(
            state=LoopState([HELLO]), call_model=model, run_id="r", max_iterations=3
        ).run()
    with pytest.raises(UsageError, match="has ended"):
        kept[0].with_extra_messages([_again(0, 0)])


def _turn(messages: list[dict[str, Any]] | None = None) -> ModelTurn:
    return ModelTurn(
        iteration=1,
        turn_id="r:1",
        messages=messages if messages is not None else [HELLO],
        tools=(),
        text_stream=None,
        emit=lambda event: None,
    )


def test_the_extras_are_copies_and_the_source_turn_is_unchanged() -> None:
    transcript = [HELLO]
    turn = _turn(transcript)
    extra = {"role": "user", "content": [{"type": "text", "text": "again"}], "name": "ann"}
    derived = turn.with_extra_messages([extra])
    extra["content"][0]["text"] = "changed"  # type: ignore[index]
    extra["role"] = "system"
    assert derived.messages == [
        HELLO,
        {"role": "user", "content": [{"type": "text", "text": "again"}], "name": "ann"},
    ]
    assert turn.messages is transcript
    assert transcript == [HELLO]
    assert (derived.iteration, derived.turn_id, derived.tools) == (1, "r:1", ())
    assert turn.with_extra_messages([]).messages == [HELLO]


@pytest.mark.parametrize(
    ("messages", "error", "pattern"),
    [
        ("hello", TypeError, r"messages must be a list of chat message dicts, got 'hello'"),
        ({"role": "user"}, TypeError, r"messages must be a list"),
        (None, TypeError, r"messages must be a list"),
        ([["user", "hi"]], TypeError, r"messages\[0\] must be a chat message dict"),
        ([{"content": "hi"}], ValueError, r"messages\[0\] must have a string 'role', got None"),
        ([{"role": "robot", "content": "hi"}], ValueError, r"messages\[0\] has role 'robot'"),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "c", "content": "x"},
            ],
            ValueError,
            r"messages\[1\] is a tool message",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [call("c")]}],
            ValueError,
            r"messages\[0\] is an assistant message with tool_calls",
        ),
        (
            [{"role": "user", "content": None}],
            TypeError,
            r"messages\[0\] is a user message with no content",
        ),
        ([{"role": "user", "content": 7}], TypeError, r"messages\[0\]\.content must be a string"),
        ([{"role": "user", "content": ["x"]}], TypeError, r"messages\[0\]\.content must be"),
    ],
)
def test_bad_extras_are_refused_naming_the_message(
    messages: Any, error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=r"ModelTurn.with_extra_messages: " + pattern):
        _turn().with_extra_messages(messages)


# --- the property: any sequence of re-asks, any cancel moment ---------------------------------

calls_strategy = st.lists(
    st.fixed_dictionaries({"delay": st.sampled_from([0, 0.5, 1, 2])}), max_size=3
)


@attrs.frozen
class Scenario:
    reasks: list[int]
    calls: list[list[dict[str, Any]]]
    cancel_at: float | None
    stream: bool


scenarios = st.builds(
    Scenario,
    reasks=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=4),
    calls=st.lists(calls_strategy, max_size=4),
    cancel_at=st.none() | st.integers(min_value=0, max_value=40).map(lambda k: k / 4),
    stream=st.booleans(),
)


async def play(scenario: Scenario) -> None:
    calls = [
        [call(f"t{t}c{c}", **behaviour) for c, behaviour in enumerate(turn)]
        for t, turn in enumerate(scenario.calls)
    ]
    model = Reasker(list(scenario.reasks), calls)
    tools = ScriptedTools(model.log)
    state = LoopState([HELLO])
    more: dict[str, Any] = {"max_iterations": len(scenario.reasks)}
    sink = None
    if scenario.stream:
        sink, receiver = open_memory_sink()
        receiver.close()
        more["text_sink"] = sink
    loop = ToolLoop(state=state, call_model=model, run_tool_call=tools, run_id="run", **more)
    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        if scenario.cancel_at is not None:
            tg.start_soon(cancel_at, scope, scenario.cancel_at, model.log)
        with scope:
            await loop.run()
        tg.cancel_scope.cancel()

    messages = state.messages
    # Answers every call, truthfully, with nothing after a cancel.
    assert_answers_match_log(messages, model.log)
    # No re-ask ever entered the transcript: each assistant message is a turn's answer.
    assert messages[0] == HELLO
    spoken = [m for m in messages if m["role"] != "tool"]
    assert spoken[1:] == [
        {
            "role": "assistant",
            "content": f"good {t}",
            **({"tool_calls": calls[t]} if t < len(calls) and calls[t] else {}),
        }
        for t in range(len(spoken) - 1)
    ]
    # Every ask saw the transcript as the turn found it, then its extras in order.
    for iteration, sent in model.seen:
        start = model.at_start[iteration - 1]
        t = iteration - 1
        assert sent[: len(start)] == start
        extras = sent[len(start) :]
        pairs = len(extras) // 2
        assert extras == [m for k in range(pairs) for m in (_bad(t, k), _again(t, k))]
    # Each turn's transcript at its start is a prefix of the final one.
    for start in model.at_start:
        assert messages[: len(start)] == start


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
def test_any_sequence_of_reasks_keeps_the_transcript_whole(
    backend: str, scenario: Scenario
) -> None:
    run_on(backend, play, scenario)
