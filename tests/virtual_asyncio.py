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
        self._loop.advance(timeout)
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

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds
