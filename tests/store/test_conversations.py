"""Conversations that last: ``Agent.run(prompt, conversation=...)`` on SQLite and PostgreSQL.

The history is the store's: a run starts from it and adds its messages at
its end. One run at a time holds a conversation (a second is refused with
``ConversationBusy``, naming the holder); a run that fails or is cancelled
leaves the conversation as it was; a run that crashed holding it holds it
until its lease runs out, and its resume is refused once the conversation
has moved on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from juno_bind_trio import ConversationBusy, RunContext, UsageError
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import RunStore, SqliteRunStore
from juno_bind_trio.testing import CrashingStore, check_tool_call_history, run_until_crash

from .durable_world import call
from .store_helpers import FakeClock

pytestmark = pytest.mark.anyio


def users(turn: ModelTurn) -> list[str]:
    return [m["content"] for m in turn.messages if m["role"] == "user"]


async def echo(turn: ModelTurn) -> ModelTurnResult:
    """Answers with every user message it was shown, so a test reads what it saw."""
    return ModelTurnResult(content=" | ".join(users(turn)))


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


async def test_a_conversation_keeps_its_history_across_runs(store: RunStore) -> None:
    agent = Agent(echo, instructions="Be brief.", store=store)
    first = await agent.run("hello", conversation="thread-42")
    assert first.output == "hello"
    second = await agent.run("and again", conversation="thread-42")
    assert second.output == "hello | and again"  # the model saw the first exchange
    assert second.run_id != first.run_id
    assert roles(second.messages) == ["system", "user", "assistant", "user", "assistant"]
    assert second.new_messages() == second.messages[3:]  # this run's own part
    stored = await store.conversation_messages("thread-42")
    assert stored == second.messages
    listed = await store.list_conversations()
    assert [(c.conversation_id, c.turns, c.last_run_id, c.active_run_id) for c in listed] == [
        ("thread-42", 2, second.run_id, None)
    ]
    assert (await store.get_run(second.run_id)).conversation_id == "thread-42"
    # Another conversation starts from nothing.
    other = await agent.run("fresh", conversation="thread-43")
    assert other.output == "fresh"
    assert await store.conversation_messages("never-used") == []


async def test_the_agents_instructions_of_today_replace_the_historys(store: RunStore) -> None:
    await Agent(echo, instructions="Old rules.", store=store).run("a", conversation="c")
    result = await Agent(echo, instructions="New rules.", store=store).run("b", conversation="c")
    systems = [m["content"] for m in result.messages if m["role"] == "system"]
    assert systems == ["New rules."]
    assert roles(result.messages) == ["system", "user", "assistant", "user", "assistant"]


async def test_a_second_run_on_a_busy_conversation_is_refused(
    store_factory: Callable[[], RunStore],
) -> None:
    """Two workers (two stores on one database) start a run on one conversation at once:
    the second is refused, naming the first, and stores nothing; the first is unharmed."""
    inside = anyio.Event()
    go_on = anyio.Event()

    async def slow(turn: ModelTurn) -> ModelTurnResult:
        inside.set()
        await go_on.wait()
        return await echo(turn)

    async with store_factory() as store_a, store_factory() as store_b:
        first = Agent(slow, store=store_a, store_owner="worker-a")
        second = Agent(echo, store=store_b, store_owner="worker-b")
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def run_first() -> None:
                results.append(await first.run("one", conversation="t", run_id="run-a"))

            tg.start_soon(run_first)
            await inside.wait()
            with pytest.raises(ConversationBusy, match="held by run 'run-a'") as caught:
                await second.run("two", conversation="t", run_id="run-b")
            assert caught.value.conversation_id == "t"
            assert caught.value.holder == "run-a"
            assert isinstance(caught.value, UsageError)
            go_on.set()
        assert results[0].output == "one"
        assert [r.run_id for r in await store_b.list_runs()] == ["run-a"]  # nothing of run-b
        # Once the first ended, the second may go, and sees the first's answer.
        after = await second.run("two", conversation="t", run_id="run-b")
        assert after.output == "one | two"


async def test_concurrent_first_runs_of_a_new_conversation_race_to_one(
    store_factory: Callable[[], RunStore],
) -> None:
    """Neither conversation row exists yet: both claims create it, one wins."""
    outcomes: list[str] = []
    go_on = anyio.Event()

    async def slow(turn: ModelTurn) -> ModelTurnResult:
        await go_on.wait()
        return await echo(turn)

    async with store_factory() as store_a, store_factory() as store_b:

        async def attempt(store: RunStore, name: str) -> None:
            try:
                await Agent(slow, store=store, store_owner=name).run("hi", conversation="new")
                outcomes.append("ran")
            except ConversationBusy:
                outcomes.append("refused")
                go_on.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, store_a, "a")
            tg.start_soon(attempt, store_b, "b")
        assert sorted(outcomes) == ["ran", "refused"]
        assert [c.turns for c in await store_a.list_conversations()] == [1]


async def test_a_cancelled_run_leaves_the_conversation_as_it_was(store: RunStore) -> None:
    started = anyio.Event()

    @tool
    async def slow_lookup(ctx: RunContext[None], q: str) -> str:
        """Look up slowly."""
        started.set()
        await anyio.sleep(3600)
        return "never"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if users(turn)[-1] == "look it up" and turn.messages[-1]["role"] == "user":
            return ModelTurnResult(tool_calls=(call("c1", "slow_lookup", q="x"),))
        return await echo(turn)

    agent = Agent(model, tools=[slow_lookup], store=store)
    first = await agent.run("hi", conversation="t")
    before = await store.conversation_messages("t")
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_started() -> None:
                await started.wait()
                scope.cancel()

            tg.start_soon(cancel_when_started)
            await agent.run("look it up", conversation="t", run_id="cut")
    assert scope.cancelled_caught
    assert await store.conversation_messages("t") == before == first.messages
    assert (await store.get_run("cut")).status == "cancelled"
    # The hold was given up: the next message goes at once.
    after = await agent.run("still there?", conversation="t")
    assert after.output == "hi | still there?"
    check_tool_call_history(after.messages)


async def test_a_failed_run_leaves_the_conversation_as_it_was(store: RunStore) -> None:
    async def broken(turn: ModelTurn) -> ModelTurnResult:
        if users(turn)[-1] == "break":
            raise RuntimeError("the model is down")
        return await echo(turn)

    agent = Agent(broken, store=store)
    first = await agent.run("hi", conversation="t")
    with pytest.raises(RuntimeError, match="the model is down"):
        await agent.run("break", conversation="t")
    assert await store.conversation_messages("t") == first.messages
    assert (await agent.run("ok", conversation="t")).output == "hi | ok"


async def test_a_crashed_holder_holds_until_its_lease_runs_out(
    store: RunStore, clock: FakeClock
) -> None:
    """The process died holding the conversation: refused within its lease, taken after;
    the crashed run's resume is then refused (the conversation moved on) and left as it was."""
    sent: list[str] = []

    @tool
    async def send(ctx: RunContext[None], to: str) -> str:
        """Send."""
        sent.append(ctx.tool_call_id)
        return "sent"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if turn.messages[-1]["role"] == "user" and users(turn)[-1] == "send it":
            return ModelTurnResult(tool_calls=(call("c1", "send", to="ann"),))
        return await echo(turn)

    crashing = CrashingStore(store, "after_model_answer", 1)
    dying = Agent(model, tools=[send], store=crashing, store_owner="gone", lease_ttl=30)
    assert await run_until_crash(lambda: dying.run("send it", conversation="t", run_id="dead"))
    agent = Agent(model, tools=[send], store=store, store_owner="alive", lease_ttl=30)
    with pytest.raises(ConversationBusy, match="'dead'"):
        await agent.run("hello?", conversation="t")
    clock.advance(31)
    later = await agent.run("hello?", conversation="t")
    assert later.output == "hello?"  # the dead run's messages never reached it
    with pytest.raises(ConversationBusy, match="moved on"):
        await agent.resume("dead")
    record = await store.get_run("dead")
    assert record.status == "running"
    assert record.lease_owner is None
    assert sent == []  # the refused resume ran nothing
    assert await store.conversation_messages("t") == later.messages


