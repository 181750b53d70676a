"""The seam between an [Agent][juno_bind_trio.agent.Agent] and a run store.

``Agent(..., store=...)`` hands every run to [run_durably][], which claims it
in the store, wraps the run's loop ports with a
[DurableRun][juno_bind_trio.store.DurableRun], and answers a resumed run's
open turn before the loop starts. The agent's own code stays one ToolLoop
per run; this module only re-plugs its ports.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import attrs

from juno_bind_trio._errors import LeaseLostError
from juno_bind_trio.loop import LoopResult, RunStats
from juno_bind_trio.run import EffectResumability

from ._durable import open_durable_run
from ._owner import default_owner
from ._sqlite import SqliteRunStore
from ._store import RunStore

if TYPE_CHECKING:
    from juno_bind_trio.agent._run import _RunCore

__all__ = ["StoreSpec", "check_store", "default_owner", "run_durably"]

StoreSpec = str | os.PathLike[str] | RunStore
"""What ``Agent(store=...)`` takes: a SQLite file's path, or an open RunStore."""

DEFAULT_LEASE_TTL: Final = 30.0


def check_store(owner: str, store: object) -> StoreSpec | None:
    """Refuse, at construction, a ``store=`` that is not a path or a RunStore."""
    if store is None or isinstance(store, RunStore):
        return store
    if isinstance(store, str | os.PathLike) and os.fspath(store) != "":
        return store
    raise TypeError(f"{owner}: store must be a SQLite file path, a RunStore or None, got {store!r}")


@asynccontextmanager
async def _opened(store: StoreSpec) -> AsyncIterator[RunStore]:
    if isinstance(store, RunStore):
        yield store  # the host opened it and closes it
        return
    async with SqliteRunStore(store) as opened:
        yield opened


async def run_durably(
    core: _RunCore[Any], *, resume: bool, owner: str, lease_ttl: float
) -> LoopResult:
    """Run *core*'s loop on its store: a new run is created first; a resumed one is loaded,
    healed, and its open turn answered by receipt."""
    from juno_bind_trio.agent._run import _EitherStop

    store_spec = core.settings.store
    assert store_spec is not None
    tools = core.tools

    def resumability(name: str) -> EffectResumability:
        found = tools.get(name)
        return "repeatable" if found is not None and found.repeatable else "non_repeatable"

    def uses_key(name: str) -> bool:
        found = tools.get(name)
        return found is not None and found.uses_idempotency_key

    async with _opened(store_spec) as store:
        if not resume:
            await store.create_run(
                core.run_id,
                messages=core.state.messages,
                chain=core.chain,
                agent=core.settings.name,
            )
        async with open_durable_run(
            store,
            core.run_id,
            owner=owner,
            lease_ttl=lease_ttl,
            resumability=resumability,
            uses_idempotency_key=uses_key,
        ) as run:
            core.state = run.state
            core.chain = run.chain
            if resume:  # new_messages: what this resume adds after the loaded transcript
                core.new_start = len(run.state.messages)
            if run.answered:  # it had ended; a crash lost only its status
                await run.finish("completed")
                _check_kept(run.lost, core.run_id, owner)
                last = run.state.messages[-1].get("content")
                return LoopResult(
                    reason="completed",
                    iterations=0,
                    stats=RunStats(),
                    content=last if isinstance(last, str) else None,
                )
            # RunContext.iteration is the run's own count, as the store records it:
            # the open turn's calls belong to its iteration, and the loop's turns
            # continue after the iterations the stored run already had.
            open_turn = run.open_turn_iteration
            if open_turn is not None:
                core.iteration = open_turn
            serial = any(t.serial for t in tools.values())
            await run.finish_open_turn(
                core.dispatch,
                per_tool_limit=core.settings.per_tool_limit,
                runs_serially=core.runs_serially if serial else None,
            )
            core.iteration_base = run.iteration
            loop = core.build_loop()
            loop = core.loop = attrs.evolve(
                loop,
                call_model=run.wrap_call_model(core.call_model),
                run_tool_call=run.wrap_tool_call(core.dispatch),
                save_session=run.save_session,
                stop=_EitherStop(core.stop, run.stop),
            )
            result = await loop.run()
            await run.finish(result.reason)
        _check_kept(run.lost, core.run_id, owner)
    return result


def _check_kept(lost: bool, run_id: str, owner: str) -> None:
    """Raise LeaseLostError for a run whose lease was lost: what it did after that
    (an answer, a finished batch) was not saved, so it must not look finished."""
    if lost:
        raise LeaseLostError(
            f"run {run_id!r}: this worker ({owner!r}) lost the run's lease before its work "
            "was saved; the store holds it as of its last saved iteration, not finished. "
            f"Resume it (await agent.resume({run_id!r})): calls that finished are answered "
            "from their receipts, not run again",
            run_id,
        )
