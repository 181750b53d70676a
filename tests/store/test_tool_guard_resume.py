"""A tool guard refusing a call of a resumed open turn leaves no receipt (SQLite, PostgreSQL).

A refused call never starts, so no receipt of it is written: in the loop,
and on a resume too, where the open turn's never-started calls (after a
crash, or after a decision) are dispatched through the store, which writes
each one's receipt before it runs. The guard is asked before that; the model
still reads the refusal, kind ``authz``, and the other calls run as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from juno_bind_trio.agent import Agent, GuardrailResult, RunContext, ToolGuard, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import RunStore
from juno_bind_trio.testing import CrashingStore, FunctionModel, run_until_crash

pytestmark = pytest.mark.anyio


def _calls(*names: str) -> FunctionModel:
    """One turn launching each name at once, then "done"."""

    def fn(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(
            tool_calls=tuple(
                {
                    "id": f"c_{name}",
                    "type": "function",
                    "function": {"name": "launch", "arguments": json.dumps({"name": name})},
                }
                for name in names
            )
        )

    return FunctionModel(fn)


def _answers(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}


def _launcher(launched: list[str], refused: set[str], **options: Any) -> Any:
    asked: list[str] = []

    async def no_refused(ctx: RunContext[None], arguments: dict[str, Any]) -> GuardrailResult:
        asked.append(arguments["name"])
        tripped = arguments["name"] in refused
        return GuardrailResult(tripwire=tripped, message=f"{arguments['name']} is not allowed")

    async def launch(name: str) -> str:
        """Launch something."""
        launched.append(name)
        return json.dumps({"launched": name})

    made = tool(launch, guards=[ToolGuard(before=no_refused)], **options)
    return made, asked


async def test_a_crash_resumed_call_the_guard_refuses_has_no_receipt(store: RunStore) -> None:
    launched: list[str] = []
    launch, asked = _launcher(launched, {"b"})
    crashing = CrashingStore(store, "after_model_answer", 1)
    first = Agent(_calls("a", "b"), tools=[launch], store=crashing, store_owner="w1")
    assert await run_until_crash(lambda: first.run("go", run_id="r1"))
    assert (launched, asked) == ([], [])  # the crash came before any call
    again = Agent(_calls("a", "b"), tools=[launch], store=store, store_owner="w1")
    result = await again.resume("r1")
    assert result.output == "done"
    assert launched == ["a"]
    assert sorted(asked) == ["a", "b"]  # each asked once: before its receipt, not again
    answers = _answers(result.messages)
    assert answers["c_b"]["kind"] == "authz"
    assert answers["c_b"]["error"] == "b is not allowed"
    assert answers["c_a"] == {"launched": "a"}
    receipts = await store.receipts("r1")
    assert [(r.tool_call_id, r.state) for r in receipts] == [("c_a", "succeeded")]
    # What the model read is what the store kept.
    stored = await store.load("r1")
    assert _answers(stored.messages)["c_b"]["kind"] == "authz"


async def test_an_approved_call_the_guard_now_refuses_has_no_receipt(store: RunStore) -> None:
    """The guard passed the call when it was asked for; by the decision, it refuses it
    (the world changed meanwhile): the approved call never starts."""
    launched: list[str] = []
    refused: set[str] = set()
    launch, asked = _launcher(launched, refused, requires_approval=True)
    agent = Agent(_calls("a", "b"), tools=[launch], store=store, store_owner="w1")
    first = await agent.run("go", run_id="r2")
    assert first.reason == "suspended"
    assert sorted(p.id for p in first.pending) == ["c_a", "c_b"]
    refused.add("b")
    result = await agent.resume("r2", approvals={"c_a": True, "c_b": True})
    assert (result.output, launched) == ("done", ["a"])
    answers = _answers(result.messages)
    assert answers["c_b"]["kind"] == "authz"
    assert answers["c_a"] == {"launched": "a"}
    receipts = await store.receipts("r2")
    assert [(r.tool_call_id, r.state) for r in receipts] == [("c_a", "succeeded")]
    assert sorted(asked) == ["a", "a", "b", "b"]  # at the request, then at the resume


async def test_a_crash_resumed_call_of_a_tool_its_step_hid_has_no_receipt(store: RunStore) -> None:
    """The same for a call of a tool the step did not offer (``prepare_tools``): it never
    starts, so it has no receipt; the model reads ``not_found``, as in the loop."""
    launched: list[str] = []

    def fn(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(
            tool_calls=(
                {
                    "id": "c_a",
                    "type": "function",
                    "function": {"name": "launch", "arguments": "{}"},
                },
                {
                    "id": "c_h",
                    "type": "function",
                    "function": {"name": "hidden", "arguments": "{}"},
                },
            )
        )

    async def launch() -> str:
        """Launch."""
        launched.append("launch")
        return "launched"

    async def hidden() -> str:
        """Never offered."""
        launched.append("hidden")
        return "hidden ran"

    def only_launch(ctx: RunContext[None], defs: list[Any]) -> list[Any]:
        return [d for d in defs if d.name == "launch"]

    def agent_on(on: RunStore) -> Agent[None, str]:
        return Agent(
            FunctionModel(fn),
            tools=[tool(launch), tool(hidden)],
            prepare_tools=only_launch,
            store=on,
            store_owner="w1",
        )

    crashing = CrashingStore(store, "after_model_answer", 1)
    assert await run_until_crash(lambda: agent_on(crashing).run("go", run_id="r3"))
    result = await agent_on(store).resume("r3")
    assert (result.output, launched) == ("done", ["launch"])
    answers = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert json.loads(answers["c_h"])["kind"] == "not_found"
    assert answers["c_a"] == "launched"
    receipts = await store.receipts("r3")
    assert [(r.tool_call_id, r.state) for r in receipts] == [("c_a", "succeeded")]