async def test_a_crashed_run_resumed_in_time_adds_its_answer(store: RunStore) -> None:
    sent: list[str] = []

    @tool
    async def send(ctx: RunContext[None], to: str) -> str:
        """Send."""
        sent.append(ctx.tool_call_id)
        return "sent"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if turn.messages[-1]["role"] == "user" and users(turn)[-1] == "send it":
            return ModelTurnResult(tool_calls=(call("c1", "send", to="ann"),))
        return ModelTurnResult(content="done")

    first = await Agent(model, tools=[send], store=store).run("hi", conversation="t")
    crashing = CrashingStore(store, "after_results", 1)
    dying = Agent(model, tools=[send], store=crashing, store_owner="w1")
    assert await run_until_crash(lambda: dying.run("send it", conversation="t", run_id="r"))
    resumed = await Agent(model, tools=[send], store=store, store_owner="w1").resume("r")
    assert resumed.output == "done"
    assert sent == ["c1"]  # answered from its receipt, not run again
    stored = await store.conversation_messages("t")
    assert stored == resumed.messages
    assert stored[: len(first.messages)] == first.messages
    assert [c.turns for c in await store.list_conversations()] == [2]


async def test_a_suspended_run_is_continued_in_its_conversation(store: RunStore) -> None:
    refunds: list[int] = []

    @tool(requires_approval=True)
    async def refund(ctx: RunContext[None], eur: int) -> str:
        """Refund."""
        refunds.append(eur)
        return f"refunded {eur}"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        last = turn.messages[-1]
        if last["role"] == "user" and last["content"] == "refund me":
            return ModelTurnResult(tool_calls=(call("r1", "refund", eur=50),))
        if last["role"] == "tool":
            return ModelTurnResult(content=f"tool said: {last['content']}")
        return await echo(turn)

    agent = Agent(model, tools=[refund], store=store)
    waiting = await agent.run("refund me", conversation="t")
    assert waiting.reason == "suspended"
    assert [p.id for p in waiting.pending] == ["r1"]
    assert await store.conversation_messages("t") == waiting.messages
    with pytest.raises(UsageError, match="still wait for a decision"):
        await agent.run("hello?", conversation="t")
    done = await agent.run(conversation="t", approvals={"r1": True})
    assert refunds == [50]
    assert done.output == "tool said: refunded 50"
    assert await store.conversation_messages("t") == done.messages
    check_tool_call_history(done.messages)


