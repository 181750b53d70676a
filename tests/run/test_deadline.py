"""RunDeadline: a timeout is its own outcome, at its exact virtual time."""

from __future__ import annotations

import math
from typing import Any

import anyio
import outcome
import pytest

from juno_bind_trio import AbortedToolCallError, RunTimeoutError, UsageError
from juno_bind_trio.run import RunDeadline, run_tool_calls_pooled_by_tool

pytestmark = pytest.mark.anyio


async def test_deadline_raises_run_timeout_at_its_exact_time() -> None:
    start = anyio.current_time()
    with pytest.raises(RunTimeoutError) as info, RunDeadline(30):
        await anyio.sleep_forever()
    assert anyio.current_time() - start == 30
    assert info.value.seconds == 30
    assert isinstance(info.value, TimeoutError)
    assert "30s" in str(info.value)


async def test_a_body_that_finishes_in_time_raises_nothing_and_reports_remaining() -> None:
    start = anyio.current_time()
    deadline = RunDeadline(30)
    assert deadline.remaining() == 30  # the clock starts on entry
    with deadline:
        await anyio.sleep(10)
        assert deadline.remaining() == 20
        assert not deadline.expired
        assert not deadline.stop.cancel_called
    assert anyio.current_time() - start == 10
    assert not deadline.timed_out


async def test_an_outer_cancel_passes_through_as_a_cancellation() -> None:
    start = anyio.current_time()
    deadline = RunDeadline(30)
    with anyio.move_on_after(5) as outer:
        with deadline:
            await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert anyio.current_time() - start == 5
    assert not deadline.timed_out
    assert not deadline.expired


async def test_a_hand_cancelled_outer_scope_is_not_a_timeout() -> None:
    with anyio.CancelScope() as outer:
        with RunDeadline(30):
            outer.cancel()
            await anyio.sleep(1)
        pytest.fail("the cancel did not reach the body")  # pragma: no cover
    assert outer.cancelled_caught


async def test_nested_deadlines_blame_the_one_that_expired() -> None:
    start = anyio.current_time()
    with pytest.raises(RunTimeoutError) as info, RunDeadline(10), RunDeadline(60) as inner:
        await anyio.sleep_forever()
    assert info.value.seconds == 10
    assert anyio.current_time() - start == 10
    assert not inner.timed_out


async def test_an_error_in_the_body_propagates_unchanged() -> None:
    async def body() -> None:
        await anyio.sleep(1)
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"), RunDeadline(30):
        await body()


async def test_zero_budget_times_out_at_the_first_checkpoint() -> None:
    start = anyio.current_time()
    reached: list[bool] = []

    async def body() -> None:
        reached.append(True)  # the body does start: a zero budget is not a refusal
        await anyio.lowlevel.checkpoint()

    with pytest.raises(RunTimeoutError), RunDeadline(0):
        await body()
    assert reached == [True]
    assert anyio.current_time() == start


async def test_infinite_budget_never_expires() -> None:
    with RunDeadline(math.inf) as deadline:
        await anyio.sleep(10**6)
        assert deadline.remaining() == math.inf
        assert not deadline.expired


async def test_grace_fires_the_soft_stop_first_and_the_hard_stop_later() -> None:
    start = anyio.current_time()
    seen: list[tuple[float, bool, bool, bool]] = []
    deadline = RunDeadline(10, grace=5)

    async def body() -> None:
        while True:
            seen.append(
                (
                    anyio.current_time() - start,
                    deadline.stop.cancel_called,
                    deadline.expired,
                    deadline.timed_out,
                )
            )
            await anyio.sleep(5)

    with pytest.raises(RunTimeoutError) as info, deadline:
        await body()
    assert seen == [
        (0, False, False, False),
        (5, False, False, False),
        (10, True, True, False),  # budget spent: soft stop only, still running
    ]
    assert anyio.current_time() - start == 15  # hard stop at seconds + grace
    assert info.value.seconds == 10
    assert deadline.timed_out


async def test_a_body_that_stops_softly_within_grace_raises_nothing() -> None:
    start = anyio.current_time()
    with RunDeadline(10, grace=5) as deadline:
        while not deadline.stop.cancel_called:  # noqa: ASYNC110 - a soft stop is polled, by design
            await anyio.sleep(3)
        # the loop's "why did I stop" port
        with pytest.raises(RunTimeoutError):
            deadline.raise_if_expired()
    assert anyio.current_time() - start == 12  # the first read at or after t=10
    assert deadline.remaining() == 0


async def test_raise_if_expired_is_silent_before_the_budget_ends() -> None:
    with RunDeadline(10) as deadline:
        await anyio.sleep(9)
        deadline.raise_if_expired()


class Flag:
    """Anything with a bool ``cancel_called`` serves as a stop."""

    cancel_called = False

    def cancel(self) -> None:
        self.cancel_called = True


