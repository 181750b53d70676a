"""Progress writes, coalesced to at most one per interval.

A long run reports progress (tokens so far, the tool that is running, a step
count) many times a second, and a host wants it somewhere durable (a status
row, a lease renewal, a websocket ping) that it should not write many times a
second. A run also must not stall because that write is slow, nor die
because it failed: progress is a report, not part of the work.

So [`open_coalesced_heartbeat()`][juno_bind_trio.run.open_coalesced_heartbeat] keeps only the
**latest** progress and a task of its own writes it, at most once per interval:

* [`CoalescedHeartbeat.beat()`][juno_bind_trio.run.CoalescedHeartbeat.beat] records the value and
  returns at once. It never awaits, so it is safe from anywhere inside the run, including code
  that must not checkpoint.
* The first beat is written at once; beats that arrive within ``interval``
  of the last write's *start* wait, and only the newest of them is written
  when the interval is up. Writes never overlap.
* A write that raises an ``Exception`` is counted in
  [`statistics()`][juno_bind_trio.run.CoalescedHeartbeat.statistics] and its value stays pending
  (unless a newer beat replaced it), to be tried again no sooner than the next
  interval. The run goes on. ``Cancelled`` is never caught.
* On leaving the block, however it is left (finished, failed, cancelled),
  the last pending value is written once more, shielded and bounded by
  ``flush_timeout``: a run's final progress is the one a reader most needs,
  and a cancelled run is exactly when it would otherwise be lost. This final
  write is the one exception to "one per interval"; a write still in flight
  at that moment is cancelled and its value written by the final flush.

The TypeScript ``unrefTimer`` has no counterpart: it kept a Node timer from
holding the process open, and a task inside a task group that the block
cancels on exit cannot outlive its owner in the first place.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, NoReturn, TypeVar, final

import anyio
import attrs

from juno_bind_trio._errors import UsageError
from juno_bind_trio._validate import real_number, shown

__all__ = ["CoalescedHeartbeat", "HeartbeatStatistics", "open_coalesced_heartbeat"]

T = TypeVar("T")


@final
@attrs.frozen
class HeartbeatStatistics:
    """A snapshot of a heartbeat's counters.

    ``beats``: calls to [`beat()`][juno_bind_trio.run.CoalescedHeartbeat.beat]. ``writes``: writes
    that returned. ``write_errors``: writes that raised. ``pending``: a value
    is waiting to be written. ``last_error``: the most recent write failure.
    """

    beats: int
    writes: int
    write_errors: int
    pending: bool
    last_error: Exception | None


def _seconds(what: str, value: object, *, zero_and_inf: bool) -> float:
    # interval: positive and finite (0 would be no coalescing, inf no heartbeat).
    # flush_timeout: 0 (skip the final write) and inf (wait for it) both mean something.
    kind = "a non-negative number" if zero_and_inf else "a positive finite number"
    message = f"open_coalesced_heartbeat: {what} must be {kind} of seconds, got {shown(value)}"
    seconds = real_number(value)
    if seconds is None:
        raise TypeError(message)
    if (
        math.isnan(seconds)
        or seconds < 0
        or (not zero_and_inf and (seconds == 0 or math.isinf(seconds)))
    ):
        raise ValueError(message)
    return seconds


@final
@attrs.define(eq=False, repr=False)
class CoalescedHeartbeat(Generic[T]):
    """The handle [`open_coalesced_heartbeat()`][juno_bind_trio.run.open_coalesced_heartbeat]
    yields: call [`beat()`][juno_bind_trio.run.CoalescedHeartbeat.beat] with progress."""

    _write: Callable[[T], Awaitable[object]] = attrs.field(alias="write")
    _interval: float = attrs.field(alias="interval")
    _value: T | None = attrs.field(default=None, init=False)
    _pending: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _wake: anyio.Event = attrs.field(factory=anyio.Event, init=False)
    # When the next write may start: one interval after the last one started.
    _next_write_at: float = attrs.field(default=-math.inf, init=False)
    _beats: int = attrs.field(default=0, init=False)
    _writes: int = attrs.field(default=0, init=False)
    _write_errors: int = attrs.field(default=0, init=False)
    _last_error: Exception | None = attrs.field(default=None, init=False)

    def __repr__(self) -> str:
        return f"<CoalescedHeartbeat interval={self._interval:g}s {self.statistics()}>"

    def beat(self, progress: T) -> None:
        """Record *progress* as the latest; it is written within one interval.

        Never awaits and never raises for a slow or failing writer.

        :raises UsageError: the heartbeat's block has already exited.
        """
        if self._closed:
            raise UsageError("CoalescedHeartbeat: beat() after the heartbeat's block exited")
        self._beats += 1
        self._value = progress
        self._pending = True
        self._wake.set()

    def statistics(self) -> HeartbeatStatistics:
        """Return the counters as a frozen
        [`HeartbeatStatistics`][juno_bind_trio.run.HeartbeatStatistics]."""
        return HeartbeatStatistics(
            beats=self._beats,
            writes=self._writes,
            write_errors=self._write_errors,
            pending=self._pending,
            last_error=self._last_error,
        )

    async def _write_pending(self) -> None:
        value: T = self._value  # type: ignore[assignment]
        self._value = None
        self._pending = False
        self._next_write_at = anyio.current_time() + self._interval
        written = False
        try:
            await self._write(value)
            written = True
            self._writes += 1
        except Exception as exc:
            self._write_errors += 1
            self._last_error = exc
        finally:
            # Failed or cut off: the value is still the latest unless a newer
            # beat arrived meanwhile, and the latest must not be lost.
            if not written and not self._pending:
                self._value = value
                self._pending = True

    async def _run(self) -> NoReturn:
        while True:
            if not self._pending:
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            await anyio.sleep_until(self._next_write_at)
            await self._write_pending()


@asynccontextmanager
async def open_coalesced_heartbeat(
    write: Callable[[T], Awaitable[object]],
    *,
    interval: float,
    flush_timeout: float = 5.0,
) -> AsyncIterator[CoalescedHeartbeat[T]]:
    """Own a task that writes the latest progress with *write*, at most once per *interval*.


        async with open_coalesced_heartbeat(store.save_progress, interval=2.0) as heartbeat:
            await loop.run(..., on_progress=heartbeat.beat)

    *write* is an async function taking one progress value; what it returns
    is ignored. *interval* (seconds, positive, finite) is the least time
    between the starts of two writes. *flush_timeout* (seconds, non-negative)
    bounds the shielded final write on exit; ``math.inf`` waits for it.

    An exception raised by the block is re-raised as it is, never wrapped in
    an exception group.
    """
    if not callable(write):
        raise TypeError(f"open_coalesced_heartbeat: write must be an async callable, got {write!r}")
    heartbeat: CoalescedHeartbeat[T] = CoalescedHeartbeat(
        write=write,
        interval=_seconds("interval", interval, zero_and_inf=False),
    )
    flush_budget = _seconds("flush_timeout", flush_timeout, zero_and_inf=True)
    body_error: BaseException | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat._run)
            try:
                yield heartbeat
            except BaseException as exc:  # re-raised below, once the task has stopped
                # Held rather than raised here: raised inside the task group it
                # would come out wrapped in an ExceptionGroup of one.
                body_error = exc
            tg.cancel_scope.cancel()
    finally:
        heartbeat._closed = True
        if heartbeat._pending and flush_budget > 0:
            with anyio.move_on_after(flush_budget, shield=True):
                await heartbeat._write_pending()
        if body_error is not None:
            raise body_error
