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

The last one keeps a host's bare ``task.cancel()`` alive on asyncio, where
anyio can lose count of it (see ``task_cancellation``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn

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
    "raise_task_cancellation",
    "split_cancellations",
    "task_cancellation",
]

TASK_CANCELLATION_MESSAGE: Final = "the task was cancelled, not by a cancel scope"
"""What a cancellation re-raised by ``task_cancellation`` says, for a person reading a traceback."""


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


def task_cancellation(exc: BaseException) -> BaseException | None:
    """A fresh cancellation to raise in place of *exc*, or ``None`` to raise *exc* as it is.

    Only on asyncio, and only for a ``CancelledError`` that reaches a point
    where no enclosing cancel scope is cancelled. No scope can claim such a
    cancellation: it is the task's own (``task.cancel()``, the way a host
    stops a task and ``asyncio.Runner`` handles Ctrl-C), or one a tool raised
    itself. Either way it must reach the top of the task. Synchronous.

    Raised as it is, it can be swallowed on the way. When a ``task.cancel()``
    lands in the same event-loop step as a cancel scope's own cancellation of
    the task, asyncio delivers one ``CancelledError`` carrying the scope's
    message. Each anyio scope then tells its own cancellation from the task's
    by that message and by ``Task.cancelling()``, the count of requests still
    pending; and anyio (4.16) miscounts it: a scope left in a *child* task
    while its task group is being cancelled hands its uncancel debt to the
    task group's scope, which then calls ``uncancel()`` on the *parent* task
    for cancellations it never made. Once the count is back at zero, the next
    cancelled scope on the way out takes the task's cancellation for its own
    and the task runs on as if nobody had cancelled it.

    The replacement carries no scope's message and no such exception in its
    context (the original is its ``__cause__``), so no scope mistakes it for
    its own, whatever the count says. Raise it with
    ``raise_task_cancellation``.
    """
    if sniffio.current_async_library() != "asyncio" or cancelled_now():
        return None
    aio = sys.modules.get("asyncio")
    if aio is None or not isinstance(exc, aio.CancelledError):
        return None
    if exc.args == (TASK_CANCELLATION_MESSAGE,) and exc.__context__ is None:
        return None  # already re-raised by an inner layer
    fresh: BaseException = aio.CancelledError(TASK_CANCELLATION_MESSAGE)
    fresh.__cause__ = exc
    return fresh


def raise_task_cancellation(fresh: BaseException) -> NoReturn:
    """Raise *fresh* (from ``task_cancellation``) with no implicit context.

    Raised inside an ``except`` block, an exception gets the one being handled
    as its ``__context__``, and anyio reads a scope's message through that
    chain too; the cause is kept in ``__cause__`` instead.
    """
    try:
        raise fresh
    finally:
        fresh.__context__ = None


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
