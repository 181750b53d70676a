"""A worker: claim runnable runs one after another, run each under its lease."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import suppress

import anyio

from juno_bind_trio._errors import StoreDataError
from juno_bind_trio._validate import error_kind
from juno_bind_trio.run import EffectResumability

from ._durable import DurableRun
from ._lease import _open_durable_run
from ._protocol import RunStore
from ._records import DEFAULT_LEASE_TTL

__all__ = ["serve_runs"]

_log = logging.getLogger("juno_bind_trio.store")


def _seconds(what: str, value: object) -> float:
    message = f"serve_runs: {what} must be a positive finite number of seconds, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(message)
    if not 0 < value < math.inf:
        raise ValueError(message)
    return float(value)


async def serve_runs(
    store: RunStore,
    handle: Callable[[DurableRun], Awaitable[object]],
    *,
    owner: str,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    poll_interval: float = 1.0,
    resumability: Callable[[str], EffectResumability] | None = None,
    uses_idempotency_key: Callable[[str], bool] | None = None,
    stop_when_idle: bool = False,
) -> int:
    """Claim runnable runs from *store* and ``await handle(run)`` for each, one at a time.

    A runnable run is a new one (``"pending"``) or one whose worker's lease
    expired (``"running"``: that worker died), oldest first; PostgreSQL hands
    each to exactly one worker (``FOR UPDATE SKIP LOCKED``). *handle* gets
    the [DurableRun][juno_bind_trio.store.DurableRun] (its open turn not yet
    answered: call ``finish_open_turn`` first) and ends it with
    ``await run.finish(...)``. Run several ``serve_runs`` in one process, or
    one in each of many, for more at once.

    With nothing to claim it waits *poll_interval* seconds and asks again, or
    returns when *stop_when_idle*. An exception from *handle* is logged and
    the run recorded ``"failed"``. A run whose stored data cannot be read
    (any column of its row, its transcript, a receipt) is recorded
    ``"failed"``, its data otherwise left as it is, with the run and what
    could not be read named in the log and in its
    [detail][juno_bind_trio.store.RunRecord]; the worker goes on with the
    next run. Cancel the scope around it to stop the worker: the run in hand
    is handed back (``"running"``, no lease), claimable at once by another.
    Returns how many runs it took in hand.
    """
    given: object = store
    if not isinstance(given, RunStore):
        raise TypeError(f"serve_runs: store must be a RunStore, got {store!r}")
    if not callable(handle):
        raise TypeError(f"serve_runs: handle must be an async callable, got {handle!r}")
    given_owner: object = owner
    if not isinstance(given_owner, str) or not given_owner:
        raise error_kind(given_owner, str)(
            f"serve_runs: owner must be a non-empty string, got {owner!r}"
        )
    for name, fn in (
        ("resumability", resumability),
        ("uses_idempotency_key", uses_idempotency_key),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(f"serve_runs: {name} must be callable or None, got {fn!r}")
    if not isinstance(stop_when_idle, bool):
        raise TypeError(f"serve_runs: stop_when_idle must be a bool, got {stop_when_idle!r}")
    ttl = _seconds("lease_ttl", lease_ttl)
    interval = _seconds("poll_interval", poll_interval)
    handled = 0
    while True:
        lease = await store.claim_next(owner=owner, ttl=ttl)
        if lease is None:
            if stop_when_idle:
                return handled
            await anyio.sleep(interval)
            continue
        try:
            async with _open_durable_run(
                store,
                lease.run_id,
                owner=owner,
                lease_ttl=ttl,
                renew_interval=None,
                lease=lease,
                resumability=resumability,
                uses_idempotency_key=uses_idempotency_key,
                worker=True,  # a cancel stops this worker: the run in hand is handed back
            ) as run:
                await handle(run)
        except StoreDataError as exc:
            _log.error("run %r cannot be read, recorded as failed: %s", lease.run_id, exc)
            with anyio.CancelScope(shield=True), suppress(Exception):
                await store.release(lease, status="failed", detail=f"failed: {exc}")
        except Exception:
            _log.exception("run %r failed", lease.run_id)
        handled += 1
