"""CoalescedHeartbeat: at most one write per interval, the latest value, a final flush."""

from __future__ import annotations

import itertools
import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio import UsageError
from juno_bind_trio.run import (
    CoalescedHeartbeat,
    HeartbeatStatistics,
    open_coalesced_heartbeat,
)

pytestmark = pytest.mark.anyio


class Recorder:
    """A writer that records (virtual time since start, value); optionally slow or failing."""

    def __init__(self, *, takes: float = 0, fail_on: set[int] | None = None) -> None:
        self.start = anyio.current_time()
        self.takes = takes
        self.fail_on = fail_on or set()
        self.calls = 0
        self.written: list[tuple[float, Any]] = []

    async def __call__(self, value: object) -> None:
        call = self.calls
        self.calls += 1
        if self.takes:
            await anyio.sleep(self.takes)
        if call in self.fail_on:
            raise ConnectionError(f"store down (call {call})")
        self.written.append((anyio.current_time() - self.start, value))


async def test_first_beat_is_written_at_once_and_later_ones_coalesce() -> None:
    write = Recorder()
    async with open_coalesced_heartbeat(write, interval=2) as heartbeat:
        heartbeat.beat(1)
        await anyio.sleep(0.5)
        heartbeat.beat(2)
        await anyio.sleep(0.5)
        heartbeat.beat(3)  # replaces 2: only the newest is written
        await anyio.sleep(5)
        assert write.written == [(0, 1), (2, 3)]
    assert write.written == [(0, 1), (2, 3)]  # nothing pending: no final write
    assert heartbeat.statistics() == HeartbeatStatistics(
        beats=3, writes=2, write_errors=0, pending=False, last_error=None
    )


async def test_a_quiet_heartbeat_writes_at_once_again_after_the_interval() -> None:
    write = Recorder()
    async with open_coalesced_heartbeat(write, interval=2) as heartbeat:
        heartbeat.beat("a")
        await anyio.sleep(7)
        heartbeat.beat("b")  # more than an interval since the last write
        await anyio.sleep(1)
    assert write.written == [(0, "a"), (7, "b")]


async def test_exit_flushes_the_pending_value_at_once() -> None:
    write = Recorder()
    start = anyio.current_time()
    async with open_coalesced_heartbeat(write, interval=10) as heartbeat:
        heartbeat.beat("first")
        await anyio.sleep(3)
        heartbeat.beat("last")  # the next periodic write would be at t=10
    assert write.written == [(0, "first"), (3, "last")]
    assert anyio.current_time() - start == 3
    assert heartbeat.statistics().pending is False


async def test_a_failing_writer_is_counted_and_its_value_retried_next_interval() -> None:
    write = Recorder(fail_on={0})
    async with open_coalesced_heartbeat(write, interval=2) as heartbeat:
        heartbeat.beat("x")
        await anyio.lowlevel.checkpoint()
        await anyio.sleep(1)
        stats = heartbeat.statistics()
        assert (stats.write_errors, stats.writes, stats.pending) == (1, 0, True)
        assert isinstance(stats.last_error, ConnectionError)
        await anyio.sleep(5)
    assert write.written == [(2, "x")]
    assert heartbeat.statistics().writes == 1
    assert heartbeat.statistics().write_errors == 1


async def test_a_newer_beat_supersedes_a_failed_value() -> None:
    write = Recorder(fail_on={0})
    async with open_coalesced_heartbeat(write, interval=2) as heartbeat:
        heartbeat.beat("old")
        await anyio.sleep(1)
        heartbeat.beat("new")
        await anyio.sleep(5)
    assert write.written == [(2, "new")]


async def test_a_writer_that_always_fails_does_not_stop_the_run() -> None:
    write = Recorder(fail_on=set(range(100)))
    async with open_coalesced_heartbeat(write, interval=1) as heartbeat:
        heartbeat.beat("x")
        await anyio.sleep(3.5)  # tries at 0, 1, 2, 3
    # plus the final flush: the value was never written, so it is tried once more
    assert write.calls == 5
    assert heartbeat.statistics().write_errors == 5
    assert heartbeat.statistics().pending is True


async def test_the_final_flush_survives_an_outer_cancel() -> None:
    write = Recorder(takes=1)
    start = anyio.current_time()
    with anyio.move_on_after(4) as outer:
        async with open_coalesced_heartbeat(write, interval=10) as heartbeat:
            heartbeat.beat("start")
            await anyio.sleep(2)
            heartbeat.beat("progress")
            await anyio.sleep_forever()
    assert outer.cancelled_caught  # the cancellation still propagated
    # the write takes 1s: "start" lands at 1; the cancel at 4 flushes "progress", shielded
    assert write.written == [(1, "start"), (5, "progress")]
    assert anyio.current_time() - start == 5


async def test_a_write_in_flight_at_exit_is_cut_and_written_again() -> None:
    write = Recorder(takes=3)
    async with open_coalesced_heartbeat(write, interval=10) as heartbeat:
        heartbeat.beat("v")
        await anyio.sleep(1)  # the first write of "v" is in flight until t=3
    assert write.calls == 2
    assert write.written == [(4, "v")]  # the flush, started at t=1


