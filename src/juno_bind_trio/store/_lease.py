"""Claiming a stored run under a lease, keeping it alive, and giving it back on the way out."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress

import anyio

from juno_bind_trio._errors import RunLeasedError, StoreDataError, TranscriptError
from juno_bind_trio._validate import error_kind
from juno_bind_trio.loop import LoopState
from juno_bind_trio.run import EffectResumability, open_coalesced_heartbeat
from juno_bind_trio.transcript import HealResult, heal_transcript

from ._durable import DurableRun, _never, _non_repeatable
from ._owner import holder_is_gone
from ._protocol import RunStore
from ._records import DEFAULT_LEASE_TTL, RESUMABLE_STATUSES, Lease, RunStatus, StoredRun

__all__ = ["open_durable_run"]


async def _give_back(
    store: RunStore, lease: Lease, status: RunStatus, detail: str | None = None
) -> None:
    """Release *lease*, recording *status*, on the way out of a block.

    Shielded: this runs on the way out of a cancel too. Quiet: the error or
    cancel on its way out is the one the caller must see, and a lease that
    cannot be given back expires. Not bounded by a timer: a store call is one
    transaction, bounded by the database's own timeouts.
    """
    with anyio.CancelScope(shield=True), suppress(Exception):
        await store.release(lease, status=status, detail=detail)


def _only_cancels(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_cancels(e) for e in exc.exceptions)
    return isinstance(exc, anyio.get_cancelled_exc_class())


def _ending(exc: BaseException | None, *, worker: bool) -> tuple[RunStatus, str]:
    """The status and detail of a run whose block was left without ``finish``.

    A cancel of the run's own scope ended it: ``"cancelled"``, continued only
    when asked for by id. A cancel of a worker (``serve_runs``), an interrupt
    (``KeyboardInterrupt``) or a plain exit hands it back, ``"running"`` with
    no lease: any worker's ``claim_next`` takes it at once. An exception
    failed it, and the detail names the exception's type (its message may
    hold what the store must not: the worker's log has it).
    """
    if exc is None:
        return "running", "handed back: its worker left the run without an ending"
    if _only_cancels(exc):
        if worker:
            return "running", "handed back: its worker was stopped while it ran"
        return "cancelled", "cancelled: a hard cancel (or a deadline) ended the run"
    if isinstance(exc, Exception):
        return "failed", f"failed: {type(exc).__name__} was raised while it ran"
    return "running", f"handed back: {type(exc).__name__} stopped its worker"


async def _release_on_exit(
    store: RunStore, run: DurableRun, exc: BaseException | None, *, worker: bool
) -> None:
    if run._finished or run.lost:
        return
    run._finished = True
    status, detail = _ending(exc, worker=worker)
    await _give_back(store, run.lease, status, detail)


async def _claim(store: RunStore, run_id: str, owner: str, ttl: float) -> Lease:
    """Claim *run_id*, taking it from a holder known to be dead (see ``_owner``)."""
    try:
        return await store.claim_run(run_id, owner=owner, ttl=ttl)
    except RunLeasedError:
        holder = (await store.get_run(run_id)).lease_owner
        if holder is None or not holder_is_gone(holder):
            raise
    # Its process is gone: the lease would only hold the run for the rest of its
    # TTL. Taken in one transaction that checks it is still that holder's lease
    # (another worker may have claimed it meanwhile: RunLeasedError again).
    return await store.claim_run(run_id, owner=owner, ttl=ttl, take_over=holder)


def _heal_for_resume(loaded: StoredRun, run_id: str) -> HealResult:
    if loaded.record.status not in RESUMABLE_STATUSES:
        raise ValueError(
            f"open_durable_run: run {run_id!r} ended {loaded.record.status!r}; "
            "there is nothing to resume"
        )
    try:
        return heal_transcript(loaded.messages)
    except TranscriptError as exc:
        # A stored transcript healing cannot read is a corrupted row, like one that
        # does not parse: it names the run, and a worker records the run failed
        # instead of claiming it again and again.
        raise StoreDataError(
            f"run {run_id!r}: the stored transcript cannot be read ({exc}); the row is "
            "corrupted (column messages)",
            run_id,
        ) from None


def _check_seconds(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"open_durable_run: {what} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"open_durable_run: {what} must be a positive number, got {value!r}")
    return float(value)


def open_durable_run(
    store: RunStore,
    run_id: str,
    *,
    owner: str,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    renew_interval: float | None = None,
    resumability: Callable[[str], EffectResumability] | None = None,
    uses_idempotency_key: Callable[[str], bool] | None = None,
    lease: Lease | None = None,
) -> AbstractAsyncContextManager[DurableRun]:
    """Claim *run_id* (or take over *lease*, from ``claim_next``), load it, keep the lease alive.

    ```python
    async with open_durable_run(store, "order-17", owner="worker-1") as run:
        ...
        await run.finish(result.reason)
    ```

    *owner* names this worker in the lease. *lease_ttl*: seconds a lease
    lasts unrenewed, so how soon another worker takes over after this one
    dies. *renew_interval*: how often the heartbeat renews it (default a
    third of the TTL). *resumability*: ``(tool_name) -> "repeatable" |
    "non_repeatable"`` (default: every tool non-repeatable, the safe reading).
    *uses_idempotency_key*: ``(tool_name) -> bool``, tools whose interrupted
    calls may be dispatched again because they pass the key on.

    A run leased to a process of this machine that is no longer running (its
    owner of the default ``host:pid:machine`` shape, its pid gone: it was
    killed) is taken over at once rather than after its lease runs out; any
    other holder's lease is waited out (``RunLeasedError``).

    The transcript is healed on load (``run.heal_changes`` lists what was
    repaired). Leaving the block without
    [finish][juno_bind_trio.store.DurableRun.finish] gives the lease up
    (shielded) and records how the run ended: after an exception it is
    ``"failed"``; after a hard cancel, ``"cancelled"`` (continued only when
    asked for by id: ``open_durable_run`` again, or ``Agent.resume``); after
    an interrupt (``KeyboardInterrupt``) or a plain exit it is handed back,
    ``"running"`` with no lease, so any worker's ``claim_next`` takes it at
    once. [RunRecord.detail][juno_bind_trio.store.RunRecord] says which. A lost
    lease writes nothing.

    :raises RunLeasedError: another worker holds the run.
    :raises StoreDataError: the stored run cannot be read; nothing is written
        but giving back the lease this call took.
    :raises ValueError: the run already ended for good (``"completed"``, ...);
        the lease this call took is given back and the status left as it was.
    """
    return _open_durable_run(
        store,
        run_id,
        owner=owner,
        lease_ttl=lease_ttl,
        renew_interval=renew_interval,
        resumability=resumability,
        uses_idempotency_key=uses_idempotency_key,
        lease=lease,
        worker=False,
    )


@asynccontextmanager
async def _open_durable_run(
    store: RunStore,
    run_id: str,
    *,
    owner: str,
    lease_ttl: float,
    renew_interval: float | None,
    resumability: Callable[[str], EffectResumability] | None,
    uses_idempotency_key: Callable[[str], bool] | None,
    lease: Lease | None,
    worker: bool,
) -> AsyncIterator[DurableRun]:
    """``open_durable_run``; *worker*: a cancel stops the worker (``serve_runs``), not the
    run, which is handed back instead of recorded ``"cancelled"``."""
    given: object = store
    if not isinstance(given, RunStore):
        raise TypeError(f"open_durable_run: store must be a RunStore, got {store!r}")
    texts: tuple[tuple[str, object], ...] = (("run_id", run_id), ("owner", owner))
    for name, text in texts:
        if not isinstance(text, str) or not text:
            raise error_kind(text, str)(
                f"open_durable_run: {name} must be a non-empty string, got {text!r}"
            )
    if lease is not None and not isinstance(lease, Lease):
        raise TypeError(f"open_durable_run: lease must be a Lease or None, got {lease!r}")
    ttl = _check_seconds("lease_ttl", lease_ttl)
    interval = (
        ttl / 3 if renew_interval is None else _check_seconds("renew_interval", renew_interval)
    )
    if interval >= ttl:
        raise ValueError(
            f"open_durable_run: renew_interval ({interval:g}) must be below lease_ttl ({ttl:g})"
        )
    for name, fn in (
        ("resumability", resumability),
        ("uses_idempotency_key", uses_idempotency_key),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(f"open_durable_run: {name} must be callable or None, got {fn!r}")
    claimed_here = lease is None
    if lease is None:
        lease = await _claim(store, run_id, owner, ttl)
    elif lease.run_id != run_id:
        raise ValueError(f"open_durable_run: the lease is on {lease.run_id!r}, not {run_id!r}")
    loaded: StoredRun | None = None
    try:
        loaded = await store.load(run_id)
        healed = _heal_for_resume(loaded, run_id)
    except BaseException:
        if claimed_here:
            # Claimed here and not handed out: give the lease back, so the run does
            # not sit leased to a worker that refused it until the lease expires.
            # Its status stays what it was; nothing else is written.
            status: RunStatus = "running" if loaded is None else loaded.record.status
            await _give_back(store, lease, status)
        raise
    run = DurableRun(
        store=store,
        lease=lease,
        loaded=loaded,
        resumability=_non_repeatable if resumability is None else resumability,
        uses_idempotency_key=_never if uses_idempotency_key is None else uses_idempotency_key,
        state=LoopState(messages=healed.messages),
        heal_changes=healed.changes,
    )

    async def write(progress: object) -> None:
        await run.renew(progress, ttl=ttl)

    body_error: BaseException | None = None
    try:
        async with (
            open_coalesced_heartbeat(write, interval=interval, flush_timeout=0) as heartbeat,
            anyio.create_task_group() as tg,
        ):

            async def tick() -> None:
                # Renew once a renew_interval of the lease has been used up, read in
                # the store's clock (the one lease times are in), so a lease is
                # renewed as time really passes, however the event loop's runs.
                while True:
                    await anyio.sleep(interval)
                    if run.lease.expires_at - store.now() <= ttl - interval:
                        heartbeat.beat({"iteration": run.iteration})

            tg.start_soon(tick)
            try:
                yield run
            except BaseException as exc:  # re-raised below, not inside the task group
                body_error = exc
            tg.cancel_scope.cancel()
    except BaseException as exc:
        await _release_on_exit(store, run, exc, worker=worker)
        raise
    if body_error is not None:
        await _release_on_exit(store, run, body_error, worker=worker)
        raise body_error
    await _release_on_exit(store, run, None, worker=worker)
