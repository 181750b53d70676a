"""The pool against tools that end in unusual ways: stray cancellations, groups, BaseExceptions.

* A cancellation exception that is not the run's own (asyncio's
  ``CancelledError`` from a future somebody else cancelled) is that call's
  failure; the batch settles every call and returns.
* With a hard cancel pending, a tool whose own task group holds a failure
  and the cancellation is "interrupted", and the cancellation leaves alone,
  so the caller's cancel scope absorbs it.
* One failure that is not an ``Exception`` reaches the caller as itself, on
  both backends, never in a group; cancellations are taken out first.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import anyio
import anyio.lowlevel
import outcome
import pytest

from cancel_helpers import fan_out_then_fail
from conftest import run_on
from juno_bind_trio.run import (
    INTERRUPTED_TOOL_CALL_MESSAGE,
    InterruptedToolCallError,
    ToolBatch,
    ToolCallLike,
)

pytestmark = pytest.mark.anyio


def call(i: int, tool: str = "t") -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}


class HostBase(BaseException):
    """A host's own BaseException subclass (not an Exception): it must propagate."""


# --- A: a stray asyncio CancelledError is a tool failure -------------------------------


async def stray_cancel_tool(c: ToolCallLike) -> str:
    call_id = c["id"]  # type: ignore[index]
    if call_id == "c1":
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
    await anyio.sleep(0.01)
    return str(call_id)


def test_a_stray_cancelled_error_is_one_calls_failure() -> None:
    async def main() -> None:
        batch: ToolBatch[str] = ToolBatch([call(0), call(1), call(2)])
        results = await batch.run(stray_cancel_tool)
        assert results[0] == outcome.Value("c0")
        assert results[2] == outcome.Value("c2")
        assert isinstance(results[1], outcome.Error)
        assert isinstance(results[1].error, asyncio.CancelledError)
        assert batch.states == ("finished", "finished", "finished")

    run_on("asyncio", main)


def test_a_stray_cancel_in_a_one_worker_group_does_not_cut_off_the_queue() -> None:
    # One worker: c1's stray cancel must not end the worker that still has c2 to claim.
    async def main() -> None:
        batch: ToolBatch[str] = ToolBatch([call(0), call(1), call(2)])
        results = await batch.run(stray_cancel_tool, per_tool_limit=1)
        assert [type(r) for r in results] == [outcome.Value, outcome.Error, outcome.Value]
        assert batch.statistics().finished == 3

    run_on("asyncio", main)


def test_a_worker_that_dies_unsettled_is_still_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the stray-cancel rule, anyio reads the worker's CancelledError as a
    # cancel of the whole group and ends every worker silently. The sweep after the
    # task group is what still keeps "no unsettled call is ever returned".
    monkeypatch.setattr("juno_bind_trio.run._pool.is_foreign_cancellation", lambda exc: False)

    async def main() -> None:
        batch: ToolBatch[str] = ToolBatch([call(0), call(1), call(2)])
        results = await batch.run(stray_cancel_tool)
        assert None not in results
        assert batch.states == ("interrupted", "interrupted", "interrupted")
        for result in results:
            assert isinstance(result, outcome.Error)
            assert isinstance(result.error, InterruptedToolCallError)

    run_on("asyncio", main)


def test_a_native_task_cancel_is_still_the_runs_cancellation() -> None:
    # A bare task.cancel() of the host's task is the run's own cancellation, not a
    # stray one: it propagates, and the calls it cut off are interrupted.
    async def main() -> None:
        batch: ToolBatch[None] = ToolBatch([call(0), call(1)])

        async def slow(c: ToolCallLike) -> None:
            await anyio.sleep(10)

        task = asyncio.ensure_future(batch.run(slow))
        await anyio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert batch.states == ("interrupted", "interrupted")

    run_on("asyncio", main)


# --- C: one failure, never a group; a cancel absorbed by its own scope ----------------


async def test_a_failing_fan_out_under_the_callers_deadline_is_absorbed_by_it() -> None:
    # fails() raises at 1.0 s; cleans_up() is then in its shielded cleanup until
    # 3.0 s; the caller's deadline lands at 1.5 s, in the middle of it. On Trio the
    # tool then raises a group holding the ValueError and the Cancelled.
    start = anyio.current_time()
    batch: ToolBatch[None] = ToolBatch([call(0)])
    with anyio.move_on_after(1.5) as scope:
        await batch.run(fan_out_then_fail)
    assert scope.cancelled_caught
    assert anyio.current_time() - start == 3.0
    assert batch.states == ("interrupted",)
    result = batch.result(0)
    assert isinstance(result, outcome.Error)
    assert isinstance(result.error, InterruptedToolCallError)
    assert str(result.error) == INTERRUPTED_TOOL_CALL_MESSAGE


async def test_a_group_of_a_failure_and_the_cancel_is_interrupted_and_absorbed() -> None:
    batch: ToolBatch[None] = ToolBatch([call(0), call(1)])

    async def tool(c: ToolCallLike) -> None:
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class() as cancelled:
            # What a tool's own task group raises when one child failed as the
            # cancel cut off another.
            raise BaseExceptionGroup("tool's own group", [ValueError("x"), cancelled]) from None

    with anyio.move_on_after(1) as scope:
        await batch.run(tool)
    assert scope.cancelled_caught
    assert batch.states == ("interrupted", "interrupted")
    result = batch.result(0)
    assert isinstance(result, outcome.Error)
    cause = result.error.__cause__
    assert isinstance(cause, ExceptionGroup)
    assert [type(e) for e in cause.exceptions] == [ValueError]


