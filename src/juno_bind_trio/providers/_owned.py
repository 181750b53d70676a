"""The adapter a model string owns: one per event loop, opened at first use, closed with it.

Why one *per event loop* and not one for the model's whole life: an SDK's
HTTP client is bound to the loop it first ran on. Its pooled connections are
that loop's streams and its locks that backend's (measured with openai 3.57
on httpx2: a second ``asyncio.run`` on the same client fails with "Event loop
is closed", and trio then asyncio fails on the pool's trio lock).
``Agent.run_sync`` starts a loop per call, as does a script that calls
``trio.run`` twice, so each loop gets its own client and the rule is the same
on both backends.

Why no warning when nobody closes it: the client is held open by one async
generator suspended at a ``yield`` whose ``finally`` closes it. Both event
loops finalize the async generators still alive when they end
(``asyncio.run`` in ``shutdown_asyncgens``, ``trio.run`` after its main task
returns), which closes the client in its own loop, with its sockets. When
the owner is dropped while its loop runs on (an agent built per request in a
server, say), the generator is collected and the loop's finalizer closes the
client then. ``aclose()`` closes it at once.

Why the opener is *not* an async context manager: a loop finalizes every
live async generator at once, in no order. An ``@asynccontextmanager``
opener held inside the holder is a second live generator, so at the loop's
end both are closed concurrently and the inner one is "already running"
when the outer one's exit reaches it (measured on trio and asyncio with an
``"anthropic:"`` agent never closed: three tracebacks on stderr). So a
provider's opener is a plain coroutine returning the adapter and the
coroutine function that closes its client, and the holder is the only
generator.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeAlias, final
from weakref import WeakKeyDictionary

import anyio
import anyio.lowlevel

from ._adapter import ProviderAdapter

__all__ = ["AdapterCloser", "OwnedAdapter", "StringAdapterOpener"]

AdapterCloser: TypeAlias = Callable[[], Awaitable[object]]
"""Closes the client under an adapter (``client.close``, say)."""

StringAdapterOpener: TypeAlias = Callable[[], Awaitable[tuple[ProviderAdapter, AdapterCloser]]]
"""Opens a client (from arguments or the SDK's environment) and returns its adapter and closer.

Raises the package's ``UsageError`` for a missing key; leaves nothing open when it raises.
"""


async def _held_open(close: AdapterCloser) -> AsyncGenerator[None, None]:
    # Suspended at the yield for the client's life; closed by aclose() or by the
    # event loop's async generator finalization (see the module docstring).
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await close()


@final
class _Held:
    __slots__ = ("adapter", "holder")

    def __init__(self, adapter: ProviderAdapter, holder: AsyncGenerator[None, None]) -> None:
        self.adapter = adapter
        self.holder = holder


@final
class OwnedAdapter:
    """One adapter per event loop from *open_adapter*, opened at its first use there."""

    __slots__ = ("_adapters", "_locks", "_open", "opened")

    def __init__(self, open_adapter: StringAdapterOpener) -> None:
        self._open = open_adapter
        self._adapters: WeakKeyDictionary[object, _Held] = WeakKeyDictionary()
        self._locks: WeakKeyDictionary[object, anyio.Lock] = WeakKeyDictionary()
        self.opened = 0
        """How many adapters this owner has opened (one per event loop it ran in)."""

    async def adapter(self) -> ProviderAdapter:
        """This event loop's adapter, opened now if it has none (once, however many runs ask)."""
        loop = anyio.lowlevel.current_token().native_token
        held = self._adapters.get(loop)
        if held is not None:
            return held.adapter
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = anyio.Lock()
        async with lock:
            held = self._adapters.get(loop)
            if held is None:  # not opened by a run that held the lock before this one
                adapter, close = await self._open()
                holder = _held_open(close)
                await holder.asend(None)  # enters the try; awaits nothing
                held = self._adapters[loop] = _Held(adapter, holder)
                self.opened += 1
        return held.adapter

    async def aclose(self) -> None:
        """Close this event loop's adapter's client, if it has one."""
        held = self._adapters.pop(anyio.lowlevel.current_token().native_token, None)
        if held is None:
            await anyio.lowlevel.checkpoint()
            return
        with anyio.CancelScope(shield=True):
            await held.holder.aclose()

    def is_open(self) -> bool:
        """Whether the current event loop has an open adapter of this owner."""
        return anyio.lowlevel.current_token().native_token in self._adapters
