"""ToolLoop against tools and hosts that misbehave.

* A stray asyncio ``CancelledError`` from a tool is that call's failure, in
  the pool and in the serial phase; ``not_run`` only for a call never started.
* An exception whose ``__str__`` fails is rendered by its type name, and
  every call is answered anyway.
* One failure plus a hard cancel never leaks as a group; the caller's own
  cancel scope absorbs its cancel.
* Wiring mistakes (a sync port, a non-awaitable, a wrong return) are the
  host's: refused at construction or raised as ``UsageError``, with the
  transcript whole, never turned into a tool message.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from loop_scripts import Host, Turn, answers, call, kind_of

from cancel_helpers import fan_out_then_fail
from conftest import run_on
from juno_bind_trio import UsageError
from juno_bind_trio.loop import (
    LoopEvent,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    ToolCallOutcome,
    ToolCallRejectedEvent,
    ToolLoop,
)
from juno_bind_trio.run import INTERRUPTED_TOOL_CALL_MESSAGE, ToolCallLike, tool_call_id

pytestmark = pytest.mark.anyio


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class BadKind(Exception):
    @property
    def kind(self) -> str:
        raise RuntimeError("no kind either")


class HostBase(BaseException):
    """A host's own BaseException (not an Exception)."""


def ok(call_id: str) -> ToolCallOutcome:
    return ToolCallOutcome.from_content(call_id, json.dumps({"ok": call_id}))


async def _model(turn: ModelTurn) -> ModelTurnResult:
    raise AssertionError  # pragma: no cover - never called


async def _tool(tc: ToolCallLike) -> ToolCallOutcome:
    raise AssertionError  # pragma: no cover - never called


def loop_for(turns: list[Turn], tool: Any, **overrides: Any) -> tuple[Host, ToolLoop]:
    host = Host(turns)
    return host, host.loop(run_tool_call=tool, **overrides)


# --- A: a stray CancelledError is a failure, not a cancellation -------------------------


async def stray(tc: ToolCallLike) -> ToolCallOutcome:
    call_id = tool_call_id(tc)
    if call_id == "c1":
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
    await anyio.sleep(0.01)
    return ok(call_id)


@pytest.mark.parametrize("serial", [False, True])
def test_a_stray_cancelled_error_is_answered_as_that_calls_failure(serial: bool) -> None:
    async def main() -> None:
        host, loop = loop_for(
            [Turn(calls=[call("c0"), call("c1"), call("c2")]), Turn(content="done")],
            stray,
            runs_serially=(lambda tc: True) if serial else None,
        )
        result = await loop.run()
        assert result.reason == "completed"
        found = answers(host.state.messages)
        assert found["c0"] == {"ok": "c0"}
        assert found["c2"] == {"ok": "c2"}
        # Started, so never not_run; failed, so no kind: an ordinary failure.
        assert found["c1"] == {"success": False, "error": "CancelledError"}
        assert loop.stats.tool_failures == 1
        assert loop.stats.tool_calls_not_run == 0

    run_on("asyncio", main)


def test_a_native_task_cancel_during_the_serial_phase_still_cancels_the_run() -> None:
    # task.cancel() of the host's own task is the run's cancellation (Task.cancelling()
    # says so), not a stray one: it propagates, and the call is interrupted.
    async def main() -> None:
        host = Host([Turn(calls=[call("a", delay=10), call("b")])])
        loop = host.loop(runs_serially=lambda tc: True)
        task = asyncio.ensure_future(loop.run())
        await anyio.sleep(2)  # the model turn takes 1 s; a is then running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        found = answers(host.state.messages)
        assert kind_of(found["a"]) == "interrupted"
        assert kind_of(found["b"]) == "not_run"
        assert host.saves() == 0

    run_on("asyncio", main)


# --- B: rendering an error never fails ---------------------------------------------------


