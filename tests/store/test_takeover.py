"""A lease whose holder is known to be dead is taken over at once; any other is waited out.

"Known dead": the owner is of the default ``host:pid:machine`` shape, names
this machine, and its pid runs no process (or only a zombie). The processes
here are real (a child that exited and was reaped, one still running, one
killed and not yet reaped); the store tests run on both stores and backends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from juno_bind_trio.agent import Agent
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.store import LeaseLostError, RunLeasedError, RunStore, open_durable_run
from juno_bind_trio.store._owner import _machine, default_owner, holder_is_gone

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hi"}]


async def never(turn: ModelTurn) -> ModelTurnResult:
    raise AssertionError("the model of a run another process holds is never asked")


def owner_of(pid: int, *, host: str | None = None, machine: str | None = None) -> str:
    return f"{host or socket.gethostname()}:{pid}:{machine or _machine()}"


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that ran and was reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait(timeout=60)


def test_the_default_owner_names_this_process_on_this_machine() -> None:
    host, pid, machine = default_owner().rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert len(machine) == 8
    assert int(machine, 16) >= 0


def test_only_a_process_of_this_machine_that_is_gone_is_known_dead(
    dead_pid: int, live_pid: int
) -> None:
    assert holder_is_gone(owner_of(dead_pid))
    assert not holder_is_gone(owner_of(live_pid))
    assert not holder_is_gone(default_owner())  # this very process
    assert not holder_is_gone(owner_of(dead_pid, host="another-host"))
    assert not holder_is_gone(owner_of(dead_pid, machine="0badf00d"))  # another boot or pid ns
    for name in ("worker-7", "w1", "", ":::", f"{socket.gethostname()}:{dead_pid}"):
        assert not holder_is_gone(name), name
    for pid in ("0", "-1", "0012", "x", str(2**80)):
        assert not holder_is_gone(f"{socket.gethostname()}:{pid}:{_machine()}"), pid


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_a_killed_process_not_yet_reaped_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 60
        while holder_is_gone(owner_of(child.pid)) is False:  # until it is a zombie
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        assert os.path.exists(f"/proc/{child.pid}")  # not reaped: still in the table
    finally:
        child.wait(timeout=60)


async def test_claim_run_takes_over_only_the_lease_it_names(store: RunStore) -> None:
    await store.create_run("r1", messages=USER)
    held = await store.claim_run("r1", owner="old-worker", ttl=600)
    with pytest.raises(RunLeasedError, match="'old-worker'"):
        await store.claim_run("r1", owner="w2", ttl=30)
    with pytest.raises(RunLeasedError):  # naming another holder takes nothing
        await store.claim_run("r1", owner="w2", ttl=30, take_over="someone-else")
    lease = await store.claim_run("r1", owner="w2", ttl=30, take_over="old-worker")
    assert lease.token == held.token + 1
    record = await store.get_run("r1")
    assert (record.lease_owner, record.lease_token) == ("w2", held.token + 1)
    assert record.detail is not None
    assert "'old-worker'" in record.detail
    assert "no longer running" in record.detail
    # The old holder, had it lived, is fenced off: every write of its refused.
    with pytest.raises(LeaseLostError):
        await store.save_transcript(held, USER, iteration=1)
    with pytest.raises(ValueError, match="claim_run: take_over"):
        await store.claim_run("r1", owner="w2", ttl=30, take_over="")


async def test_a_run_held_by_a_dead_process_of_this_machine_resumes_at_once(
    store: RunStore, dead_pid: int
) -> None:
    await store.create_run("r1", messages=USER)
    gone = owner_of(dead_pid)
    await store.claim_run("r1", owner=gone, ttl=600)  # then that process was killed

    async def model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="done")

    result = await Agent(model, store=store).resume("r1")  # this process's default owner
    assert result.output == "done"
    assert (await store.get_run("r1")).status == "completed"


async def test_the_takeover_is_recorded_while_the_run_is_held(
    store: RunStore, dead_pid: int
) -> None:
    await store.create_run("r1", messages=USER)
    gone = owner_of(dead_pid)
    await store.claim_run("r1", owner=gone, ttl=600)
    async with open_durable_run(store, "r1", owner=default_owner()) as run:
        record = await store.get_run("r1")
        assert record.lease_owner == default_owner()
        assert record.detail is not None
        assert repr(gone) in record.detail
        await run.finish("stopped")


async def test_a_run_held_by_a_live_process_is_waited_out(store: RunStore, live_pid: int) -> None:
    await store.create_run("r1", messages=USER)
    alive = owner_of(live_pid)
    await store.claim_run("r1", owner=alive, ttl=600)
    with pytest.raises(RunLeasedError, match=f"'{alive}'"):
        async with open_durable_run(store, "r1", owner=default_owner()):
            raise AssertionError("a live holder's run must not be handed out")
    for name in ("worker-7", owner_of(live_pid, host="another-host")):
        await store.create_run(f"held-by-{name}", messages=USER)
        await store.claim_run(f"held-by-{name}", owner=name, ttl=600)
        with pytest.raises(RunLeasedError):
            await Agent(never, store=store).resume(f"held-by-{name}")
    assert (await store.get_run("r1")).lease_owner == alive
