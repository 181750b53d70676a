"""The per-tool pool: concurrency bounds, results, the soft stop and the hard cancel.

Every time asserted here is exact virtual time since the test's own start.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import outcome
import pytest
from openai.types.chat import ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_message_function_tool_call import Function

from juno_bind_trio import UsageError
from juno_bind_trio.run import (
    ABORTED_TOOL_CALL_MESSAGE,
    INTERRUPTED_TOOL_CALL_MESSAGE,
    InterruptedToolCallError,
    ToolBatch,
    ToolBatchStatistics,
    ToolCallLike,
    run_tool_calls_pooled_by_tool,
    tool_call_id,
    tool_call_name,
)

pytestmark = pytest.mark.anyio


def make_calls(*tools: str) -> list[dict[str, Any]]:
    """One call per tool name given, ids ``c0``, ``c1``, … in order."""
    return [
        {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        for i, tool in enumerate(tools)
    ]


class Recorder:
    """A tool dispatcher that sleeps per call and records what happened, and when.

    ``durations`` maps a call id to its virtual duration (default 1 s);
    ``fail`` is the set of ids that raise ``ToolBoom`` after sleeping.
    """

    def __init__(
        self,
        durations: dict[str, float] | None = None,
        fail: Sequence[str] = (),
        on_start: Callable[[str], None] | None = None,
    ) -> None:
        self.start = anyio.current_time()
        self.durations = durations or {}
        self.fail = set(fail)
        self.on_start = on_start
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.cancelled: set[str] = set()
        self.running: dict[str, int] = defaultdict(int)
        self.peak: dict[str, int] = defaultdict(int)

    def now(self) -> float:
        return anyio.current_time() - self.start

    async def __call__(self, call: ToolCallLike) -> str:
        call_id, tool = tool_call_id(call), tool_call_name(call)
        assert call_id not in self.started, f"{call_id} started twice"
        self.started[call_id] = self.now()
        if self.on_start is not None:
            self.on_start(call_id)
        self.running[tool] += 1
        self.peak[tool] = max(self.peak[tool], self.running[tool])
        try:
            await anyio.sleep(self.durations.get(call_id, 1))
        except anyio.get_cancelled_exc_class():
            self.cancelled.add(call_id)
            raise
        finally:
            self.running[tool] -= 1
        self.ended[call_id] = self.now()
        if call_id in self.fail:
            raise ToolBoom(call_id)
        return f"ok-{call_id}"


class ToolBoom(Exception):
    pass


def values(results: Sequence[outcome.Outcome[Any] | None]) -> list[Any]:
    """Each result as a comparable value: the returned value, or (error type, id)."""
    shown: list[Any] = []
    for result in results:
        if isinstance(result, outcome.Value):
            shown.append(result.value)
        elif isinstance(result, outcome.Error):
            error = result.error
            shown.append((type(error).__name__, getattr(error, "tool_call_id", error.args)))
        else:
            shown.append(None)
    return shown


# --- concurrency bounds --------------------------------------------------------


async def test_twelve_one_second_calls_to_one_tool_with_limit_five_finish_at_three() -> None:
    tool = Recorder()
    results = await run_tool_calls_pooled_by_tool(make_calls(*["t"] * 12), tool, per_tool_limit=5)
    assert tool.now() == 3
    assert sorted(tool.started.values()) == [0] * 5 + [1] * 5 + [2] * 2
    assert tool.peak["t"] == 5
    assert values(results) == [f"ok-c{i}" for i in range(12)]


@pytest.mark.parametrize(
    ("limit", "calls", "finish"), [(1, 4, 4), (2, 5, 3), (3, 3, 1), (7, 20, 3)]
)
async def test_a_group_reaches_its_limit_and_never_exceeds_it(
    limit: int, calls: int, finish: int
) -> None:
    tool = Recorder()
    await run_tool_calls_pooled_by_tool(make_calls(*["t"] * calls), tool, per_tool_limit=limit)
    assert tool.now() == finish == math.ceil(calls / limit)
    assert tool.peak["t"] == min(limit, calls)


async def test_the_default_limit_is_five_workers_a_tool() -> None:
    tool = Recorder()
    await run_tool_calls_pooled_by_tool(make_calls(*["t"] * 11), tool)
    assert tool.peak["t"] == 5
    assert tool.now() == 3


async def test_each_group_claims_its_calls_in_order() -> None:
    tool = Recorder(durations={"c0": 3, "c1": 1, "c2": 1, "c3": 1})
    await run_tool_calls_pooled_by_tool(make_calls("t", "t", "t", "t"), tool, per_tool_limit=2)
    # c1 frees its worker first, which claims c2, then c3: order by index.
    assert tool.started == {"c0": 0, "c1": 0, "c2": 1, "c3": 2}


async def test_tools_run_concurrently_with_each_other() -> None:
    # A slow tool does not hold up another tool's queue.
    tool = Recorder(durations={"c0": 10})
    calls = make_calls("slow", *["fast"] * 6, "other")
    await run_tool_calls_pooled_by_tool(calls, tool, per_tool_limit=5)
    assert tool.started["c7"] == 0
    assert tool.ended["c6"] == 2  # the sixth fast call waited for a fast worker only
    assert tool.ended["c0"] == 10
    assert tool.peak == {"slow": 1, "fast": 5, "other": 1}


# --- results -------------------------------------------------------------------


async def test_results_are_aligned_with_the_calls_not_with_completion_order() -> None:
    durations = {"c0": 3, "c1": 1, "c2": 2, "c3": 0.5}
    tool = Recorder(durations=durations)
    calls = make_calls("a", "b", "a", "b")
    results = await run_tool_calls_pooled_by_tool(calls, tool, per_tool_limit=1)
    assert values(results) == ["ok-c0", "ok-c1", "ok-c2", "ok-c3"]
    assert tool.ended == {"c1": 1, "c3": 1.5, "c0": 3, "c2": 5}


async def test_a_tool_that_raises_is_an_error_result_never_an_exception_from_the_pool() -> None:
    tool = Recorder(fail=["c1", "c2"])
    batch: ToolBatch[str] = ToolBatch(make_calls("a", "a", "b", "b"))
    results = await batch.run(tool)
    assert values(results) == ["ok-c0", ("ToolBoom", ("c1",)), ("ToolBoom", ("c2",)), "ok-c3"]
    assert batch.states == ("finished",) * 4
    assert batch.statistics().finished == 4


async def test_an_exception_group_from_a_tool_is_a_result_too() -> None:
    group = ExceptionGroup("two faults", [ValueError("a"), KeyError("b")])

    async def tool(call: ToolCallLike) -> None:
        await anyio.lowlevel.checkpoint()
        raise group

    (result,) = await run_tool_calls_pooled_by_tool(make_calls("t"), tool)
    assert isinstance(result, outcome.Error)
    assert result.error is group


async def test_a_non_async_run_function_fails_its_calls_not_the_pool() -> None:
    def not_async(call: ToolCallLike) -> str:
        return "not awaitable"

    results: list[outcome.Outcome[str]] = await run_tool_calls_pooled_by_tool(
        make_calls("t"),
        not_async,  # type: ignore[arg-type]
    )
    assert isinstance(results[0], outcome.Error)
    assert isinstance(results[0].error, TypeError)


async def test_the_returned_outcomes_are_the_batchs_own_and_the_list_is_a_copy() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("t", "t"))
    results = await batch.run(Recorder())
    assert results[0] is batch.result(0)
    assert results[1] is batch.result(1)
    results.clear()
    assert values([batch.result(0), batch.result(1)]) == ["ok-c0", "ok-c1"]


async def test_an_empty_batch_returns_an_empty_list_at_once() -> None:
    start = anyio.current_time()
    assert await run_tool_calls_pooled_by_tool([], Recorder()) == []
    assert anyio.current_time() == start


async def test_an_empty_batch_is_still_a_checkpoint() -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_tool_calls_pooled_by_tool([], Recorder())
    assert scope.cancelled_caught


async def test_sdk_tool_call_objects_are_accepted_and_passed_through() -> None:
    calls = [
        ChatCompletionMessageToolCall(
            id=f"c{i}", type="function", function=Function(name="t", arguments="{}")
        )
        for i in range(3)
    ]
    seen: list[ToolCallLike] = []

    async def tool(call: ToolCallLike) -> str:
        seen.append(call)
        await anyio.lowlevel.checkpoint()
        return tool_call_id(call)

    results = await run_tool_calls_pooled_by_tool(calls, tool)
    assert values(results) == ["c0", "c1", "c2"]
    assert sorted(seen, key=tool_call_id) == calls
    assert all(a is b for a, b in zip(sorted(seen, key=tool_call_id), calls, strict=True))


# --- statistics ----------------------------------------------------------------


async def test_statistics_at_each_stage_of_a_batch() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls(*["t"] * 7))
    snapshots: list[ToolBatchStatistics] = [batch.statistics()]

    async def watch() -> None:
        await anyio.sleep(0.5)
        snapshots.append(batch.statistics())
        await anyio.sleep(1)
        snapshots.append(batch.statistics())

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await batch.run(Recorder(), per_tool_limit=5)
    snapshots.append(batch.statistics())
    stats = [
        (s.queued, s.claimed, s.in_flight, s.finished, s.refused, s.interrupted) for s in snapshots
    ]
    assert stats == [
        (7, 0, 0, 0, 0, 0),
        (2, 5, 5, 0, 0, 0),  # t=0.5
        (0, 7, 2, 5, 0, 0),  # t=1.5
        (0, 7, 0, 7, 0, 0),
    ]
    assert {s.total for s in snapshots} == {7}
    assert "finished=7" in repr(batch)


# --- the soft stop -------------------------------------------------------------


async def test_soft_stop_refuses_unclaimed_calls_and_lets_calls_in_flight_finish() -> None:
    stop = anyio.CancelScope()
    batch: ToolBatch[str] = ToolBatch(make_calls(*["t"] * 12))
    tool = Recorder()

    async def press_stop() -> None:
        await anyio.sleep(1.5)
        stop.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(press_stop)
        results = await batch.run(tool, stop=stop, per_tool_limit=5)
    # c5..c9 were in flight at 1.5 and ran to completion at 2; nothing was cancelled.
    assert tool.now() == 2
    assert tool.cancelled == set()
    assert set(tool.started) == {f"c{i}" for i in range(10)}
    assert values(results) == [f"ok-c{i}" for i in range(10)] + [
        ("AbortedToolCallError", "c10"),
        ("AbortedToolCallError", "c11"),
    ]
    refused = results[10]
    assert isinstance(refused, outcome.Error)
    assert str(refused.error) == ABORTED_TOOL_CALL_MESSAGE
    assert batch.states == ("finished",) * 10 + ("refused",) * 2
    assert batch.statistics() == ToolBatchStatistics(
        total=12, queued=0, claimed=10, in_flight=0, finished=10, refused=2, interrupted=0
    )


async def test_soft_stop_already_set_refuses_every_call_without_starting_any() -> None:
    stop = anyio.CancelScope()
    stop.cancel()
    tool = Recorder()
    results = await run_tool_calls_pooled_by_tool(make_calls("a", "b", "a"), tool, stop=stop)
    assert tool.started == {}
    assert tool.now() == 0
    assert values(results) == [("AbortedToolCallError", f"c{i}") for i in range(3)]


async def test_soft_stop_is_read_at_each_claim_even_within_one_instant() -> None:
    # The first call presses stop and returns without another checkpoint: the
    # very next claim, at the same virtual time, is refused.
    stop = anyio.CancelScope()

    def on_start(call_id: str) -> None:
        if call_id == "c0":
            stop.cancel()

    tool = Recorder(durations={"c0": 0}, on_start=on_start)
    results = await run_tool_calls_pooled_by_tool(
        make_calls("t", "t", "t"), tool, stop=stop, per_tool_limit=1
    )
    assert values(results) == [
        "ok-c0",
        ("AbortedToolCallError", "c1"),
        ("AbortedToolCallError", "c2"),
    ]
    assert tool.now() == 0


async def test_any_object_with_cancel_called_is_a_stop_and_is_only_read() -> None:
    class Flag:
        def __init__(self) -> None:
            self.reads = 0
            self.raised = False

        @property
        def cancel_called(self) -> bool:
            self.reads += 1
            return self.raised

    flag = Flag()
    tool = Recorder(on_start=lambda call_id: setattr(flag, "raised", call_id == "c1"))
    results = await run_tool_calls_pooled_by_tool(
        make_calls("t", "t", "t", "u"), tool, stop=flag, per_tool_limit=1
    )
    assert values(results) == ["ok-c0", "ok-c1", ("AbortedToolCallError", "c2"), "ok-c3"]
    assert flag.reads >= 4  # once per claim at least (and once by the argument check)


# --- the hard cancel -----------------------------------------------------------


async def test_hard_cancel_mid_batch_settles_every_call_before_cancellation_leaves() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls(*["t"] * 12))
    tool = Recorder()
    seen_in_except: tuple[str, ...] = ()
    caught: BaseException | None = None
    with anyio.move_on_after(1.5) as scope:
        try:
            await batch.run(tool, per_tool_limit=5)
        except anyio.get_cancelled_exc_class() as exc:
            # No checkpoint yet: this is what a loop's `except` gets to read.
            seen_in_except = batch.states
            caught = exc
            raise
    assert scope.cancelled_caught
    assert type(caught) is anyio.get_cancelled_exc_class()  # bare, never a group
    assert tool.now() == 1.5
    expected = ("finished",) * 5 + ("interrupted",) * 5 + ("refused",) * 2
    assert seen_in_except == batch.states == expected
    assert tool.cancelled == {f"c{i}" for i in range(5, 10)}
    assert set(tool.started) == {f"c{i}" for i in range(10)}  # c10, c11 never started
    assert values([batch.result(i) for i in range(12)]) == (
        [f"ok-c{i}" for i in range(5)]
        + [("InterruptedToolCallError", f"c{i}") for i in range(5, 10)]
        + [("AbortedToolCallError", "c10"), ("AbortedToolCallError", "c11")]
    )
    interrupted = batch.result(5)
    assert isinstance(interrupted, outcome.Error)
    assert str(interrupted.error) == INTERRUPTED_TOOL_CALL_MESSAGE
    assert batch.statistics() == ToolBatchStatistics(
        total=12, queued=0, claimed=10, in_flight=0, finished=5, refused=2, interrupted=5
    )


async def test_hard_cancel_before_the_batch_starts_no_call() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("a", "b", "a"))
    tool = Recorder()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await batch.run(tool)
    assert scope.cancelled_caught
    assert tool.started == {}
    assert batch.states == ("refused",) * 3


async def test_hard_cancel_between_claims_starts_nothing_more() -> None:
    # A tool cancels the run's scope and returns without a checkpoint: the
    # cancel is requested, not yet delivered, and the next claim must see it.
    batch: ToolBatch[str] = ToolBatch(make_calls("t", "t", "t"))
    started: list[str] = []
    with anyio.CancelScope() as scope:

        async def tool(call: ToolCallLike) -> str:
            started.append(tool_call_id(call))
            scope.cancel()
            return "returned"

        await batch.run(tool, per_tool_limit=1)
    assert scope.cancelled_caught
    assert started == ["c0"]
    assert batch.states == ("finished", "refused", "refused")
    assert values([batch.result(0)]) == ["returned"]


async def test_a_cancel_at_the_tools_own_checkpoint_interrupts_it() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("t", "t"))
    with anyio.CancelScope() as scope:
        tool = Recorder(durations={"c0": 0}, on_start=lambda _: scope.cancel())
        await batch.run(tool, per_tool_limit=1)
    assert scope.cancelled_caught
    assert tool.cancelled == {"c0"}
    assert batch.states == ("interrupted", "refused")


async def test_a_tool_that_swallows_the_cancel_finished_and_nothing_after_it_starts() -> None:
    async def stubborn(call: ToolCallLike) -> str:
        if tool_call_id(call) == "c0":
            with anyio.CancelScope(shield=True):
                await anyio.sleep(2)  # it insists on finishing its write
            return "done anyway"
        await anyio.sleep(1)
        return "ok"

    batch: ToolBatch[str] = ToolBatch(make_calls("t", "t"))
    start = anyio.current_time()
    with anyio.move_on_after(1):
        await batch.run(stubborn, per_tool_limit=1)
    assert anyio.current_time() - start == 2
    assert batch.states == ("finished", "refused")
    assert values([batch.result(0)]) == ["done anyway"]


async def test_a_tool_that_turns_the_cancel_into_an_error_is_interrupted_not_failed() -> None:
    async def wrapper(call: ToolCallLike) -> str:
        try:
            await anyio.sleep(5)
        except anyio.get_cancelled_exc_class():
            raise RuntimeError("request aborted") from None
        return "ok"

    batch: ToolBatch[str] = ToolBatch(make_calls("t", "t"))
    with anyio.move_on_after(1) as scope:
        await batch.run(wrapper, per_tool_limit=1)
    assert scope.cancelled_caught
    assert batch.states == ("interrupted", "refused")
    result = batch.result(0)
    assert isinstance(result, outcome.Error)
    assert isinstance(result.error, InterruptedToolCallError)
    assert isinstance(result.error.__cause__, RuntimeError)


async def test_a_base_exception_from_a_tool_leaves_bare_and_the_batch_is_settled() -> None:
    class Stop(BaseException):
        pass

    async def tool(call: ToolCallLike) -> str:
        if tool_call_id(call) == "c1":
            await anyio.sleep(1)
            raise Stop
        await anyio.sleep(5)
        return "ok"

    batch: ToolBatch[str] = ToolBatch(make_calls("a", "b", "a"))
    with pytest.raises(Stop):
        await batch.run(tool, per_tool_limit=1)
    assert batch.states == ("interrupted", "interrupted", "refused")


async def test_the_soft_stop_and_the_hard_cancel_together() -> None:
    stop = anyio.CancelScope()
    tool = Recorder(durations={"c0": 5})
    batch: ToolBatch[str] = ToolBatch(make_calls("a", "b", "b", "a", "a", "b"))

    async def press_stop() -> None:
        await anyio.sleep(1.5)
        stop.cancel()

    with anyio.move_on_after(2.5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(press_stop)
            await batch.run(tool, stop=stop, per_tool_limit=1)
    # b: c1 ran 0-1, c2 1-2, and c5's claim at 2 saw the stop. a: c0 (5 s) was
    # cut off by the hard cancel at 2.5, so c3 and c4 were never claimed.
    assert tool.now() == 2.5
    assert batch.states == ("interrupted", "finished", "finished", "refused", "refused", "refused")
    assert set(tool.started) == {"c0", "c1", "c2"}


# --- misuse --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        (True, TypeError),
        (False, TypeError),
        (0, ValueError),
        (-1, ValueError),
        (1.5, TypeError),
        (5.0, TypeError),
        (None, TypeError),
        ("5", TypeError),
    ],
)
@pytest.mark.parametrize("entry", ["function", "method"])
async def test_a_bad_per_tool_limit_is_refused_by_name(limit: Any, error: type, entry: str) -> None:
    calls = make_calls("t")
    tool = Recorder()
    if entry == "function":
        with pytest.raises(error) as info:
            await run_tool_calls_pooled_by_tool(calls, tool, per_tool_limit=limit)
    else:
        batch: ToolBatch[str] = ToolBatch(calls)
        with pytest.raises(error) as info:
            await batch.run(tool, per_tool_limit=limit)
    assert (
        str(info.value)
        == f"ToolBatch.run: per_tool_limit must be a positive integer, got {limit!r}"
    )
    assert tool.started == {}


async def test_a_bad_argument_leaves_the_batch_runnable() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("t"))
    with pytest.raises(ValueError):
        await batch.run(Recorder(), per_tool_limit=0)
    assert values(await batch.run(Recorder())) == ["ok-c0"]


async def test_run_and_stop_are_checked() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("t"))
    with pytest.raises(TypeError, match=r"^ToolBatch.run: run must be an async callable, got 42$"):
        await batch.run(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^ToolBatch.run: stop must be None or have a bool"):
        await batch.run(Recorder(), stop=object())  # type: ignore[arg-type]


async def test_a_batch_runs_once() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("t"))
    await batch.run(Recorder())
    with pytest.raises(UsageError, match="already been run"):
        await batch.run(Recorder())


async def test_a_batch_cannot_be_run_twice_at_the_same_time() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("t"))
    outcomes: list[str] = []

    async def attempt() -> None:
        try:
            await batch.run(Recorder())
        except UsageError:
            outcomes.append("refused")
        else:
            outcomes.append("ran")

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt)
        tg.start_soon(attempt)
    assert sorted(outcomes) == ["ran", "refused"]


@pytest.mark.parametrize(
    ("calls", "error", "message"),
    [
        (make_calls("a")[0], TypeError, "ToolBatch: calls must be a sequence of tool calls, got {"),
        ("c0", TypeError, "ToolBatch: calls must be a sequence of tool calls, got 'c0'"),
        (42, TypeError, "ToolBatch: calls must be a sequence of tool calls, got 42"),
        ([{"id": "c0"}], TypeError, "ToolBatch: expected a function tool call"),
        (
            make_calls("a", "b") + make_calls("c"),
            ValueError,
            "ToolBatch: tool call ids must be unique, got 'c0' twice",
        ),
        (
            [{"id": "", "function": {"name": "a", "arguments": ""}}],
            ValueError,
            "ToolBatch: tool call ids must be non-empty",
        ),
    ],
)
def test_the_batch_checks_its_calls_when_built(calls: Any, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        ToolBatch(calls)
    assert str(info.value).startswith(message)


async def test_the_one_shot_function_checks_its_calls_too() -> None:
    with pytest.raises(ValueError, match="unique"):
        await run_tool_calls_pooled_by_tool(make_calls("a") * 2, Recorder())


def test_a_batch_is_queued_until_run() -> None:
    batch: ToolBatch[str] = ToolBatch(make_calls("a", "b"))
    assert batch.states == ("queued", "queued")
    assert batch.state(1) == "queued"
    assert batch.result(0) is None
    assert batch.calls == tuple(make_calls("a", "b"))


async def test_the_how_to_recipe_answers_every_call_after_a_hard_cancel() -> None:
    """docs/how-to/cancel-a-tool-batch.md, as written there."""
    from juno_bind_trio.plugins import kind_for_error, tool_failure_message

    def answer(batch: ToolBatch[str]) -> list[dict[str, object]]:
        messages: list[dict[str, object]] = []
        for index, call in enumerate(batch.calls):
            result = batch.result(index)  # None only if run() refused its arguments
            if isinstance(result, outcome.Value):
                messages.append(
                    {"role": "tool", "tool_call_id": tool_call_id(call), "content": result.value}
                )
            elif isinstance(result, outcome.Error):
                error = result.error
                messages.append(
                    tool_failure_message(tool_call_id(call), str(error), kind_for_error(error))
                )
        return messages

    transcript: list[dict[str, object]] = []
    batch: ToolBatch[str] = ToolBatch(make_calls("t", "t", "t", "t", "t"))
    with anyio.CancelScope() as outer:
        try:
            with anyio.move_on_after(1.5):
                await batch.run(Recorder(), per_tool_limit=2)
        finally:
            transcript.extend(answer(batch))
    assert not outer.cancelled_caught
    assert [m["tool_call_id"] for m in transcript] == ["c0", "c1", "c2", "c3", "c4"]
    assert [m["content"] for m in transcript[:2]] == ["ok-c0", "ok-c1"]
    kinds = [json.loads(str(m["content"]))["kind"] for m in transcript[2:]]
    assert kinds == ["interrupted", "interrupted", "not_run"]
