"""A durable run with compaction, SIGKILLed after a compaction, resumes from the compacted history.

The first process summarizes turns 1 and 2, saves the compacted transcript,
and is killed in the next turn's tool call. A new process resumes: the
stored transcript is the compacted one, the resumed requests read the
summary and never the summarized turns, the only summary the second process
asks for covers the turns after it (folding the first summary in), and every
request's history, and the final transcript through the real SDK, is one the
validating fake server accepts.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import anyio
import pytest

from .durable_world import check_history, provider_accepts
from .test_kill import LINE_TIMEOUT, database, read_line, start, stored_run

WORKER = str(Path(__file__).with_name("compaction_worker.py"))
SUMMARY = "Summary of the earlier conversation:\n"


def lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(("kind", "worker_loop"), [("sqlite", "trio"), ("postgres", "asyncio")])
def test_a_run_killed_after_a_compaction_resumes_from_the_summary(
    kind: str, worker_loop: str, tmp_path: Path
) -> None:
    db = database(kind, tmp_path)
    run_id = f"compaction-{worker_loop}"
    effects, turns = tmp_path / "effects.txt", tmp_path / "turns.txt"
    args = (db, run_id, str(effects), str(turns))
    first = start(*args, "yes", script=WORKER, backend=worker_loop)
    deadline = time.monotonic() + LINE_TIMEOUT
    while not any(line[:2] == ["c4", "step"] for line in lines(effects)):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the worker never reached call c4"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()

    # What the store keeps is the compacted history: the summary of c1 and c2 in
    # their place, after the instructions; turn 3 as it was.
    held, kept = anyio.run(stored_run, db, run_id)
    assert held.status == "running"
    assert kept[0] == {"role": "system", "content": "You take steps."}
    assert kept[1] == {"role": "system", "content": SUMMARY + "c1,c2"}
    assert [m.get("tool_call_id") for m in kept if m["role"] == "tool"] == ["c3"]
    check_history(kept)

    second = start(*args, "no", script=WORKER, backend=worker_loop)
    printed = json.loads(read_line(second, "result"))
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert printed == {"output": "done", "compactions": 1}  # the resumed run's own

    by_pid = {str(first.pid): "first", str(second.pid): "second"}
    requests = [
        (kind_, turn_id, by_pid[pid], ids, folded)
        for kind_, turn_id, pid, ids, folded in lines(turns)
    ]
    summaries = [r for r in requests if r[0] == "summary"]
    # One summary per process; the second covers only the turns after the first
    # summary, reading it; c1 and c2 are never summarized again.
    assert [(who, ids, folded) for _, _, who, ids, folded in summaries] == [
        ("first", "c1,c2", "-"),
        ("second", "c3,c4", "c1,c2"),
    ]
    assert [turn_id for _, turn_id, *_ in summaries] == [
        f"{run_id}:3:compaction",
        f"{run_id}:5:compaction",
    ]
    # Every request of the second process reads a summary, never c1 or c2 themselves.
    resumed = [r for r in requests if r[2] == "second" and r[0] == "model"]
    assert [turn_id for _, turn_id, *_ in resumed] == [f"{run_id}:{n}" for n in (5, 6, 7)]
    for _, _, _, ids, folded in resumed:
        assert folded != "-"
        assert not {"c1", "c2"} & set(ids.split(","))
    # c4 was cut off by the kill and ran again (a repeatable tool); nothing else twice.
    ran = [line[0] for line in lines(effects)]
    assert ran == ["c1", "c2", "c3", "c4", "c4", "c5", "c6"]

    record, messages = anyio.run(stored_run, db, run_id)
    assert record.status == "completed"
    check_history(messages)
    assert messages[0] == {"role": "system", "content": "You take steps."}
    assert [m["content"] for m in messages if m["role"] == "system"][1:] == [
        SUMMARY + "c3,c4+c1,c2"
    ]
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["c5", "c6"]
    assert messages[-1] == {"role": "assistant", "content": "done"}
    anyio.run(provider_accepts, messages, kept)
