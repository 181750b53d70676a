"""The span trees a run produces, exported through the OpenTelemetry SDK, on both backends."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pydantic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tracing_helpers import (
    Say,
    ScriptedModel,
    call,
    fallback_model,
    installed_exporter,
    named,
    span_tree,
)

from juno_bind_trio import _tracing
from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    ErrorResponse,
    FakeResponse,
    StreamResponse,
    Usage,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter, empty, with the SDK provider installed for this test."""
    yield from installed_exporter(monkeypatch)


@tool
async def get_weather(city: str) -> str:
    """Forecast for a city.

    Args:
        city: The city's name.
    """
    return f"clear in {city}"


async def _fallback_run(script_small: list[FakeResponse]) -> tuple[object, list[str]]:
    script: dict[str, list[FakeResponse]] = {
        "big": [ErrorResponse(503), ErrorResponse(409)],
        "small": script_small,
    }
    async with fallback_model(script) as (model, server):
        result = await Agent(model, name="forecaster").run("Weather?")
        return result, [r.json["model"] for r in server.requests]


async def test_a_fallback_turn_is_one_run_with_three_attempts(
    exporter: InMemorySpanExporter,
) -> None:
    _result, models = await _fallback_run(
        [
            StreamResponse.of_text(
                "Clear ", "skies.", usage=Usage(prompt_tokens=11, completion_tokens=4)
            )
        ]
    )
    assert models == ["big", "big", "small"]
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [
        ("invoke_agent forecaster", (("chat big", ()), ("chat big", ()), ("chat small", ()))),
    ]
    (run,) = named(spans, "invoke_agent forecaster")
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "forecaster"
    assert run.status.status_code is StatusCode.UNSET
    first, second = named(spans, "chat big")
    (third,) = named(spans, "chat small")
    for span, provider in ((first, "provider-a"), (second, "provider-b"), (third, "provider-a")):
        assert span.attributes is not None
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["juno.route.provider"] == provider
        assert span.attributes["server.address"] == "127.0.0.1"
        assert isinstance(span.attributes["server.port"], int)
    assert first.attributes is not None
    assert second.attributes is not None
    assert first.attributes["gen_ai.request.model"] == "big"
    assert [s.attributes["juno.route.attempt"] for s in (first, second, third) if s.attributes] == [
        1,
        2,
        3,
    ]
    # The failed attempts: the classified error, and what routing did about it.
    for span in (first, second):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["juno.route.action"] == "next_candidate"
        (decision,) = [e for e in span.events if e.name == "juno.route.decision"]
        assert decision.attributes is not None
        assert decision.attributes["juno.route.action"] == "next_candidate"
    # A 503: the classifier's own verdict was to move on.
    assert first.attributes["error.type"] == "InternalServerError"
    assert first.attributes["juno.route.verdict"] == "next_candidate"
    assert "juno.route.adjusted" not in first.attributes
    # A 409 asks for the same endpoint again; the plan has no retries to give.
    assert second.attributes["error.type"] == "ConflictError"
    assert second.attributes["juno.route.verdict"] == "retry_same_endpoint"
    assert second.attributes["juno.route.adjusted"] == "retry_budget_spent"
    # The answer: finish reason and usage, no error.
    assert third.status.status_code is StatusCode.UNSET
    assert third.attributes is not None
    assert third.attributes["gen_ai.request.model"] == "small"
    assert third.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert third.attributes["gen_ai.usage.input_tokens"] == 11
    assert third.attributes["gen_ai.usage.output_tokens"] == 4
    assert "juno.route.action" not in third.attributes
    # Ordered in time, each inside the run.
    assert run.start_time is not None
    assert run.end_time is not None
    for earlier, later in ((first, second), (second, third)):
        assert earlier.end_time is not None
        assert later.start_time is not None
        assert earlier.end_time <= later.start_time
    # No content by default.
    for span in spans:
        assert span.attributes is not None
        assert "gen_ai.input.messages" not in span.attributes
        assert "gen_ai.output.messages" not in span.attributes


async def test_message_content_is_recorded_only_when_asked(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_tracing.CAPTURE_CONTENT_ENV, "true")
    await _fallback_run([StreamResponse.of_text("Clear.")])
    (answer,) = named(exporter.get_finished_spans(), "chat small")
    assert answer.attributes is not None
    sent = json.loads(str(answer.attributes["gen_ai.input.messages"]))
    assert sent == [{"role": "user", "content": "Weather?"}]
    got = json.loads(str(answer.attributes["gen_ai.output.messages"]))
    assert got[0]["content"] == "Clear."


