"""Approvals across processes: the run waits with no process alive, and a SIGKILL while the
approved call runs never makes it run twice. Real processes, real kills, both stores."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import anyio
import pytest

from juno_bind_trio.store import WORKER_STOPPED_TOOL_CALL_MESSAGE

from .durable_world import check_history, provider_accepts
from .test_kill import LINE_TIMEOUT, database, effects, open_store, read_line, start

WORKER = str(Path(__file__).with_name("approval_worker.py"))


def step(command: str, db: str, log: Path, backend: str = "asyncio") -> str:
    proc = start(command, db, "r1", str(log), script=WORKER, backend=backend)
    line = read_line(proc, "'finished'")
    _, err = proc.communicate(timeout=LINE_TIMEOUT)
    assert proc.returncode == 0, err
    return line.strip()


async def stored(db: str) -> tuple[str, list[dict[str, object]], list[str]]:
    async with open_store(db) as store:
        loaded = await store.load("r1")
        waiting = [c.id for c in await store.pending_calls("r1")]
        return loaded.record.status, loaded.messages, waiting


@pytest.mark.parametrize(("kind", "loop"), [("sqlite", "trio"), ("postgres", "asyncio")])
def test_approved_in_another_process_after_the_first_exited(
    kind: str, loop: str, tmp_path: Path
) -> None:
    db = database(kind, tmp_path)
    log = tmp_path / "effects.txt"
    assert step("start", db, log, loop) == "finished suspended c1,c3"
    status, _, waiting = anyio.run(stored, db)
    assert (status, waiting) == ("suspended", ["c1", "c3"])  # no process holds it
    assert step("approve", db, log, loop) == "finished completed -"
    status, messages, waiting = anyio.run(stored, db)
    assert (status, waiting) == ("completed", [])
    seen = effects(log)
    assert seen["r1", "c1", "refund"] == 1
    assert seen["r1", "c2", "lookup"] == 1
    answers = {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
    assert answers == {"c1": "refunded 500", "c2": "order 17", "c3": "tue"}
    check_history(messages)
    anyio.run(provider_accepts, messages)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_sigkill_while_the_approved_call_runs_never_runs_it_twice(
    kind: str, tmp_path: Path
) -> None:
    db = database(kind, tmp_path)
    log = tmp_path / "effects.txt"
    assert step("start", db, log) == "finished suspended c1,c3"
    worker = start("hang", db, "r1", str(log), script=WORKER)
    deadline = time.monotonic() + LINE_TIMEOUT
    while ("r1", "c1", "refund") not in effects(log):  # the refund has had its effect
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the approved refund never started"
        time.sleep(0.02)
    worker.send_signal(signal.SIGKILL)
    worker.communicate()
    # A plain resume in a third process: the decisions held; the refund is not re-run.
    assert step("resume", db, log) == "finished completed -"
    status, messages, _ = anyio.run(stored, db)
    assert status == "completed"
    assert effects(log)["r1", "c1", "refund"] == 1
    answers = {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
    assert json.loads(str(answers["c1"])) == {
        "success": False,
        "kind": "interrupted",
        "error": WORKER_STOPPED_TOOL_CALL_MESSAGE,
    }
    assert answers["c3"] == "tue"
    check_history(messages)
    anyio.run(provider_accepts, messages)


@pytest.mark.parametrize(("kind", "loop"), [("sqlite", "asyncio"), ("postgres", "trio")])
def test_a_sigkill_during_a_conversations_approved_call_never_runs_it_twice(
    kind: str, loop: str, tmp_path: Path
) -> None:
    """``agent.run(conversation=..., approvals=...)`` resumes the conversation's waiting
    run durably: killed while the approved refund runs, a plain resume in a third process
    answers it interrupted, and the store says the run completed and waits for nothing."""
    db = database(kind, tmp_path)
    log = tmp_path / "effects.txt"
    assert step("talk", db, log, loop) == "finished suspended c1,c3"
    worker = start("talk-hang", db, "r1", str(log), script=WORKER, backend=loop)
    deadline = time.monotonic() + LINE_TIMEOUT
    while ("r1", "c1", "refund") not in effects(log):  # the refund ran in the stored run
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the approved refund never started"
        time.sleep(0.02)
    worker.send_signal(signal.SIGKILL)
    worker.communicate()
    assert step("resume", db, log, loop) == "finished completed -"
    status, messages, waiting = anyio.run(stored, db)
    assert (status, waiting) == ("completed", [])
    assert effects(log)["r1", "c1", "refund"] == 1
    answers = {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
    assert json.loads(str(answers["c1"]))["kind"] == "interrupted"
    assert answers["c3"] == "tue"
    check_history(messages)
    anyio.run(provider_accepts, messages)

    async def after(db: str) -> tuple[list[str], object, object]:
        async with open_store(db) as store:
            runs = [r.run_id for r in await store.list_runs()]
            return runs, await store.list_waiting(), await store.conversation_messages("t")

    runs, still_waiting, conversation = anyio.run(after, db)
    assert (runs, still_waiting) == (["r1"], [])  # one run, and nothing waits
    assert conversation == messages


@pytest.mark.parametrize(("kind", "loop"), [("sqlite", "trio"), ("postgres", "asyncio")])
def test_an_external_result_supplied_after_a_restart(kind: str, loop: str, tmp_path: Path) -> None:
    """The refund is approved in a second process (the run waits again, on the host's date
    alone); a third process, started after both exited, supplies the date."""
    db = database(kind, tmp_path)
    log = tmp_path / "effects.txt"
    assert step("start", db, log, loop) == "finished suspended c1,c3"
    assert step("refund-only", db, log, loop) == "finished suspended c3"
    status, _, waiting = anyio.run(stored, db)
    assert (status, waiting) == ("suspended", ["c3"])
    assert step("date-only", db, log, loop) == "finished completed -"
    status, messages, waiting = anyio.run(stored, db)
    assert (status, waiting) == ("completed", [])
    assert effects(log)["r1", "c1", "refund"] == 1
    answers = {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
    assert answers == {"c1": "refunded 500", "c2": "order 17", "c3": '{"day":"tue"}'}
    check_history(messages)
    anyio.run(provider_accepts, messages)
