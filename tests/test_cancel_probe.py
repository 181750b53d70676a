"""The cancellation probe the pool, the loop and the route executor resolve once.

``checkpoint_if_cancelled_fn`` hands back the running backend's own probe,
looked up once per async library: Trio's ``checkpoint_if_cancelled`` on Trio,
the anyio backend's on asyncio (through anyio's public event-loop token, so
that no per-call backend lookup is left). Whatever it resolves to must still
be the probe: raise in a cancelled scope, and neither raise nor let another
task run in one that is not.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
import trio

from juno_bind_trio._cancel import checkpoint_if_cancelled, checkpoint_if_cancelled_fn

pytestmark = pytest.mark.anyio


async def test_the_probe_is_resolved_once_per_library(anyio_backend_name: str) -> None:
    probe = checkpoint_if_cancelled_fn()
    assert checkpoint_if_cancelled_fn() is probe
    if anyio_backend_name == "trio":
        assert probe is trio.lowlevel.checkpoint_if_cancelled
    else:
        backend = anyio.lowlevel.current_token().backend_class
        assert probe == backend.checkpoint_if_cancelled


async def test_the_probe_raises_only_in_a_cancelled_scope_and_never_yields() -> None:
    probe = checkpoint_if_cancelled_fn()
    ran: list[str] = []

    async def sibling() -> None:
        ran.append("sibling")

    async with anyio.create_task_group() as group:
        group.start_soon(sibling)
        # Not cancelled: returns at once, without a checkpoint, so the sibling
        # scheduled above has not run yet.
        await probe()
        await checkpoint_if_cancelled()
        assert ran == []
    assert ran == ["sibling"]

    with anyio.CancelScope() as scope:
        scope.cancel()  # cancelled while this task runs: nothing delivered yet
        await probe()
        pytest.fail("the probe returned inside a cancelled scope")  # pragma: no cover
    assert scope.cancelled_caught

    with anyio.CancelScope() as outer:
        with anyio.CancelScope():
            outer.cancel()
            await checkpoint_if_cancelled()
            pytest.fail("the probe missed an enclosing scope's cancel")  # pragma: no cover
    assert outer.cancelled_caught
