"""The write lane: the hot writes many tasks of a store make at once, applied in one commit.

Group commit
------------

The writes a loop iteration makes (the open turn, the receipts, the
transcript) go through one *write lane* per store. A writer that finds the
lane idle leads: it lets the tasks already runnable reach the lane (a
scheduler turn or two, shielded), takes every write queued by then, and applies them
in **one** worker-thread hop and one commit; writes that arrive while that
commit is under way wait, and the first of them to run leads the next. Each
write keeps its own lease check and its own outcome (a write refused for a
lost lease raises `LeaseLostError` to its caller alone), and each caller is
released only after the commit that holds its write. A caller cancelled
while its write is still queued takes it out: nothing of it is written, and
the cancel is raised. Once a commit has taken the write, the caller waits for
that commit (shielded) and then sees the cancel, as with any store call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import outcome
import sniffio

from juno_bind_trio._errors import StoreError

from . import _guarded

__all__ = ["WriteLane"]


class _Queued:
    """A write waiting in the lane, and, once a commit has taken it, how it ended."""

    __slots__ = ("flight", "result", "write")

    def __init__(self, write: _guarded.Write) -> None:
        self.write = write
        self.flight: anyio.Event | None = None  # the commit that took it
        self.result: outcome.Outcome[Any] | None = None


class WriteLane:
    """The group commit both database stores share: a subclass supplies
    ``_check_open`` and ``_commit_group``, and sets the three fields below."""

    _queue: deque[_Queued]
    _flight: anyio.Event | None  # set when the commit under way ends
    _commits: int  # group commits made (tests and the benchmark read it)

    def _check_open(self) -> None:
        raise NotImplementedError

    def _commit_group(self, writes: Sequence[_guarded.Write]) -> list[outcome.Outcome[Any]]:
        """Apply *writes* with one commit where possible; one outcome per write, in order.

        A write that fails (its lease lost, its data refused) fails alone: the
        others still commit."""
        raise NotImplementedError

    async def _write(self, write: _guarded.Write) -> Any:
        """Apply one of a run's hot writes through the lane (see "Group commit" above)."""
        self._check_open()
        await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled already: nothing written
        item = _Queued(write)
        self._queue.append(item)
        try:
            while item.result is None:
                if self._flight is None:
                    await self._fly()
                else:
                    await self._flight.wait()
        except BaseException:
            if item.result is None:
                if item.flight is None:  # still queued: out it goes, nothing written
                    self._queue.remove(item)
                    raise
                with anyio.CancelScope(shield=True):  # taken: wait for its commit
                    await item.flight.wait()
            if item.result is None or isinstance(item.result, outcome.Value):
                raise
            # It failed in the database: that error says more than the cancel,
            # which stays pending and reaches the caller at its next checkpoint.
            return item.result.unwrap()
        # A cancel that arrived while the commit was under way was held until it
        # ended; the caller sees it now, with the write already whole.
        await anyio.lowlevel.checkpoint_if_cancelled()
        return item.result.unwrap()

    async def _fly(self) -> None:
        flight = self._flight = anyio.Event()
        taken: list[_Queued] = []
        try:
            # Scheduler turns, shielded, so writers already runnable (a batch's calls
            # starting together, results arriving together) join this commit. One
            # on asyncio, whose ready queue is first in, first out. Two on trio: it
            # orders each turn's tasks at random, so a writer woken in the same turn
            # as the leader may run after it in the next, and is queued by the one
            # after.
            await anyio.lowlevel.cancel_shielded_checkpoint()
            if sniffio.current_async_library() == "trio":
                await anyio.lowlevel.cancel_shielded_checkpoint()
            taken = list(self._queue)  # the leader's own write is among them
            self._queue.clear()
            for item in taken:
                item.flight = flight
            writes = [item.write for item in taken]
            try:
                # Shielded whole: the thread cannot be stopped, and once it is asked
                # for, the writers it carries wait for what it did.
                with anyio.CancelScope(shield=True):
                    results = await anyio.to_thread.run_sync(self._commit_group, writes)
            except Exception as exc:  # the lane itself failed: every write in it fails
                results = [outcome.Error(exc) for _ in taken]
            self._commits += 1
            for item, result in zip(taken, results, strict=True):
                item.result = result
        finally:
            for item in taken:
                if item.result is None:  # pragma: no cover - a BaseException in the lane
                    item.result = outcome.Error(
                        StoreError(
                            f"{type(self).__name__}: the write's commit was interrupted; "
                            "whether it landed is not known"
                        )
                    )
            self._flight = None
            flight.set()