async def test_delete_conversation_deletes_it_and_its_runs(store: RunStore) -> None:
    agent = Agent(echo, store=store)
    one = await agent.run("a", conversation="gone")
    two = await agent.run("b", conversation="gone")
    kept = await agent.run("c", conversation="kept")
    assert await store.delete_conversation("gone") is True
    assert await store.delete_conversation("gone") is False
    assert await store.conversation_messages("gone") == []
    assert [r.run_id for r in await store.list_runs()] == [kept.run_id]
    assert [c.conversation_id for c in await store.list_conversations()] == ["kept"]
    assert one.run_id != two.run_id
    # A deleted conversation's id starts afresh.
    assert (await agent.run("d", conversation="gone")).output == "d"


async def test_delete_conversation_refuses_a_held_one(store: RunStore) -> None:
    inside = anyio.Event()
    go_on = anyio.Event()

    async def slow(turn: ModelTurn) -> ModelTurnResult:
        inside.set()
        await go_on.wait()
        return await echo(turn)

    agent = Agent(slow, store=store)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: agent.run("a", conversation="t", run_id="holder"))
        await inside.wait()
        with pytest.raises(ConversationBusy, match="'holder'"):
            await store.delete_conversation("t")
        go_on.set()
    assert await store.delete_conversation("t") is True


async def test_open_run_and_run_sync_take_a_conversation(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    agent = Agent(echo, store=str(path))
    async with agent.open_run("one", conversation="t") as run:
        async for _ in run:
            pass
    assert run.result is not None
    assert run.result.output == "one"
    result = await agent.run("two", conversation="t")
    assert result.output == "one | two"
    async with SqliteRunStore(path) as store:
        assert await store.conversation_messages("t") == result.messages


def test_run_sync_takes_a_conversation(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"Agent\.run_sync: conversation="):
        Agent(echo).run_sync("hi", conversation="t")
    agent = Agent(echo, store=str(tmp_path / "chat.db"))
    assert agent.run_sync("one", conversation="t").output == "one"
    assert agent.run_sync("two", conversation="t", backend="asyncio").output == "one | two"


async def test_conversation_wiring_mistakes_are_refused_at_the_call(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"Agent\.run: conversation='t' .* Agent\(store=\.\.\.\)"):
        await Agent(echo).run("hi", conversation="t")
    stored = Agent(echo, store=str(tmp_path / "x.db"))
    with pytest.raises(ValueError, match="conversation= and message_history="):
        await stored.run("hi", conversation="t", message_history=[])
    with pytest.raises(TypeError, match="conversation must be a non-empty str"):
        await stored.run("hi", conversation="")
    with pytest.raises(TypeError, match="conversation must be a non-empty str"):
        stored.open_run("hi", conversation=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prompt"):
        await stored.run(conversation="t")  # no prompt and nothing to continue
