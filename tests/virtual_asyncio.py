"""An asyncio event loop on a virtual clock, the asyncio twin of trio's autojump MockClock.

``trio.testing.MockClock(autojump_threshold=0)`` jumps the clock to the next
deadline whenever every task is blocked. This loop does the same for asyncio:
its ``time()`` is virtual, and whenever the loop would block in the selector
with a timer pending, it first polls the selector without blocking (so real
loopback I/O that is already there is still seen first) and, if nothing is
ready, advances the virtual clock to the timer instead of sleeping. With no
timer pending it blocks on real I/O as usual. Tests therefore assert exact
virtual times on both anyio backends and never sleep on the wall clock.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from typing import Any


class _AutojumpSelector:
    def __init__(self, inner: selectors.BaseSelector, loop: VirtualClockEventLoop) -> None:
        self._inner = inner
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            return self._inner.select(None)
        ready = self._inner.select(0)
        if ready or timeout <= 0:
            return ready
        self._loop.jump_to_next_timer(timeout)
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class VirtualClockEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose clock only moves when every task is waiting on a timer."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._selector = _AutojumpSelector(self._selector, self)  # type: ignore[has-type,arg-type]

    def time(self) -> float:
        return self._virtual_now

    def jump_to_next_timer(self, timeout: float) -> None:
        """Move the clock to the earliest pending timer, exactly.

        Adding ``timeout`` (which asyncio computed as ``when - now`` and capped at
        a day) would accumulate rounding: far from zero, ``now + (when - now)``
        can land a hair short of ``when``, and the loop would then spin forever
        on a remainder smaller than the clock's resolution. Jumping to the
        timer's own deadline is exact.
        """
        # asyncio caps a select timeout at one day; with nothing ready, nothing
        # can happen before the earliest timer, so go straight there.
        scheduled = self._scheduled  # type: ignore[attr-defined]
        target = scheduled[0].when() if scheduled else self._virtual_now + timeout
        # asyncio runs a timer when `when < now + clock_resolution`. Far from
        # zero that sum rounds back to `now` and the timer would never run; one
        # ulp past it is the smallest time at which it does.
        if target + self._clock_resolution <= target:  # type: ignore[attr-defined]
            target = math.nextafter(target, math.inf)
        self._virtual_now = max(self._virtual_now, target)
