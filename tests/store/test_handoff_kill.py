"""A durable run SIGKILLed around a handoff resumes under the agent in charge (#32).

Real processes and real kills, at three points: inside the handoff's own batch
(the transfer answered, the switch not yet made), in the target's first model
call (the switch made and saved), and in the target's non-repeatable tool. A
new process resumes with the first agent, which knows its handoff graph by
name; the run must finish under billing, billing's model reading billing's
instructions and offered billing's tools, no effect repeated, and the final
transcript accepted by the validating fake server through the real SDK.
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

WORKER = str(Path(__file__).with_name("handoff_worker.py"))


def lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]


# Where the first process is killed, and the line that says it got there.
POINTS = {
    "batch": ("effects", ["l1", "look"]),
    "model": ("turns", ["billing"]),
    "tool": ("effects", ["s2", "send"]),
}


@pytest.mark.parametrize(
    ("kind", "point", "worker_loop"),
    [
        ("sqlite", "batch", "trio"),
        ("sqlite", "model", "asyncio"),
        ("sqlite", "tool", "trio"),
        ("postgres", "batch", "asyncio"),
    ],
)
def test_a_run_killed_around_a_handoff_resumes_under_the_agent_in_charge(
    kind: str, point: str, worker_loop: str, tmp_path: Path
) -> None:
    db = database(kind, tmp_path)
    run_id = f"handoff-{point}-{worker_loop}"
    effects, turns = tmp_path / "effects.txt", tmp_path / "turns.txt"
    files = {"effects": effects, "turns": turns}
    args = (db, run_id, str(effects), str(turns))
    first = start(*args, point, script=WORKER, backend=worker_loop)
    which, prefix = POINTS[point]
    deadline = time.monotonic() + LINE_TIMEOUT
    while not any(line[: len(prefix)] == prefix for line in lines(files[which])):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, f"the worker never reached {point}"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    held, _ = anyio.run(stored_run, db, run_id)
    assert held.status == "running"

    second = start(*args, "none", script=WORKER, backend=worker_loop)
    printed = json.loads(read_line(second, "result"))
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert printed == {"output": "billing done", "agent": "billing"}

    record, messages = anyio.run(stored_run, db, run_id)
    assert record.status == "completed"
    check_history(messages)
    assert messages[0] == {"role": "system", "content": "You handle refunds."}
    assert sum(m["role"] == "system" for m in messages) == 1
    handoffs = [m for m in messages if m.get("tool_call_id") == "h1"]
    assert [json.loads(m["content"]) for m in handoffs] == [
        {"transferred_to": "billing", "transferred_from": "triage", "in_charge": True}
    ]
    # Triage spoke once, in the killed process; everything after is billing's.
    spoken = lines(turns)
    assert spoken[0][0] == "triage"
    assert [agent for agent, *_ in spoken[1:]] == ["billing"] * (len(spoken) - 1)
    resumed = [agent for agent, _, pid in spoken if pid == str(second.pid)]
    assert resumed
    assert set(resumed) == {"billing"}
    # No non-repeatable effect twice; the send a kill cut off is answered interrupted.
    sends = [line for line in lines(effects) if line[1] == "send"]
    assert len(sends) <= 1
    if point == "tool":
        answer = next(m for m in messages if m.get("tool_call_id") == "s2")
        assert json.loads(answer["content"])["kind"] == "interrupted"
    anyio.run(provider_accepts, messages)
