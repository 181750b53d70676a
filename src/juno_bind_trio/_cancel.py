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

``open_task_group`` is the cheapest task group for the running backend, for a
group opened on every run (the input guardrails'): Trio's own nursery costs
half of anyio's task group over it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Final, NoReturn, Protocol, cast

import anyio
import anyio.lowlevel
import sniffio
import trio

__all__ = [
    "TaskGroup",
    "cancelled_now",
    "checkpoint_if_cancelled",
    "checkpoint_if_cancelled_fn",
    "is_foreign_cancellation",
    "one_failure",
    "open_task_group",
    "raise_task_cancellation",
    "split_cancellations",
    "task_cancellation",
]

TASK_CANCELLATION_MESSAGE: Final = "the task was cancelled, not by a cancel scope"
"""What a cancellation re-raised by ``task_cancellation`` says, for a person reading a traceback."""


_IF_CANCELLED: dict[str, Callable[[], Awaitable[None]]] = {}
"""The probe for each async library seen so far, by its sniffio name."""


def checkpoint_if_cancelled_fn() -> Callable[[], Awaitable[None]]:
    """The cheapest "raise if this task's scope is cancelled" for the running backend.

    Resolve it once per batch or route and call the result: anyio's own
    ``anyio.lowlevel.checkpoint_if_cancelled`` looks its backend up on every
    call, which costs about three times Trio's probe on Trio and some 40 % of
    the probe itself on asyncio. Not a checkpoint unless cancelled.
    """
    # sniffio (trio's own dependency) answers in a fifth of the time
    # trio.lowlevel.in_trio_run() takes under asyncio, where it raises inside.
    library = sniffio.current_async_library()
    probe = _IF_CANCELLED.get(library)
    if probe is None:
        if library == "trio":
            probe = trio.lowlevel.checkpoint_if_cancelled
        else:
            # The backend's own probe, the one anyio's function delegates to,
            # reached through anyio's public event-loop token (4.11+). A
            # backend class is fixed per library, so it is looked up once.
            probe = anyio.lowlevel.current_token().backend_class.checkpoint_if_cancelled
        _IF_CANCELLED[library] = probe
    return probe


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


class _Scope(Protocol):
    def cancel(self) -> None: ...


class TaskGroup(Protocol):
    """What ``open_task_group`` yields: a Trio nursery or an anyio task group."""

    @property
    def cancel_scope(self) -> _Scope: ...

    def start_soon(self, fn: Callable[..., Awaitable[Any]], /, *args: Any) -> None: ...


class _Nursery:
    """Trio's nursery, leaving as anyio's task group does when all it holds is cancellations.

    A strict nursery wraps even a lone ``Cancelled`` in a group; anyio's task
    group raises the cancellation bare, and callers rely on that (a cancel
    leaves as a cancel, never as a group). The first one is raised as it is.
    """

    __slots__ = ("_manager",)

    def __init__(self) -> None:
        self._manager = trio.open_nursery(strict_exception_groups=True)

    async def __aenter__(self) -> TaskGroup:
        return await self._manager.__aenter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        try:
            return bool(await self._manager.__aexit__(kind, exc, traceback))
        except BaseExceptionGroup as group:
            cancelled, rest = group.split(trio.Cancelled)
            if rest is None and cancelled is not None:
                leaf: BaseException = cancelled
                while isinstance(leaf, BaseExceptionGroup):
                    leaf = leaf.exceptions[0]
                raise leaf from None
            raise


def open_task_group() -> AbstractAsyncContextManager[TaskGroup]:
    """A task group for the running backend: Trio's nursery on Trio, anyio's elsewhere.

    Both leave the same way: a child's failure in a group, cancellations alone
    as one bare cancellation.
    """
    if sniffio.current_async_library() == "trio":
        return _Nursery()
    # anyio's start_soon is typed with a TypeVarTuple, which no protocol spells.
    return cast("AbstractAsyncContextManager[TaskGroup]", anyio.create_task_group())
