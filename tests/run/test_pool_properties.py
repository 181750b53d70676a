"""The pool against an exact model of itself, over random batches, stops and cancels.

The model: within one tool's group, claims go in call order to whichever of
the group's ``limit`` workers frees first, so the start time of every call
follows from the durations alone (a heap of worker-free times). Durations are
whole seconds and the stop and cancel land on half seconds, so nothing ties
with them and every call's fate is determined:

* it starts at its modelled time if that is before the soft stop and the
  hard cancel, and is refused otherwise (and is never started);
* a started call finishes at start + duration, unless the hard cancel lands
  first, which interrupts it.

Checked for every example, on both backends: the result is aligned with the
calls and complete, each call's state and result match the model, no call
starts after the stop or the cancel, no group ever exceeds its limit, every
call ran at most once, and ``run()`` ends (returning or cancelled) at exactly
the modelled time.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

import anyio
import attrs
import outcome
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_on
from juno_bind_trio.run import (
    AbortedToolCallError,
    InterruptedToolCallError,
    ToolBatch,
    ToolCallLike,
    tool_call_id,
)


@attrs.frozen
class Spec:
    tool: int
    duration: int
    fails: bool


@attrs.frozen
class Scenario:
    calls: list[Spec]
    limit: int
    stop_at: float | None
    cancel_at: float | None


class Boom(Exception):
    pass


scenarios = st.builds(
    Scenario,
    calls=st.lists(
        st.builds(Spec, tool=st.integers(0, 3), duration=st.integers(0, 4), fails=st.booleans()),
        max_size=24,
    ),
    limit=st.integers(1, 4),
    stop_at=st.none() | st.integers(0, 12).map(lambda k: k + 0.5),
    cancel_at=st.none() | st.integers(0, 12).map(lambda k: k + 0.5),
)


def modelled_starts(scenario: Scenario) -> list[float]:
    """Each call's start time if nothing stopped the batch."""
    starts = [0.0] * len(scenario.calls)
    free: dict[int, list[float]] = defaultdict(lambda: [0.0] * scenario.limit)
    for index, spec in enumerate(scenario.calls):
        at = heapq.heappop(free[spec.tool])
        starts[index] = at
        heapq.heappush(free[spec.tool], at + spec.duration)
    return starts


async def play(scenario: Scenario) -> None:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": f"t{s.tool}", "arguments": "{}"}}
        for i, s in enumerate(scenario.calls)
    ]
    specs = {f"c{i}": s for i, s in enumerate(scenario.calls)}
    begin = anyio.current_time()
    stop = anyio.CancelScope()
    stop_pressed = False
    started: dict[str, float] = {}
    late_starts: list[str] = []
    running: dict[int, int] = defaultdict(int)
    peak: dict[int, int] = defaultdict(int)

    async def tool(call: ToolCallLike) -> str:
        call_id = tool_call_id(call)
        spec = specs[call_id]
        assert call_id not in started, "a call ran twice"
        now = anyio.current_time() - begin
        started[call_id] = now
        if stop_pressed or (scenario.cancel_at is not None and now > scenario.cancel_at):
            late_starts.append(call_id)
        running[spec.tool] += 1
        peak[spec.tool] = max(peak[spec.tool], running[spec.tool])
        try:
            await anyio.sleep(spec.duration)
        finally:
            running[spec.tool] -= 1
        if spec.fails:
            raise Boom(call_id)
        return f"ok-{call_id}"

    async def press_stop(at: float) -> None:
        nonlocal stop_pressed
        await anyio.sleep(at)
        stop_pressed = True
        stop.cancel()

    batch: ToolBatch[str] = ToolBatch(calls)
    returned: list[outcome.Outcome[str]] | None = None
    deadline = begin + scenario.cancel_at if scenario.cancel_at is not None else float("inf")
    with anyio.CancelScope(deadline=deadline) as hard:
        async with anyio.create_task_group() as tg:
            if scenario.stop_at is not None:
                tg.start_soon(press_stop, scenario.stop_at)
            returned = await batch.run(tool, stop=stop, per_tool_limit=scenario.limit)
            tg.cancel_scope.cancel()
    ended = anyio.current_time() - begin

    # --- the model's answer ----------------------------------------------------
    first_stop = min(
        t for t in (scenario.stop_at, scenario.cancel_at, float("inf")) if t is not None
    )
    expected_states: list[str] = []
    expected_end = 0.0
    for spec, start in zip(scenario.calls, modelled_starts(scenario), strict=True):
        if start > first_stop:
            expected_states.append("refused")
            continue
        end = start + spec.duration
        if scenario.cancel_at is not None and end > scenario.cancel_at:
            expected_states.append("interrupted")
        else:
            expected_states.append("finished")
        expected_end = max(expected_end, end)
    # Work is queued only while a worker is busy, so the hard cancel lands
    # inside run() exactly when some call is in flight at that moment.
    cancelled = "interrupted" in expected_states

    # --- aligned and complete, every call answered exactly once ---------------
    assert len(batch.states) == len(calls)
    assert list(batch.states) == expected_states
    results = [batch.result(i) for i in range(len(calls))]
    assert all(r is not None for r in results)
    if cancelled:
        assert hard.cancelled_caught
        assert ended == scenario.cancel_at
    else:
        assert not hard.cancelled_caught
        assert returned is not None
        assert [a is b for a, b in zip(returned, results, strict=True)] == [True] * len(calls)
        assert ended == expected_end
    for index, (state, result) in enumerate(zip(batch.states, results, strict=True)):
        call_id = f"c{index}"
        spec = scenario.calls[index]
        if state == "refused":
            assert isinstance(result, outcome.Error)
            assert isinstance(result.error, AbortedToolCallError)
            assert result.error.tool_call_id == call_id
            assert call_id not in started
        elif state == "interrupted":
            assert isinstance(result, outcome.Error)
            assert isinstance(result.error, InterruptedToolCallError)
            assert result.error.tool_call_id == call_id
        elif spec.fails:
            assert isinstance(result, outcome.Error)
            assert isinstance(result.error, Boom)
            assert result.error.args == (call_id,)
        else:
            assert result == outcome.Value(f"ok-{call_id}")

    # --- starts: exactly modelled, never after a stop, never over the limit ---
    starts = modelled_starts(scenario)
    assert started == {
        f"c{i}": starts[i] for i, state in enumerate(expected_states) if state != "refused"
    }
    assert late_starts == []
    assert all(n <= scenario.limit for n in peak.values())
    stats = batch.statistics()
    assert stats.total == stats.finished + stats.refused + stats.interrupted
    assert stats.claimed == len(started)


@settings(max_examples=200, deadline=None)
@given(scenario=scenarios)
def test_the_pool_matches_its_model(backend: str, scenario: Scenario) -> None:
    run_on(backend, play, scenario)


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_the_model_itself_on_a_known_schedule(limit: int) -> None:
    # Guards the oracle: twelve one-second calls to one tool.
    scenario = Scenario([Spec(0, 1, False)] * 12, limit, None, None)
    starts = modelled_starts(scenario)
    assert starts == [float(i // limit) for i in range(12)]
