"""A finished run never looks lost: its heartbeat stops renewing the lease it gave up.

The heartbeat wakes every ``renew_interval`` of virtual time and renews once
that much of the lease is used up in the store's clock, which the test moves
by hand (a clock that followed the virtual one would race ahead of it while
a worker thread talks to the database).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from juno_bind_trio.store import RunStore, open_durable_run

from .store_helpers import FakeClock

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hi"}]


class Renewals:
    """Counts the store's lease renewals, started and ended; ``idle`` is set while
    none is under way (a worker thread's hop takes real time)."""

    def __init__(self, store: RunStore) -> None:
        self.started = self.ended = 0
        self.idle = anyio.Event()
        self.idle.set()
        renew_lease = store.renew_lease

        async def counted(lease: Any, **kwargs: Any) -> Any:
            self.started += 1
            self.idle = anyio.Event()
            try:
                return await renew_lease(lease, **kwargs)
            finally:
                self.ended += 1
                if self.ended == self.started:
                    self.idle.set()

        store.renew_lease = counted  # type: ignore[method-assign]


async def test_a_finished_run_is_not_lost_when_its_heartbeat_comes_round(
    store: RunStore, clock: FakeClock
) -> None:
    await store.create_run("r1", messages=USER)
    renewals = Renewals(store)
    async with open_durable_run(store, "r1", owner="w", lease_ttl=1.0, renew_interval=0.05) as run:
        claimed = run.lease.expires_at
        clock.advance(0.1)
        await anyio.sleep(0.1)  # the heartbeat renews while the run is held
        await renewals.idle.wait()
        assert renewals.started >= 1
        assert run.lease.expires_at == pytest.approx(claimed + 0.1)
        held = renewals.started
        await run.finish("completed")
        clock.advance(0.5)  # half the lease used: a held one would be renewed now
        await anyio.sleep(0.3)  # six heartbeat intervals after the release
        await renewals.idle.wait()
        assert renewals.started == held  # nothing left to renew: nothing asked
        assert not run.lost
        assert not run.stop.cancel_called
    record = await store.get_run("r1")
    assert (record.status, record.lease_owner) == ("completed", None)


async def test_a_renewal_under_way_when_the_run_finishes_does_not_make_it_lost(
    store: RunStore, clock: FakeClock
) -> None:
    await store.create_run("r1", messages=USER)
    renew_lease = store.renew_lease
    released = anyio.Event()
    renewing = anyio.Event()
    refused: list[BaseException] = []
    answered = anyio.Event()

    async def late_renew(lease: Any, **kwargs: Any) -> Any:
        # The heartbeat's renewal reaches the database only after the release.
        renewing.set()
        await released.wait()
        try:
            return await renew_lease(lease, **kwargs)
        except BaseException as exc:
            refused.append(exc)
            raise
        finally:
            answered.set()

    store.renew_lease = late_renew  # type: ignore[method-assign]
    async with open_durable_run(store, "r1", owner="w", lease_ttl=1.0, renew_interval=0.05) as run:
        clock.advance(0.1)
        await renewing.wait()
        await run.finish("completed")
        released.set()
        await answered.wait()
        await anyio.sleep(0.1)
        assert [type(e).__name__ for e in refused] == ["LeaseLostError"]  # it was refused
        assert not run.lost  # and that says nothing about a run that finished
        assert not run.stop.cancel_called
    assert (await store.get_run("r1")).status == "completed"
