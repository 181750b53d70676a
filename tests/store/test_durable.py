"""Durable runs on both stores: persisted as they go, resumed after a crash, never twice."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import anyio.lowlevel
import openai
import pytest

from juno_bind_trio import INTERRUPTED_TOOL_CALL_MESSAGE
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.plugins import tool_failure_message
from juno_bind_trio.run import ToolCallReceiptKey
from juno_bind_trio.store import (
    WORKER_STOPPED_TOOL_CALL_MESSAGE,
    RunLeasedError,
    RunStore,
    StoreDataError,
    open_durable_run,
    serve_runs,
    tool_call_idempotency_key,
    tool_call_receipt_key,
)
from juno_bind_trio.testing import (
    CrashingStore,
    CrashPoint,
    SimulatedCrash,
    ToolCallHistoryError,
    run_until_crash,
)

from .durable_world import SCRIPT, World, call, check_history, drive, provider_accepts
from .store_helpers import FakeClock, raw_execute, raw_query

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "send the invitations"}]


def interrupted_answers(messages: list[dict[str, Any]]) -> set[str]:
    """The calls answered ``kind: "interrupted"`` (refused: their effect is unknown)."""
    refused = set()
    for m in messages:
        answer = json.loads(m["content"]) if m["role"] == "tool" and m["content"][:1] == "{" else {}
        if answer.get("kind") == "interrupted":
            refused.add(m["tool_call_id"])
    return refused


async def test_a_durable_run_is_saved_at_every_iteration(store: RunStore) -> None:
    await store.create_run("r1", messages=USER, agent="inviter")
    world = World()
    result = await drive(store, "r1", world)
    assert result.reason == "completed"
    loaded = await store.load("r1")
    assert loaded.record.status == "completed"
    assert loaded.record.iteration == 3
    assert loaded.record.lease_owner is None
    assert loaded.pending_turn is None
    check_history(loaded.messages)
    assert loaded.messages[-1] == {"role": "assistant", "content": "all sent"}
    receipts = await store.receipts("r1")
    assert [(r.iteration, r.tool_call_id, r.state) for r in receipts] == [
        (1, "c1", "succeeded"),
        (1, "c2", "succeeded"),
        (2, "c3", "succeeded"),
        (2, "c4", "succeeded"),
    ]
    assert [r.resumability for r in receipts] == [
        "non_repeatable",
        "repeatable",
        "non_repeatable",
        "non_repeatable",
    ]
    assert sorted(world.effects) == ["c1", "c3", "c4"]
    with pytest.raises(ValueError, match="ended 'completed'"):
        await drive(store, "r1", world)
    # The refused open gave its claim back and left the status as it was.
    after = await store.get_run("r1")
    assert (after.status, after.lease_owner) == ("completed", None)


# Every point, at each call of the scripted run; the tool that honours its
# idempotency key on every other row, so both resume paths meet every point.
CRASHES: list[tuple[CrashPoint, int, bool]] = [
    ("after_model_answer", 1, False),
    ("after_model_answer", 2, True),
    ("after_calls_started", 1, False),
    ("after_calls_started", 1, True),
    ("after_calls_started", 2, False),
    ("after_calls_started", 3, True),
    ("after_results", 1, False),
    ("after_results", 1, True),
    ("after_results", 2, True),
    ("after_results", 3, False),
    ("before_save", 1, True),
    ("before_save", 2, False),
    ("before_save", 3, True),
]


@pytest.mark.parametrize(("point", "n", "idempotent_send"), CRASHES)
async def test_a_crash_at_any_point_resumes_with_no_effect_twice(
    store: RunStore, point: CrashPoint, n: int, idempotent_send: bool
) -> None:
    await store.create_run("r1", messages=USER)
    world = World(idempotent_send=idempotent_send)
    crashing = CrashingStore(store, point, n)
    assert await run_until_crash(lambda: drive(crashing, "r1", world))
    assert crashing.crashed
    with pytest.raises(SimulatedCrash):
        await crashing.get_run("r1")
    # The dead worker wrote nothing on its way out: the run is still its.
    dead = await store.load("r1")
    assert dead.record.status == "running"
    assert dead.record.lease_owner == "w1"
    assert all(r.state != "interrupted" for r in dead.receipts)
    finished_before = {r.tool_call_id for r in await store.receipts("r1") if r.state == "succeeded"}
    effects_before, reads_before = list(world.effects), list(world.reads)

    # The same worker, restarted, takes its run back and finishes it.
    result = await drive(store, "r1", world)
    assert result.reason == "completed"
    final = await store.load("r1")
    assert final.record.status == "completed"
    check_history(final.messages)
    await provider_accepts(final.messages)
    # Every non-repeatable effect at most once; no finished call ran again.
    assert len(world.effects) == len(set(world.effects))
    ran_again = world.effects[len(effects_before) :] + world.reads[len(reads_before) :]
    assert not finished_before & set(ran_again)
    refused = interrupted_answers(final.messages)
    assert refused <= {"c1", "c3", "c4"}  # only non-repeatable calls are ever refused
    if idempotent_send:
        assert refused == set()  # a tool that honours the key is dispatched again instead
        assert sorted(world.effects) == ["c1", "c3", "c4"]
    else:
        assert set(world.effects) | refused == {"c1", "c3", "c4"}


@pytest.mark.parametrize(
    ("point", "n", "effects", "reads", "refused"),
    [
        # The model answered; nothing started: every call runs on resume, once.
        ("after_model_answer", 1, ["c1", "c3", "c4"], ["c2"], set()),
        # The whole first batch settled; only the save was lost: nothing runs again.
        ("before_save", 1, ["c1", "c3", "c4"], ["c2"], set()),
        ("after_results", 2, ["c1", "c3", "c4"], ["c2"], set()),
    ],
)
async def test_what_a_resume_runs_again(
    store: RunStore,
    point: CrashPoint,
    n: int,
    effects: list[str],
    reads: list[str],
    refused: set[str],
) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    assert await run_until_crash(lambda: drive(CrashingStore(store, point, n), "r1", world))
    await drive(store, "r1", world)
    assert sorted(world.effects) == effects
    assert world.reads == reads
    assert interrupted_answers((await store.load("r1")).messages) == refused


async def test_no_tool_starts_after_the_crash_even_from_the_same_group_commit(
    store: RunStore,
) -> None:
    # Four calls start together, so their "started" receipts share a commit; the
    # crash comes after the first one returns. The others returned from the same
    # commit into a dead process: none of them may run its tool.
    await store.create_run("r1", messages=USER)
    world = World()
    script = (
        ModelTurnResult(tool_calls=tuple(call(f"c{i}", "send", to=str(i)) for i in range(4))),
        ModelTurnResult(content="done"),
    )
    crashing = CrashingStore(store, "after_calls_started", 1)
    assert await run_until_crash(lambda: drive(crashing, "r1", world, script=script))
    assert world.effects == []


async def test_a_started_send_is_refused_with_the_documented_answer(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    # Only c1 (send) and c2 (read) start; c2 settles first (shorter): crash on c1's start.
    script = (
        ModelTurnResult(tool_calls=(call("c1", "send", to="ann"),)),
        ModelTurnResult(content="done"),
    )
    crashing = CrashingStore(store, "after_calls_started", 1)
    assert await run_until_crash(lambda: drive(crashing, "r1", world, script=script))
    assert world.effects == []  # it died between the receipt and the effect
    async with open_durable_run(store, "r1", owner="w1", resumability=world.resumability) as run:
        answers = await run.finish_open_turn(lambda c: pytest.fail("must not run"))
        assert [(a.tool_call_id, a.state, a.action) for a in answers] == [
            ("c1", "started", "refuse")
        ]
        # The worker stopped while the call ran; nothing cancelled it, and the
        # answer says what happened.
        assert run.state.messages[-1] == tool_failure_message(
            "c1", WORKER_STOPPED_TOOL_CALL_MESSAGE, "interrupted"
        )
        assert json.loads(run.state.messages[-1]["content"]) == {
            "success": False,
            "kind": "interrupted",
            "error": WORKER_STOPPED_TOOL_CALL_MESSAGE,
        }
        assert "cancel" not in WORKER_STOPPED_TOOL_CALL_MESSAGE
        await run.finish("stopped")
    assert world.effects == []


async def test_another_worker_waits_for_the_lease_to_expire(
    store: RunStore, clock: FakeClock
) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    assert await run_until_crash(
        lambda: drive(CrashingStore(store, "after_results", 1), "r1", world)
    )
    with pytest.raises(RunLeasedError):
        await drive(store, "r1", world, owner="w2")
    clock.advance(31)
    assert (await drive(store, "r1", world, owner="w2")).reason == "completed"
    assert len(world.effects) == len(set(world.effects))
    record = await store.get_run("r1")
    assert (record.status, record.lease_token) == ("completed", 2)


async def test_a_worker_that_lost_its_lease_stops_softly_and_writes_nothing(
    store: RunStore, clock: FakeClock
) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    taken = anyio.Event()

    async def thief() -> None:
        # While w1's first batch runs, its lease expires (w1 stalled) and w2 takes the run.
        if not taken.is_set():
            taken.set()
            clock.advance(31)
            await store.claim_run("r1", owner="w2", ttl=30)

    world.during_tool = thief
    result = await drive(store, "r1", world)
    world.during_tool = None
    assert taken.is_set()
    assert result.reason == "stopped"  # softly: the loop ended, nothing was cancelled
    loaded = await store.load("r1")
    # w1 wrote nothing after losing the lease: no settled receipt, no saved iteration.
    assert loaded.record.lease_owner == "w2"
    assert loaded.record.iteration == 0
    assert {r.state for r in loaded.receipts} == {"started"}
    # w2 finishes it; c1 started under w1 and may have sent: refused, never twice.
    clock.advance(1)
    assert (await drive(store, "r1", world, owner="w2")).reason == "completed"
    assert world.effects.count("c1") == 1
    check_history((await store.load("r1")).messages)
    await provider_accepts((await store.load("r1")).messages)


async def test_a_hard_cancel_records_the_interruption_and_that_the_run_was_cancelled(
    store: RunStore,
) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    started: list[None] = []
    with anyio.CancelScope() as scope:

        async def cancel_once_both_started() -> None:
            # Both calls have made their effect; the first waits for the second.
            started.append(None)
            if len(started) == 2:
                scope.cancel()
            await anyio.sleep_forever()

        world.during_tool = cancel_once_both_started
        await drive(store, "r1", world)
    world.during_tool = None
    loaded = await store.load("r1")
    assert {r.tool_call_id: r.state for r in loaded.receipts} == {
        "c1": "interrupted",
        "c2": "interrupted",
    }
    # The store says how it ended: cancelled, not a run that looks alive.
    record = loaded.record
    assert (record.status, record.lease_owner) == ("cancelled", None)
    assert record.detail is not None
    assert record.detail.startswith("cancelled: a hard cancel")
    # A cancelled run is not work for any worker; it is resumed when asked for by id.
    assert await store.claim_next(owner="w9", ttl=30) is None
    async with open_durable_run(store, "r1", owner="w9", resumability=world.resumability) as run:
        answers = await run.finish_open_turn(world_tool(world))
        assert {a.tool_call_id: a.action for a in answers} == {"c1": "refuse", "c2": "run"}
        # A cancel cut c1 off: its answer says so (not that its worker stopped).
        c1 = next(m for m in run.state.messages if m.get("tool_call_id") == "c1")
        assert json.loads(c1["content"])["error"] == INTERRUPTED_TOOL_CALL_MESSAGE
        await run.finish("stopped")
    assert world.effects == ["c1"]
    assert world.reads == ["c2", "c2"]  # repeatable: run again
    record = await store.get_run("r1")
    assert (record.status, record.detail) == ("stopped", None)


def world_tool(world: World) -> Any:
    from juno_bind_trio.loop import ToolCallOutcome

    async def run(tool_call: Any) -> ToolCallOutcome:
        world.reads.append(tool_call["id"])
        return ToolCallOutcome(
            tool_message={"role": "tool", "tool_call_id": tool_call["id"], "content": "again"}
        )

    return run


def test_the_idempotency_key_is_stable_and_depends_on_every_part() -> None:
    base = tool_call_receipt_key("r1", call("c1", "send", to="ann", n=1))
    # Key order and spacing in the model's JSON do not change it.
    same = tool_call_receipt_key(
        "r1",
        {"id": "c1", "function": {"name": "send", "arguments": '{ "n": 1, "to": "ann" }'}},
    )
    assert tool_call_idempotency_key(base) == tool_call_idempotency_key(same)
    key = tool_call_idempotency_key(base)
    assert re.fullmatch("[0-9a-f]{64}", key)
    others = [
        ToolCallReceiptKey(
            run_id="r2",
            tool_call_id=base.tool_call_id,
            tool_name=base.tool_name,
            args_hash=base.args_hash,
        ),
        tool_call_receipt_key("r1", call("c2", "send", to="ann", n=1)),
        tool_call_receipt_key("r1", call("c1", "send", to="bob", n=1)),
    ]
    assert len({tool_call_idempotency_key(k) for k in others} | {key}) == 4
    with pytest.raises(TypeError, match="tool_call_idempotency_key"):
        tool_call_idempotency_key("r1:c1")  # type: ignore[arg-type]


async def test_open_durable_run_refuses_bad_arguments(store: RunStore) -> None:
    with pytest.raises(TypeError, match="open_durable_run: store"):
        async with open_durable_run("runs.db", "r1", owner="w"):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValueError, match="renew_interval"):
        async with open_durable_run(store, "r1", owner="w", lease_ttl=3, renew_interval=3):
            pass
    with pytest.raises(ValueError, match="lease_ttl"):
        async with open_durable_run(store, "r1", owner="w", lease_ttl=-1):
            pass
    assert SCRIPT  # the shared script is not mutated by any test


async def test_a_run_whose_answer_was_saved_but_not_its_status_is_just_completed(
    store: RunStore,
) -> None:
    """SIGKILL between the last save and the release: the model is not asked again."""
    await store.create_run("r1", messages=USER)
    lease = await store.claim_run("r1", owner="w1", ttl=30)
    answered = [*USER, {"role": "assistant", "content": "all sent"}]
    await store.save_transcript(lease, answered, iteration=1)
    world = World()
    result = await drive(store, "r1", world, script=())  # the model must not be called
    assert result.reason == "completed"
    loaded = await store.load("r1")
    assert (loaded.record.status, loaded.messages) == ("completed", answered)
    assert world.effects == []


async def test_the_provider_check_of_these_tests_refuses_a_cut_short_history(
    store: RunStore,
) -> None:
    # The final-transcript checks above are live: the same run with one answer lost is
    # refused by the checker and, through the real SDK, by the validating server.
    await store.create_run("r1", messages=USER)
    assert (await drive(store, "r1", World())).reason == "completed"
    messages = (await store.load("r1")).messages
    lost = next(i for i, m in enumerate(messages) if m.get("tool_call_id") == "c3")
    cut = messages[:lost] + messages[lost + 1 :]
    with pytest.raises(ToolCallHistoryError, match="did not have response messages: c3"):
        check_history(cut)
    with pytest.raises(openai.BadRequestError, match="did not have response messages: c3"):
        await provider_accepts(messages, cut)


async def test_a_resumed_run_says_which_iteration_its_open_turn_is(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    world = World()
    # The second model answer was recorded (iteration 2), none of its calls started.
    assert await run_until_crash(
        lambda: drive(CrashingStore(store, "after_model_answer", 2), "r1", world)
    )
    async with open_durable_run(store, "r1", owner="w1", resumability=world.resumability) as run:
        assert (run.iteration, run.open_turn_iteration) == (1, 2)

        async def tool(tool_call: Any) -> Any:
            from juno_bind_trio.loop import ToolCallOutcome

            return ToolCallOutcome(
                tool_message={"role": "tool", "tool_call_id": tool_call["id"], "content": "ok"}
            )

        await run.finish_open_turn(tool)
        assert (run.iteration, run.open_turn_iteration) == (2, None)
        await run.finish("stopped")
    receipts = await store.receipts("r1")
    assert {r.tool_call_id: r.iteration for r in receipts if r.iteration == 2} == {
        "c3": 2,
        "c4": 2,
    }


async def test_a_cancel_while_the_run_loads_gives_the_claim_back(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    load = store.load
    with anyio.CancelScope() as scope:

        async def cancelled_load(run_id: str) -> Any:
            # The cancel lands after the claim, before the run is handed out.
            scope.cancel()
            await anyio.lowlevel.checkpoint()
            return await load(run_id)

        store.load = cancelled_load  # type: ignore[method-assign]
        async with open_durable_run(store, "r1", owner="w1"):
            raise AssertionError("a cancelled open must not hand the run out")
    assert scope.cancelled_caught
    # Given back despite the cancel (shielded): not left leased to w1 until it expires.
    record = await store.get_run("r1")
    assert (record.status, record.lease_owner) == ("running", None)


UNREADABLE = [
    # Each parses as JSON and every message has a role, but healing cannot read it.
    [USER[0], {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "a"}]}],
    [USER[0], {"role": "tool", "content": "an answer naming no call"}],
    [USER[0], {"role": "assistant", "tool_calls": "not a list"}],
]


@pytest.mark.parametrize("messages", UNREADABLE)
async def test_a_stored_transcript_healing_cannot_read_is_a_corrupted_row(
    store: RunStore, messages: list[Any]
) -> None:
    text = json.dumps(messages)
    for run_id in ("r1", "r2"):
        await store.create_run(run_id, messages=USER)
        raw_execute(store, "UPDATE juno_runs SET messages = ? WHERE run_id = ?", (text, run_id))
    with pytest.raises(StoreDataError, match=r"run 'r1'.*messages\[1\]") as info:
        async with open_durable_run(store, "r1", owner="w1"):
            raise AssertionError("a corrupted run must not be handed out")
    assert info.value.run_id == "r1"
    # The claim made to open it is given back: the run is not left leased to w1.
    refused = await store.get_run("r1")
    assert (refused.lease_owner, refused.status) == (None, "running")

    # A worker records it failed and moves on (it used to claim it again, forever).
    async def handle(run: Any) -> None:
        raise AssertionError("a corrupted run must not be handled")

    assert await serve_runs(store, handle, owner="w2", stop_when_idle=True) == 2
    assert [(await store.get_run(r)).status for r in ("r1", "r2")] == ["failed", "failed"]
    for run_id in ("r1", "r2"):  # nothing was overwritten
        stored = raw_query(store, "SELECT messages FROM juno_runs WHERE run_id = ?", (run_id,))
        assert stored == [(text,)]
