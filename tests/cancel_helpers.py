"""Tools and probes the cancellation tests of more than one subpackage share."""

from __future__ import annotations

from typing import NoReturn

import anyio


async def fan_out_then_fail(call: object) -> NoReturn:
    """A tool with its own task group: one part fails at 1 s while the other cleans up.

    The other part sits in a shielded cleanup from its cancel (at 1 s) until
    3 s, so a caller's deadline between the two lands while the tool's group
    holds the ``ValueError`` and is still waiting: on Trio the tool then raises
    a group of the failure and the ``Cancelled``.
    """

    async def fails() -> None:
        await anyio.sleep(1)
        raise ValueError("part failed")

    async def cleans_up() -> None:
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(2)

    async with anyio.create_task_group() as tg:
        tg.start_soon(fails)
        tg.start_soon(cleans_up)
    raise AssertionError("unreachable: the task group raises")  # pragma: no cover
