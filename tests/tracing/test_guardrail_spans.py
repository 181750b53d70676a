"""A guardrail's trip and re-ask are events on the run's span."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracing_helpers import installed_exporter, named

from juno_bind_trio import GuardrailTripped
from juno_bind_trio.agent import Agent, GuardrailResult, RunContext, output_guardrail
from juno_bind_trio.loop import ModelTurn, ModelTurnResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from installed_exporter(monkeypatch)


async def model(turn: ModelTurn) -> ModelTurnResult:
    return ModelTurnResult(content="bad")


def refuse(ctx: RunContext[None], output: Any) -> GuardrailResult:
    return GuardrailResult(tripwire=True)


async def test_a_reask_then_a_trip_are_events_of_the_run(exporter: InMemorySpanExporter) -> None:
    agent = Agent(
        model,
        name="guarded",
        max_output_retries=1,
        output_guardrails=[output_guardrail(refuse, on_trip="reask")],
    )
    with pytest.raises(GuardrailTripped):
        await agent.run("go")
    (run,) = named(exporter.get_finished_spans(), "invoke_agent guarded")
    assert [(e.name, dict(e.attributes or {})) for e in run.events] == [
        ("juno.guardrail.reask", {"juno.guardrail.name": "refuse"}),
        (
            "juno.guardrail.tripped",
            {"juno.guardrail.name": "refuse", "juno.guardrail.kind": "output"},
        ),
    ]
