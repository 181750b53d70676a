"""ToolLoop: every arm of an iteration, on both backends, at exact virtual times."""

from __future__ import annotations

import json

import anyio
import anyio.lowlevel
import pytest
from loop_scripts import (
    FatalToolError,
    Host,
    Turn,
    answers,
    assert_answers_match_log,
    call,
    cancel_at,
    kind_of,
)

from juno_bind_trio import AbortedToolCallError, UsageError
from juno_bind_trio.completion import ListSink
from juno_bind_trio.loop import ModelTurn, ModelTurnResult, RunStats, ToolCallOutcome
from juno_bind_trio.run import INTERRUPTED_TOOL_CALL_MESSAGE, ToolCallLike

pytestmark = pytest.mark.anyio


async def test_a_final_answer_completes_the_run_and_is_persisted() -> None:
    start = anyio.current_time()
    host = Host([Turn(content="hi there", delay=2.0)])
    result = await host.loop().run()
    assert anyio.current_time() - start == 2.0
    assert result.reason == "completed"
    assert result.iterations == 1
    assert result.content == "hi there"
    assert host.state.messages[-1] == {"role": "assistant", "content": "hi there"}
    assert host.saves() == 1


async def test_tools_run_concurrently_then_the_model_answers() -> None:
    start = anyio.current_time()
    host = Host(
        [
            Turn(content="let me look", calls=[call("a", "x", delay=2), call("b", "y", delay=3)]),
            Turn(content="found it", delay=1.0),
        ]
    )
    result = await host.loop().run()
    # model 1s + the batch (max of 2s and 3s, concurrent) + model 1s
    assert anyio.current_time() - start == 5.0
    assert result.reason == "completed"
    assert result.iterations == 2
    messages = host.state.messages
    assert messages[1] == {
        "role": "assistant",
        "content": "let me look",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": '{"delay": 2}'}},
            {"id": "b", "type": "function", "function": {"name": "y", "arguments": '{"delay": 3}'}},
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "a", "content": '{"ok": "a"}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "b", "content": '{"ok": "b"}'}
    assert messages[4] == {"role": "assistant", "content": "found it"}
    # The second turn saw the whole first iteration.
    assert host.model.seen_lengths == [1, 4]
    assert host.saves() == 2
    assert result.stats == RunStats(
        model_calls=2,
        input_tokens=20,
        output_tokens=10,
        cost=1.0,
        model_seconds=2.0,
        tool_seconds=3.0,
        tool_calls=2,
    )


async def test_calls_to_one_tool_are_pooled_by_per_tool_limit() -> None:
    start = anyio.current_time()
    calls = [call(f"c{i}", "same", delay=1) for i in range(5)]
    host = Host([Turn(calls=calls, delay=0)])
    loop = host.loop(per_tool_limit=2, max_iterations=1)
    result = await loop.run()
    # five one-second calls, two at a time: 1 + 1 + 1
    assert anyio.current_time() - start == 3.0
    assert result.reason == "max_iterations"
    assert [e[2] - start for e in host.log.entries if e[0] == "start"] == [0, 0, 1, 1, 2]


async def test_the_serial_phase_runs_first_one_at_a_time_in_order() -> None:
    start = anyio.current_time()
    calls = [
        call("p1", "work", delay=1),
        call("s1", "activate", delay=2),
        call("p2", "work", delay=1),
        call("s2", "activate", delay=3),
    ]
    host = Host([Turn(calls=calls, delay=0)])
    result = await host.loop(
        max_iterations=1, runs_serially=lambda c: c["function"]["name"] == "activate"
    ).run()
    assert anyio.current_time() - start == 2 + 3 + 1
    starts = {e[1]: e[2] - start for e in host.log.entries if e[0] == "start"}
    assert starts == {"s1": 0.0, "s2": 2.0, "p1": 5.0, "p2": 5.0}
    # answered in call order, not in the order they ran
    tool_ids = [m["tool_call_id"] for m in host.state.messages if m["role"] == "tool"]
    assert tool_ids == ["p1", "s1", "p2", "s2"]
    assert result.stats.tool_seconds == 6.0


async def test_max_iterations_ends_a_model_that_never_stops_calling_tools() -> None:
    start = anyio.current_time()
    host = Host([Turn(calls=[call(f"c{i}", delay=1)]) for i in range(10)])
    result = await host.loop(max_iterations=3).run()
    assert anyio.current_time() - start == 6.0
    assert result.reason == "max_iterations"
    assert result.iterations == 3
    assert host.saves() == 3
    answers(host.state.messages)


async def test_should_stop_is_asked_before_every_model_call() -> None:
    asked: list[float] = []
    start = anyio.current_time()

    def should_stop() -> bool:
        asked.append(anyio.current_time() - start)
        return len(asked) == 3

    host = Host([Turn(calls=[call(f"c{i}", delay=1)]) for i in range(10)])
    result = await host.loop(should_stop=should_stop).run()
    assert result.reason == "should_stop"
    assert result.iterations == 2
    assert asked == [0.0, 2.0, 4.0]
    assert host.saves() == 2


async def test_on_turn_would_end_can_continue_the_loop() -> None:
    host = Host([Turn(content="draft"), Turn(content="final")])
    results: list[ModelTurnResult] = []

    async def on_turn_would_end(result: ModelTurnResult) -> bool:
        results.append(result)
        await anyio.sleep(0.5)
        if len(results) == 1:
            host.state.messages.append({"role": "user", "content": "keep going"})
            return True
        return False

    start = anyio.current_time()
    result = await host.loop(on_turn_would_end=on_turn_would_end).run()
    assert anyio.current_time() - start == 1 + 0.5 + 1 + 0.5
    assert result.reason == "completed"
    assert result.content == "final"
    assert [r.content for r in results] == ["draft", "final"]
    assert [m["content"] for m in host.state.messages] == ["hello", "draft", "keep going", "final"]
    assert host.saves() == 2


async def test_on_turn_would_end_must_return_a_bool() -> None:
    async def sloppy(result: ModelTurnResult) -> bool:
        return 1  # type: ignore[return-value]

    host = Host([Turn(content="x")])
    with pytest.raises(UsageError, match=r"ToolLoop: on_turn_would_end must return a bool, got 1"):
        await host.loop(on_turn_would_end=sloppy).run()


async def test_a_suspending_tool_ends_the_run_with_every_result_recorded() -> None:
    start = anyio.current_time()
    host = Host(
        [
            Turn(
                calls=[
                    call("ask", "human", delay=1, suspend="approve the refund"),
                    call("other", delay=2, compact=True),
                ]
            )
        ]
    )
    compactions: list[float] = []

    async def apply_compaction() -> None:
        compactions.append(anyio.current_time())

    result = await host.loop(apply_compaction=apply_compaction).run()
    assert anyio.current_time() - start == 3.0
    assert result.reason == "suspended"
    assert [s.tool_call_id for s in result.suspensions] == ["ask"]
    assert [s.reason for s in result.suspensions] == ["approve the refund"]
    assert set(answers(host.state.messages)) == {"ask", "other"}
    # before the compaction and persist arms
    assert compactions == []
    assert host.saves() == 0


async def test_compaction_by_token_count_runs_before_persist() -> None:
    seen: list[int] = []

    def needs_compaction(tokens: int) -> bool:
        seen.append(tokens)
        return tokens > 20

    host = Host(
        [
            Turn(calls=[call("a")], input_tokens=10, output_tokens=5),
            Turn(calls=[call("b")], input_tokens=30, output_tokens=5),
            Turn(content="done"),
        ],
        compact_delay=2.0,
    )
    start = anyio.current_time()
    result = await host.loop(needs_compaction=needs_compaction, apply_compaction=host.compact).run()
    assert seen == [15, 35]
    assert anyio.current_time() - start == 3 + 2
    assert result.stats.compactions == 1
    kinds = [k for k in host.log.kinds() if k in ("compact", "save")]
    assert kinds == ["save", "compact", "save", "save"]


async def test_a_tool_can_request_compaction() -> None:
    host = Host([Turn(calls=[call("a", compact=True), call("b")]), Turn(content="done")])
    result = await host.loop(apply_compaction=host.compact, max_iterations=5).run()
    assert result.stats.compactions == 1
    assert host.log.kinds().count("compact") == 1


def test_needs_compaction_without_apply_compaction_is_a_wiring_error() -> None:
    host = Host([])
    with pytest.raises(TypeError, match=r"needs_compaction was given without apply_compaction"):
        host.loop(needs_compaction=lambda tokens: True)


async def test_activations_reach_the_next_turns_tools() -> None:
    active: list[str] = []
    skills: list[tuple[str, ...]] = []

    async def activate_plugins(names: tuple[str, ...]) -> None:
        await anyio.sleep(1)
        active.extend(names)

    async def activate_skills(names: tuple[str, ...]) -> None:
        skills.append(names)

    host = Host(
        [
            Turn(
                calls=[
                    call("a", plugin="calendar", skill="scheduling"),
                    call("b", plugin="calendar"),
                    call("c", plugin="mail"),
                ]
            ),
            Turn(content="done"),
        ]
    )
    start = anyio.current_time()
    await host.loop(
        build_tools=lambda: ["base", *active],
        activate_plugins=activate_plugins,
        activate_skills=activate_skills,
    ).run()
    assert anyio.current_time() - start == 3.0
    assert active == ["calendar", "mail"]
    assert skills == [("scheduling",)]
    assert [list(t.tools) for t in host.model.seen] == [["base"], ["base", "calendar", "mail"]]


async def test_an_ordinary_tool_failure_is_a_result_the_model_sees() -> None:
    host = Host([Turn(calls=[call("a", fail="disk full"), call("b")]), Turn(content="sorry")])
    result = await host.loop().run()
    assert result.reason == "completed"
    failed = next(m for m in host.state.messages if m.get("tool_call_id") == "a")
    # The seed's envelope: no kind for an ordinary failure, key order success, error.
    assert failed["content"] == '{"success":false,"error":"RuntimeError: disk full"}'
    assert result.stats.tool_failures == 1
    assert result.stats.tool_calls == 2


async def test_a_wrong_return_from_run_tool_call_is_a_usage_error_not_a_tool_message() -> None:
    host = Host([Turn(calls=[call("a", bad_return=True), call("b", delay=2)])])
    with pytest.raises(UsageError, match=r"run_tool_call must return a ToolCallOutcome, got 'not"):
        await host.loop(max_iterations=1).run()
    found = answers(host.state.messages)
    # The miswired call ran and cannot be read: "effect unknown", never the error text.
    assert found["a"] == {
        "success": False,
        "kind": "interrupted",
        "error": INTERRUPTED_TOOL_CALL_MESSAGE,
    }
    # The rest of the batch finished and keeps its real answer.
    assert found["b"] == {"ok": "b"}
    assert host.saves() == 0


async def test_answering_another_call_id_is_a_usage_error() -> None:
    host = Host([Turn(calls=[call("a"), call("b", answer_for="zzz")])])
    with pytest.raises(UsageError, match=r"run_tool_call answered 'zzz' when called for 'b'"):
        await host.loop(max_iterations=1).run()
    found = answers(host.state.messages)
    assert found["a"] == {"ok": "a"}
    assert kind_of(found["b"]) == "interrupted"


async def test_a_fatal_pooled_error_propagates_as_itself_after_the_batch() -> None:
    host = Host(
        [Turn(calls=[call("a", delay=1), call("b", fatal=True, delay=2), call("c", delay=3)])]
    )
    start = anyio.current_time()
    with pytest.raises(FatalToolError, match="fatal in b") as info:
        await host.loop(is_fatal_tool_error=lambda e: isinstance(e, FatalToolError)).run()
    # Itself, not an ExceptionGroup holding it.
    assert type(info.value) is FatalToolError
    # The pool settles every call before the loop reads a result.
    assert anyio.current_time() - start == 4.0
    kinds = assert_answers_match_log(host.state.messages, host.log)
    assert kinds == {"a": "ok", "b": "failed", "c": "ok"}
    assert host.saves() == 0


async def test_a_fatal_serial_error_propagates_at_once_and_nothing_after_it_starts() -> None:
    host = Host(
        [
            Turn(
                calls=[
                    call("s1", "act", fatal=True, delay=1),
                    call("s2", "act"),
                    call("p", "work"),
                ]
            )
        ]
    )
    start = anyio.current_time()
    with pytest.raises(FatalToolError) as info:
        await host.loop(
            runs_serially=lambda c: c["function"]["name"] == "act",
            is_fatal_tool_error=lambda e: isinstance(e, FatalToolError),
        ).run()
    assert type(info.value) is FatalToolError
    assert anyio.current_time() - start == 2.0
    assert host.log.started() == ["s1"]
    kinds = assert_answers_match_log(host.state.messages, host.log)
    assert kinds == {"s1": "failed", "s2": "not_run", "p": "not_run"}


async def test_an_ordinary_serial_failure_does_not_stop_the_serial_phase() -> None:
    host = Host([Turn(calls=[call("s1", "act", fail="nope"), call("s2", "act")])])
    await host.loop(max_iterations=1, runs_serially=lambda c: True).run()
    assert assert_answers_match_log(host.state.messages, host.log) == {
        "s1": "failed",
        "s2": "ok",
    }


async def test_run_stats_accumulate_across_iterations() -> None:
    host = Host(
        [
            Turn(calls=[call("a", delay=2), call("b", fail="x")], cost=0.25, delay=1),
            Turn(calls=[call("c", delay=1)], cost=0.5, delay=2, input_tokens=100),
            Turn(content="done", cost=1.0, delay=0.5, output_tokens=7),
        ]
    )
    loop = host.loop()
    result = await loop.run()
    assert result.stats == loop.stats
    assert result.stats == RunStats(
        model_calls=3,
        input_tokens=120,
        output_tokens=17,
        cost=1.75,
        model_seconds=3.5,
        tool_seconds=3.0,
        tool_calls=3,
        tool_failures=1,
    )


def test_run_stats_add_field_by_field() -> None:
    a = RunStats(model_calls=1, cost=0.5, tool_calls=2, compactions=1)
    b = RunStats(model_calls=2, cost=0.25, tool_calls_not_run=3)
    assert a + b == RunStats(
        model_calls=3, cost=0.75, tool_calls=2, tool_calls_not_run=3, compactions=1
    )
    assert a.__add__(3) is NotImplemented


async def test_a_loop_runs_once() -> None:
    host = Host([Turn(content="x")])
    loop = host.loop()
    await loop.run()
    with pytest.raises(UsageError, match=r"ToolLoop.run: a loop runs once"):
        await loop.run()


async def test_call_model_must_return_a_model_turn_result() -> None:
    seen: list[ModelTurn] = []

    async def bad_model(turn: ModelTurn) -> ModelTurnResult:
        seen.append(turn)
        await anyio.lowlevel.checkpoint()
        return {"content": "x"}  # type: ignore[return-value]

    host = Host([])
    with pytest.raises(UsageError, match=r"call_model must return a ModelTurnResult"):
        await host.loop(call_model=bad_model, text_sink=ListSink()).run()
    # the loop finishes the turn's stream however the turn ended
    (turn,) = seen
    assert turn.text_stream is not None
    assert turn.text_stream.finished


async def test_a_stop_refusal_judged_fatal_propagates_from_the_serial_phase() -> None:
    seen: list[BaseException] = []

    def is_fatal(error: BaseException) -> bool:
        seen.append(error)
        return isinstance(error, AbortedToolCallError)

    stop = anyio.CancelScope()
    host = Host([Turn(calls=[call("s1", "act"), call("p")], delay=1)])
    loop = host.loop(
        stop=stop, runs_serially=lambda c: c["id"] == "s1", is_fatal_tool_error=is_fatal
    )
    caught: BaseException | None = None
    async with anyio.create_task_group() as tg:
        # the stop fires during the model call, after the top-of-iteration check
        tg.start_soon(cancel_at, stop, 0.5, host.log, "stop")
        try:
            await loop.run()
        except AbortedToolCallError as exc:
            caught = exc
    assert type(caught) is AbortedToolCallError
    assert caught.tool_call_id == "s1"
    assert [type(e) for e in seen] == [AbortedToolCallError]
    assert host.log.started() == []
    assert assert_answers_match_log(host.state.messages, host.log) == {
        "s1": "not_run",
        "p": "not_run",
    }


async def test_tool_call_objects_from_the_sdk_are_accepted() -> None:
    from openai.types.chat import ChatCompletionMessageToolCall

    sdk_call = ChatCompletionMessageToolCall.model_validate(
        {"id": "sdk1", "type": "function", "function": {"name": "work", "arguments": "{}"}}
    )
    calls: list[ToolCallLike] = [sdk_call]
    host = Host([Turn(calls=calls)])
    await host.loop(max_iterations=1).run()
    assert host.state.messages[1]["tool_calls"] == [
        {"id": "sdk1", "type": "function", "function": {"name": "work", "arguments": "{}"}}
    ]
    assert json.loads(host.state.messages[2]["content"]) == {"ok": "sdk1"}


def test_tool_call_outcome_from_content() -> None:
    outcome = ToolCallOutcome.from_content("c1", "42", request_compaction=True)
    assert outcome.tool_message == {"role": "tool", "tool_call_id": "c1", "content": "42"}
    assert outcome.tool_call_id == "c1"
    assert outcome.request_compaction is True
