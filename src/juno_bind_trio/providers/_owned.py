"""The adapter a model string owns: one per event loop, opened at first use, closed with it.

``Agent("anthropic:<model>")`` owns its client, as ``Agent("openai:<model>")``
does (see ``providers/openai/_owned.py`` for why one *per event loop*: an SDK's
HTTP client is bound to the loop it first ran on, and ``run_sync`` starts a
loop per call). This is that rule for any provider: *open_adapter* is an
async context manager factory that opens the provider's client and yields
its adapter; it is entered at the first run in a loop, held open by a
suspended async generator (which the loop finalizes with its async
generators, closing the client in its own loop), and left by ``aclose()``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager
from typing import final
from weakref import WeakKeyDictionary

import anyio
import anyio.lowlevel

from ._adapter import ProviderAdapter

__all__ = ["OwnedAdapter", "StringAdapterFactory"]

StringAdapterFactory = Callable[[], AbstractAsyncContextManager[ProviderAdapter]]


async def _held_open(
    opener: AbstractAsyncContextManager[ProviderAdapter], cell: list[ProviderAdapter]
) -> AsyncGenerator[None, None]:
    async with opener as adapter:
        cell.append(adapter)
        yield


@final
class _Held:
    __slots__ = ("adapter", "holder")

    def __init__(self, adapter: ProviderAdapter, holder: AsyncGenerator[None, None]) -> None:
        self.adapter = adapter
        self.holder = holder


@final
class OwnedAdapter:
    """One adapter per event loop from *open_adapter*, opened at its first use there."""

    __slots__ = ("_adapters", "_open", "opened")

    def __init__(self, open_adapter: StringAdapterFactory) -> None:
        self._open = open_adapter
        self._adapters: WeakKeyDictionary[object, _Held] = WeakKeyDictionary()
        self.opened = 0
        """How many adapters this owner has opened (one per event loop it ran in)."""

    async def adapter(self) -> ProviderAdapter:
        """This event loop's adapter, opened now if it has none."""
        loop = anyio.lowlevel.current_token().native_token
        held = self._adapters.get(loop)
        if held is not None:
            return held.adapter
        cell: list[ProviderAdapter] = []
        holder = _held_open(self._open(), cell)
        await holder.asend(None)
        held = self._adapters.get(loop)
        if held is not None:  # another run of this loop opened one meanwhile
            with anyio.CancelScope(shield=True):
                await holder.aclose()
            return held.adapter
        self._adapters[loop] = _Held(cell[0], holder)
        self.opened += 1
        return cell[0]

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
