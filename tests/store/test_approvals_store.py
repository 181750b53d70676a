"""Durable approvals: a suspended run waits in the store, on no worker, and goes on anywhere.

Every test runs on SQLite and PostgreSQL, on trio and asyncio. Each "worker"
is a new Agent on the same store: nothing carries over in memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from juno_bind_trio import Approve, Deny, ExternalTool, PendingToolCall, UsageError
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import (
    WORKER_STOPPED_TOOL_CALL_MESSAGE,
    CallDecision,
    RunLeasedError,
    RunStore,
    SqliteRunStore,
    open_durable_run,
)
from juno_bind_trio.testing import CrashingStore, run_until_crash

from .durable_world import call, check_history, provider_accepts
from .store_helpers import FakeClock

pytestmark = pytest.mark.anyio


async def model(turn: ModelTurn) -> ModelTurnResult:
    """Turn 1: a refund (needs approval), a lookup, a date the host picks; then an answer
    quoting every tool message it saw, in order."""
    if not any(m.get("role") == "assistant" for m in turn.messages):
        return ModelTurnResult(
            tool_calls=(
                call("c1", "refund", amount="500"),
                call("c2", "lookup", order="17"),
                call("c3", "pick", day="mon"),
            )
        )
    seen = [m["content"] for m in turn.messages if m.get("role") == "tool"]
    return ModelTurnResult(content=json.dumps(seen))


class Shop:
    """The tools, and every effect they had across all workers."""

    def __init__(self, *, timeout: float | None = None) -> None:
        self.effects: list[tuple[str, int | str]] = []
        self.gate: anyio.Event | None = None  # set: the refund waits on it
        self.entered = anyio.Event()

        @tool(requires_approval=True, approval_timeout=timeout)
        async def refund(amount: int) -> str:
            """Refund money."""
            self.effects.append(("refund", amount))
            self.entered.set()
            if self.gate is not None:
                await self.gate.wait()
            return f"refunded {amount}"

        @tool
        async def lookup(order: str) -> str:
            """Look an order up."""
            self.effects.append(("lookup", order))
            return f"order {order}"

        self.tools = [refund, lookup, ExternalTool("pick", {"type": "object"})]

    def agent(self, store: RunStore, owner: str) -> Agent[None, str]:
        return Agent(model, tools=self.tools, store=store, store_owner=owner)


def answers(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


async def suspended(shop: Shop, store: RunStore, run_id: str = "r1") -> None:
    first = await shop.agent(store, "w1").run("refund order 17", run_id=run_id)
    assert first.reason == "suspended"
    assert [p.id for p in first.pending] == ["c1", "c3"]


async def snapshot(store: RunStore, run_id: str) -> tuple[object, ...]:
    loaded = await store.load(run_id)
    return (
        loaded.record.status,
        loaded.messages,
        loaded.pending_turn,
        loaded.receipts,
        await store.call_decisions(run_id),
    )


async def test_a_suspended_run_waits_in_the_store_with_its_pending_calls(
    store: RunStore, clock: FakeClock
) -> None:
    shop = Shop()
    await suspended(shop, store)
    assert shop.effects == [("lookup", "17")]
    record = await store.get_run("r1")
    assert (record.status, record.lease_owner, record.pending_iteration) == ("suspended", None, 1)
    assert await store.pending_calls("r1") == [
        PendingToolCall("c1", "refund", {"amount": 500}, "approval"),
        PendingToolCall("c3", "pick", {"day": "mon"}, "external"),
    ]
    assert [r.run_id for r in await store.list_waiting()] == ["r1"]
    rows = await store.call_decisions("r1")
    assert [(r.call.id, r.iteration, r.created_at, r.decision) for r in rows] == [
        ("c1", 1, clock.now, None),
        ("c3", 1, clock.now, None),
    ]
    # The lookup ran once, before the suspension, and its receipt answers it later.
    assert [(r.tool_call_id, r.state) for r in (await store.load("r1")).receipts] == [
        ("c2", "succeeded")
    ]


async def test_another_worker_approves_and_answers_and_the_run_completes(
    store: RunStore, clock: FakeClock
) -> None:
    shop = Shop()
    await suspended(shop, store)
    clock.advance(3600)
    done = await shop.agent(store, "w2").resume(
        "r1", approvals={"c1": True}, results={"c3": {"day": "tue"}}, principal="ann"
    )
    assert done.reason == "completed"
    assert shop.effects == [("lookup", "17"), ("refund", 500)]
    got = answers(done.messages)
    assert got == {"c1": "refunded 500", "c2": "order 17", "c3": '{"day":"tue"}'}
    check_history(done.messages)
    await provider_accepts(done.messages)
    assert (await store.load("r1")).messages == done.messages
    assert await store.list_waiting() == []
    assert await store.pending_calls("r1") == []
    audit = {r.call.id: r.decision for r in await store.call_decisions("r1")}
    assert audit == {
        "c1": CallDecision(kind="approved", principal="ann", decided_at=clock.now),
        "c3": CallDecision(
            kind="result", answer={"day": "tue"}, principal="ann", decided_at=clock.now
        ),
    }
    # The decisions hold: a later resume finds nothing to decide, and the run ended.
    with pytest.raises(UsageError, match="'c1'"):
        await shop.agent(store, "w3").resume("r1", approvals={"c1": True})


async def test_a_denial_is_an_authz_failure_and_an_undecided_call_stays_pending(
    store: RunStore,
) -> None:
    shop = Shop()
    await suspended(shop, store)
    second = await shop.agent(store, "w2").resume(
        "r1", approvals={"c1": Deny("over the limit")}, principal="bob"
    )
    assert second.reason == "suspended"
    assert second.pending == (PendingToolCall("c3", "pick", {"day": "mon"}, "external"),)
    assert await store.pending_calls("r1") == list(second.pending)
    assert (await store.get_run("r1")).status == "suspended"
    denied = json.loads(answers(second.messages)["c1"])
    assert denied["kind"] == "authz"
    assert "over the limit" in denied["error"]
    done = await shop.agent(store, "w3").resume("r1", errors={"c3": "the user closed it"})
    assert done.reason == "completed"
    assert ("refund", 500) not in shop.effects
    assert shop.effects.count(("lookup", "17")) == 1
    got = answers(done.messages)
    assert json.loads(got["c1"])["kind"] == "authz"
    assert json.loads(got["c3"]) == {
        "success": False,
        "kind": "external",
        "error": "the user closed it",
    }
    check_history(done.messages)
    await provider_accepts(done.messages)


async def test_corrected_arguments_are_validated_and_run(store: RunStore) -> None:
    shop = Shop()
    await suspended(shop, store)
    before = await snapshot(store, "r1")
    with pytest.raises(ValueError, match="c1"):
        await shop.agent(store, "w2").resume("r1", approvals={"c1": Approve({"amount": "x"})})
    assert await snapshot(store, "r1") == before
    second = await shop.agent(store, "w2").resume(
        "r1", approvals={"c1": Approve({"amount": "100"})}, principal="ann"
    )
    assert second.reason == "suspended"
    assert shop.effects[-1] == ("refund", 100)
    body = json.loads(answers(second.messages)["c1"])
    assert body["arguments_corrected_to"] == {"amount": 100}
    (c1, _c3) = await store.call_decisions("r1")
    assert c1.decision is not None
    assert (c1.decision.kind, c1.decision.arguments) == ("approved", {"amount": 100})
    assert c1.call.arguments == {"amount": 500}  # what the model asked for stays on record


async def test_unknown_settled_or_mismatched_ids_are_refused_and_change_nothing(
    store: RunStore,
) -> None:
    shop = Shop()
    await suspended(shop, store)
    before = await snapshot(store, "r1")
    agent = shop.agent(store, "w2")
    with pytest.raises(UsageError, match="'nope'"):
        await agent.resume("r1", approvals={"c1": True, "nope": True})
    with pytest.raises(UsageError, match="'c2'"):  # ran already: nothing waits on it
        await agent.resume("r1", approvals={"c2": True})
    with pytest.raises(UsageError, match=r"'c3'.*results="):
        await agent.resume("r1", approvals={"c3": True})
    with pytest.raises(UsageError, match=r"'c1'.*approvals="):
        await agent.resume("r1", results={"c1": 1})
    assert await snapshot(store, "r1") == before
    assert shop.effects == [("lookup", "17")]


async def test_an_undecided_deadline_is_answered_as_a_timed_out_denial(
    store: RunStore, clock: FakeClock
) -> None:
    shop = Shop(timeout=60)
    await suspended(shop, store)
    (c1, _c3) = await store.pending_calls("r1")
    assert c1.expires_at == clock.now + 60
    clock.advance(60)
    assert [p.id for p in await store.pending_calls("r1")] == ["c3"]
    with pytest.raises(UsageError, match=r"'c1'.*settled \(expired\)"):
        await shop.agent(store, "w2").resume("r1", approvals={"c1": True})
    done = await shop.agent(store, "w2").resume("r1", results={"c3": "tue"})
    assert done.reason == "completed"
    body = json.loads(answers(done.messages)["c1"])
    assert body["kind"] == "authz"
    assert "deadline" in body["error"]
    assert ("refund", 500) not in shop.effects
    (expired, _) = await store.call_decisions("r1")
    assert expired.decision == CallDecision(kind="expired", decided_at=clock.now)


async def test_a_crash_during_the_approved_call_never_runs_it_again(store: RunStore) -> None:
    shop = Shop()
    await suspended(shop, store)
    crashing = CrashingStore(store, "after_calls_started", 1)
    worker = Agent(model, tools=shop.tools, store=crashing, store_owner="w2")
    resume = worker.resume
    assert await run_until_crash(
        lambda: resume("r1", approvals={"c1": True}, results={"c3": "tue"}, principal="ann")
    )
    # The decisions were written before the claim; the receipt before the call.
    assert await store.pending_calls("r1") == []
    # A plain resume goes on without them; the cut-off call is answered, not re-run.
    done = await shop.agent(store, "w2").resume("r1")
    assert done.reason == "completed"
    assert shop.effects.count(("refund", 500)) <= 1
    assert json.loads(answers(done.messages)["c1"]) == {
        "success": False,
        "kind": "interrupted",
        "error": WORKER_STOPPED_TOOL_CALL_MESSAGE,
    }
    assert answers(done.messages)["c3"] == "tue"
    check_history(done.messages)
    await provider_accepts(done.messages)


async def test_two_workers_resuming_the_approved_run_at_once_run_it_once(
    store: RunStore,
) -> None:
    shop = Shop()
    await suspended(shop, store)
    shop.gate = anyio.Event()
    outcomes: dict[str, object] = {}

    async def worker(name: str, **decisions: Any) -> None:
        try:
            outcomes[name] = (await shop.agent(store, name).resume("r1", **decisions)).reason
        except (UsageError, RunLeasedError) as exc:
            outcomes[name] = type(exc).__name__

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: worker("w2", approvals={"c1": True}, results={"c3": 1}))
        await shop.entered.wait()  # w2 holds the run, its refund under way
        await worker("w3")  # a plain resume meanwhile
        await worker("w4", approvals={"c1": True})  # and the same approval again: refused
        shop.gate.set()
    assert outcomes == {"w2": "completed", "w3": "RunLeasedError", "w4": "RunLeasedError"}
    assert shop.effects.count(("refund", 500)) == 1


async def test_a_decision_refused_while_another_worker_resumes_changes_nothing(
    store: RunStore,
) -> None:
    # w2 resumes with c1 approved and c3 still waiting; while it holds the run,
    # a decision for c3 arrives (through resume and through the store). Both
    # are refused with RunLeasedError, so neither may be written: w2 would
    # suspend again keeping the decided row, never applying it, and the run
    # would drop out of list_waiting with c3 unanswered.
    shop = Shop()
    await suspended(shop, store)
    shop.gate = anyio.Event()
    outcomes: dict[str, object] = {}

    async def resume_w2() -> None:
        outcomes["w2"] = (await shop.agent(store, "w2").resume("r1", approvals={"c1": True})).reason

    async with anyio.create_task_group() as tg:
        tg.start_soon(resume_w2)
        await shop.entered.wait()  # w2 holds the run, its refund under way
        before = await store.call_decisions("r1")
        with pytest.raises(RunLeasedError, match="c3"):
            await shop.agent(store, "w3").resume("r1", results={"c3": "tue"})
        with pytest.raises(RunLeasedError, match="c3"):
            await store.decide_calls("r1", {"c3": CallDecision(kind="result", answer="tue")})
        assert await store.call_decisions("r1") == before
        shop.gate.set()
    assert outcomes == {"w2": "suspended"}
    assert [c.id for c in await store.pending_calls("r1")] == ["c3"]
    assert [r.run_id for r in await store.list_waiting()] == ["r1"]
    done = await shop.agent(store, "w4").resume("r1", results={"c3": "wed"})
    assert done.reason == "completed"
    assert answers(done.messages)["c3"] == "wed"
    assert shop.effects.count(("refund", 500)) == 1


async def test_a_decision_for_a_run_cancelled_meanwhile_is_refused(store: RunStore) -> None:
    shop = Shop()
    await suspended(shop, store)
    shop.gate = anyio.Event()  # never set: the refund hangs until the cancel
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: shop.agent(store, "w2").resume("r1", approvals={"c1": True}))
        await shop.entered.wait()
        tg.cancel_scope.cancel()
    assert (await store.get_run("r1")).status == "cancelled"
    before = await snapshot(store, "r1")
    with pytest.raises(UsageError, match="cancelled"):
        await shop.agent(store, "w3").resume("r1", results={"c3": "tue"})
    assert await snapshot(store, "r1") == before


async def test_a_resume_with_decisions_costs_one_write_more_than_a_plain_resume(
    tmp_path: Path,
) -> None:
    # benchmarks/bench_approvals.py prints the same counts; here they are pinned.
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        counts: list[tuple[bool, int]] = []  # (write, statements) per transaction
        inner = store._raw_transaction

        def counted(fn: Callable[[Any], Any], *, write: bool) -> Any:
            statements = [0]

            def each(ex: Any) -> Any:
                def one(sql: str, params: Any) -> Any:
                    statements[0] += 1
                    return ex(sql, params)

                return fn(one)

            try:
                return inner(each, write=write)
            finally:
                counts.append((write, statements[0]))

        store._raw_transaction = counted  # type: ignore[method-assign]

        async def cost(run_id: str, **decisions: Any) -> tuple[int, int, int]:
            counts.clear()
            done = await Shop().agent(store, "w2").resume(run_id, **decisions)
            assert done.reason == "completed"
            reads = sum(1 for w, _ in counts if not w)
            return reads, len(counts) - reads, sum(n for _, n in counts)

        for run_id in ("plain", "decided", "corrected"):
            await suspended(Shop(), store, run_id)
        await store.decide_calls(
            "plain",
            {"c1": CallDecision(kind="approved"), "c3": CallDecision(kind="result", answer=1)},
        )
        plain = await cost("plain")
        decided = await cost("decided", approvals={"c1": True}, results={"c3": 1})
        corrected = await cost(
            "corrected", approvals={"c1": Approve({"amount": 1})}, results={"c3": 1}
        )
    assert plain == (1, 6, 17)
    assert (decided[0] - plain[0], decided[1] - plain[1]) == (0, 1)
    assert (corrected[0] - plain[0], corrected[1] - plain[1]) == (1, 1)


async def test_a_durable_run_without_the_gate_refuses_to_run_calls_that_wait(
    store: RunStore,
) -> None:
    shop = Shop()
    await suspended(shop, store)

    async def never(call: object) -> Any:
        raise AssertionError("nothing runs")

    async with open_durable_run(store, "r1", owner="raw") as run:
        assert [r.call.id for r in run.waiting_calls] == ["c1", "c3"]
        with pytest.raises(UsageError, match=r"'c1', 'c3'.*Agent.resume"):
            await run.finish_open_turn(never)
        await run.finish("suspended", pending=[r.call for r in run.waiting_calls])
    assert [p.id for p in await store.pending_calls("r1")] == ["c1", "c3"]
    assert shop.effects == [("lookup", "17")]


async def test_a_later_call_reusing_an_id_waits_again_on_a_resumed_run(store: RunStore) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    async def refund(amount: int) -> str:
        """Refund."""
        ran.append(amount)
        return "ok"

    async def reusing(turn: ModelTurn) -> ModelTurnResult:
        asked = sum(1 for m in turn.messages if m.get("role") == "assistant")
        if asked < 2:
            return ModelTurnResult(tool_calls=(call("c1", "refund", amount=5 + 1000 * asked),))
        return ModelTurnResult(content="done")

    def agent() -> Agent[None, str]:
        return Agent(reusing, tools=[refund], store=store, store_owner="w1")

    assert (await agent().run("go", run_id="r1")).reason == "suspended"
    second = await agent().resume("r1", approvals={"c1": True})
    assert second.reason == "suspended"
    assert ran == [5]
    assert [(p.id, p.arguments) for p in second.pending] == [("c1", {"amount": 1005})]
    assert (await store.get_run("r1")).pending_iteration == 2
    done = await agent().resume("r1", approvals={"c1": Deny("no")})
    assert done.reason == "completed"
    assert ran == [5]
    check_history(done.messages)