@pytest.mark.parametrize("serial", [False, True])
async def test_an_exception_whose_str_fails_is_answered_by_its_type_name(serial: bool) -> None:
    async def tool(tc: ToolCallLike) -> ToolCallOutcome:
        await anyio.lowlevel.checkpoint()
        if tool_call_id(tc) == "a":
            raise BadStr
        if tool_call_id(tc) == "b":
            raise BadKind("kindless")
        return ok(tool_call_id(tc))

    host, loop = loop_for(
        [Turn(calls=[call("a"), call("b"), call("c")]), Turn(content="done")],
        tool,
        runs_serially=(lambda tc: True) if serial else None,
    )
    result = await loop.run()
    assert result.reason == "completed"
    found = answers(host.state.messages)
    assert found["a"] == {"success": False, "error": "BadStr"}
    assert found["b"] == {"success": False, "error": "BadKind: kindless"}
    assert found["c"] == {"ok": "c"}


async def test_a_fatal_error_whose_str_fails_still_leaves_every_call_answered() -> None:
    async def tool(tc: ToolCallLike) -> ToolCallOutcome:
        await anyio.sleep(1 if tool_call_id(tc) == "a" else 2)
        if tool_call_id(tc) == "a":
            raise BadStr
        return ok(tool_call_id(tc))

    host, loop = loop_for(
        [Turn(calls=[call("a"), call("b")])],
        tool,
        is_fatal_tool_error=lambda e: isinstance(e, BadStr),
    )
    with pytest.raises(BadStr):
        await loop.run()
    found = answers(host.state.messages)
    assert found == {"a": {"success": False, "error": "BadStr"}, "b": {"ok": "b"}}


async def test_a_tool_error_reaches_the_model_with_its_type() -> None:
    async def tool(tc: ToolCallLike) -> ToolCallOutcome:
        await anyio.lowlevel.checkpoint()
        return {"weather": "sunny"}["city"]  # type: ignore[return-value]

    host, loop = loop_for([Turn(calls=[call("a")]), Turn(content="done")], tool)
    await loop.run()
    assert answers(host.state.messages)["a"] == {"success": False, "error": "KeyError: 'city'"}


# --- C: one failure, never a group ------------------------------------------------------


@pytest.mark.parametrize("serial", [False, True])
async def test_a_failing_fan_out_under_the_callers_deadline_is_absorbed(serial: bool) -> None:
    start = anyio.current_time()
    host, loop = loop_for(
        [Turn(calls=[call("a"), call("b")], delay=0)],
        fan_out_then_fail,
        runs_serially=(lambda tc: True) if serial else None,
    )
    returned = False
    with anyio.move_on_after(1.5) as scope:
        await loop.run()
        returned = True
    assert not returned
    assert scope.cancelled_caught
    found = answers(host.state.messages)
    assert kind_of(found["a"]) == "interrupted"
    # Serially, b never started; in the pool it ran alongside a and was cut off too.
    assert kind_of(found["b"]) == ("not_run" if serial else "interrupted")
    assert anyio.current_time() - start == 3.0
    assert host.saves() == 0


@pytest.mark.parametrize("serial", [False, True])
async def test_one_base_exception_during_a_cancel_reaches_the_caller_as_itself(
    serial: bool,
) -> None:
    async def tool(tc: ToolCallLike) -> ToolCallOutcome:
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class() as cancelled:
            if tool_call_id(tc) == "a":
                raise BaseExceptionGroup("cleanup", [HostBase("in cleanup"), cancelled]) from None
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    host, loop = loop_for(
        [Turn(calls=[call("a"), call("b")], delay=0)],
        tool,
        runs_serially=(lambda tc: True) if serial else None,
    )
    with pytest.raises(HostBase, match="in cleanup") as info, anyio.move_on_after(1):
        await loop.run()
    assert type(info.value) is HostBase
    # Taken out of the group it was raised in, which stays readable as its cause.
    assert isinstance(info.value.__cause__, BaseExceptionGroup)
    if serial:
        assert info.value in info.value.__cause__.exceptions  # the tool's own group
    found = answers(host.state.messages)
    assert kind_of(found["a"]) == "interrupted"


# --- D: wiring mistakes are the host's --------------------------------------------------


def sync_port(*args: Any) -> None:
    return None


