"""Continuing a stored run's waiting calls by the other roads: ``message_history=`` (refused,
naming ``agent.resume``), ``conversation=`` (the stored run itself resumes) and the web
view's decide (the same resume, streamed). Whatever the road, an approved call runs once
under its receipt and the store's status of every run is what happened: ``list_waiting``
lists exactly the runs still waiting. SQLite and PostgreSQL, trio and asyncio."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from juno_bind_trio import Deny, UsageError
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.store import CallDecision, RunStore, SqliteRunStore
from juno_bind_trio.testing import CrashingStore, check_tool_call_history, run_until_crash

from .durable_world import check_history, provider_accepts
from .store_helpers import FakeClock
from .test_approvals_store import Shop, answers, model, snapshot

pytestmark = pytest.mark.anyio


async def waiting_ids(store: RunStore) -> list[str]:
    return [r.run_id for r in await store.list_waiting()]


async def test_message_history_with_decisions_is_refused_naming_the_stored_run(
    store: RunStore,
) -> None:
    shop = Shop()
    agent = shop.agent(store, "w1")
    first = await agent.run("refund order 17", run_id="r1")
    assert first.reason == "suspended"
    before = await snapshot(store, "r1")
    decided: list[dict[str, Any]] = [{"approvals": {"c1": True}, "results": {"c3": "tue"}}, {}]
    for decisions in decided:
        with pytest.raises(UsageError) as refused:
            await agent.run(message_history=first.messages, **decisions)
        text = str(refused.value)
        assert "await agent.resume('r1', approvals=..." in text
        assert "(c1, c3)" in text
    with pytest.raises(UsageError, match=r"agent\.resume\('r1'"):
        await agent.run("and now?", message_history=first.messages, approvals={"c1": True})
    assert shop.effects == [("lookup", "17")]  # the refund never ran
    assert [r.run_id for r in await store.list_runs()] == ["r1"]  # no copy was stored
    assert await snapshot(store, "r1") == before
    assert await waiting_ids(store) == ["r1"]
    # The road it names goes through, once.
    done = await agent.resume("r1", approvals={"c1": True}, results={"c3": "tue"})
    assert done.reason == "completed"
    assert shop.effects.count(("refund", 500)) == 1
    assert await waiting_ids(store) == []


async def test_without_a_store_message_history_still_continues_in_memory() -> None:
    shop = Shop()
    agent = Agent(model, tools=shop.tools)
    first = await agent.run("refund order 17")
    done = await agent.run(
        message_history=first.messages, approvals={"c1": True}, results={"c3": "tue"}
    )
    assert done.reason == "completed"
    assert done.run_id != first.run_id
    assert shop.effects.count(("refund", 500)) == 1


async def test_open_run_with_decisions_on_a_conversation_has_the_runs_id_from_entry(
    store: RunStore,
) -> None:
    shop = Shop()
    await shop.agent(store, "w1").run("refund order 17", conversation="t", run_id="r1")
    seen: list[str] = []
    async with shop.agent(store, "w2").open_run(
        conversation="t", approvals={"c1": True}, results={"c3": "tue"}
    ) as run:
        seen.append(run.run_id)  # before any event: already the continued run's
        async for event in run:
            seen.append(getattr(event, "run_id", run.run_id))
    assert set(seen) == {"r1"}
    assert run.result is not None
    assert (run.result.run_id, run.result.reason) == ("r1", "completed")
    assert shop.effects.count(("refund", 500)) == 1
    assert [r.run_id for r in await store.list_runs()] == ["r1"]


async def test_open_run_with_a_prompt_and_decisions_on_a_waiting_conversation_is_refused_on_entry(
    store: RunStore,
) -> None:
    shop = Shop()
    await shop.agent(store, "w1").run("refund order 17", conversation="t", run_id="r1")
    entered = False
    with pytest.raises(UsageError, match=r"^Agent\.open_run: run 'r1'"):
        async with shop.agent(store, "w2").open_run(
            "and more", conversation="t", approvals={"c1": True}
        ):
            entered = True
    assert not entered
    assert await waiting_ids(store) == ["r1"]
    assert shop.effects.count(("refund", 500)) == 0


async def test_open_run_on_a_conversation_cancelled_on_entry_leaves_the_run_waiting(
    store: RunStore,
) -> None:
    # The block's entry reads the store for the waiting run: a cancel there (its first
    # checkpoint) starts nothing, writes nothing, and the run still waits.
    shop = Shop()
    await shop.agent(store, "w1").run("refund order 17", conversation="t", run_id="r1")
    entered = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with shop.agent(store, "w2").open_run(conversation="t", approvals={"c1": True}):
            entered = True
    assert scope.cancelled_caught
    assert not entered
    assert await waiting_ids(store) == ["r1"]
    assert shop.effects.count(("refund", 500)) == 0
    assert {c.id for c in await store.pending_calls("r1")} == {"c1", "c3"}
    # The same decision, given again, goes through.
    done = await shop.agent(store, "w3").run(conversation="t", approvals={"c1": True})
    assert (done.run_id, shop.effects.count(("refund", 500))) == ("r1", 1)


async def test_decisions_on_a_conversation_resume_its_waiting_run(store: RunStore) -> None:
    shop = Shop()
    agent = shop.agent(store, "w1")
    first = await agent.run("refund order 17", conversation="t", run_id="r1")
    assert first.reason == "suspended"
    assert await waiting_ids(store) == ["r1"]
    # One call decided, the other left waiting: the same run, suspended again.
    second = await shop.agent(store, "w2").run(conversation="t", approvals={"c1": True})
    assert second.run_id == "r1"
    assert second.reason == "suspended"
    assert [p.id for p in second.pending] == ["c3"]
    assert shop.effects.count(("refund", 500)) == 1
    assert [r.run_id for r in await store.list_runs()] == ["r1"]  # no second run
    assert await waiting_ids(store) == ["r1"]
    assert [c.id for c in await store.pending_calls("r1")] == ["c3"]
    # The approved call ran under its receipt.
    receipts = {r.tool_call_id: r.state for r in await store.receipts("r1")}
    assert receipts["c1"] == "succeeded"
    # The host answers the rest; the run completes, and waits for nothing more.
    done = await shop.agent(store, "w3").run(conversation="t", results={"c3": "tue"})
    assert (done.run_id, done.reason) == ("r1", "completed")
    assert await waiting_ids(store) == []
    assert (await store.get_run("r1")).status == "completed"
    assert shop.effects.count(("refund", 500)) == 1
    assert answers(done.messages) == {"c1": "refunded 500", "c2": "order 17", "c3": "tue"}
    assert await store.conversation_messages("t") == done.messages
    assert [
        (c.turns, c.last_run_id, c.active_run_id) for c in await store.list_conversations()
    ] == [(1, "r1", None)]
    audit = {r.call.id: r.decision.kind for r in await store.call_decisions("r1") if r.decision}
    assert audit == {"c1": "approved", "c3": "result"}
    check_tool_call_history(done.messages)
    await provider_accepts(done.messages)
    # The decisions are settled: deciding again is refused, naming the id.
    with pytest.raises(UsageError, match="'c1'"):
        await agent.run(conversation="t", approvals={"c1": True})


async def test_a_prompt_with_decisions_on_a_conversation_is_refused(store: RunStore) -> None:
    shop = Shop()
    agent = shop.agent(store, "w1")
    await agent.run("refund order 17", conversation="t", run_id="r1")
    before = await snapshot(store, "r1")
    with pytest.raises(UsageError, match="run 'r1' of conversation 't' waits for these"):
        await agent.run("hello?", conversation="t", approvals={"c1": Deny("no")})
    assert await snapshot(store, "r1") == before
    assert [r.run_id for r in await store.list_runs()] == ["r1"]


async def test_a_crash_while_the_conversations_approved_call_runs_never_reruns_it(
    store: RunStore,
) -> None:
    shop = Shop()
    await shop.agent(store, "w1").run("refund order 17", conversation="t", run_id="r1")
    crashing = CrashingStore(store, "after_calls_started", 1)
    worker = Agent(model, tools=shop.tools, store=crashing, store_owner="w2")
    assert await run_until_crash(
        lambda: worker.run(conversation="t", approvals={"c1": True}, results={"c3": "tue"})
    )
    # The decisions were written before the claim: nothing waits for a person any more.
    assert await store.pending_calls("r1") == []
    done = await shop.agent(store, "w2").resume("r1")
    assert done.reason == "completed"
    assert shop.effects.count(("refund", 500)) <= 1
    assert '"interrupted"' in answers(done.messages)["c1"]
    assert await store.conversation_messages("t") == done.messages
    assert await waiting_ids(store) == []
    check_history(done.messages)


async def test_the_decisions_carry_no_principal_by_the_conversation_road(
    store: RunStore,
) -> None:
    shop = Shop()
    await shop.agent(store, "w1").run("refund order 17", conversation="t", run_id="r1")
    await shop.agent(store, "w2").run(conversation="t", approvals={"c1": False})
    decided: dict[str, Any] = {r.call.id: r.decision for r in await store.call_decisions("r1")}
    assert decided["c1"] == CallDecision(
        kind="denied", answer="denied", decided_at=decided["c1"].decided_at
    )
    assert decided["c3"] is None
    assert await waiting_ids(store) == ["r1"]


async def test_a_resume_that_crashed_leaves_the_run_running_for_a_worker_to_find(
    store: RunStore, clock: FakeClock
) -> None:
    """Claimed, a suspended run is running: a crash in the approved call leaves it
    ``"running"`` under a lease that runs out (a worker's ``claim_next`` finds it), never
    ``"suspended"`` with nothing listed as waiting."""
    shop = Shop()
    await shop.agent(store, "w1").run("refund order 17", run_id="r1")
    crashing = CrashingStore(store, "after_calls_started", 1)
    worker = Agent(model, tools=shop.tools, store=crashing, store_owner="w2")
    assert await run_until_crash(
        lambda: worker.resume("r1", approvals={"c1": True}, results={"c3": "tue"})
    )
    assert (await store.get_run("r1")).status == "running"
    assert await waiting_ids(store) == []  # nothing waits for a person any more
    assert await store.claim_next(owner="w3", ttl=30) is None  # the dead lease still holds
    clock.advance(31)
    lease = await store.claim_next(owner="w3", ttl=30)
    assert lease is not None
    assert lease.run_id == "r1"


async def test_an_approval_by_the_conversation_road_for_a_run_cancelled_meanwhile(
    store: RunStore,
) -> None:
    """The run was cancelled while its approved refund ran; a later decision on its
    conversation is refused naming the cancel, and changes nothing."""
    shop = Shop()
    agent = shop.agent(store, "w1")
    await agent.run("refund order 17", conversation="t", run_id="r1")
    shop.gate = anyio.Event()  # never set: the refund hangs until the cancel
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: shop.agent(store, "w2").run(conversation="t", approvals={"c1": True}))
        await shop.entered.wait()
        tg.cancel_scope.cancel()
    assert (await store.get_run("r1")).status == "cancelled"
    before = await snapshot(store, "r1")
    conversation = await store.conversation_messages("t")
    with pytest.raises(UsageError, match="'r1' was cancelled"):
        await agent.run(conversation="t", results={"c3": "tue"})
    assert await snapshot(store, "r1") == before
    assert await store.conversation_messages("t") == conversation
    assert await waiting_ids(store) == []
    assert shop.effects.count(("refund", 500)) == 1


async def test_a_repeatable_approved_call_cut_off_by_a_crash_runs_again(
    store: RunStore,
) -> None:
    """Pinned: after a crash during an approved call, a plain resume answers it
    interrupted, never re-run, *unless the tool is repeatable*: then it runs again."""
    ran: list[int] = []

    @tool(requires_approval=True, repeatable=True)
    async def refund(amount: int) -> str:
        """Refund money (safe to repeat)."""
        ran.append(amount)
        return f"refunded {amount}"

    tools = [refund, *Shop().tools[1:]]
    first = await Agent(model, tools=tools, store=store, store_owner="w1").run(
        "refund order 17", run_id="r1"
    )
    assert first.reason == "suspended"
    crashing = CrashingStore(store, "after_calls_started", 1)
    worker = Agent(model, tools=tools, store=crashing, store_owner="w2")
    assert await run_until_crash(
        lambda: worker.resume("r1", approvals={"c1": True}, results={"c3": "tue"})
    )
    done = await Agent(model, tools=tools, store=store, store_owner="w2").resume("r1")
    assert done.reason == "completed"
    assert answers(done.messages)["c1"] == "refunded 500"  # run again, not "interrupted"
    assert ran[-1] == 500
    check_history(done.messages)


async def test_the_conversation_road_costs_one_read_more_than_resume(tmp_path: Path) -> None:
    """Deciding by ``agent.run(conversation=..., approvals=...)`` is ``resume`` with the
    same decisions plus one read (the conversation's end, naming the waiting run)."""
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        counts: list[bool] = []  # one per transaction: whether it wrote
        inner = store._raw_transaction

        def counted(fn: Callable[[Any], Any], *, write: bool) -> Any:
            try:
                return inner(fn, write=write)
            finally:
                counts.append(write)

        store._raw_transaction = counted  # type: ignore[method-assign]
        for run_id in ("by-resume", "by-conversation"):
            await Shop().agent(store, "w1").run("refund", conversation=run_id, run_id=run_id)
        decisions: dict[str, Any] = {"approvals": {"c1": True}, "results": {"c3": 1}}
        counts.clear()
        done = await Shop().agent(store, "w2").resume("by-resume", **decisions)
        resumed = (counts.count(False), counts.count(True))
        counts.clear()
        other = await Shop().agent(store, "w2").run(conversation="by-conversation", **decisions)
        road = (counts.count(False), counts.count(True))
    assert (done.reason, other.reason, other.run_id) == (
        "completed",
        "completed",
        "by-conversation",
    )
    assert (road[0] - resumed[0], road[1] - resumed[1]) == (1, 0)
