"""Hard cancel and soft stop, injected at every checkpoint of an iteration.

The hard-cancel invariants, checked after every injection:

* ``Cancelled`` propagates (the scope caught it; ``run()`` returned nothing);
* every tool call of the last assistant message is answered exactly once,
  truthfully (finished → its result, cut off → ``interrupted``, never
  started → ``not_run``);
* no tool call, model call, compaction or persist starts after the cancel.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from loop_scripts import (
    Host,
    Turn,
    assert_answers_match_log,
    assert_nothing_after_cancel,
    call,
    cancel_at,
)

from juno_bind_trio import AbortedToolCallError, InterruptedToolCallError
from juno_bind_trio.completion import ListSink, ResetEvent
from juno_bind_trio.loop import ModelTurnResult, ToolCallRejectedEvent, ToolLoop

pytestmark = pytest.mark.anyio


async def run_cancelled_at(host: Host, delay: float, **overrides: Any) -> ToolLoop:
    """Run a loop for *host*, cancel its scope after *delay* seconds, check the invariants."""
    loop = host.loop(**overrides)
    scope = anyio.CancelScope()
    returned = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_at, scope, delay, host.log)
        with scope:
            await loop.run()
            returned = True
    assert not returned
    assert scope.cancelled_caught
    assert_answers_match_log(host.state.messages, host.log)
    assert_nothing_after_cancel(host.log)
    return loop


def tool_kinds(host: Host) -> dict[str, str]:
    return assert_answers_match_log(host.state.messages, host.log)


# --- hard cancel, checkpoint by checkpoint ----------------------------------------------


async def test_cancel_during_the_model_call() -> None:
    start = anyio.current_time()
    sink = ListSink()
    host = Host([Turn(calls=[call("a")], delay=3, lost=["hel", "lo"], failed_attempts=1)])
    loop = await run_cancelled_at(host, 1.5, text_sink=sink)
    assert anyio.current_time() - start == 1.5
    # nothing recorded for a turn that never returned
    assert host.state.messages == [{"role": "user", "content": "hello"}]
    assert loop.iterations == 1
    assert loop.stats.model_seconds == 1.5
    assert loop.stats.model_calls == 1
    assert host.saves() == 0
    stream = host.model.seen[0].text_stream
    assert stream is not None
    assert stream.finished
    # finish("failed") drops the armed reset: the partial text stays on screen
    assert not any(isinstance(e, ResetEvent) for e in sink.events)


async def test_cancel_during_the_serial_phase() -> None:
    start = anyio.current_time()
    host = Host(
        [
            Turn(
                calls=[
                    call("p1", "work", delay=1),
                    call("s1", "act", delay=1),
                    call("s2", "act", delay=1),
                    call("s3", "act", delay=1),
                ]
            )
        ]
    )
    loop = await run_cancelled_at(host, 2.5, runs_serially=lambda c: c["function"]["name"] == "act")
    assert anyio.current_time() - start == 2.5
    assert tool_kinds(host) == {"s1": "ok", "s2": "interrupted", "s3": "not_run", "p1": "not_run"}
    assert host.log.started() == ["s1", "s2"]
    assert loop.stats.tool_calls_interrupted == 1
    assert loop.stats.tool_calls_not_run == 2
    assert loop.stats.tool_seconds == 1.5
    assert host.saves() == 0


async def test_cancel_during_the_pool() -> None:
    start = anyio.current_time()
    host = Host(
        [
            Turn(
                calls=[
                    call("a1", "a", delay=1),
                    call("a2", "a", delay=1),
                    call("a3", "a", delay=1),
                    call("b", "b", delay=5),
                ]
            )
        ]
    )
    await run_cancelled_at(host, 2.5, per_tool_limit=1)
    assert anyio.current_time() - start == 2.5
    assert tool_kinds(host) == {
        "a1": "ok",
        "a2": "interrupted",
        "a3": "not_run",
        "b": "interrupted",
    }
    assert host.saves() == 0


async def test_a_deadline_is_a_hard_cancel_too() -> None:
    start = anyio.current_time()
    host = Host([Turn(calls=[call("a", delay=1), call("b", delay=4)]), Turn(content="never")])
    with anyio.move_on_after(3) as scope:
        await host.loop().run()
    assert scope.cancelled_caught
    assert anyio.current_time() - start == 3.0
    assert tool_kinds(host) == {"a": "ok", "b": "interrupted"}
    assert host.log.kinds().count("model") == 1


async def test_cancel_during_persist() -> None:
    host = Host([Turn(calls=[call("a")]), Turn(content="never")], save_delay=2)
    start = anyio.current_time()
    await run_cancelled_at(host, 2.0)
    assert anyio.current_time() - start == 2.0
    # entered once, before the cancel; never finished, never entered again
    assert host.saves() == 1
    assert "saved" not in host.log.kinds()
    assert tool_kinds(host) == {"a": "ok"}


async def test_cancel_during_compaction() -> None:
    host = Host([Turn(calls=[call("a", compact=True)]), Turn(content="never")], compact_delay=2)
    await run_cancelled_at(host, 1.5, apply_compaction=host.compact)
    assert host.log.kinds().count("compact") == 1
    assert host.saves() == 0
    assert tool_kinds(host) == {"a": "ok"}


async def test_cancel_during_plugin_activation() -> None:
    async def activate(names: tuple[str, ...]) -> None:
        await anyio.sleep(5)

    host = Host([Turn(calls=[call("a", plugin="p")]), Turn(content="never")])
    await run_cancelled_at(host, 2, activate_plugins=activate)
    assert host.saves() == 0
    assert tool_kinds(host) == {"a": "ok"}


async def test_cancel_during_on_turn_would_end() -> None:
    async def on_turn_would_end(result: ModelTurnResult) -> bool:
        await anyio.sleep(5)
        return True

    host = Host([Turn(content="draft")])
    await run_cancelled_at(host, 2, on_turn_would_end=on_turn_would_end)
    assert host.saves() == 0
    assert host.state.messages[-1] == {"role": "assistant", "content": "draft"}


async def test_a_tool_that_turns_the_cancel_into_an_error_is_still_interrupted() -> None:
    host = Host([Turn(calls=[call("s1", "act", delay=3, swallow_cancel=True), call("s2", "act")])])
    await run_cancelled_at(host, 2, runs_serially=lambda c: True)
    assert tool_kinds(host) == {"s1": "interrupted", "s2": "not_run"}
    assert host.log.started() == ["s1"]


async def test_no_serial_call_starts_under_a_cancel_a_shielded_tool_left_pending() -> None:
    start = anyio.current_time()
    host = Host([Turn(calls=[call("s1", "act", delay=3, shield=True), call("s2", "act")])])
    await run_cancelled_at(host, 2, runs_serially=lambda c: True)
    # s1 finished under its shield at 1 + 3; the cancel then stopped everything else.
    assert anyio.current_time() - start == 4.0
    assert tool_kinds(host) == {"s1": "ok", "s2": "not_run"}
    assert host.log.started() == ["s1"]


@pytest.mark.parametrize("port", ["activate_plugins", "on_turn_would_end"])
async def test_no_port_is_entered_under_a_cancel_a_shielded_port_left_pending(port: str) -> None:
    async def shielded(*args: Any) -> bool:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(3)
        return True

    turn = Turn(calls=[call("a", plugin="p")]) if port == "activate_plugins" else Turn(content="x")
    host = Host([turn, Turn(content="never")], compact_delay=1)
    overrides: dict[str, Any] = {
        port: shielded,
        "apply_compaction": host.compact,
        "needs_compaction": lambda tokens: True,
    }
    await run_cancelled_at(host, 2, **overrides)
    assert host.saves() == 0
    assert "compact" not in host.log.kinds()
    assert host.log.kinds().count("model") == 1


async def test_cancel_between_iterations_leaves_the_finished_iteration_intact() -> None:
    host = Host(
        [
            Turn(calls=[call("a", delay=1)]),
            Turn(calls=[call("b", delay=1), call("c", delay=3)]),
            Turn(content="never"),
        ]
    )
    await run_cancelled_at(host, 5)
    assert tool_kinds(host) == {"a": "ok", "b": "ok", "c": "interrupted"}
    assert host.saves() == 1


# --- soft stop ---------------------------------------------------------------------------


async def run_stopped_at(
    host: Host, delay: float, *, late_save: bool = False, **overrides: Any
) -> Any:
    """Run a loop for *host* with a soft stop fired after *delay* seconds.

    Checks that nothing but (with *late_save*) a persist started after the stop.
    """
    stop = anyio.CancelScope()
    loop = host.loop(stop=stop, **overrides)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_at, stop, delay, host.log, "stop")
        result = await loop.run()
        tg.cancel_scope.cancel()
    late_kinds = (
        ("start", "model", "compact") if late_save else ("start", "model", "save", "compact")
    )
    late = [e for e in host.log.after("stop") if e[0] in late_kinds]
    assert late == []
    return result


async def test_a_stop_during_the_pool_refuses_what_is_queued_and_ends_the_run() -> None:
    start = anyio.current_time()
    calls = [call(f"c{i}", "same", delay=1) for i in range(4)]
    host = Host([Turn(calls=calls), Turn(content="never")])
    result = await run_stopped_at(host, 1.5, per_tool_limit=1, apply_compaction=host.compact)
    # in-flight c0 finishes at 2; c1..c3 are refused at claim time
    assert anyio.current_time() - start == 2.0
    assert result.reason == "stopped"
    assert result.iterations == 1
    assert tool_kinds(host) == {"c0": "ok", "c1": "not_run", "c2": "not_run", "c3": "not_run"}
    assert result.stats.tool_calls_not_run == 3
    assert host.saves() == 0


async def test_a_stop_in_the_serial_phase_refuses_the_rest_through_the_same_seams() -> None:
    events_send, events_receive = anyio.create_memory_object_stream[Any](100)
    host = Host([Turn(calls=[call("s1", "act", delay=2), call("s2", "act"), call("p", "work")])])
    result = await run_stopped_at(
        host,
        2,
        runs_serially=lambda c: c["function"]["name"] == "act",
        events=events_send,
    )
    assert result.reason == "stopped"
    assert tool_kinds(host) == {"s1": "ok", "s2": "not_run", "p": "not_run"}
    rejected = []
    while True:
        try:
            event = events_receive.receive_nowait()
        except anyio.WouldBlock:
            break
        if type(event).__name__ == "ToolCallRejectedEvent":
            rejected.append((event.tool_call_id, event.kind))
    assert rejected == [("s2", "not_run"), ("p", "not_run")]
    events_send.close()
    events_receive.close()


async def test_a_stop_before_the_run_makes_no_model_call() -> None:
    stop = anyio.CancelScope()
    stop.cancel()
    host = Host([Turn(content="never")])
    result = await host.loop(stop=stop).run()
    assert result.reason == "stopped"
    assert result.iterations == 0
    assert host.log.entries == []


async def test_a_stop_during_the_model_call_refuses_the_whole_batch() -> None:
    host = Host([Turn(calls=[call("a"), call("b")], delay=2)])
    result = await run_stopped_at(host, 1)
    assert result.reason == "stopped"
    assert tool_kinds(host) == {"a": "not_run", "b": "not_run"}
    assert host.log.started() == []


async def test_a_stop_during_persist_ends_the_run_before_the_next_model_call() -> None:
    host = Host([Turn(calls=[call("a")]), Turn(content="never")], save_delay=2)
    result = await run_stopped_at(host, 2)
    assert result.reason == "stopped"
    # the soft stop lets the persist in flight finish
    assert host.log.kinds().count("saved") == 1
    assert host.log.kinds().count("model") == 1


async def test_a_stop_comes_before_the_suspend_arm() -> None:
    host = Host([Turn(calls=[call("a", delay=2, suspend="ask"), call("b", "other", delay=2)])])
    result = await run_stopped_at(host, 1.5)
    assert result.reason == "stopped"
    assert result.suspensions == ()
    assert tool_kinds(host) == {"a": "ok", "b": "ok"}


async def test_a_final_answer_during_a_stop_still_completes_and_is_persisted() -> None:
    # The answer is real (nothing was refused), so it is recorded like any other.
    host = Host([Turn(content="the answer", delay=2)])
    result = await run_stopped_at(host, 1, late_save=True)
    assert result.reason == "completed"
    assert result.content == "the answer"
    assert host.saves() == 1


async def test_a_cancel_and_a_stop_both_pending_in_the_serial_phase_cancel_wins() -> None:
    # s1 runs shielded through both; s2 is claimed next. The pool checks the hard
    # cancel first, so the serial phase must too: Cancelled propagates, rather
    # than a refusal that is_fatal_tool_error turns into an AbortedToolCallError.
    host = Host([Turn(calls=[call("s1", "act", delay=3, shield=True), call("s2", "act")])])
    stop = anyio.CancelScope()
    loop = host.loop(
        stop=stop,
        runs_serially=lambda c: True,
        is_fatal_tool_error=lambda e: isinstance(e, AbortedToolCallError),
    )
    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_at, stop, 2, host.log, "stop")
        tg.start_soon(cancel_at, scope, 2, host.log, "cancel")
        with scope:
            await loop.run()
    assert scope.cancelled_caught
    assert tool_kinds(host) == {"s1": "ok", "s2": "not_run"}
    assert_nothing_after_cancel(host.log)


@pytest.mark.parametrize("activation", ["plugin", "skill"])
async def test_no_activation_is_entered_under_a_cancel_a_shielded_serial_tool_left_pending(
    activation: str,
) -> None:
    entered: list[tuple[str, ...]] = []

    async def activate(names: tuple[str, ...]) -> None:
        entered.append(names)

    # The shielded call is the batch's last: no claim after it sees the cancel.
    host = Host([Turn(calls=[call("s1", "act", delay=3, shield=True, **{activation: "x"})])])
    port = "activate_plugins" if activation == "plugin" else "activate_skills"
    await run_cancelled_at(host, 2, runs_serially=lambda c: True, **{port: activate})
    assert entered == []
    assert tool_kinds(host) == {"s1": "ok"}
    assert host.saves() == 0


def shielded(port: Any) -> Any:
    """*port*, run to its end whatever the cancel says (the cancel is left pending)."""

    async def run(*args: Any) -> Any:
        with anyio.CancelScope(shield=True):
            return await port(*args)

    return run


@pytest.mark.parametrize("with_on_turn_would_end", [False, True])
async def test_nothing_after_a_shielded_final_answer_under_a_cancel(
    with_on_turn_would_end: bool,
) -> None:
    asked: list[ModelTurnResult] = []

    async def on_turn_would_end(result: ModelTurnResult) -> bool:
        asked.append(result)
        return False

    host = Host([Turn(content="the answer", delay=3)])
    overrides: dict[str, Any] = {"call_model": shielded(host.model)}
    if with_on_turn_would_end:
        overrides["on_turn_would_end"] = on_turn_would_end
    await run_cancelled_at(host, 2, **overrides)
    assert asked == []
    assert host.saves() == 0
    assert host.state.messages[-1] == {"role": "assistant", "content": "the answer"}


async def test_no_model_call_after_a_shielded_persist_under_a_cancel() -> None:
    host = Host([Turn(calls=[call("a")]), Turn(content="never")], save_delay=3)
    await run_cancelled_at(host, 3, save_session=shielded(host.save))
    assert host.log.kinds().count("saved") == 1
    assert host.log.kinds().count("model") == 1


@pytest.mark.parametrize("serial", [False, True])
async def test_an_interrupted_call_keeps_what_the_tool_raised_as_the_cause(serial: bool) -> None:
    # The pool keeps the error a tool turned the cancel into; the serial phase must too.
    send, receive = anyio.create_memory_object_stream[Any](100)
    with send, receive:
        host = Host([Turn(calls=[call("s1", "act", delay=3, swallow_cancel=True)])])
        await run_cancelled_at(host, 2, runs_serially=lambda c: serial, events=send)
        events = []
        while True:
            try:
                events.append(receive.receive_nowait())
            except anyio.WouldBlock:
                break
    (rejected,) = [e for e in events if isinstance(e, ToolCallRejectedEvent)]
    assert rejected.kind == "interrupted"
    assert isinstance(rejected.error, InterruptedToolCallError)
    assert isinstance(rejected.error.__cause__, RuntimeError)


async def test_a_cancel_and_a_stop_both_pending_after_the_pool_cancel_wins() -> None:
    # p1 runs shielded through both; the batch ends with the stop fired, which
    # alone would end the run "stopped". With the hard cancel pending too, the
    # caller gets the cancellation, not a result that reads as a soft ending.
    host = Host([Turn(calls=[call("p1", "act", delay=3, shield=True)])])
    stop = anyio.CancelScope()
    loop = host.loop(stop=stop)
    scope = anyio.CancelScope()
    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_at, stop, 2, host.log, "stop")
        tg.start_soon(cancel_at, scope, 2, host.log, "cancel")
        with scope:
            await loop.run()
    assert scope.cancelled_caught
    assert anyio.current_time() - start == 4  # the model's second, then the 3 s tool
    assert tool_kinds(host) == {"p1": "ok"}
    assert host.saves() == 0
    assert_nothing_after_cancel(host.log)
