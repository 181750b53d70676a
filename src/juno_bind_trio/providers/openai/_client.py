"""Client-level helpers for ``openai.AsyncOpenAI``."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

__all__ = ["prime_openai_client"]


async def prime_openai_client(client: Any) -> None:
    """Run the SDK's one-time platform probe now instead of inside the first request.

    ``AsyncOpenAI`` detects the operating system (for its ``X-Stainless-OS``
    header) on a client's first request, in a worker thread. That thread hop
    is then part of the first request's time: on a real clock it is charged
    to the first attempt's time-to-first-token budget, and on a virtual clock
    (Trio's autojump ``MockClock``) the clock jumps to the next pending
    deadline while the thread runs, so a watchdog or a ``move_on_after``
    fires although nothing was late. Priming once, right after creating the
    client and before any deadline is armed, removes both effects.

    Idempotent and cheap after the first call. It sets the attribute the SDK
    itself caches the answer in; with an SDK that no longer has it, it does
    nothing and the SDK probes as before.
    """
    if getattr(client, "_platform", "absent") is not None:
        return
    from openai._base_client import get_platform  # the SDK's own probe, unchanged

    client._platform = await anyio.to_thread.run_sync(get_platform)