async def test_the_content_switch_is_read_once_per_run(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool
    async def flip(to: str) -> str:
        """Changes the switch in the middle of the run.

        Args:
            to: The variable's new value.
        """
        monkeypatch.setenv(_tracing.CAPTURE_CONTENT_ENV, to)
        return "flipped"

    def arguments_of(run: int) -> list[object]:
        spans = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
        return [(s.attributes or {}).get("gen_ai.tool.call.arguments") for s in spans[run * 3 :]]

    # Set before the run: it takes effect, for the whole run, though the first
    # tool turns it off and the second batch starts after that.
    monkeypatch.setenv(_tracing.CAPTURE_CONTENT_ENV, "true")
    turns = [
        Say(calls=[call("c1", "flip", to="false")]),
        Say(calls=[call("c2", "get_weather", city="Oslo")]),
        Say(calls=[call("c3", "flip", to="true")]),
        Say(text="done"),
    ]
    agent = Agent(ScriptedModel(list(turns)), tools=[flip, get_weather])
    await agent.run("go")
    assert arguments_of(0) == ['{"to": "false"}', '{"city": "Oslo"}', '{"to": "true"}']
    # The next run reads it again: "false" when it started; the last flip
    # ("true") waits for the run after it.
    monkeypatch.setenv(_tracing.CAPTURE_CONTENT_ENV, "false")
    agent = Agent(ScriptedModel(list(turns)), tools=[flip, get_weather])
    await agent.run("go")
    assert arguments_of(1) == [None, None, None]


async def test_a_hard_cancel_interrupts_the_running_call_and_records_the_rest(
    exporter: InMemorySpanExporter,
) -> None:
    @tool
    async def quick() -> str:
        """Done at once."""
        return "ok"

    @tool
    async def slow(n: int) -> str:
        """Sleeps long.

        Args:
            n: Which.
        """
        await anyio.sleep(100)
        return "late"

    model = ScriptedModel(
        [
            Say(
                calls=[
                    call("c1", "quick"),
                    call("c2", "slow", n=1),
                    call("c3", "slow", n=2),
                    call("c4", "slow", n=3),
                ]
            )
        ]
    )
    agent = Agent(model, tools=[quick, slow], name="worker", per_tool_limit=1)
    with anyio.move_on_after(5) as scope:
        await agent.run("go")
    assert scope.cancelled_caught
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [
        (
            "invoke_agent worker",
            (
                ("execute_tool quick", ()),
                ("execute_tool slow", ()),
                ("execute_tool slow", ()),
                ("execute_tool slow", ()),
            ),
        )
    ]
    states = {}
    for span in named(spans, "execute_tool quick") + named(spans, "execute_tool slow"):
        assert span.attributes is not None
        states[span.attributes["gen_ai.tool.call.id"]] = (
            span.attributes["gen_ai.tool.name"],
            span.attributes["juno.tool.end_state"],
            span.status.status_code,
        )
    assert states == {
        "c1": ("quick", "finished", StatusCode.UNSET),
        "c2": ("slow", "interrupted", StatusCode.ERROR),
        "c3": ("slow", "not_run", StatusCode.UNSET),
        "c4": ("slow", "not_run", StatusCode.UNSET),
    }
    (run,) = named(spans, "invoke_agent worker")
    assert [e.name for e in run.events] == ["juno.run.cancelled"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes is not None
    assert run.attributes["error.type"] == "cancelled"
    # The interrupted call ended when the cancel reached it, not before.
    (interrupted,) = [
        s for s in spans if s.attributes and s.attributes.get("gen_ai.tool.call.id") == "c2"
    ]
    assert interrupted.end_time is not None
    assert interrupted.start_time is not None
    assert interrupted.end_time >= interrupted.start_time


async def test_a_soft_stop_is_an_event_on_the_run(exporter: InMemorySpanExporter) -> None:
    stop = anyio.CancelScope()

    @tool
    async def halt() -> str:
        """Asks the run to stop."""
        stop.cancel()
        return "stopping"

    model = ScriptedModel([Say(calls=[call("h1", "halt")]), Say("never")])
    result = await Agent(model, tools=[halt], name="stopper").run("go", stop=stop)
    assert result.reason == "stopped"
    (run,) = named(exporter.get_finished_spans(), "invoke_agent stopper")
    assert [e.name for e in run.events] == ["juno.run.stopped"]
    assert run.status.status_code is StatusCode.UNSET


class Forecast(pydantic.BaseModel):
    city: str
    sky: str


async def test_a_structured_output_retry_is_a_second_attempt_and_an_event(
    exporter: InMemorySpanExporter,
) -> None:
    script = {
        "m": [
            StreamResponse.of_text('{"city": "Oslo"}'),  # no sky: re-asked
            StreamResponse.of_text('{"city": "Oslo", "sky": "clear"}'),
        ]
    }
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan([RouteStage("m", [Candidate("p")])], max_retries=0)
        model = OpenAIChatModel(plan=plan, clients={"p": client})
        result = await Agent(model, output_type=Forecast, name="typed").run("Forecast?")
    assert result.output == Forecast(city="Oslo", sky="clear")
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [("invoke_agent typed", (("chat m", ()), ("chat m", ())))]
    (run,) = named(spans, "invoke_agent typed")
    (retry,) = run.events
    assert retry.name == "juno.output.retry"
    assert retry.attributes is not None
    assert "sky" in str(retry.attributes["juno.output.problem"])
    # Both attempts answered: the re-ask is the output's business, not routing's.
    for span in named(spans, "chat m"):
        assert span.status.status_code is StatusCode.UNSET


async def test_a_sub_agent_run_is_a_child_of_the_tool_call_that_started_it(
    exporter: InMemorySpanExporter,
) -> None:
    @tool
    async def note(text: str) -> str:
        """Notes it.

        Args:
            text: What.
        """
        return "noted"

    child = Agent(
        ScriptedModel([Say(calls=[call("n1", "note", text="x")]), Say("child done")]),
        tools=[note],
        name="child",
    )

    @tool
    async def delegate(ctx: RunContext[None], task: str) -> str:
        """Hands the task to the child.

        Args:
            task: What to do.
        """
        return str((await child.run(task, parent=ctx)).output)

    parent_model = ScriptedModel(
        [Say(calls=[call("d1", "delegate", task="t"), call("q1", "note", text="y")]), Say("done")]
    )
    parent = Agent(parent_model, tools=[delegate, note], name="parent")
    result = await parent.run("go")
    assert result.output == "done"
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [
        (
            "invoke_agent parent",
            (
                (
                    "execute_tool delegate",
                    (("invoke_agent child", (("execute_tool note", ()),)),),
                ),
                ("execute_tool note", ()),
            ),
        )
    ]
    (inner,) = named(spans, "invoke_agent child")
    (outer,) = named(spans, "invoke_agent parent")
    assert inner.context is not None
    assert outer.context is not None
    assert inner.context.trace_id == outer.context.trace_id


async def test_each_pooled_call_parents_under_the_run_never_a_previous_call(
    exporter: InMemorySpanExporter,
) -> None:
    @tool
    async def step(n: int) -> str:
        """One step.

        Args:
            n: Which.
        """
        await anyio.sleep(0.01 * (n % 3))
        return str(n)

    calls = [call(f"s{n}", "step", n=n) for n in range(24)]
    model = ScriptedModel([Say(calls=calls), Say(calls=calls[:5]), Say("done")])
    # Two workers per tool: each claims many calls, one after another.
    result = await Agent(model, tools=[step], name="many", per_tool_limit=2).run("go")
    assert result.output == "done"
    spans = exporter.get_finished_spans()
    (run,) = named(spans, "invoke_agent many")
    steps = named(spans, "execute_tool step")
    assert len(steps) == 29
    assert run.context is not None
    for span in steps:
        assert span.parent is not None
        assert span.parent.span_id == run.context.span_id
        assert span.attributes is not None
        assert span.attributes["juno.tool.end_state"] == "finished"


async def test_the_logger_says_route_decisions_and_cancels_at_info_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="juno_bind_trio")
    await _fallback_run([StreamResponse.of_text("Clear.")])
    routing = [r for r in caplog.records if r.name == "juno_bind_trio"]
    assert [r.levelno for r in routing] == [logging.INFO] * 3
    assert routing[0].getMessage() == (
        "route: big from provider-a failed (InternalServerError): next_candidate"
    )
    assert routing[1].getMessage() == (
        "route: big from provider-b failed (ConflictError): next_candidate (retry_budget_spent)"
    )
    assert routing[-1].getMessage() == "route: succeeded after 3 attempt(s)"
    caplog.clear()

    @tool
    async def wait() -> str:
        """Waits."""
        await anyio.sleep(100)
        return "late"

    model = ScriptedModel([Say(calls=[call("w1", "wait")])])
    with anyio.move_on_after(1):
        await Agent(model, tools=[wait]).run("go")
    (record,) = [r for r in caplog.records if r.name == "juno_bind_trio"]
    assert record.levelno == logging.INFO
    assert "cancelled" in record.getMessage()


async def test_the_success_path_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="juno_bind_trio")
    model = ScriptedModel([Say(calls=[call("c", "get_weather", city="Oslo")]), Say("Clear.")])
    assert (await Agent(model, tools=[get_weather]).run("go")).output == "Clear."
    assert [r for r in caplog.records if r.name.startswith("juno_bind_trio")] == []


def test_no_tracer_without_an_sdk_provider() -> None:
    # The API's default (proxy) provider is not a real one: tracing stays off.
    assert _tracing._provider_override is None
    assert _tracing.tracer() is None


def test_a_global_sdk_provider_turns_tracing_on() -> None:
    # In a process of its own: the API lets the global provider be set once.
    program = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from juno_bind_trio import _tracing

        assert _tracing.tracer() is None
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        found = _tracing.tracer()
        assert found is not None
        assert _tracing.tracer() is found  # cached against the provider
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_the_example_prints_the_run_as_a_tree() -> None:
    # examples/tracing.py sets the global provider, so it runs as its own process.
    example = Path(__file__).resolve().parents[2] / "examples" / "tracing.py"
    done = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Clear in Oslo.",
        "invoke_agent forecaster",
        "  chat big  error.type=InternalServerError juno.route.action=next_candidate",
        "  chat small",
        "  execute_tool get_weather  juno.tool.end_state=finished",
        "  chat big  error.type=InternalServerError juno.route.action=next_candidate",
        "  chat small",
    ]
    assert "juno_bind_trio INFO route: big from p failed (InternalServerError)" in done.stderr
    assert "WARNING" not in done.stderr
