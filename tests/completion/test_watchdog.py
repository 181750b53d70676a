"""StreamWatchdog: both budgets and the reasoning gate, at exact virtual times, on both backends."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import StreamStallError, UsageError
from juno_bind_trio.completion import (
    DEFAULT_INTER_CHUNK_TIMEOUT,
    DEFAULT_TIME_TO_FIRST_TOKEN,
    StreamWatchdog,
)

pytestmark = pytest.mark.anyio

Kind = Literal["answer", "reasoning", "chunk"]


def report(watchdog: StreamWatchdog, kind: Kind) -> None:
    getattr(watchdog, kind)()


async def stall_of(
    watchdog: StreamWatchdog, body: Callable[[StreamWatchdog], Awaitable[None]]
) -> tuple[StreamStallError | None, float]:
    """Run *body* under *watchdog*; return the stall it raised (or None) and the elapsed time."""
    start = anyio.current_time()
    try:
        with watchdog:
            await body(watchdog)
    except StreamStallError as stall:
        return stall, anyio.current_time() - start
    return None, anyio.current_time() - start


async def forever(_: StreamWatchdog) -> None:
    await anyio.sleep_forever()


# -- construction -------------------------------------------------------------------


def test_defaults_are_the_documented_budgets() -> None:
    watchdog = StreamWatchdog()
    assert DEFAULT_TIME_TO_FIRST_TOKEN == 30.0
    assert DEFAULT_INTER_CHUNK_TIMEOUT == 60.0
    assert watchdog.time_to_first_token == DEFAULT_TIME_TO_FIRST_TOKEN
    assert watchdog.inter_chunk_timeout == DEFAULT_INTER_CHUNK_TIMEOUT


@pytest.mark.parametrize("field", ["time_to_first_token", "inter_chunk_timeout"])
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (True, TypeError),
        ("5", TypeError),
        (None, TypeError),
        (0, ValueError),
        (-1.5, ValueError),
        (math.nan, ValueError),
        (-math.inf, ValueError),
    ],
)
def test_budgets_must_be_positive_seconds(field: str, bad: object, error: type) -> None:
    with pytest.raises(error, match=rf"StreamWatchdog: {field} must be a positive number"):
        StreamWatchdog(**{field: bad})  # type: ignore[arg-type]


def test_inf_switches_a_budget_off_and_ints_become_floats() -> None:
    watchdog = StreamWatchdog(time_to_first_token=math.inf, inter_chunk_timeout=3)
    assert watchdog.time_to_first_token == math.inf
    assert watchdog.inter_chunk_timeout == 3.0
    assert isinstance(watchdog.inter_chunk_timeout, float)


# -- the first-token budget -------------------------------------------------------


async def test_silent_stream_stalls_on_first_token_budget_not_inter_chunk() -> None:
    # inter_chunk (2) is shorter than the first-token budget (5), but it is
    # about gaps *between* chunks: before the first chunk only the first-token
    # budget applies (prompt processing and hidden reasoning send nothing).
    stall, elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=2), forever
    )
    assert elapsed == 5
    assert stall is not None
    assert (stall.budget, stall.timeout) == ("time_to_first_token", 5.0)
    assert str(stall) == ("provider stream stalled: no first token within 5s (time_to_first_token)")


async def test_reasoning_does_not_satisfy_the_first_token_budget() -> None:
    seen: list[float] = []

    async def think(watchdog: StreamWatchdog) -> None:
        for _ in range(20):  # bounded, so a broken gate fails instead of hanging
            await anyio.sleep(1)
            watchdog.reasoning()
            seen.append(watchdog.deadline)

    watchdog = StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=2)
    stall, elapsed = await stall_of(watchdog, think)
    # Reasoning every second kept the inter-chunk budget happy, yet the answer
    # never started, so the first-token budget fired exactly on time.
    assert elapsed == 5
    assert stall is not None
    assert stall.budget == "time_to_first_token"
    assert len(seen) == 4
    assert watchdog.stalled
    assert not watchdog.answered


async def test_other_chunks_do_not_satisfy_the_first_token_budget_either() -> None:
    async def role_chunk_then_nothing(watchdog: StreamWatchdog) -> None:
        watchdog.chunk()  # the role-only opening chunk
        await anyio.sleep_forever()

    stall, elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=4, inter_chunk_timeout=10), role_chunk_then_nothing
    )
    assert elapsed == 4
    assert stall is not None
    assert stall.budget == "time_to_first_token"


async def test_reasoning_keeps_the_stream_alive_under_the_inter_chunk_budget() -> None:
    async def think_then_stop(watchdog: StreamWatchdog) -> None:
        for gap in (1.0, 1.5, 1.5):  # reasoning at 1, 2.5, 4
            await anyio.sleep(gap)
            watchdog.reasoning()
        await anyio.sleep_forever()

    stall, elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=10, inter_chunk_timeout=2), think_then_stop
    )
    # Thinking flowed, then stopped: a dead stream 2 s after its last sign of life.
    assert elapsed == 6
    assert stall is not None
    assert (stall.budget, stall.timeout) == ("inter_chunk", 2.0)


async def test_before_the_answer_the_deadline_is_whichever_budget_runs_out_first() -> None:
    start = anyio.current_time()
    deadlines: list[tuple[float, str]] = []

    async def body(watchdog: StreamWatchdog) -> None:
        deadlines.append((watchdog.deadline - start, watchdog.budget))
        await anyio.sleep(1)
        watchdog.reasoning()  # 1 + 3 = 4 < 5: the inter-chunk budget is first
        deadlines.append((watchdog.deadline - start, watchdog.budget))
        await anyio.sleep(2.5)
        watchdog.reasoning()  # 3.5 + 3 = 6.5 > 5: a sign of life buys the answer nothing
        deadlines.append((watchdog.deadline - start, watchdog.budget))
        await anyio.sleep_forever()

    stall, elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=3), body
    )
    assert deadlines == [(5, "time_to_first_token"), (4, "inter_chunk"), (5, "time_to_first_token")]
    assert elapsed == 5
    assert stall is not None
    assert stall.budget == "time_to_first_token"


async def test_first_answer_ends_the_first_token_budget() -> None:
    start = anyio.current_time()
    after_answer: list[tuple[float, str]] = []

    async def body(watchdog: StreamWatchdog) -> None:
        await anyio.sleep(4.5)
        watchdog.answer()
        after_answer.append((watchdog.deadline - start, watchdog.budget))
        # Keep streaming well past the first-token budget, each gap under 2 s.
        for i in range(10):
            await anyio.sleep(1.75)
            report(watchdog, "reasoning" if i % 2 else "answer")

    watchdog = StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=2)
    stall, elapsed = await stall_of(watchdog, body)
    assert stall is None
    assert after_answer == [(6.5, "inter_chunk")]
    assert elapsed == 4.5 + 17.5
    assert not watchdog.stalled
    assert watchdog.answered


# -- the inter-chunk budget --------------------------------------------------------


async def test_inter_chunk_stall_after_the_answer_started() -> None:
    async def body(watchdog: StreamWatchdog) -> None:
        await anyio.sleep(1)
        watchdog.answer()
        await anyio.sleep(1.5)
        watchdog.answer()
        await anyio.sleep_forever()

    stall, elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=2), body
    )
    assert elapsed == 4.5
    assert stall is not None
    assert (stall.budget, stall.timeout) == ("inter_chunk", 2.0)
    assert str(stall) == "provider stream stalled: no next chunk within 2s (inter_chunk)"


async def test_default_budgets_tight_first_token_then_patient() -> None:
    async def body(watchdog: StreamWatchdog) -> None:
        await anyio.sleep(29)
        watchdog.answer()
        await anyio.sleep(59)
        watchdog.answer()
        await anyio.sleep_forever()

    stall, elapsed = await stall_of(StreamWatchdog(), body)
    assert elapsed == 29 + 59 + 60
    assert stall is not None
    assert (stall.budget, stall.timeout) == ("inter_chunk", DEFAULT_INTER_CHUNK_TIMEOUT)


async def test_default_first_token_budget_fires_at_thirty_seconds_under_async_with() -> None:
    start = anyio.current_time()
    stall: StreamStallError | None = None
    try:
        async with StreamWatchdog():
            await anyio.sleep_forever()
    except StreamStallError as exc:
        stall = exc
    assert anyio.current_time() - start == DEFAULT_TIME_TO_FIRST_TOKEN
    assert stall is not None
    assert stall.budget == "time_to_first_token"


async def test_inf_first_token_budget_waits_for_ever_for_the_first_chunk() -> None:
    async def body(watchdog: StreamWatchdog) -> None:
        await anyio.sleep(10_000)
        watchdog.reasoning()
        await anyio.sleep_forever()

    stall, elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=math.inf, inter_chunk_timeout=3), body
    )
    assert elapsed == 10_003
    assert stall is not None
    assert stall.budget == "inter_chunk"


async def test_chunk_arriving_after_the_deadline_neither_rescues_nor_relabels() -> None:
    # The body is past the first-token deadline inside a shield, so the
    # cancellation has not been delivered yet when the answer is reported.
    start = anyio.current_time()
    seen: list[tuple[float, str]] = []

    async def body(watchdog: StreamWatchdog) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(6)
        watchdog.answer()
        seen.append((watchdog.deadline - start, watchdog.budget))
        await anyio.lowlevel.checkpoint()

    watchdog = StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=2)
    stall, elapsed = await stall_of(watchdog, body)
    assert seen == [(5, "time_to_first_token")]
    assert elapsed == 6
    assert stall is not None
    assert stall.budget == "time_to_first_token"
    assert watchdog.statistics().answer_chunks == 0


# -- cancellation from elsewhere ------------------------------------------------------


async def test_outer_cancel_passes_through_untouched() -> None:
    start = anyio.current_time()
    watchdog = StreamWatchdog(time_to_first_token=5)
    with anyio.CancelScope() as outer:

        async def canceller() -> None:
            await anyio.sleep(1)
            outer.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(canceller)
            await stall_of(watchdog, forever)
            pytest.fail("the outer cancellation was swallowed")  # pragma: no cover
    assert outer.cancelled_caught
    assert anyio.current_time() - start == 1
    assert not watchdog.stalled


async def test_outer_deadline_passes_through_even_when_it_ties_with_the_watchdog() -> None:
    start = anyio.current_time()
    watchdog = StreamWatchdog(time_to_first_token=5)
    with anyio.move_on_after(5) as outer:
        await stall_of(watchdog, forever)
        pytest.fail("the outer cancellation was turned into a stall")  # pragma: no cover
    assert outer.cancelled_caught
    assert anyio.current_time() - start == 5
    assert not watchdog.stalled


async def test_outer_cancel_passes_through_after_the_answer_started() -> None:
    async def body(watchdog: StreamWatchdog) -> None:
        await anyio.sleep(1)
        watchdog.answer()
        await anyio.sleep_forever()

    start = anyio.current_time()
    watchdog = StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=10)
    with anyio.move_on_after(3) as outer:
        await stall_of(watchdog, body)
        pytest.fail("the outer cancellation was swallowed")  # pragma: no cover
    assert outer.cancelled_caught
    assert anyio.current_time() - start == 3
    assert not watchdog.stalled


async def test_stall_error_does_not_chain_the_cancellation() -> None:
    stall, _ = await stall_of(StreamWatchdog(time_to_first_token=1), forever)
    assert stall is not None
    assert stall.__cause__ is None
    assert stall.__suppress_context__


async def test_body_exception_passes_through_unchanged() -> None:
    async def body(_: StreamWatchdog) -> None:
        await anyio.sleep(0.5)
        raise KeyError("boom")

    watchdog = StreamWatchdog(time_to_first_token=1)
    with pytest.raises(KeyError, match="boom"):
        await stall_of(watchdog, body)
    assert not watchdog.stalled


async def test_cleanup_in_the_body_runs_on_a_stall_before_the_error_leaves() -> None:
    closed_at: list[float] = []
    start = anyio.current_time()

    async def body(_: StreamWatchdog) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.25)  # an aclose() that must await
                closed_at.append(anyio.current_time() - start)

    stall, elapsed = await stall_of(StreamWatchdog(time_to_first_token=2), body)
    assert stall is not None
    assert closed_at == [2.25]
    assert elapsed == 2.25


# -- lifetime -----------------------------------------------------------------------------


async def test_cannot_be_entered_twice() -> None:
    watchdog = StreamWatchdog(time_to_first_token=5)
    with watchdog:
        pass
    with pytest.raises(UsageError, match="cannot be entered twice"):
        watchdog.__enter__()


@pytest.mark.parametrize("kind", ["answer", "reasoning", "chunk"])
async def test_reporting_before_entry_is_a_usage_error(kind: Kind) -> None:
    with pytest.raises(UsageError, match=rf"StreamWatchdog\.{kind}\(\) before"):
        report(StreamWatchdog(), kind)


@pytest.mark.parametrize("kind", ["answer", "reasoning", "chunk"])
async def test_reporting_after_exit_is_a_no_op(kind: Kind) -> None:
    with StreamWatchdog(time_to_first_token=5) as watchdog:
        watchdog.answer()
    before = watchdog.statistics()
    report(watchdog, kind)
    assert watchdog.statistics() == before


async def test_statistics_record_counts_and_times() -> None:
    start = anyio.current_time()
    with StreamWatchdog(time_to_first_token=5, inter_chunk_timeout=2) as watchdog:
        watchdog.chunk()
        await anyio.sleep(1)
        watchdog.reasoning()
        await anyio.sleep(1)
        watchdog.reasoning()
        await anyio.sleep(0.5)
        watchdog.answer()
        await anyio.sleep(0.5)
        watchdog.answer()
    stats = watchdog.statistics()
    assert (stats.answer_chunks, stats.reasoning_chunks, stats.other_chunks) == (2, 2, 1)
    assert stats.started_at == start
    assert stats.first_answer_at is not None
    assert stats.first_answer_at - start == 2.5
    assert stats.last_chunk_at is not None
    assert stats.last_chunk_at - start == 3
    assert (stats.deadline - start, stats.budget) == (5, "inter_chunk")
    assert not stats.stalled
    assert "stalled=False" in repr(watchdog)


# -- a reference model over random schedules ---------------------------------------------


def reference(
    ttft: float, inter: float, events: list[tuple[float, Kind]], waits_after: bool
) -> tuple[float, str | None, int]:
    """When the body ends, which budget (if any) fired, and how many events were reported.

    Declarative, not the implementation's algorithm: a stall is the earliest of
    "no answer by ttft" and "a gap after some chunk longer than inter".
    """
    times: list[float] = []
    now = 0.0
    for gap, _ in events:
        now += gap
        times.append(now)
    end = math.inf if waits_after else (times[-1] if times else 0.0)
    first_answer = min(
        (t for t, (_, k) in zip(times, events, strict=True) if k == "answer"), default=math.inf
    )
    candidates: list[tuple[float, int, str]] = []
    if first_answer > ttft:
        candidates.append((ttft, 0, "time_to_first_token"))
    for i, t in enumerate(times):
        following = times[i + 1] if i + 1 < len(times) else end
        if following > t + inter:
            candidates.append((t + inter, 1, "inter_chunk"))
    candidates = [c for c in candidates if c[0] <= end]
    if not candidates:
        return end, None, len(events)
    at, _, budget = min(candidates)
    return at, budget, sum(1 for t in times if t < at)


schedules = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=12).map(lambda n: n / 2),
        st.sampled_from(["answer", "reasoning", "chunk"]),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    ttft=st.integers(min_value=0, max_value=8).map(lambda n: n + 0.25),
    inter=st.integers(min_value=0, max_value=5).map(lambda n: n + 0.25),
    events=schedules,
    waits_after=st.booleans(),
)
def test_any_schedule_stalls_exactly_when_the_reference_says(
    backend: str, ttft: float, inter: float, events: list[tuple[float, Kind]], waits_after: bool
) -> None:
    # Gaps are multiples of 0.5 and budgets end in .25, so no chunk ever
    # arrives exactly at a deadline: the outcome never hangs on tie order.
    async def scenario() -> tuple[float, str | None, int, float | None]:
        start = anyio.current_time()
        reported = 0
        try:
            with StreamWatchdog(time_to_first_token=ttft, inter_chunk_timeout=inter) as wd:
                for gap, kind in events:
                    await anyio.sleep(gap)
                    report(wd, kind)
                    reported += 1
                if waits_after:
                    await anyio.sleep_forever()
        except StreamStallError as stall:
            timeout = stall.timeout
            return anyio.current_time() - start, stall.budget, reported, timeout
        return anyio.current_time() - start, None, reported, None

    elapsed, budget, reported, timeout = run_on(backend, scenario)
    assert (elapsed, budget, reported) == reference(ttft, inter, events, waits_after)
    assert timeout == {None: None, "time_to_first_token": ttft, "inter_chunk": inter}[budget]


# A fast stream: chunks closer together than the slack. The scope's deadline is
# then filed a little late so that most chunks need no move; the stall may be
# reported up to the slack after the true deadline, and never before it.
_TINY = 1 / 1024  # exact in binary, so the reference and the clock agree


def _slack(inter: float) -> float:
    return min(inter * 0.001, 0.1)


dense_schedules = st.lists(
    st.tuples(
        st.sampled_from([0.0, _TINY / 8, _TINY / 2, _TINY, 0.5, 1.0]),
        st.sampled_from(["answer", "reasoning", "chunk"]),
    ),
    max_size=40,
)


@settings(max_examples=150)
@given(
    ttft=st.sampled_from([0.25, 1.25, 3.25]),
    inter=st.sampled_from([0.25, 1.25, 3.25, 20.25]),
    events=dense_schedules,
    waits_after=st.booleans(),
)
def test_a_fast_stream_stalls_no_earlier_than_the_budget_and_at_most_the_slack_later(
    backend: str, ttft: float, inter: float, events: list[tuple[float, Kind]], waits_after: bool
) -> None:
    # waits_after=False: the stream ends after its last chunk, which may itself
    # have come inside the slack after a deadline: that is still a stall.
    async def scenario() -> tuple[float, str | None]:
        start = anyio.current_time()
        try:
            with StreamWatchdog(time_to_first_token=ttft, inter_chunk_timeout=inter) as wd:
                for gap, kind in events:
                    await anyio.sleep(gap)
                    report(wd, kind)
                if waits_after:
                    await anyio.sleep_forever()
        except StreamStallError as stall:
            return anyio.current_time() - start, stall.budget
        return anyio.current_time() - start, None

    elapsed, budget = run_on(backend, scenario)
    at, expected_budget, _ = reference(ttft, inter, events, waits_after)
    assert budget == expected_budget, (elapsed, at)
    if expected_budget is None:
        assert elapsed == at  # the end of the stream, no stall
    else:
        assert at - 1e-9 <= elapsed <= at + _slack(inter) + 1e-9, (elapsed, at)


@pytest.mark.parametrize("then", ["ends", "checkpoints"])
async def test_a_chunk_inside_the_slack_after_the_deadline_is_still_a_stall(then: str) -> None:
    # Two chunks 0.5 ms apart file the scope's deadline 1 ms late (slack of a
    # 1 s budget); the next chunk comes 0.2 ms after the true deadline, before
    # the scope fires. However the block goes on, that is a stall at once.
    async def body(wd: StreamWatchdog) -> None:
        wd.answer()
        await anyio.sleep(0.0005)
        wd.answer()
        await anyio.sleep(1.0002)
        wd.answer()
        if then == "checkpoints":
            await anyio.sleep(0.5)

    start = anyio.current_time()
    wd = StreamWatchdog(time_to_first_token=1.0, inter_chunk_timeout=1.0)
    stall, elapsed = await stall_of(wd, body)
    assert stall is not None
    assert stall.budget == "inter_chunk"
    assert wd.stalled
    assert elapsed == pytest.approx(1.0007)
    assert wd.statistics().answer_chunks == 2
    assert anyio.current_time() - start == pytest.approx(1.0007)


async def test_a_fast_stream_reports_its_stall_within_the_slack_and_keeps_the_true_deadline() -> (
    None
):
    # 1,000 answer chunks 0.1 ms apart under a 20 s inter-chunk budget: the
    # scope's deadline lags the chunks, but what the watchdog reports as its
    # deadline is the true one, and the stall lands inside [true, true + 20 ms]
    # (the slack: a thousandth of the budget).
    inter = 20.0
    start = anyio.current_time()
    seen: dict[str, float] = {}

    async def body(wd: StreamWatchdog) -> None:
        for _ in range(1000):
            await anyio.sleep(0.0001)
            wd.answer()
        seen["last"] = anyio.current_time()
        seen["deadline"] = wd.deadline
        seen["stats_deadline"] = wd.statistics().deadline
        await anyio.sleep_forever()

    stall, _elapsed = await stall_of(
        StreamWatchdog(time_to_first_token=1.0, inter_chunk_timeout=inter), body
    )
    assert stall is not None
    assert stall.budget == "inter_chunk"
    last = seen["last"]
    assert seen["deadline"] == seen["stats_deadline"] == last + inter
    assert last + inter <= anyio.current_time() <= last + inter + inter * 0.001
    assert anyio.current_time() - start < 0.1 + inter + inter * 0.001 + 0.001


async def test_a_stream_at_fifty_tokens_a_second_moves_the_scope_for_one_chunk_in_four() -> None:
    # A real provider's pace (a chunk every 20 ms) under the default budgets:
    # the slack (a thousandth of 60 s) spans three chunk gaps, so the scope's
    # deadline (the event loop's timer, a few microseconds to move) is re-filed
    # on every fourth chunk, while the watchdog's own deadline follows each one.
    wd = StreamWatchdog()
    moves = 0
    with wd:
        scope = wd._scope
        assert scope is not None
        filed = scope.deadline
        for _ in range(40):
            await anyio.sleep(0.02)
            wd.answer()
            assert wd.deadline == pytest.approx(anyio.current_time() + 60.0)
            if scope.deadline != filed:
                moves += 1
                filed = scope.deadline
            assert wd.deadline <= scope.deadline <= wd.deadline + 0.06 + 1e-9
    # The first answer moves it from the first-token deadline, exactly; from
    # the second on, one chunk in four (2, 6, ..., 38). At a 10 ms slack it
    # was every one of the 40.
    assert moves == 11