async def test_the_final_flush_is_bounded_by_flush_timeout() -> None:
    write = Recorder(takes=100)
    start = anyio.current_time()
    async with open_coalesced_heartbeat(write, interval=1, flush_timeout=3) as heartbeat:
        heartbeat.beat("v")
        await anyio.sleep(2)
    assert anyio.current_time() - start == 5
    assert write.written == []
    assert heartbeat.statistics().pending is True  # never written, still the latest


async def test_zero_flush_timeout_skips_the_final_write() -> None:
    write = Recorder(takes=1)
    async with open_coalesced_heartbeat(write, interval=10, flush_timeout=0) as heartbeat:
        heartbeat.beat("a")
        await anyio.sleep(2)
        heartbeat.beat("b")
    assert write.written == [(1, "a")]
    assert write.calls == 1  # the writer is not even called: no half-done write of "b"


async def test_an_error_in_the_block_is_not_wrapped_in_a_group() -> None:
    write = Recorder()

    async def body(heartbeat: CoalescedHeartbeat[object]) -> None:
        heartbeat.beat("a")
        await anyio.sleep(1)
        heartbeat.beat("b")
        raise LookupError("bug")

    with pytest.raises(LookupError, match="bug") as info:
        async with open_coalesced_heartbeat(write, interval=10) as heartbeat:
            await body(heartbeat)
    assert type(info.value) is LookupError
    assert write.written == [(0, "a"), (1, "b")]  # flushed on the way out


async def test_beat_after_exit_is_a_usage_error() -> None:
    async with open_coalesced_heartbeat(Recorder(), interval=1) as heartbeat:
        pass
    with pytest.raises(UsageError, match=r"^CoalescedHeartbeat: beat\(\) after"):
        heartbeat.beat(1)


async def test_a_burst_of_beats_costs_one_write_of_the_last() -> None:
    write = Recorder(takes=5)
    async with open_coalesced_heartbeat(write, interval=1) as heartbeat:
        heartbeat.beat(-1)
        await anyio.sleep(1)  # -1 is being written until t=5
        for i in range(1000):
            heartbeat.beat(i)
        assert heartbeat.statistics().beats == 1001
        await anyio.sleep(20)
    assert write.written == [(5, -1), (10, 999)]
    assert "interval=1s" in repr(heartbeat)


@pytest.mark.parametrize(
    ("kwargs", "error", "shown"),
    [
        ({"interval": 0}, ValueError, "interval must be a positive finite number"),
        ({"interval": math.inf}, ValueError, "got inf"),
        ({"interval": math.nan}, ValueError, "got nan"),
        ({"interval": True}, TypeError, "got True"),
        ({"interval": "1"}, TypeError, "got '1'"),
        ({"interval": 1, "flush_timeout": -1}, ValueError, "flush_timeout must be a non-negative"),
    ],
)
async def test_bad_arguments_are_refused_by_name(
    kwargs: dict[str, object], error: type[Exception], shown: str
) -> None:
    with pytest.raises(error, match=r"^open_coalesced_heartbeat: ") as info:
        async with open_coalesced_heartbeat(Recorder(), **kwargs):  # type: ignore[arg-type]
            pass  # pragma: no cover
    assert shown in str(info.value)


async def test_a_writer_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="write must be an async callable, got 5"):
        async with open_coalesced_heartbeat(5, interval=1):  # type: ignore[arg-type]
            pass  # pragma: no cover


# --- the invariant, over arbitrary beat timings ---------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=25),
    interval=st.integers(min_value=1, max_value=6),
    tail=st.integers(min_value=0, max_value=10),
)
def test_writes_are_spaced_and_always_the_latest(
    backend: str, gaps: list[int], interval: int, tail: int
) -> None:
    """Whatever the timing: periodic writes start >= interval apart, each writes the newest
    beat so far, and the last value written is the last beat."""

    async def scenario() -> tuple[list[tuple[float, Any]], list[tuple[float, int]]]:
        write = Recorder()
        beats: list[tuple[float, int]] = []
        async with open_coalesced_heartbeat(write, interval=interval) as heartbeat:
            for i, gap in enumerate(gaps):
                await anyio.sleep(gap)
                heartbeat.beat(i)
                beats.append((anyio.current_time() - write.start, i))
            await anyio.sleep(tail)
        return write.written, beats

    written, beats = run_on(backend, scenario)
    assert written[-1][1] == beats[-1][1]
    periodic = written[:-1]  # the last may be the final flush, exempt from spacing
    for earlier, later in itertools.pairwise(periodic):
        assert later[0] - earlier[0] >= interval
    for at, value in written:
        # the newest beat at the write's instant (beats in that same instant may
        # land either side of it, but never one from before a newer beat)
        assert max((i for t, i in beats if t < at), default=-1) <= value
        assert value <= max(i for t, i in beats if t <= at)
    assert [v for _, v in written] == sorted({v for _, v in written})  # never a stale value
