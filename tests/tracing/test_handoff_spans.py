"""A handoff on the run's span: one invoke_agent span, an event naming who takes over (#32)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracing_helpers import Say, ScriptedModel, call, installed_exporter, named

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.testing import FakeResponse, StreamResponse, open_fake_openai_server

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


async def test_each_span_names_the_agent_speaking_and_the_run_span_the_last(
    exporter: InMemorySpanExporter,
) -> None:
    @tool
    async def lookup(order: str) -> str:
        """Look an order up."""
        return "paid"

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
        ScriptedModel(
            [Say(calls=[call("l1", "lookup", order="1"), call("h1", "transfer_to_billing")])]
        ),
        name="triage",
        tools=[lookup],
        handoffs=[billing],
    )
    await triage.run("refund order 1")
    spans = exporter.get_finished_spans()
    (run,) = named(spans, "invoke_agent triage")
    attributes = dict(run.attributes or {})
    assert attributes["gen_ai.agent.name"] == "triage"  # the run's own agent
    assert attributes["juno.agent.in_charge"] == "billing"  # who spoke last
    speaking = {
        span.name: dict(span.attributes or {}).get("gen_ai.agent.name")
        for span in spans
        if span.name.startswith("execute_tool")
    }
    assert speaking == {
        "execute_tool lookup": "triage",
        "execute_tool transfer_to_billing": "triage",
        "execute_tool refund": "billing",
    }


async def test_a_run_without_handoffs_adds_no_agent_to_its_tool_spans(
    exporter: InMemorySpanExporter,
) -> None:
    @tool
    async def lookup(order: str) -> str:
        """Look an order up."""
        return "paid"

    agent = Agent(
        ScriptedModel([Say(calls=[call("l1", "lookup", order="1")]), Say("done")]),
        name="solo",
        tools=[lookup],
    )
    await agent.run("look")
    spans = exporter.get_finished_spans()
    (tool_span,) = named(spans, "execute_tool lookup")
    assert "gen_ai.agent.name" not in dict(tool_span.attributes or {})
    (run,) = named(spans, "invoke_agent solo")
    assert "juno.agent.in_charge" not in dict(run.attributes or {})


async def test_the_chat_spans_name_the_agent_whose_model_answers(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the real SDK against the fake server: each chat span is its agent's."""
    script: dict[str, list[FakeResponse]] = {
        "triage-m": [StreamResponse.of_tool_calls(("h1", "transfer_to_billing", "{}"))],
        "billing-m": [StreamResponse.of_text("Billing ", "here.")],
    }
    async with open_fake_openai_server(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        billing = Agent("openai:billing-m", name="billing", instructions="Billing.")
        triage = Agent("openai:triage-m", name="triage", instructions="Triage.", handoffs=[billing])
        async with triage, billing:
            result = await triage.run("refund")
    assert result.output == "Billing here."
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert [(s.name, dict(s.attributes or {}).get("gen_ai.agent.name")) for s in chats] == [
        ("chat triage-m", "triage"),
        ("chat billing-m", "billing"),
    ]
