"""The run's soft stop: one flag the loop, the pool, the agent and the store all read.

A soft stop is anything with a ``cancel_called`` bool
([StopSignal][juno_bind_trio.run.StopSignal]); a cancel scope is one. When a
layer needs a stop of its own that it can fire itself (an
[AgentRun.stop][juno_bind_trio.agent.AgentRun.stop], a usage limit, a store
worker that lost its lease), it makes a [SoftStop][juno_bind_trio.run.SoftStop]:
made without an event loop, so a run can be built anywhere. When two stops
must both be honoured (the caller's and the run's own),
[either_stop][juno_bind_trio.run.either_stop] reads them as one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final, overload

if TYPE_CHECKING:
    from ._calls import StopSignal

__all__ = ["SoftStop", "either_stop"]


@final
class SoftStop:
    """A soft stop a run fires itself: a flag read like a cancel scope's ``cancel_called``.

    Anything with a ``cancel_called`` bool is a loop's ``stop``; this one is
    made without an event loop, so a run can be built anywhere. Firing it is
    synchronous and idempotent.
    """

    __slots__ = ("cancel_called",)

    def __init__(self) -> None:
        self.cancel_called: bool = False

    def __repr__(self) -> str:
        return f"<SoftStop cancel_called={self.cancel_called}>"

    def cancel(self) -> None:
        """Fire the stop: the loop starts nothing new and ends ``"stopped"``."""
        self.cancel_called = True


@final
class _EitherStop:
    __slots__ = ("_first", "_second")

    def __init__(self, first: StopSignal, second: StopSignal) -> None:
        self._first = first
        self._second = second

    def __repr__(self) -> str:
        return f"<either_stop {self._first!r} {self._second!r} cancel_called={self.cancel_called}>"

    @property
    def cancel_called(self) -> bool:
        return bool(self._first.cancel_called or self._second.cancel_called)


@overload
def either_stop(first: None, second: None) -> None: ...
@overload
def either_stop(first: StopSignal, second: StopSignal | None) -> StopSignal: ...
@overload
def either_stop(first: StopSignal | None, second: StopSignal) -> StopSignal: ...
@overload
def either_stop(first: StopSignal | None, second: StopSignal | None) -> StopSignal | None: ...


def either_stop(first: StopSignal | None, second: StopSignal | None) -> StopSignal | None:
    """A stop that reads as fired once either *first* or *second* fired.

    ``None`` for no stop: with one of them ``None``, the other is returned
    as it is (so ``either_stop(None, None)`` is ``None``). Reading the result
    reads both, every time: it never latches, and it never fires either.

    :raises TypeError: a stop without a ``cancel_called`` attribute.
    """
    for name, stop in (("first", first), ("second", second)):
        if stop is not None and not hasattr(stop, "cancel_called"):
            raise TypeError(
                f"either_stop: {name} must be a stop signal (with cancel_called) or None, "
                f"got {stop!r}"
            )
    if first is None:
        return second
    if second is None:
        return first
    return _EitherStop(first, second)
