"""`AgentResult.new_messages()` of durable runs: a stored run, and a resumed one."""

from __future__ import annotations

import pytest

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import RunStore
from juno_bind_trio.testing import CrashingStore, CrashPoint, run_until_crash

from .test_agent_store import Shop, model

pytestmark = pytest.mark.anyio


async def test_a_stored_run_with_history_returns_its_own_part(store: RunStore) -> None:
    shop = Shop()
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]

    async def answer(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="ok")

    agent = Agent(answer, tools=shop.tools, store=store, store_owner="w1")
    result = await agent.run("go", message_history=history, run_id="o1")
    assert result.new_messages() == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
    ]


@pytest.mark.parametrize(
    ("point", "n"),
    [("after_calls_started", 1), ("after_results", 1), ("before_save", 2)],
)
async def test_a_resumed_run_returns_what_the_resume_added(
    store: RunStore, point: CrashPoint, n: int
) -> None:
    shop = Shop()
    crashing = CrashingStore(store, point, n)
    first = Agent(model, tools=shop.tools, store=crashing, store_owner="w1")
    assert await run_until_crash(lambda: first.run("Charge Ann and tell her.", run_id="o1"))
    loaded = (await store.load("o1")).messages

    result = await Agent(model, tools=shop.tools, store=store, store_owner="w1").resume("o1")
    assert result.output == "Charged and told."
    new = result.new_messages()
    assert result.messages[: len(loaded)] == loaded
    assert new == result.messages[len(loaded) :]
    assert new, "the resume answered the open turn and went on"
    assert new[-1] == {"role": "assistant", "content": "Charged and told."}
    assert {"role": "user", "content": "Charge Ann and tell her."} not in new


async def test_a_resume_of_an_answered_run_added_nothing(store: RunStore) -> None:
    await store.create_run("o1", messages=[{"role": "user", "content": "go"}])
    lease = await store.claim_run("o1", owner="w1", ttl=30)
    answered = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "Done."}]
    await store.save_transcript(lease, answered, iteration=1)

    async def never(turn: ModelTurn) -> ModelTurnResult:
        raise AssertionError("the model must not be asked again")

    result = await Agent(never, store=store, store_owner="w1").resume("o1")
    assert result.messages == answered
    assert result.new_messages() == []
