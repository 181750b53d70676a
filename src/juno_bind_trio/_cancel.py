"""Cancellation probes shared by the pool, the loop and the route executor.

Both exist because a cancel can be pending without the current task having
seen it: it was delivered at a tool's last checkpoint and swallowed, it was
requested while a shielded port ran, or the previous step simply returned
without awaiting anything. A harness that then starts the next side effect
(claims a queued call, enters a port, makes another attempt) has run work
after the cancel, which is the one thing cancellation promises it won't.

The other two answer questions about an exception a tool raised: was it the
run's own cancellation (and so must propagate), and what is left of a group
once its cancellations are taken out (so one failure is raised as itself, and
a caller's cancel scope can absorb its own cancel).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import sniffio
import trio

__all__ = [
    "cancelled_now",
    "checkpoint_if_cancelled",
    "checkpoint_if_cancelled_fn",
    "is_foreign_cancellation",
    "one_failure",
    "split_cancellations",
]


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


def is_foreign_cancellation(exc: BaseException) -> bool:
    """Whether *exc* is a cancellation exception that is not the calling task's own.

    On asyncio a tool can raise ``CancelledError`` without anyone cancelling
    the run: it awaited a future somebody else cancelled. That exception is
    the tool's failure, not the run's cancellation. It is told apart by the
    task: not inside a cancelled anyio scope, and not itself being cancelled
    (``Task.cancelling()`` is zero, so a bare ``task.cancel()`` of the host's
    task still counts as the run's own). On Trio, ``Cancelled`` only ever comes
    from a cancelled scope, so it is never foreign. Synchronous.
    """
    if cancelled_now() or sniffio.current_async_library() != "asyncio":
        return False
    # The library never imports asyncio itself; under the asyncio backend it is
    # loaded already, and only its own exception class and task are read here.
    aio = sys.modules.get("asyncio")
    if aio is None or not isinstance(exc, aio.CancelledError):
        return False
    task = aio.current_task()
    return task is None or task.cancelling() == 0


def split_cancellations(
    exc: BaseException,
) -> tuple[BaseException | None, BaseException | None]:
    """Split *exc* into (its cancellations, everything else), either part ``None`` if empty.

    A bare exception lands wholly on one side; a group is split leaf by leaf
    (``BaseExceptionGroup.split``), keeping its nesting on both sides.
    """
    cancelled = anyio.get_cancelled_exc_class()
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(cancelled)
    if isinstance(exc, cancelled):
        return exc, None
    return None, exc


def one_failure(exc: BaseException) -> BaseException:
    """*exc* itself, or its only leaf if it is a group (nested at any depth) of exactly one.

    A group of one is the task group's wrapping, an implementation detail: the
    caller should see the one exception that happened.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
