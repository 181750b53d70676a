"""Worker processes killed with SIGKILL at random points; another process resumes.

Real processes, a real SQLite file or PostgreSQL server, real kills: what
can only be shown by stopping a process where no handler runs. The kill
times are random (seeded, printed on failure), so these tests wait on the
wall clock by nature; they stay small in the default run. ``nox -s
soak_store`` runs the issue's sizes: 50 killed runs per store, and 8 workers
draining 500 runs on PostgreSQL while a tenth of them are killed
(``JUNO_STORE_SOAK=1``).
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from juno_bind_trio.store import (
    WORKER_STOPPED_TOOL_CALL_MESSAGE,
    PostgresRunStore,
    RunStore,
    SqliteRunStore,
)
from script_runner import STORE_PREIMPORT, ScriptProcess, start_script

from .durable_world import check_history, provider_accepts
from .store_helpers import postgres_dsn

WORKER = str(Path(__file__).with_name("kill_worker.py"))
SOAK = os.environ.get("JUNO_STORE_SOAK") == "1"
KILLED_RUNS = 50 if SOAK else 4
MANY = (8, 500, 50) if SOAK else (3, 24, 3)  # workers, runs, kills
SEED = int(os.environ.get("JUNO_STORE_SEED", "20261130"))
SENDS = {"a", "c", "d"}  # the script's non-repeatable calls
# Real seconds a worker gets to print its next line; a loaded CI machine needs a
# few. Past it the worker is killed and the test fails, rather than hanging the run.
LINE_TIMEOUT = 120.0


def database(kind: str, tmp_path: Path) -> str:
    return str(tmp_path / "runs.db") if kind == "sqlite" else postgres_dsn()


def open_store(db: str) -> RunStore:
    return PostgresRunStore(db) if db.startswith("postgresql://") else SqliteRunStore(db)


def read_line(proc: ScriptProcess, what: str, timeout: float = LINE_TIMEOUT) -> str:
    """The worker's next line on stdout; the test fails if none comes within *timeout*
    seconds of real time (the worker is killed, and its stderr shown)."""
    stdout = proc.stdout
    assert stdout is not None

    async def read() -> tuple[str, bool]:
        timed_out = False
        async with anyio.create_task_group() as tg:

            async def watchdog() -> None:
                nonlocal timed_out
                await anyio.sleep(timeout)
                timed_out = True
                proc.kill()  # which ends the read below with end of file

            tg.start_soon(watchdog)
            line = await anyio.to_thread.run_sync(stdout.readline)
            tg.cancel_scope.cancel()
        return line, timed_out

    line, timed_out = anyio.run(read)
    if timed_out:
        _, err = proc.communicate()
        pytest.fail(f"the worker printed no {what} line within {timeout:g} s; stderr: {err!r}")
    return line


def start(
    *args: str, script: str = WORKER, timeout: float = LINE_TIMEOUT, backend: str = "asyncio"
) -> ScriptProcess:
    proc = start_script(
        script,
        *args,
        cwd=Path.cwd(),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "JUNO_WORKER_BACKEND": backend,
        },
        preimport=STORE_PREIMPORT,
    )
    line = read_line(proc, "'ready'", timeout)
    if line.strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"worker did not start: {line!r} {err!r}")
    return proc


def finish(proc: ScriptProcess) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err


def effects(path: Path) -> collections.Counter[tuple[str, str, str]]:
    if not path.exists():
        return collections.Counter()
    return collections.Counter(
        tuple(line.split()[:3])  # type: ignore[misc]
        for line in path.read_text(encoding="utf-8").splitlines()
    )


async def create_runs(db: str, run_ids: list[str]) -> None:
    async with open_store(db) as store:
        for run_id in run_ids:
            await store.create_run(run_id, messages=[{"role": "user", "content": "go"}])


async def status_of(db: str, run_id: str) -> str:
    async with open_store(db) as store:
        return (await store.get_run(run_id)).status


async def finished_calls(db: str, run_id: str) -> set[str]:
    async with open_store(db) as store:
        return {r.tool_call_id for r in await store.receipts(run_id) if r.state == "succeeded"}


async def final_state(db: str) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    async with open_store(db) as store:
        out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        for record in await store.list_runs(limit=10_000):
            out[record.run_id] = (record.status, (await store.load(record.run_id)).messages)
        return out


def test_a_worker_that_prints_nothing_fails_the_test_instead_of_hanging(tmp_path: Path) -> None:
    # Silent for 30 s, then gone: unbounded, the read would wait all of that and
    # then see end of file; bounded, the test fails after 1 s with the worker killed.
    silent = tmp_path / "silent_worker.py"
    silent.write_text(
        "import sys, time\nprint('starting', file=sys.stderr, flush=True)\ntime.sleep(30)\n",
        encoding="utf-8",
    )
    with pytest.raises(pytest.fail.Exception, match=r"no 'ready' line within 1 s.*starting"):
        start(script=str(silent), timeout=1.0)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_worker_killed_anywhere_is_resumed_with_no_effect_twice(
    kind: str, tmp_path: Path
) -> None:
    db = database(kind, tmp_path)
    rng = random.Random(SEED)
    log = tmp_path / "effects.txt"
    run_ids = [f"r{i}" for i in range(KILLED_RUNS)]
    anyio.run(create_runs, db, [*run_ids, "calibration"])
    # How long one run takes on this machine now: kills land within that span.
    calibration = start("run", db, "calibration", "w0", str(tmp_path / "calibration.txt"))
    began = time.monotonic()
    assert read_line(calibration, "'finished'").strip() == "finished"  # the run, not the exit
    span = time.monotonic() - began
    finish(calibration)
    cut_short = 0
    for run_id in run_ids:
        first = start("run", db, run_id, "w1", str(log))
        time.sleep(rng.uniform(0.0, span))  # a random point: model call, batch, save, ...
        first.send_signal(signal.SIGKILL)
        first.communicate()
        if anyio.run(status_of, db, run_id) != "completed":
            cut_short += 1
        done_before = anyio.run(finished_calls, db, run_id)
        seen_before = effects(log)
        # A second process, the same worker restarted, resumes the run.
        finish(start("run", db, run_id, "w1", str(log)))
        seen = effects(log)
        for call_id in done_before:  # no finished call ran again
            tool = "send" if call_id in SENDS else "look"
            assert seen[run_id, call_id, tool] == seen_before[run_id, call_id, tool], (
                f"seed {SEED}: {run_id}/{call_id} finished before the kill and ran again"
            )
    final = anyio.run(final_state, db)
    seen = effects(log)
    for run_id in run_ids:  # the calibration run is not counted
        status, messages = final[run_id]
        assert status == "completed", f"seed {SEED}: {run_id} ended {status}"
        check_history(messages)
        for call_id in SENDS:  # every non-repeatable effect at most once
            assert seen[run_id, call_id, "send"] <= 1, f"seed {SEED}: {run_id}/{call_id} twice"
    # Each final transcript is what the run would send next: a validating server takes it.
    anyio.run(provider_accepts, *(final[run_id][1] for run_id in run_ids))
    # Kills must land mid-run, or this tests nothing; some may come after the end.
    assert cut_short >= (len(run_ids) // 2 if SOAK else 1), (
        f"seed {SEED}: only {cut_short} kills landed mid-run"
    )
    print(f"\n{kind}: {cut_short} of {len(run_ids)} kills landed mid-run")


def test_many_workers_drain_the_runs_while_some_are_killed(tmp_path: Path) -> None:
    workers, runs, kills = MANY
    db = postgres_dsn()
    rng = random.Random(SEED)
    log, done = tmp_path / "effects.txt", tmp_path / "done.txt"
    run_ids = [f"m{i:04d}" for i in range(runs)]
    anyio.run(create_runs, db, run_ids)
    started = time.monotonic()
    generation = 0

    def spawn(index: int) -> ScriptProcess:
        nonlocal generation
        generation += 1
        return start("drain", db, f"w{index}-{generation}", str(log), str(done), "2")

    live = [spawn(i) for i in range(workers)]
    for _ in range(kills):
        time.sleep(rng.uniform(0.05, 0.4))
        index = rng.randrange(workers)
        live[index].send_signal(signal.SIGKILL)
        live[index].communicate()
        live[index] = spawn(index)  # a new worker takes the dead one's place
    for proc in live:
        finish(proc)
    elapsed = time.monotonic() - started
    final = anyio.run(final_state, db)
    assert len(final) == runs
    unfinished = [r for r, (status, _) in final.items() if status != "completed"]
    assert unfinished == [], f"seed {SEED}"
    completions = collections.Counter(line.split()[0] for line in done.read_text().splitlines())
    assert max(completions.values()) == 1, f"seed {SEED}: a run completed twice"
    seen = effects(log)
    twice = [key for key, count in seen.items() if key[2] == "send" and count > 1]
    assert twice == [], f"seed {SEED}: non-repeatable effects repeated: {twice[:5]}"
    for _, messages in final.values():
        check_history(messages)
    anyio.run(provider_accepts, *(messages for _, messages in final.values()))
    print(f"\n{runs} runs, {workers} workers, {kills} kills: {runs / elapsed:.1f} runs/s")


async def stored_run(db: str, run_id: str) -> tuple[Any, list[dict[str, Any]]]:
    async with open_store(db) as store:
        loaded = await store.load(run_id)
        return loaded.record, loaded.messages


# Each store, and each backend the worker processes run on (a pair each, to keep it small).
@pytest.mark.parametrize(("kind", "worker_loop"), [("sqlite", "trio"), ("postgres", "asyncio")])
def test_a_restarted_process_resumes_at_once_after_a_sigkill(
    kind: str, worker_loop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first process holds the run under its default owner (host:pid:machine)
    # with a ten-minute lease, and is killed while its first call is in flight.
    db = database(kind, tmp_path)
    log = tmp_path / "effects.txt"
    turns = tmp_path / "turns.txt"
    monkeypatch.setenv("JUNO_TURN_LOG", str(turns))
    anyio.run(create_runs, db, ["r1"])
    first = start("hang", db, "r1", str(log), backend=worker_loop)
    deadline = time.monotonic() + LINE_TIMEOUT
    while ("r1", "a", "send") not in effects(log):  # the call has made its effect
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first send never started"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    held, _ = anyio.run(stored_run, db, "r1")
    assert held.status == "running"
    assert held.lease_owner is not None
    assert held.lease_owner.split(":")[1] == str(first.pid)
    assert held.lease_expires_at - time.time() > 500  # the lease would hold it for minutes
    # A new process, another pid on this machine, resumes it now: the holder is gone.
    began = time.monotonic()
    finish(start("run", db, "r1", "default", str(log), backend=worker_loop))
    assert time.monotonic() - began < 100  # well inside the lease it no longer waits out
    record, messages = anyio.run(stored_run, db, "r1")
    assert record.status == "completed"
    check_history(messages)
    seen = effects(log)
    assert seen["r1", "a", "send"] == 1  # the in-flight send was not sent again
    answer = next(m for m in messages if m.get("tool_call_id") == "a")
    # What happened, said as it happened: the worker stopped; nothing was cancelled.
    assert json.loads(answer["content"]) == {
        "success": False,
        "kind": "interrupted",
        "error": WORKER_STOPPED_TOOL_CALL_MESSAGE,
    }
    # One run, two processes, one count: the resumed process numbers its turns after
    # the turn the killed one left open, so no turn id of the run is used twice.
    answered = [line.split() for line in turns.read_text(encoding="utf-8").splitlines()]
    assert [(turn_id, int(n)) for turn_id, n, _ in answered] == [
        ("r1:1", 1),  # the killed process: its turn 1 asked for the send it died in
        ("r1:2", 2),  # the resumed process continues at the run's iteration 2
        ("r1:3", 3),
    ]
    assert {pid for _, _, pid in answered[1:]} != {answered[0][2]}
