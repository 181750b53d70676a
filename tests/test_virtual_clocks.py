"""The test harness itself: both backends really run on a virtual clock."""

from __future__ import annotations

import anyio
import pytest

from conftest import run_on

pytestmark = pytest.mark.anyio


async def test_sleep_jumps_the_clock_exactly() -> None:
    start = anyio.current_time()
    await anyio.sleep(3600)
    assert anyio.current_time() - start == 3600


@pytest.mark.parametrize("seconds", [10**6, 10**8, 365.25 * 86400 * 3, 0.1])
async def test_long_and_fractional_sleeps_end_exactly(seconds: float) -> None:
    start = anyio.current_time()
    await anyio.sleep(seconds)
    assert anyio.current_time() - start == pytest.approx(seconds, rel=1e-12, abs=1e-9)


async def test_deadline_fires_at_its_virtual_time() -> None:
    start = anyio.current_time()
    with anyio.move_on_after(2.5) as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert anyio.current_time() - start == 2.5


async def test_concurrent_sleepers_wake_in_order() -> None:
    woke: list[tuple[str, float]] = []
    start = anyio.current_time()

    async def sleeper(name: str, delay: float) -> None:
        await anyio.sleep(delay)
        woke.append((name, anyio.current_time() - start))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper, "b", 2)
        tg.start_soon(sleeper, "a", 1)
    assert woke == [("a", 1), ("b", 2)]


def test_run_on_gives_each_run_a_fresh_clock(backend: str) -> None:
    async def elapsed() -> float:
        await anyio.sleep(10)
        return anyio.current_time()

    assert run_on(backend, elapsed) == 10
    assert run_on(backend, elapsed) == 10


def test_trio_waits_on_a_thread_without_spinning_and_still_jumps_at_once() -> None:
    import time

    import trio

    from conftest import QuietAutojump

    class Waits(trio.abc.Instrument):
        def __init__(self) -> None:
            self.seen: list[tuple[float, bool]] = []

        def before_io_wait(self, timeout: float) -> None:
            pending = trio.lowlevel.current_statistics().seconds_to_next_deadline < float("inf")
            self.seen.append((timeout, pending))

    async def main() -> tuple[list[tuple[float, bool]], float]:
        waits = Waits()
        trio.lowlevel.add_instrument(waits)
        await anyio.to_thread.run_sync(time.sleep, 0.2)  # no deadline pending meanwhile
        start = anyio.current_time()
        await anyio.sleep(5)
        await anyio.to_thread.run_sync(time.sleep, 0.05)
        with anyio.move_on_after(7):
            await anyio.to_thread.run_sync(time.sleep, 0.05)  # a deadline pending meanwhile
            await anyio.sleep_forever()
        return waits.seen, anyio.current_time() - start

    seen, elapsed = run_on("trio", main)
    # A bare MockClock(autojump_threshold=0) polls with a zero timeout all the while
    # the thread sleeps: thousands of times in 0.3 s.
    assert len(seen) < 100, len(seen)
    # Virtual time is as exact as ever, and with a deadline pending the clock is
    # strict: every wait then is a zero-timeout poll, the jump comes at once.
    assert elapsed == 12
    assert all(timeout == 0 for timeout, pending in seen if pending)
    assert any(timeout == QuietAutojump.RELAXED for timeout, pending in seen if not pending)
