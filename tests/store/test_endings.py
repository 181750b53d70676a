"""The store records how each run ended, and the CLI and the web view read it back.

A hard cancel of the run is ``"cancelled"`` (resumed only when asked for by
id); a stopped worker, an interrupt or a block left without ``finish`` hands
the run back (``"running"``, no lease, claimable at once); an exception is
``"failed"``, naming its type. ``RunRecord.detail`` says which, and a cancelled
run no longer lists as ``running ... lease -`` nor reads back as detached.
"""

from __future__ import annotations

import io
import os
from typing import Any

import anyio
import pytest

from juno_bind_trio import RunContext
from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import (
    DurableRun,
    RunStore,
    SqliteRunStore,
    open_durable_run,
    serve_runs,
)
from juno_bind_trio.store.__main__ import main
from juno_bind_trio.web import LiveRuns

from .durable_world import call
from .store_helpers import DSN_ENV

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]


class Interrupt(BaseException):
    """Stands for a KeyboardInterrupt: not an error of the run, not a cancel."""


def waiting_agent(store: RunStore, started: anyio.Event) -> Agent[None, str]:
    @tool
    async def wait(ctx: RunContext[None], n: int) -> str:
        """Wait for a long time."""
        started.set()
        await anyio.sleep(3600)
        return "waited"

    async def model(turn: ModelTurn) -> ModelTurnResult:
        if len(turn.messages) == 1:
            return ModelTurnResult(tool_calls=(call("c1", "wait", n=1),))
        return ModelTurnResult(content="done waiting")

    return Agent(model, tools=[wait], store=store)


async def cli_list(store: RunStore) -> list[str]:
    """``python -m juno_bind_trio.store DATABASE list``, in a thread (it runs its own loop)."""
    database = store.path if isinstance(store, SqliteRunStore) else os.environ[DSN_ENV]
    out = io.StringIO()
    code = await anyio.to_thread.run_sync(lambda: main([database, "list"], out=out))
    assert code == 0
    return out.getvalue().splitlines()


async def test_a_cancelled_agent_run_is_stored_as_cancelled(store: RunStore) -> None:
    started = anyio.Event()
    agent = waiting_agent(store, started)
    with anyio.CancelScope() as scope:

        async def cancel_once_started() -> None:
            await started.wait()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_started)
            await agent.run("go", run_id="r1")
    assert scope.cancelled_caught
    record = await store.get_run("r1")
    assert (record.status, record.lease_owner) == ("cancelled", None)
    assert record.detail == "cancelled: a hard cancel (or a deadline) ended the run"
    # The command line says so: not "running ... lease -".
    [line] = await cli_list(store)
    assert line.split("\t") == [
        "r1",
        "cancelled",
        "iteration 0",
        "lease -",
        "cancelled: a hard cancel (or a deadline) ended the run",
        "agent -",  # an agent with no name
    ]
    # No worker takes it as work; asked for by id, it resumes.
    assert await store.claim_next(owner="w9", ttl=30) is None

    async def answer(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="resumed")

    result = await Agent(answer, store=store).resume("r1")
    assert result.output == "resumed"
    record = await store.get_run("r1")
    assert (record.status, record.detail) == ("completed", None)


async def test_the_web_view_reads_a_cancelled_run_back_as_cancelled(store: RunStore) -> None:
    started = anyio.Event()
    runs = LiveRuns(waiting_agent(store, started), store=store)
    async with runs.running():
        live = runs.start("go", owner="ann")
        await started.wait()
        live.request_cancel()
        while not live.ended:
            await live.wait_for_more(live.last_event_id)
    assert live.reason == "cancelled"
    # After a restart: nothing in memory, the run read back from the store.
    again = LiveRuns(waiting_agent(store, anyio.Event()), store=store)
    async with again.running():
        found = await again.find(live.run_id)
    assert found is not None
    assert (found.status, found.reason) == ("ended", "cancelled")  # not "detached"
    assert found.snapshot()["stored"]["status"] == "cancelled"


async def test_a_stopped_worker_hands_its_run_back(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    holding = anyio.Event()

    async def handle(run: DurableRun) -> None:
        holding.set()
        await anyio.sleep(3600)

    with anyio.CancelScope() as worker:

        async def stop_the_worker() -> None:
            await holding.wait()
            worker.cancel()  # a deploy stops the worker, not the run

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_the_worker)
            await serve_runs(store, handle, owner="w1")
    record = await store.get_run("r1")
    assert (record.status, record.lease_owner) == ("running", None)
    assert record.detail == "handed back: its worker was stopped while it ran"
    [line] = await cli_list(store)
    assert line.endswith("\tlease -\thanded back: its worker was stopped while it ran\tagent -")
    lease = await store.claim_next(owner="w2", ttl=30)  # claimable at once
    assert lease is not None
    assert lease.run_id == "r1"


@pytest.mark.parametrize(
    ("raised", "status", "detail"),
    [
        (KeyError("the card number 4111"), "failed", "failed: KeyError was raised while it ran"),
        (Interrupt(), "running", "handed back: Interrupt stopped its worker"),
        (None, "running", "handed back: its worker left the run without an ending"),
    ],
)
async def test_how_a_block_left_without_finish_is_recorded(
    store: RunStore, raised: BaseException | None, status: str, detail: str
) -> None:
    await store.create_run("r1", messages=USER)
    caught: list[BaseException] = []
    try:
        async with open_durable_run(store, "r1", owner="w1"):
            if raised is not None:
                raise raised
    except (KeyError, Interrupt) as exc:
        caught.append(exc)
    assert caught == ([] if raised is None else [raised])  # out as itself
    record = await store.get_run("r1")
    assert (record.status, record.lease_owner, record.detail) == (status, None, detail)
    assert "4111" not in repr(record)  # an error's text is the log's, not the store's
    if status == "running":
        assert await store.claim_next(owner="w2", ttl=30) is not None


async def test_a_lease_that_ran_out_is_listed_as_such(store: RunStore, clock: Any) -> None:
    await store.create_run("r1", messages=USER)
    await store.claim_run("r1", owner="w1", ttl=30)
    clock.advance(31)  # w1 stopped renewing (the listing reads the real clock: far later)
    [line] = await cli_list(store)
    fields = line.split("\t")
    assert fields[:4] == ["r1", "running", "iteration 0", "lease w1 (expired)"]
    assert "stopped renewing the lease" in fields[4]
    # The worker that takes it over records from whom.
    await store.claim_next(owner="w2", ttl=30)
    record = await store.get_run("r1")
    assert record.detail is not None
    assert "'w1', whose lease had run out" in record.detail
