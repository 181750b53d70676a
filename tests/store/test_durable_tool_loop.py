"""DurableRun.tool_loop: the run's loop with its durable ports wired, on both stores.

The loop it builds must store and resume a run exactly as a loop wired by
hand does (the hand wiring stays supported, and ``drive`` still offers it);
the arguments that belong to the run are refused, naming themselves; every
other ToolLoop option reaches the loop.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from juno_bind_trio import UsageError
from juno_bind_trio.completion import ListSink
from juno_bind_trio.loop import (
    LoopEvent,
    ModelTurn,
    ModelTurnResult,
    StatusEvent,
    ToolCallOutcome,
)
from juno_bind_trio.run import ToolCallLike, tool_call_id
from juno_bind_trio.store import RunStore, open_durable_run
from juno_bind_trio.testing import CrashingStore, CrashPoint, run_until_crash

from .durable_world import Wiring, World, call, check_history, drive

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "send the invitations"}]


async def answer(tool_call: ToolCallLike) -> ToolCallOutcome:
    call_id = tool_call_id(tool_call)
    return ToolCallOutcome(tool_message={"role": "tool", "tool_call_id": call_id, "content": "ok"})


async def done(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="done")


async def crash_and_resume(
    store: RunStore, run_id: str, wiring: Wiring, point: CrashPoint, n: int
) -> dict[str, Any]:
    """Crash a run at *point*, resume it, and return everything the store and the tools saw."""
    await store.create_run(run_id, messages=USER)
    world = World()

    async def first_worker() -> None:
        await drive(CrashingStore(store, point, n), run_id, world, wiring=wiring)

    assert await run_until_crash(first_worker)

    async def stored() -> dict[str, Any]:
        loaded = await store.load(run_id)
        receipts = await store.receipts(run_id)
        return {
            "status": loaded.record.status,
            "lease_owner": loaded.record.lease_owner,
            "iteration": loaded.record.iteration,
            "pending_iteration": loaded.record.pending_iteration,
            "messages": loaded.messages,
            "pending_turn": loaded.pending_turn,
            "receipts": sorted(
                ((r.iteration, r.tool_call_id, r.state, r.message) for r in receipts), key=repr
            ),
        }

    dead = await stored()
    assert (dead["status"], dead["lease_owner"]) == ("running", "w1")
    result = await drive(store, run_id, world, wiring=wiring)
    final = await stored()
    assert (result.reason, final["status"]) == ("completed", "completed")
    check_history(final["messages"])
    return {
        "dead": dead,
        "final": final,
        "effects": sorted(world.effects),
        "reads": sorted(world.reads),
    }


@pytest.mark.parametrize(
    ("point", "n", "effects"),
    [
        ("after_model_answer", 2, ["c1", "c3", "c4"]),
        # c1 started and may have sent: refused on resume, never sent twice.
        ("after_calls_started", 1, ["c3", "c4"]),
        ("after_results", 2, ["c1", "c3", "c4"]),
        ("before_save", 1, ["c1", "c3", "c4"]),
    ],
)
async def test_its_loop_is_stored_and_resumed_as_a_hand_wired_one(
    store: RunStore, point: CrashPoint, n: int, effects: list[str]
) -> None:
    helper = await crash_and_resume(store, "by-helper", "tool_loop", point, n)
    by_hand = await crash_and_resume(store, "by-hand", "by_hand", point, n)
    assert helper == by_hand
    assert helper["effects"] == effects
    if point == "before_save":
        # What the loop had saved before the crash: the first batch's receipts,
        # settled, and its assistant message as the open turn (the save never came).
        dead = helper["dead"]
        assert (dead["iteration"], dead["pending_iteration"]) == (0, 1)
        assert {receipt[2] for receipt in dead["receipts"]} == {"succeeded"}


async def test_a_lost_lease_stops_its_loop_softly(store: RunStore, clock: Any) -> None:
    # The run's stop is wired: the loop ends "stopped" and its worker writes nothing.
    await store.create_run("r1", messages=USER)
    world = World()

    async def thief() -> None:
        world.during_tool = None
        clock.advance(31)
        await store.claim_run("r1", owner="w2", ttl=30)

    world.during_tool = thief
    assert (await drive(store, "r1", world, wiring="tool_loop")).reason == "stopped"
    loaded = await store.load("r1")
    assert (loaded.record.lease_owner, loaded.record.iteration) == ("w2", 0)


@pytest.mark.parametrize("name", ["state", "save_session", "stop"])
async def test_it_refuses_what_belongs_to_the_run(store: RunStore, name: str) -> None:
    await store.create_run("r1", messages=USER)
    async with open_durable_run(store, "r1", owner="w1") as run:
        # Even the run's own value: the argument has no business being given.
        own: dict[str, object] = {
            "state": run.state,
            "save_session": run.save_session,
            "stop": run.stop,
        }
        with pytest.raises(TypeError, match=rf"^DurableRun\.tool_loop: {name} is the run's own"):
            run.tool_loop(
                call_model=done, run_tool_call=answer, max_iterations=3, **{name: own[name]}
            )
        await run.finish("stopped")


async def test_it_takes_the_runs_id_and_refuses_another(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    async with open_durable_run(store, "r1", owner="w1") as run:
        assert run.tool_loop(call_model=done, run_tool_call=answer, max_iterations=1).run_id == "r1"
        same = run.tool_loop(call_model=done, run_tool_call=answer, max_iterations=1, run_id="r1")
        assert same.run_id == "r1"
        with pytest.raises(ValueError, match=r"run_id 'r2' is not this run's \('r1'\)"):
            run.tool_loop(call_model=done, run_tool_call=answer, max_iterations=1, run_id="r2")
        await run.finish("stopped")


async def test_it_refuses_ports_the_loop_would_refuse(store: RunStore) -> None:
    # The wrappers are async whatever they wrap: the loop's own check must not be lost.
    def sync_model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="done")

    def sync_tool(tool_call: ToolCallLike) -> ToolCallOutcome:
        raise AssertionError("never called")

    await store.create_run("r1", messages=USER)
    async with open_durable_run(store, "r1", owner="w1") as run:
        with pytest.raises(TypeError, match="call_model must be an async function"):
            run.tool_loop(call_model=sync_model, run_tool_call=answer, max_iterations=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="run_tool_call must be an async function"):
            run.tool_loop(call_model=done, run_tool_call=sync_tool, max_iterations=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="max_iteration"):
            run.tool_loop(call_model=done, run_tool_call=answer, max_iteration=1)
        with pytest.raises(TypeError, match="max_iterations"):
            run.tool_loop(call_model=done, run_tool_call=answer)
        await run.finish("stopped")


async def test_it_waits_for_the_open_turn_and_not_after_finish(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    assert await run_until_crash(
        lambda: drive(CrashingStore(store, "after_model_answer", 1), "r1", world)
    )
    async with open_durable_run(store, "r1", owner="w1") as run:
        # Built now, its loop would ask the model again with c1 and c2 missing.
        with pytest.raises(UsageError, match=r"open turn; await run\.finish_open_turn"):
            run.tool_loop(call_model=done, run_tool_call=answer, max_iterations=3)
        await run.finish_open_turn(answer)
        result = await run.tool_loop(call_model=done, run_tool_call=answer, max_iterations=3).run()
        assert result.reason == "completed"
        await run.finish(result.reason)
        with pytest.raises(UsageError, match="already finished"):
            run.tool_loop(call_model=done, run_tool_call=answer, max_iterations=3)
    loaded = await store.load("r1")
    assert loaded.record.status == "completed"
    check_history(loaded.messages)


async def test_it_passes_the_other_options_on(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    sink = ListSink()
    send, receive = anyio.create_memory_object_stream[LoopEvent](16)
    running = 0
    most = 0

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        assert turn.text_stream is not None
        turn.text_stream.begin_attempt()
        turn.text_stream.observe("sending")
        return ModelTurnResult(tool_calls=(call("c1", "send", to="a"), call("c2", "send", to="b")))

    async def one_at_a_time(tool_call: ToolCallLike) -> ToolCallOutcome:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(1)
        running -= 1
        return await answer(tool_call)

    async with open_durable_run(store, "r1", owner="w1") as run:
        loop = run.tool_loop(
            call_model=call_model,
            run_tool_call=one_at_a_time,
            max_iterations=1,
            text_sink=sink,
            events=send,
            per_tool_limit=1,
        )
        result = await loop.run()
        await run.finish(result.reason)
    assert result.reason == "max_iterations"  # max_iterations reached the loop
    assert most == 1  # per_tool_limit did
    assert {event.turn_id for event in sink.events} == {"r1:1"}  # text_sink did, with run_id
    with send, receive:
        events = [receive.receive_nowait() for _ in range(receive.statistics().current_buffer_used)]
    assert any(isinstance(event, StatusEvent) for event in events)  # events did
    # And the run is stored as the loop went: the iteration, both receipts settled.
    loaded = await store.load("r1")
    assert (loaded.record.status, loaded.record.iteration) == ("max_iterations", 1)
    assert {(r.tool_call_id, r.state) for r in await store.receipts("r1")} == {
        ("c1", "succeeded"),
        ("c2", "succeeded"),
    }


async def test_its_loop_numbers_its_turns_as_the_run_does(store: RunStore) -> None:
    # A run stored at iteration 2 with its third turn open: the open turn is answered
    # as iteration 3, and the loop's first turn is the run's iteration 4, under that id.
    await store.create_run("r1", messages=USER)
    async with open_durable_run(store, "r1", owner="w1") as run:
        lease = run.lease
        await store.save_transcript(lease, [*USER], iteration=2)
        await store.save_turn(
            lease,
            iteration=3,
            assistant={"role": "assistant", "content": None, "tool_calls": [call("c1", "look")]},
        )
    seen: list[tuple[str, int]] = []

    async def model(turn: ModelTurn) -> ModelTurnResult:
        seen.append((turn.turn_id, turn.iteration))
        return ModelTurnResult(content="done")

    async with open_durable_run(store, "r1", owner="w2") as run:
        assert (run.iteration, run.first_iteration, run.open_turn_iteration) == (2, 3, 3)
        await run.finish_open_turn(answer)
        assert (run.iteration, run.first_iteration) == (3, 4)
        with pytest.raises(ValueError, match=r"first_iteration 1 is not the run's next \(4\)"):
            run.tool_loop(
                call_model=model, run_tool_call=answer, max_iterations=1, first_iteration=1
            )
        loop = run.tool_loop(call_model=model, run_tool_call=answer, max_iterations=1)
        assert loop.first_iteration == 4
        result = await loop.run()
        await run.finish(result.reason)
    assert seen == [("r1:4", 4)]
    assert (await store.get_run("r1")).iteration == 4