async def test_one_base_exception_with_a_cancel_in_teardown_is_raised_as_itself() -> None:
    batch: ToolBatch[None] = ToolBatch([call(0, "a"), call(1, "b")])

    async def tool(c: ToolCallLike) -> None:
        if c["id"] == "c0":  # type: ignore[index]
            await anyio.sleep(1)
            raise HostBase("stop everything")
        # Cut off by the task group's cancel, in the same teardown.
        await anyio.sleep(10)

    with pytest.raises(HostBase, match="stop everything") as info:
        await batch.run(tool)
    assert type(info.value) is HostBase
    assert batch.states == ("interrupted", "interrupted")


async def test_a_base_exception_while_the_caller_cancels_outranks_the_cancel() -> None:
    batch: ToolBatch[None] = ToolBatch([call(0, "a"), call(1, "b")])

    async def tool(c: ToolCallLike) -> None:
        if c["id"] == "c0":  # type: ignore[index]
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                raise HostBase("in cleanup") from None
        await anyio.sleep(10)

    with pytest.raises(HostBase, match="in cleanup") as info, anyio.move_on_after(1):
        await batch.run(tool)
    assert type(info.value) is HostBase


async def test_two_base_exceptions_stay_a_group_of_two() -> None:
    batch: ToolBatch[None] = ToolBatch([call(0, "a"), call(1, "b"), call(2, "go")])
    go = anyio.Event()

    async def tool(c: ToolCallLike) -> None:
        call_id = c["id"]  # type: ignore[index]
        if call_id == "c2":
            await anyio.sleep(1)
            go.set()
            return
        # Both woken by the same set(), and neither checkpoints again before
        # raising: two failures in one instant, neither cut off by the other.
        await go.wait()
        raise HostBase(call_id)

    with pytest.raises(BaseExceptionGroup) as info:
        await batch.run(tool)
    leaves = info.value.exceptions
    assert sorted(str(e) for e in leaves) == ["c0", "c1"]
    assert all(type(e) is HostBase for e in leaves)


# --- the dict fast path's checks, and the id each harness error carries ----------------


@pytest.mark.parametrize(
    "bad",
    [
        {"id": 1, "type": "function", "function": {"name": "t", "arguments": "{}"}},
        {"id": "c0", "type": "function", "function": {"name": 1, "arguments": "{}"}},
        {"id": "c0", "type": "function", "function": {"name": "t", "arguments": {}}},
        {"id": "c0", "type": "custom", "function": {"name": "t", "arguments": "{}"}},
        {"id": "c0", "type": "function", "function": ["t", "{}"]},
    ],
    ids=["id-not-str", "name-not-str", "arguments-not-str", "type-not-function", "no-function"],
)
def test_a_malformed_dict_call_is_refused_when_the_batch_is_built(bad: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match=r"ToolBatch: expected a function tool call"):
        ToolBatch([call(0), bad])


async def test_refused_and_interrupted_results_carry_their_own_call_id() -> None:
    from juno_bind_trio.run import AbortedToolCallError

    stop = anyio.CancelScope()
    batch: ToolBatch[None] = ToolBatch([call(0), call(1), call(2), call(3)])

    async def tool(c: ToolCallLike) -> None:
        stop.cancel()  # one worker: the first call stops every later claim
        await anyio.sleep(1)

    results = await batch.run(tool, stop=stop, per_tool_limit=1)
    ids = [getattr(r.error, "tool_call_id", None) for r in results if isinstance(r, outcome.Error)]
    assert ids == ["c1", "c2", "c3"]
    assert all(
        isinstance(r, outcome.Error) and isinstance(r.error, AbortedToolCallError)
        for r in results[1:]
    )

    cut: ToolBatch[None] = ToolBatch([call(0), call(1, "other")])
    with anyio.move_on_after(0.5):
        await cut.run(tool)
    interrupted = [cut.result(i) for i in range(2)]
    assert [
        getattr(r.error, "tool_call_id", None) for r in interrupted if isinstance(r, outcome.Error)
    ] == ["c0", "c1"]
    assert all(
        isinstance(r, outcome.Error) and isinstance(r.error, InterruptedToolCallError)
        for r in interrupted
    )


def test_the_repeated_id_named_is_the_one_repeated() -> None:
    calls = [call(0), call(1), call(2)]
    calls[2]["id"] = "c1"
    with pytest.raises(ValueError, match=r"ids must be unique, got 'c1' twice"):
        ToolBatch(calls)
    calls[2]["id"] = ""
    with pytest.raises(ValueError, match=r"ids must be non-empty, got \{'id': ''"):
        ToolBatch(calls)


async def test_refusals_are_visible_in_the_statistics_while_the_batch_still_runs() -> None:
    # Three calls to a (one worker) and a long call to b. The stop fires while a0
    # runs; a1 and a2 are refused at their claims while b0 is still running.
    stop = anyio.CancelScope()
    batch: ToolBatch[None] = ToolBatch([call(0, "a"), call(1, "a"), call(2, "a"), call(3, "b")])
    seen: list[Any] = []

    async def tool(c: ToolCallLike) -> None:
        if c["id"] == "c3":  # type: ignore[index]
            await anyio.sleep(1.5)
            seen.append((batch.statistics(), batch.states))
            await anyio.sleep(1.5)
            return
        await anyio.sleep(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(batch.run, tool, stop=stop, per_tool_limit=1))
        await anyio.sleep(0.5)
        stop.cancel()
    ((stats, states),) = seen
    assert states == ("finished", "refused", "refused", "running")
    assert (stats.refused, stats.queued, stats.in_flight) == (2, 0, 1)


def test_a_batch_is_compared_and_hashed_by_identity() -> None:
    # A batch is a stateful object: two batches of the same calls are two batches.
    first: ToolBatch[None] = ToolBatch([call(0)])
    second: ToolBatch[None] = ToolBatch([call(0)])
    assert first != second
    assert len({first, second}) == 2
