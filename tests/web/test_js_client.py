"""The shipped JavaScript client: node's own tests, and agreement with TurnTextView.

The reader rules exist twice, in Python (``TurnTextView``) and in the browser
module ``juno_bind_trio/web/static/turn-view.js``. Here hypothesis writes
scenarios (turns streamed by a real ``TurnTextStream``, then delivered shuffled,
duplicated, partly lost, with turn-final and resync signals in between), both
implementations replay them, and every step must match.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from turn_scenarios import FIXTURE, expected, seed_scenarios

from juno_bind_trio.completion import ListSink, TurnTextStream

ROOT = Path(__file__).resolve().parents[2]
JS_TESTS = ROOT / "tests" / "web" / "js"
NODE = shutil.which("node")


def need_node() -> str:
    if NODE is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is required in CI (the JavaScript client's tests run on it)")
        pytest.skip("node is not installed")
    return NODE


def test_node_test_runner_passes() -> None:
    node = need_node()
    done = subprocess.run(
        [node, "--test", str(JS_TESTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
    assert "# pass 0" not in done.stdout


def test_fixture_is_what_python_records() -> None:
    """scenarios.json is regenerated from TurnTextView, never edited by hand."""
    assert json.loads(FIXTURE.read_text()) == seed_scenarios()


def replay_in_node(scenarios: list[dict[str, Any]], tmp: Path) -> list[Any]:
    node = need_node()
    path = tmp / "scenarios.json"
    path.write_text(json.dumps(scenarios))
    done = subprocess.run(
        [node, str(JS_TESTS / "replay.mjs"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: list[Any] = json.loads(done.stdout)
    return result


attempt = st.tuples(
    st.lists(st.text(alphabet="ab€ 😀", max_size=3), max_size=4),
    st.sampled_from([None, "attempt_failed", "structured_output_retry"]),
)


def stream_turn(
    turn_id: str, attempts: list[tuple[list[str], str | None]], outcome: str
) -> list[Any]:
    sink = ListSink()
    stream = TurnTextStream(sink=sink, turn_id=turn_id)
    for deltas, reason in attempts:
        stream.begin_attempt(reason)  # type: ignore[arg-type]
        for delta in deltas:
            stream.observe(delta)
    stream.finish(outcome)  # type: ignore[arg-type]
    return [event.to_wire() for event in sink.events]


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    wire: list[dict[str, Any]] = []
    turns = draw(st.sampled_from([["t1"], ["t1", "t2"]]))
    for turn in turns:
        attempts = draw(st.lists(attempt, min_size=1, max_size=4))
        wire += stream_turn(turn, attempts, draw(st.sampled_from(["succeeded", "failed"])))
    delivered = list(wire)
    if wire:
        delivered += draw(st.lists(st.sampled_from(wire), max_size=5))  # duplicates
    delivered = draw(st.permutations(delivered))
    lost = draw(st.sets(st.integers(0, max(len(delivered) - 1, 0)), max_size=2))
    steps: list[dict[str, Any]] = [
        {"op": "apply", "event": event} for i, event in enumerate(delivered) if i not in lost
    ]
    signals = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(steps)),
                st.sampled_from(["finalize", "resync"]),
                st.sampled_from(turns),
                st.one_of(st.none(), st.text(alphabet="xyz", max_size=3)),
            ),
            max_size=2,
        )
    )
    for position, op, turn, value in sorted(signals, key=lambda s: -s[0]):
        if op == "resync" and value is None:
            value = "persisted"
        steps.insert(position, {"op": op, "turnId": turn, "text": value})
    max_held = draw(st.integers(1, 4))
    return {"name": "generated", "maxHeld": max_held, "steps": steps}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(scenarios(), min_size=25, max_size=25))
def test_js_client_agrees_with_turn_text_view_step_for_step(
    batch: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    got = replay_in_node(batch, tmp_path_factory.mktemp("replay"))
    for scenario, steps in zip(batch, got, strict=True):
        assert steps == expected(scenario["maxHeld"], scenario["steps"]), scenario