class AsyncCall:
    async def __call__(self, *args: Any) -> None:
        await anyio.lowlevel.checkpoint()


async def async_port(*args: Any) -> None:
    await anyio.lowlevel.checkpoint()


ASYNC_PORTS = [
    "call_model",
    "run_tool_call",
    "activate_plugins",
    "activate_skills",
    "on_turn_would_end",
    "apply_compaction",
    "save_session",
]


def make(**overrides: Any) -> ToolLoop:
    params: dict[str, Any] = {"state": LoopState(), "max_iterations": 3, "call_model": _model}
    params.update(overrides)
    return ToolLoop(**params)


@pytest.mark.parametrize("port", ASYNC_PORTS)
@pytest.mark.parametrize(
    "value",
    [sync_port, lambda *a: async_port(*a), functools.partial(sync_port, 1), AsyncCall],
    ids=["function", "lambda-returning-a-coroutine", "partial-of-a-function", "a-class"],
)
def test_a_sync_callable_for_an_async_port_is_refused_at_construction(
    port: str, value: Any
) -> None:
    with pytest.raises(TypeError, match=rf"ToolLoop: {port} must be an async function"):
        make(**{port: value})


@pytest.mark.parametrize("port", ASYNC_PORTS)
@pytest.mark.parametrize(
    "value",
    [async_port, AsyncCall(), functools.partial(async_port, 1), functools.partial(AsyncCall())],
    ids=["async-function", "async-call", "partial-of-async", "partial-of-async-call"],
)
def test_every_async_shape_is_accepted_for_an_async_port(port: str, value: Any) -> None:
    overrides: dict[str, Any] = {port: value}
    if port == "apply_compaction":
        overrides["needs_compaction"] = lambda tokens: False
    make(**overrides)


async def test_a_run_tool_call_that_returns_a_non_awaitable_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only a function marked as a coroutine function that is not one passes the
    # construction check; stand that in by lifting the check.
    monkeypatch.setattr("juno_bind_trio.loop._ports.is_async_callable", lambda value: True)

    def sync_tool(tc: ToolCallLike) -> ToolCallOutcome:
        return ok(tool_call_id(tc))

    for serial in (False, True):
        host, loop = loop_for(
            [Turn(calls=[call("a"), call("b")])],
            sync_tool,
            runs_serially=(lambda tc: True) if serial else None,
        )
        with pytest.raises(UsageError, match=r"ToolLoop: run_tool_call must be an async") as info:
            await loop.run()
        assert "ToolCallOutcome(" in str(info.value)
        assert "cannot be awaited" in str(info.value)
        found = answers(host.state.messages)
        assert found["a"]["kind"] == "interrupted"
        assert found["a"]["error"] == INTERRUPTED_TOOL_CALL_MESSAGE
        # Serially b never started; in the pool it ran just as wrongly.
        assert kind_of(found["b"]) == ("not_run" if serial else "interrupted")
        assert host.saves() == 0


@pytest.mark.parametrize(
    "port", ["save_session", "on_turn_would_end", "call_model", "apply_compaction"]
)
async def test_a_port_that_returns_a_non_awaitable_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    monkeypatch.setattr("juno_bind_trio.loop._ports.is_async_callable", lambda value: True)
    host = Host([Turn(content="hi")])
    overrides: dict[str, Any] = {port: lambda *args: "nope"}
    if port == "apply_compaction":
        overrides["needs_compaction"] = lambda tokens: True
        overrides["on_turn_would_end"] = _go_on_once()
    with pytest.raises(UsageError, match=rf"ToolLoop: {port} must be an async function.*'nope'"):
        await host.loop(**overrides).run()


def _go_on_once() -> Any:
    calls = 0

    async def go_on(result: ModelTurnResult) -> bool:
        nonlocal calls
        calls += 1
        await anyio.lowlevel.checkpoint()
        return calls == 1

    return go_on


