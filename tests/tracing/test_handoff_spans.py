"""A handoff on the run's span: one invoke_agent span, an event naming who takes over (#32)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracing_helpers import Say, ScriptedModel, call, installed_exporter, named

from juno_bind_trio.agent import Agent, tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    yield from installed_exporter(monkeypatch)


async def test_a_handoff_is_an_event_on_the_one_run_span(exporter: InMemorySpanExporter) -> None:
    @tool
    async def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    billing = Agent(
        ScriptedModel([Say(calls=[call("r1", "refund", order="1")]), Say("done")]),
        name="billing",
        tools=[refund],
    )
    triage = Agent(
        ScriptedModel([Say(calls=[call("h1", "transfer_to_billing")])]),
        name="triage",
        handoffs=[billing],
    )
    result = await triage.run("refund order 1")
    assert result.output == "done"
    spans = exporter.get_finished_spans()
    (run,) = named(spans, "invoke_agent triage")
    assert named(spans, "invoke_agent billing") == []  # the same run, not a sub-agent's
    (event,) = [e for e in run.events if e.name == "juno.run.handoff"]
    assert dict(event.attributes or {}) == {
        "juno.handoff.from": "triage",
        "juno.handoff.to": "billing",
        "juno.handoff.call_id": "h1",
    }
    (tool_span,) = named(spans, "execute_tool refund")
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == run.context.span_id
