"""Two cancellation probes shared by the pool, the loop and the route executor.

Both exist because a cancel can be pending without the current task having
seen it: it was delivered at a tool's last checkpoint and swallowed, it was
requested while a shielded port ran, or the previous step simply returned
without awaiting anything. A harness that then starts the next side effect
(claims a queued call, enters a port, makes another attempt) has run work
after the cancel, which is the one thing cancellation promises it won't.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import sniffio
import trio

__all__ = ["cancelled_now", "checkpoint_if_cancelled", "checkpoint_if_cancelled_fn"]


def checkpoint_if_cancelled_fn() -> Callable[[], Awaitable[None]]:
    """The cheapest "raise if this task's scope is cancelled" for the running backend.

    Resolve it once per batch or route and call the result: anyio's own
    version looks the backend up on every call, which on Trio costs about
    three times what Trio's does. Not a checkpoint unless cancelled.
    """
    # sniffio (trio's own dependency) answers in a fifth of the time
    # trio.lowlevel.in_trio_run() takes under asyncio, where it raises inside.
    if sniffio.current_async_library() == "trio":
        return trio.lowlevel.checkpoint_if_cancelled
    return anyio.lowlevel.checkpoint_if_cancelled


async def checkpoint_if_cancelled() -> None:
    """Raise the backend's cancellation if this task's scope is cancelled; else return at once."""
    await checkpoint_if_cancelled_fn()()


def cancelled_now() -> bool:
    """Whether the calling task is inside a cancelled scope, checked without a checkpoint."""
    return anyio.current_effective_deadline() == -math.inf