@pytest.mark.parametrize("port", ["activate_plugins", "activate_skills"])
async def test_an_activation_port_that_returns_a_non_awaitable_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    monkeypatch.setattr("juno_bind_trio.loop._ports.is_async_callable", lambda value: True)
    which = "plugin" if port == "activate_plugins" else "skill"
    host = Host([Turn(calls=[call("a", **{which: "x"})])])
    with pytest.raises(UsageError, match=rf"ToolLoop: {port} must be an async function"):
        await host.loop(**{port: lambda names: None}).run()
    # The batch was answered before the port was reached.
    assert answers(host.state.messages) == {"a": {"ok": "a"}}


async def test_a_text_only_run_needs_no_run_tool_call() -> None:
    host = Host([Turn(content="just text")])
    result = await host.loop(run_tool_call=None).run()
    assert result.reason == "completed"
    assert result.content == "just text"


async def test_a_tool_call_in_a_run_without_tools_is_the_models_not_found() -> None:
    host = Host([Turn(calls=[call("a", name="weather")]), Turn(content="sorry")])
    result = await host.loop(run_tool_call=None).run()
    assert result.reason == "completed"
    assert answers(host.state.messages)["a"] == {
        "success": False,
        "kind": "not_found",
        "error": "There is no tool named 'weather': this run offers no tools.",
    }
    assert result.stats.tool_failures == 1


@pytest.mark.parametrize("serial", [False, True])
def test_a_stray_cancelled_error_under_a_pending_cancel_is_absorbed_by_the_callers_scope(
    serial: bool,
) -> None:
    # The run's cancel is pending (it landed while the tool was shielded) when the
    # tool fails with a stray CancelledError. The call was cut off; what leaves
    # run() must be the cancellation the caller's scope knows as its own, not the
    # stray exception, which an anyio scope on asyncio would let through.
    async def tool(tc: ToolCallLike) -> ToolCallOutcome:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(2)
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
        raise AssertionError("unreachable")  # pragma: no cover

    async def main() -> None:
        host, loop = loop_for(
            [Turn(calls=[call("a"), call("b")], delay=0)],
            tool,
            runs_serially=(lambda tc: True) if serial else None,
        )
        with anyio.move_on_after(1) as scope:
            await loop.run()
        assert scope.cancelled_caught
        found = answers(host.state.messages)
        assert kind_of(found["a"]) == "interrupted"
        assert kind_of(found["b"]) == ("not_run" if serial else "interrupted")

    run_on("asyncio", main)


@pytest.mark.parametrize("under_cancel", [False, True])
async def test_a_bare_base_exception_from_a_serial_tool_is_raised_untouched(
    under_cancel: bool,
) -> None:
    async def tool(tc: ToolCallLike) -> ToolCallOutcome:
        try:
            await anyio.sleep(2)
        except anyio.get_cancelled_exc_class():
            raise HostBase("in cleanup") from None
        raise HostBase("plain")

    host, loop = loop_for(
        [Turn(calls=[call("a"), call("b")], delay=0)], tool, runs_serially=lambda tc: True
    )
    with pytest.raises(HostBase) as info, anyio.move_on_after(1 if under_cancel else 10):
        await loop.run()
    assert str(info.value) == ("in cleanup" if under_cancel else "plain")
    # Raised as it was: not re-raised from itself, not wrapped.
    assert info.value.__cause__ is None
    found = answers(host.state.messages)
    assert (kind_of(found["a"]), kind_of(found["b"])) == ("interrupted", "not_run")


async def test_a_serial_tool_cut_off_mid_failure_keeps_the_failure_as_the_cause() -> None:
    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    _host, loop = loop_for(
        [Turn(calls=[call("a")], delay=0)],
        fan_out_then_fail,
        runs_serially=lambda tc: True,
        events=send,
    )
    with send, receive:
        with anyio.move_on_after(1.5):
            await loop.run()
        send.close()
        rejected = [e async for e in receive if isinstance(e, ToolCallRejectedEvent)]
    (event,) = rejected
    assert event.kind == "interrupted"
    cause = event.error.__cause__
    assert isinstance(cause, ExceptionGroup)
    assert [type(e) for e in cause.exceptions] == [ValueError]
