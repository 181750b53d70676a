"""Span invariants of a bare ToolLoop over random batches, pools and cancel points.

Whatever the batches, the workers per tool, the tools' timings and failures,
and wherever a hard cancel or a soft stop lands: one run span; exactly one
``execute_tool`` span per call the model asked for, each a child of the run
(never of a call a worker ran before), current while its tool runs; an end
state on every one; and nothing of ours current once the run is left.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.trace import StatusCode
from tracing_helpers import EXPORTER, PROVIDER, named

from conftest import run_on
from juno_bind_trio import _tracing
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import ToolCallLike, tool_call_id

END_STATES = {"finished", "failed", "interrupted", "not_run"}


@attrs.frozen
class Call:
    tool: str
    delay: int  # in virtual hundredths of a second
    fails: bool


@attrs.frozen
class Scenario:
    turns: tuple[tuple[Call, ...], ...]
    per_tool_limit: int
    cancel_at: int | None  # hundredths of a second; None: the run ends by itself
    soft: bool  # the cancel is the soft stop, not a hard cancel


calls = st.builds(Call, st.sampled_from(("a", "b", "c")), st.integers(0, 5), st.booleans())
scenarios = st.builds(
    Scenario,
    st.lists(st.lists(calls, max_size=7).map(tuple), min_size=1, max_size=3).map(tuple),
    st.integers(1, 3),
    st.none() | st.integers(0, 30),
    st.booleans(),
)


async def play(scenario: Scenario) -> None:
    asked: dict[str, Call] = {}
    inside: dict[str, int] = {}
    script = list(scenario.turns)

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        await anyio.sleep(0.01)
        if not script:
            return ModelTurnResult(content="done", tool_calls=[])
        batch: list[dict[str, Any]] = []
        for call in script.pop(0):
            call_id = f"t{turn.iteration}c{len(batch)}"
            asked[call_id] = call
            arguments = json.dumps({"delay": call.delay})
            batch.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.tool, "arguments": arguments},
                }
            )
        return ModelTurnResult(content=None, tool_calls=batch)

    async def run_tool(call: ToolCallLike) -> ToolCallOutcome:
        call_id = tool_call_id(call)
        inside[call_id] = trace.get_current_span().get_span_context().span_id
        planned = asked[call_id]
        await anyio.sleep(planned.delay / 100)
        # Still its own span after the await: no other call's span leaked in.
        assert trace.get_current_span().get_span_context().span_id == inside[call_id]
        if planned.fails:
            raise ValueError("no")
        return ToolCallOutcome.from_content(call_id, "ok")

    stop = anyio.CancelScope()
    loop = ToolLoop(
        state=LoopState(messages=[{"role": "user", "content": "go"}]),
        max_iterations=len(scenario.turns) + 1,
        call_model=call_model,
        run_tool_call=run_tool,
        stop=stop,
        per_tool_limit=scenario.per_tool_limit,
    )
    reason: str | None = None
    with anyio.CancelScope() as hard:
        async with anyio.create_task_group() as tg:
            if scenario.cancel_at is not None:

                async def cancel_later() -> None:
                    await anyio.sleep(scenario.cancel_at / 100)  # type: ignore[operator]
                    (stop if scenario.soft else hard).cancel()

                tg.start_soon(cancel_later)
            reason = (await loop.run()).reason
            tg.cancel_scope.cancel()
    assert trace.get_current_span() is trace.INVALID_SPAN

    spans = EXPORTER.get_finished_spans()
    (run,) = named(spans, "invoke_agent")
    assert run.parent is None
    assert run.context is not None
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert len(spans) == 1 + len(tools)
    by_id: dict[Any, Any] = {}
    for span in tools:
        attributes = span.attributes or {}
        call_id = attributes["gen_ai.tool.call.id"]
        assert call_id not in by_id
        by_id[call_id] = span
        assert span.parent is not None
        assert span.parent.span_id == run.context.span_id
        assert span.name == f"execute_tool {asked[str(call_id)].tool}"
        state = attributes["juno.tool.end_state"]
        assert state in END_STATES
        failed = state in ("failed", "interrupted")
        assert (span.status.status_code is StatusCode.ERROR) is failed
        if str(call_id) in inside:  # it started: it was current while it ran
            assert span.context is not None
            assert inside[str(call_id)] == span.context.span_id
        else:
            assert state == "not_run"
    assert set(by_id) == set(asked)
    events = [e.name for e in run.events]
    if reason is None:  # the hard cancel ended the run
        assert events == ["juno.run.cancelled"]
        assert run.status.status_code is StatusCode.ERROR
    else:
        assert events == (["juno.run.stopped"] if reason == "stopped" else [])
        assert run.status.status_code is StatusCode.UNSET


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
def test_span_invariants_hold_for_every_run(backend: str, scenario: Scenario) -> None:
    EXPORTER.clear()
    _tracing._provider_override = PROVIDER
    try:
        run_on(backend, play, scenario)
    finally:
        _tracing._provider_override = None
        EXPORTER.clear()
