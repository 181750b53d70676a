"""Tool guardrails: `before` refuses a call (kind authz, no start, no receipt), `after` replaces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from juno_bind_trio import UsageError
from juno_bind_trio.agent import (
    Agent,
    GuardrailResult,
    RunContext,
    ToolGuard,
    tool,
)
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import SqliteRunStore
from juno_bind_trio.testing import (
    CrashingStore,
    FunctionModel,
    StreamResponse,
    open_fake_openai_server,
    run_until_crash,
)

pytestmark = pytest.mark.anyio

started: list[tuple[str, float]] = []


async def _launch(name: str, count: int = 1) -> str:
    """Launch something."""
    started.append((name, anyio.current_time()))
    await anyio.sleep(2)
    return f"launched {name} x{count}"


def _call(call_id: str, name: str, **more: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "launch", "arguments": json.dumps({"name": name, **more})},
    }


def _batch(*names: str) -> FunctionModel:
    """One turn asking for a launch of each name at once, then "done"."""

    def fn(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(tool_calls=tuple(_call(f"c_{n}", n) for n in names))

    return FunctionModel(fn)


seen: list[dict[str, Any]] = []


async def _no_b(ctx: RunContext[None], arguments: dict[str, Any]) -> GuardrailResult:
    seen.append(arguments)
    if arguments["name"] == "b":
        await anyio.sleep(1)
        return GuardrailResult(tripwire=True, message="b may not be launched")
    return GuardrailResult(tripwire=False)


def _answers(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        m["tool_call_id"]: json.loads(m["content"])
        if m["content"].startswith("{")
        else m["content"]
        for m in messages
        if m["role"] == "tool"
    }


async def test_a_refused_call_of_a_parallel_batch_never_starts_while_the_others_run() -> None:
    started.clear()
    seen.clear()
    launch = tool(_launch, name="launch", guards=[ToolGuard(before=_no_b)])
    agent = Agent(_batch("a", "b", "c"), tools=[launch])
    result = await agent.run("launch them")
    assert sorted(started) == [("a", 0.0), ("c", 0.0)]  # not held up by b's check
    answers = _answers(result.messages)
    assert answers["c_a"] == "launched a x1"
    assert answers["c_c"] == "launched c x1"
    refused = answers["c_b"]
    assert refused["success"] is False
    assert refused["kind"] == "authz"
    assert "b may not be launched" in refused["error"]
    assert {"name": "b", "count": 1} in seen  # validated: the default filled in
    assert result.output == "done"
    assert anyio.current_time() == 2.0


async def test_after_replaces_what_the_model_reads_and_agent_guards_come_first() -> None:
    started.clear()
    order: list[str] = []

    def redact(ctx: RunContext[None], value: object) -> object:
        order.append(f"agent:{value}")
        return str(value).replace("launched", "[redacted]")

    async def shout(ctx: RunContext[None], value: object) -> object:
        order.append(f"tool:{value}")
        return str(value).upper()

    def keep(ctx: RunContext[None], value: object) -> None:
        order.append("keep")

    launch = tool(_launch, name="launch", guards=[ToolGuard(after=shout), ToolGuard(after=keep)])
    agent = Agent(_batch("a"), tools=[launch], tool_guards=[ToolGuard(after=redact)])
    result = await agent.run("go")
    assert _answers(result.messages)["c_a"] == "[REDACTED] A X1"
    assert order == ["agent:launched a x1", "tool:[redacted] a x1", "keep"]


async def test_a_refused_call_has_no_receipt_and_the_others_do(tmp_path: Path) -> None:
    started.clear()
    path = tmp_path / "runs.db"
    launch = tool(_launch, name="launch")
    agent = Agent(
        _batch("a", "b"), tools=[launch], store=path, tool_guards=[ToolGuard(before=_no_b)]
    )
    await agent.run("go", run_id="guarded")
    async with SqliteRunStore(path) as store:
        receipts = await store.receipts("guarded")
    assert [(r.tool_call_id, r.state) for r in receipts] == [("c_a", "succeeded")]
    assert [name for name, _ in started] == ["a"]


async def test_arguments_that_do_not_validate_reach_the_tool_not_the_guard() -> None:
    seen.clear()

    def fn(turn: ModelTurn) -> ModelTurnResult:
        if turn.iteration > 1:
            return ModelTurnResult(content="done")
        return ModelTurnResult(tool_calls=(_call("c1", "a", count="many"),))

    launch = tool(_launch, name="launch", guards=[ToolGuard(before=_no_b)])
    result = await Agent(FunctionModel(fn), tools=[launch]).run("go")
    assert seen == []
    assert _answers(result.messages)["c1"]["kind"] == "validation"


async def test_a_guard_returning_something_else_is_a_usage_error() -> None:
    launch = tool(_launch, name="launch", guards=[ToolGuard(before=lambda ctx, args: True)])
    with pytest.raises(UsageError, match="returned True for a call of 'launch'"):
        await Agent(_batch("a"), tools=[launch]).run("go")


async def test_through_the_sdk_the_model_reads_the_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started.clear()
    script = [
        StreamResponse.of_tool_calls(
            ("call_1", "launch", '{"name": "a"}'), ("call_2", "launch", '{"name": "b"}')
        ),
        StreamResponse.of_text("one launched"),
    ]
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        launch = tool(_launch, name="launch", guards=[ToolGuard(before=_no_b)])
        agent = Agent("openai:juno-small", tools=[launch])
        result = await agent.run("launch a and b")
        await agent.aclose()
    assert result.output == "one launched"
    tool_messages = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_1", "call_2"]
    assert json.loads(tool_messages[1]["content"])["kind"] == "authz"


def test_tool_guards_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="give before=, after= or both"):
        ToolGuard()
    with pytest.raises(TypeError, match="before must be a function"):
        ToolGuard(before=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"guards\[0\] must be a ToolGuard"):
        tool(_launch, guards=[_no_b])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="guards must be a list of ToolGuard"):
        Agent(_batch("a"), tool_guards=ToolGuard(before=_no_b))  # type: ignore[arg-type]
    assert repr(ToolGuard(before=_no_b)) == "<ToolGuard '_no_b'>"
    assert ToolGuard(after=_no_b, name="x").name == "x"


async def test_a_call_a_resume_runs_is_checked_as_any(tmp_path: Path) -> None:
    """A crash after the model's answer leaves its calls unstarted: the resume runs them,
    through the same `before` guard (a refusal leaves no receipt to answer it from)."""
    started.clear()
    launch = tool(_launch, name="launch", guards=[ToolGuard(before=_no_b)])
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        crashing = CrashingStore(store, "after_model_answer", 1)
        first = Agent(_batch("a", "b"), tools=[launch], store=crashing, store_owner="w1")
        assert await run_until_crash(lambda: first.run("go", run_id="r1"))
        assert started == []
        again = Agent(_batch("a", "b"), tools=[launch], store=store, store_owner="w1")
        result = await again.resume("r1")
    assert [name for name, _ in started] == ["a"]
    answers = _answers(result.messages)
    assert answers["c_b"]["kind"] == "authz"
    assert result.output == "done"