async def test_with_external_fires_on_either_stop() -> None:
    user = anyio.CancelScope()
    parent = Flag()
    start = anyio.current_time()
    with RunDeadline(10) as deadline:
        stop = deadline.with_external(user, parent)
        before = stop.cancel_called
        user.cancel()
        assert (before, stop.cancel_called) == (False, True)
        assert not deadline.stop.cancel_called  # the deadline's own stop is unaffected
    with RunDeadline(10) as deadline:
        stop = deadline.with_external(anyio.CancelScope(), parent)
        parent.cancel()
        assert stop.cancel_called
    with RunDeadline(10, grace=1) as deadline:
        stop = deadline.with_external(anyio.CancelScope())
        await anyio.sleep(10)
        assert stop.cancel_called  # the budget alone
    assert anyio.current_time() - start == 10


async def test_the_hard_stop_cuts_a_child_task_at_the_deadline() -> None:
    start = anyio.current_time()
    finished: list[str] = []

    async def tool(name: str, seconds: float) -> None:
        await anyio.sleep(seconds)
        finished.append(name)

    async def batch() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tool, "quick", 2)
            tg.start_soon(tool, "slow", 8)

    with pytest.raises(RunTimeoutError), RunDeadline(5):
        await batch()
    assert finished == ["quick"]
    assert anyio.current_time() - start == 5


async def test_a_deadline_is_entered_once() -> None:
    deadline = RunDeadline(1)
    with deadline:
        pass
    with pytest.raises(UsageError, match="only once"), deadline:
        pass  # pragma: no cover


def test_exit_without_enter_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        RunDeadline(1).__exit__(None, None, None)


@pytest.mark.parametrize(
    ("kwargs", "error", "shown"),
    [
        ({"seconds": True}, TypeError, "seconds must be a non-negative number, got True"),
        ({"seconds": "5"}, TypeError, "got '5'"),
        ({"seconds": math.nan}, TypeError, "got nan"),
        ({"seconds": -1}, ValueError, "got -1"),
        ({"seconds": 1, "grace": -0.5}, ValueError, "grace must be a non-negative number"),
        ({"seconds": 1, "grace": None}, TypeError, "grace must be"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    kwargs: dict[str, object], error: type[Exception], shown: str
) -> None:
    with pytest.raises(error, match=r"^RunDeadline: ") as info:
        RunDeadline(**kwargs)  # type: ignore[arg-type]
    assert shown in str(info.value)


def test_with_external_refuses_a_thing_without_cancel_called() -> None:
    with pytest.raises(TypeError, match=r"^RunDeadline.with_external: .*got 'stop'"):
        RunDeadline(1).with_external("stop")  # type: ignore[arg-type]


def test_repr_names_the_budget() -> None:
    assert repr(RunDeadline(2.5, grace=1)) == "RunDeadline(seconds=2.5, grace=1)"
    assert RunDeadline(2.5, grace=1).seconds == 2.5
    assert RunDeadline(2.5, grace=1).grace == 1


def test_run_timeout_error_pickles() -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(RunTimeoutError(7.5)))
    assert isinstance(copy, RunTimeoutError)
    assert copy.seconds == 7.5
    assert str(copy) == str(RunTimeoutError(7.5))


# --- with the tool pool: the soft stop at the budget, the hard stop after grace ---------


def calls_to(tool: str, n: int) -> list[dict[str, object]]:
    return [
        {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        for i in range(n)
    ]


async def test_the_pool_stops_claiming_at_the_budget_and_finishes_in_flight_calls() -> None:
    start = anyio.current_time()
    ran: list[tuple[str, float, float]] = []

    async def tool(call: Any) -> str:
        began = anyio.current_time() - start
        await anyio.sleep(4)
        ran.append((call["id"], began, anyio.current_time() - start))
        return str(call["id"])

    with RunDeadline(5, grace=10) as deadline:
        results = await run_tool_calls_pooled_by_tool(
            calls_to("t", 3),
            tool,
            stop=deadline.with_external(anyio.CancelScope()),
            per_tool_limit=1,
        )
    # c1 was claimed at 4 (before the budget) and finished inside the grace;
    # c2's claim came at 8, after the soft stop: refused, never started.
    assert ran == [("c0", 0, 4), ("c1", 4, 8)]
    assert [r.unwrap() for r in results[:2]] == ["c0", "c1"]
    assert isinstance(results[2], outcome.Error)
    assert isinstance(results[2].error, AbortedToolCallError)
    assert anyio.current_time() - start == 8
    assert deadline.expired
    assert not deadline.timed_out


async def test_without_grace_the_call_in_flight_is_cut_at_the_budget() -> None:
    start = anyio.current_time()
    finished: list[str] = []

    async def tool(call: Any) -> str:
        await anyio.sleep(4)
        finished.append(call["id"])
        return str(call["id"])

    deadline = RunDeadline(5)
    with pytest.raises(RunTimeoutError), deadline:
        await run_tool_calls_pooled_by_tool(
            calls_to("t", 3), tool, stop=deadline.stop, per_tool_limit=1
        )
    assert finished == ["c0"]
    assert anyio.current_time() - start == 5
