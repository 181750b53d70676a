"""Agent(store=...) persists a run; Agent.resume continues it after a crash, no effect twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from juno_bind_trio import INTERRUPTED_TOOL_CALL_MESSAGE, RunContext, UsageError
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import (
    WORKER_STOPPED_TOOL_CALL_MESSAGE,
    RunStore,
    SqliteRunStore,
    tool_call_idempotency_key,
    tool_call_receipt_key,
)
from juno_bind_trio.testing import CrashingStore, CrashPoint, run_until_crash

from .durable_world import call, check_history, provider_accepts

pytestmark = pytest.mark.anyio

SCRIPT = (
    ModelTurnResult(tool_calls=(call("c1", "charge", eur=20), call("c2", "look", page=1))),
    ModelTurnResult(tool_calls=(call("c3", "email", to="ann"),)),
    ModelTurnResult(content="Charged and told."),
)


class Shop:
    """Three tools: a charge that honours its idempotency key, an email that must not
    repeat, and a repeatable lookup; every call they receive is written down."""

    def __init__(self) -> None:
        self.ledger: dict[str, int] = {}  # idempotency key -> charges the API made
        self.emails: list[str] = []
        self.looks: list[str] = []
        self.keys: dict[str, str] = {}

        @tool(repeatable=False, uses_idempotency_key=True)
        async def charge(ctx: RunContext[None], eur: int) -> str:
            """Charge the card."""
            self.keys[ctx.tool_call_id] = ctx.idempotency_key
            self.ledger[ctx.idempotency_key] = 1  # the API drops a repeated key
            return f"charged {eur}"

        @tool(repeatable=False)
        async def email(ctx: RunContext[None], to: str) -> str:
            """Send an email."""
            self.emails.append(ctx.tool_call_id)
            return f"sent to {to}"

        @tool
        async def look(ctx: RunContext[None], page: int) -> str:
            """Look something up."""
            self.looks.append(ctx.tool_call_id)
            return f"page {page}"

        self.tools = [charge, email, look]


async def model(turn: ModelTurn) -> ModelTurnResult:
    spoken = sum(1 for m in turn.messages if m["role"] == "assistant")
    return SCRIPT[spoken]


async def test_an_agent_with_a_store_path_saves_its_run(tmp_path: Path) -> None:
    shop = Shop()
    path = tmp_path / "runs.db"
    agent = Agent(model, tools=shop.tools, name="shop", store=str(path))
    result = await agent.run("Charge Ann and tell her.", run_id="order-1")
    assert result.output == "Charged and told."
    async with SqliteRunStore(path) as store:
        loaded = await store.load("order-1")
        assert loaded.record.status == "completed"
        assert loaded.record.agent == "shop"
        assert loaded.messages == result.messages
        receipts = await store.receipts("order-1")
    assert [(r.tool_call_id, r.resumability, r.state) for r in receipts] == [
        ("c1", "non_repeatable", "succeeded"),
        ("c2", "repeatable", "succeeded"),
        ("c3", "non_repeatable", "succeeded"),
    ]
    # The key a tool saw is the one the store derives: the same in any process.
    c1 = next(m for m in result.messages if m.get("tool_calls"))["tool_calls"][0]
    assert shop.keys["c1"] == tool_call_idempotency_key(tool_call_receipt_key("order-1", c1))


@pytest.mark.parametrize(
    ("point", "n"),
    [
        ("after_model_answer", 1),
        ("after_calls_started", 1),
        ("after_calls_started", 2),
        ("after_results", 1),
        ("before_save", 1),
        ("after_calls_started", 3),
        ("before_save", 2),
    ],
)
async def test_an_agent_resumes_a_crashed_run_with_no_effect_twice(
    store: RunStore, point: CrashPoint, n: int
) -> None:
    shop = Shop()
    crashing = CrashingStore(store, point, n)
    first = Agent(model, tools=shop.tools, store=crashing, store_owner="w1")
    assert await run_until_crash(lambda: first.run("Charge Ann and tell her.", run_id="o1"))
    looks_done = {r.tool_call_id for r in await store.receipts("o1") if r.state == "succeeded"}

    again = Agent(model, tools=shop.tools, store=store, store_owner="w1")
    result = await again.resume("o1")
    assert result.output == "Charged and told."
    check_history(result.messages)
    await provider_accepts(result.messages)
    assert (await store.load("o1")).messages == result.messages
    assert len(shop.ledger) <= 1  # one key, whatever happened: charged at most once
    assert shop.emails.count("c3") <= 1
    assert not ({"c2"} & looks_done and shop.looks.count("c2") > 1)
    refused = {
        m["tool_call_id"]
        for m in result.messages
        if m["role"] == "tool" and WORKER_STOPPED_TOOL_CALL_MESSAGE in m["content"]
    }
    assert "c1" not in refused  # the charge honours its key: dispatched again instead
    assert refused <= {"c3"}
    assert ("c3" in refused) == (shop.emails == [] and point == "after_calls_started")


async def test_an_interrupted_email_is_refused_and_the_model_reads_why(store: RunStore) -> None:
    shop = Shop()
    # c1 and c2 start and settle; c3's receipt is written, then the process dies.
    crashing = CrashingStore(store, "after_calls_started", 3)
    first = Agent(model, tools=shop.tools, store=crashing, store_owner="w1")
    assert await run_until_crash(lambda: first.run("go", run_id="o1"))
    result = await Agent(model, tools=shop.tools, store=store, store_owner="w1").resume("o1")
    answer = next(m for m in result.messages if m.get("tool_call_id") == "c3")
    # Nothing cancelled it: the answer says its worker stopped while it ran.
    assert json.loads(answer["content"]) == {
        "success": False,
        "kind": "interrupted",
        "error": WORKER_STOPPED_TOOL_CALL_MESSAGE,
    }
    assert INTERRUPTED_TOOL_CALL_MESSAGE not in answer["content"]
    assert shop.emails == []


async def test_resume_needs_a_store_and_a_store_must_be_one() -> None:
    with pytest.raises(UsageError, match=r"Agent.resume: this agent has no store"):
        await Agent(model).resume("r1")
    with pytest.raises(TypeError, match="Agent: store must be"):
        Agent(model, store=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Agent: lease_ttl"):
        Agent(model, store="runs.db", lease_ttl=0)


async def test_a_run_id_already_stored_is_refused(store: RunStore) -> None:
    from juno_bind_trio.store import RunExistsError

    await store.create_run("o1", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(RunExistsError, match="'o1'"):
        await Agent(model, store=store).run("again", run_id="o1")


async def test_a_sub_agent_run_is_stored_with_its_lineage(store: RunStore) -> None:
    async def child_model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="child done")

    child = Agent(child_model, name="reader", store=store)

    @tool
    async def delegate(ctx: RunContext[None], topic: str) -> str:
        """Ask a sub-agent."""
        return (await child.run(topic, parent=ctx, run_id="kid")).output

    async def parent_model(turn: ModelTurn) -> ModelTurnResult:
        if len(turn.messages) == 1:
            return ModelTurnResult(tool_calls=(call("d1", "delegate", topic="x"),))
        return ModelTurnResult(content="parent done")

    parent = Agent(parent_model, tools=[delegate], name="planner", store=store)
    assert (await parent.run("plan", run_id="top")).output == "parent done"
    children = await store.list_runs(parent_run_id="top")
    assert [r.run_id for r in children] == ["kid"]
    assert children[0].chain.depth == 1
    assert [link.agent for link in children[0].chain.links] == ["planner", "reader"]
    assert children[0].status == "completed"


async def test_an_agent_resume_of_an_answered_run_completes_it(store: RunStore) -> None:
    await store.create_run("o1", messages=[{"role": "user", "content": "go"}])
    lease = await store.claim_run("o1", owner="w1", ttl=30)
    answered = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "Done."}]
    await store.save_transcript(lease, answered, iteration=1)

    async def never(turn: ModelTurn) -> ModelTurnResult:
        raise AssertionError("the model must not be asked again")

    result = await Agent(never, store=store, store_owner="w1").resume("o1")
    assert (result.output, result.reason) == ("Done.", "completed")
    assert (await store.get_run("o1")).status == "completed"


@pytest.mark.parametrize(
    ("point", "n", "ran_after_resume"),
    [
        # Iteration 1 settled, its save was lost: the resume answers it from receipts,
        # and the loop's first turn is the run's iteration 2.
        ("before_save", 1, {"c3": 2}),
        # The second answer was recorded, nothing of it started: the resume runs
        # iteration 2's call itself, before the loop.
        ("after_model_answer", 2, {"c3": 2}),
        # Nothing of iteration 1 started: all of it runs on resume, as iteration 1.
        ("after_model_answer", 1, {"c1": 1, "c2": 1, "c3": 2}),
    ],
)
async def test_a_resumed_run_keeps_counting_its_iterations(
    store: RunStore, point: CrashPoint, n: int, ran_after_resume: dict[str, int]
) -> None:
    seen: dict[str, int] = {}

    @tool(repeatable=False)
    async def charge(ctx: RunContext[None], eur: int) -> str:
        """Charge."""
        seen[ctx.tool_call_id] = ctx.iteration
        return "charged"

    @tool(repeatable=False)
    async def email(ctx: RunContext[None], to: str) -> str:
        """Email."""
        seen[ctx.tool_call_id] = ctx.iteration
        return "sent"

    @tool
    async def look(ctx: RunContext[None], page: int) -> str:
        """Look."""
        seen[ctx.tool_call_id] = ctx.iteration
        return "page"

    tools = [charge, email, look]
    crashing = CrashingStore(store, point, n)
    first = Agent(model, tools=tools, store=crashing, store_owner="w1")
    assert await run_until_crash(lambda: first.run("go", run_id="o1"))
    seen.clear()
    result = await Agent(model, tools=tools, store=store, store_owner="w1").resume("o1")
    assert result.output == "Charged and told."
    assert seen == ran_after_resume
    # The tool saw the iteration its receipt is stored under, and the run's count
    # went on to 3 (the final answer), not back to 1.
    stored = {r.tool_call_id: r.iteration for r in await store.receipts("o1")}
    assert {call_id: stored[call_id] for call_id in seen} == seen
    assert stored == {"c1": 1, "c2": 1, "c3": 2}
    assert (await store.get_run("o1")).iteration == 3


async def test_a_sub_agent_started_by_a_resumed_run_keeps_the_lineage(store: RunStore) -> None:
    async def child_model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="child done")

    child = Agent(child_model, name="reader", store=store)
    iterations: list[int] = []

    @tool
    async def delegate(ctx: RunContext[None], topic: str) -> str:
        """Ask a sub-agent."""
        iterations.append(ctx.iteration)
        return (await child.run(topic, parent=ctx, run_id=f"kid-{ctx.iteration}")).output

    async def parent_model(turn: ModelTurn) -> ModelTurnResult:
        asked = sum(1 for m in turn.messages if m["role"] == "assistant")
        if asked < 2:
            return ModelTurnResult(tool_calls=(call(f"d{asked + 1}", "delegate", topic="x"),))
        return ModelTurnResult(content="parent done")

    # The parent dies once its second answer is recorded, before d2 starts; a resume runs d2.
    crashing = CrashingStore(store, "after_model_answer", 2)
    first = Agent(parent_model, tools=[delegate], name="planner", store=crashing)
    assert await run_until_crash(lambda: first.run("plan", run_id="top"))
    again = Agent(parent_model, tools=[delegate], name="planner", store=store)
    assert (await again.resume("top")).output == "parent done"
    assert iterations == [1, 2]
    children = await store.list_runs(parent_run_id="top")
    assert [r.run_id for r in children] == ["kid-1", "kid-2"]
    for kid in children:  # the one started after the resume has the same lineage
        assert kid.chain.depth == 1
        assert kid.chain.root_run_id == "top"
        assert [link.agent for link in kid.chain.links] == ["planner", "reader"]
        assert kid.status == "completed"
