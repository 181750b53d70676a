"""Reader scenarios shared by the Python view and the shipped JavaScript client.

A scenario is a list of steps over one run's wire events (``apply`` one event,
``finalize`` a turn with or without the persisted text, ``resync`` a turn from
the persisted text). :func:`expected` runs it through Python's
[TurnTextView][juno_bind_trio.completion.TurnTextView], one view per turn,
created on the turn's first event, and records after every step what a reader
holds. ``tests/web/js/replay.mjs`` records the same for the JavaScript client;
the two must agree step for step.

``python tests/web/turn_scenarios.py`` rewrites ``js/scenarios.json``, the
seed's cases with Python's expectations, which ``node --test`` checks on its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from juno_bind_trio.completion import TurnTextView, event_from_wire

FIXTURE = Path(__file__).resolve().parent / "js" / "scenarios.json"

Step = dict[str, Any]


def text(turn: str, epoch: int, seq: int, value: str) -> Step:
    event = {"kind": "text", "turnId": turn, "epoch": epoch, "seq": seq, "text": value}
    return {"op": "apply", "event": event}


def reset(turn: str, epoch: int, seq: int, reason: str = "attempt_failed") -> Step:
    event = {"kind": "reset", "turnId": turn, "epoch": epoch, "seq": seq, "reason": reason}
    return {"op": "apply", "event": event}


def finalize(turn: str, value: str | None = None) -> Step:
    return {"op": "finalize", "turnId": turn, "text": value}


def resync(turn: str, value: str) -> Step:
    return {"op": "resync", "turnId": turn, "text": value}


def expected(max_held: int, steps: list[Step]) -> list[dict[str, Any]]:
    """What a reader holds after each step, per Python's TurnTextView."""
    views: dict[str, TurnTextView] = {}
    order: list[str] = []

    def view_of(turn: str) -> TurnTextView:
        if turn not in views:
            views[turn] = TurnTextView(turn, max_held=max_held)
            order.append(turn)
        return views[turn]

    out: list[dict[str, Any]] = []
    for step in steps:
        changed: bool | None = None
        if step["op"] == "apply":
            event = event_from_wire(step["event"])
            changed = view_of(event.turn_id).apply(event)
        elif step["op"] == "finalize":
            view_of(step["turnId"]).finalize(step["text"])
        elif step["op"] == "resync":
            view_of(step["turnId"]).resync(step["text"])
        else:  # pragma: no cover - a malformed scenario is a test bug
            raise ValueError(f"unknown step {step!r}")
        turns: list[dict[str, Any]] = []
        for turn in order:
            view = views[turn]
            if view.final:
                turns.append({"turnId": turn, "text": view.text, "final": True})
            else:
                turns.append(
                    {
                        "turnId": turn,
                        "text": view.text,
                        "final": False,
                        "epoch": view.epoch,
                        "lastSeq": view.last_seq,
                        "held": view.held,
                        "resyncNeeded": view.resync_needed,
                    }
                )
        out.append({"changed": changed, "turns": turns})
    return out


def scenario(name: str, max_held: int, steps: list[Step]) -> dict[str, Any]:
    return {"name": name, "maxHeld": max_held, "steps": steps, "expect": expected(max_held, steps)}


def seed_scenarios() -> list[dict[str, Any]]:
    """The seed's cases: reorder, duplicate, stale epoch, lost reset, overflow, cross-turn."""
    return [
        scenario(
            "reorder: early deltas are held until the gap fills",
            8,
            [text("t1", 0, 2, "lo"), text("t1", 0, 1, "l"), text("t1", 0, 0, "He")],
        ),
        scenario(
            "reorder: a retry's text before its own reset never leaves it blank",
            8,
            [text("t1", 0, 0, "old"), text("t1", 1, 2, "new"), reset("t1", 1, 1)],
        ),
        scenario(
            "duplicate: a redelivered delta appends once",
            8,
            [
                text("t1", 0, 0, "a"),
                text("t1", 0, 0, "a"),
                text("t1", 0, 1, "b"),
                text("t1", 0, 1, "b"),
                text("t1", 0, 0, "a"),
            ],
        ),
        scenario(
            "duplicate: a duplicated held event does not grow the buffer",
            8,
            [text("t1", 0, 2, "c"), text("t1", 0, 2, "c"), text("t1", 0, 0, "a")],
        ),
        scenario(
            "stale epoch: attempt 0's tail after attempt 1's reset",
            8,
            [
                text("t1", 0, 0, "Let me"),
                reset("t1", 1, 2),
                text("t1", 1, 3, "The answer"),
                text("t1", 0, 1, " think"),
            ],
        ),
        scenario(
            "stale epoch: a later-seq event of an older epoch is dropped",
            8,
            [reset("t1", 1, 0), text("t1", 1, 1, "new"), text("t1", 0, 2, "stale")],
        ),
        scenario(
            "lost reset: the retry is held, not glued onto the wiped attempt",
            3,
            [
                text("t1", 0, 0, "partial of a retracted attempt"),
                text("t1", 1, 2, "The"),
                text("t1", 1, 3, " answer"),
                text("t1", 1, 4, " is"),
            ],
        ),
        scenario(
            "hold overflow: resync from the persisted message and end the turn",
            2,
            [
                text("t1", 0, 0, "partial"),
                text("t1", 1, 2, "x"),
                text("t1", 1, 3, "y"),
                text("t1", 1, 4, "z"),
                text("t1", 1, 5, "after"),
                resync("t1", "the persisted answer"),
                text("t1", 1, 1, "late"),
            ],
        ),
        scenario(
            "cross-turn: epoch and seq restart; a later turn's reset wipes only its own",
            8,
            [
                text("t1", 0, 0, "first"),
                reset("t1", 1, 1),
                text("t1", 1, 2, "first answer"),
                finalize("t1", "first answer"),
                text("t2", 0, 0, "second"),
                reset("t2", 1, 1),
                text("t1", 1, 3, "late for a finished turn"),
                text("t2", 1, 2, "second answer"),
            ],
        ),
        scenario(
            "cross-turn: interleaved turns keep their own seq",
            8,
            [
                text("t2", 0, 1, "B"),
                text("t1", 0, 0, "a"),
                text("t2", 0, 0, "A"),
                text("t1", 0, 1, "b"),
            ],
        ),
        scenario(
            "turn-final: finalize drops held events and keeps what shows",
            8,
            [
                text("t1", 0, 0, "a"),
                text("t1", 0, 2, "c"),
                finalize("t1"),
                text("t1", 0, 1, "b"),
            ],
        ),
    ]


def write_fixture() -> None:
    FIXTURE.write_text(json.dumps(seed_scenarios(), indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write_fixture()
    sys.stdout.write(f"wrote {FIXTURE}\n")
