"""The run span of a bare ToolLoop, and which span is current where, on both backends.

A host's own spans (an HTTP client instrumentation, spans made inside a
provider) must nest under the ``chat`` span of the attempt they belong to; a
tool's under its ``execute_tool`` span; and nothing of ours may stay current
once the run, an attempt or a call is left, however it was left.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, StatusCode
from tracing_helpers import PROVIDER, fallback_model, installed_exporter, named, span_tree

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.run import ToolCallLike, tool_call_id, tool_call_name
from juno_bind_trio.testing import (
    ErrorResponse,
    FakeResponse,
    Pause,
    StreamResponse,
    TextDelta,
    open_fake_openai_server,
)

pytestmark = pytest.mark.anyio

HOST = PROVIDER.get_tracer("host")


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter, empty, with the SDK provider installed for this test."""
    yield from installed_exporter(monkeypatch)


def span_id(span: Span | ReadableSpan) -> int:
    context = span.get_span_context() if isinstance(span, Span) else span.context
    assert context is not None
    return context.span_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


class _Reads(httpx2.AsyncByteStream):
    """A response body that notes the current span at every chunk the SDK reads."""

    def __init__(self, inner: httpx2.AsyncByteStream, seen: list[int]) -> None:
        self._inner = inner
        self._seen = seen

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._seen.append(span_id(trace.get_current_span()))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class HostHTTP(httpx2.AsyncBaseTransport):
    """What an HTTP client instrumentation does: a span per request, made current."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.reads: list[list[int]] = []  # per request: the current span at each body read

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        with HOST.start_as_current_span(f"HTTP {request.method}"):
            response = await self._inner.handle_async_request(request)
        seen: list[int] = []
        self.reads.append(seen)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Reads(response.stream, seen),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def instrumented_model(
    script: Mapping[str, list[FakeResponse]], *models: str
) -> AsyncIterator[tuple[OpenAIChatModel, HostHTTP]]:
    """A model routing *models* in order on provider ``p``, whose client's HTTP is instrumented."""
    http = HostHTTP()
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(
            base_url=server.base_url, api_key="k", http_client=httpx2.AsyncClient(transport=http)
        ) as client,
    ):
        plan = RoutePlan([RouteStage(m, [Candidate("p")]) for m in models], max_retries=0)
        yield OpenAIChatModel(plan=plan, clients={"p": client}), http


def _tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> StreamResponse:
    return StreamResponse.of_tool_calls(*((i, n, json.dumps(a)) for i, n, a in calls))


async def test_a_bare_tool_loop_run_is_one_run_span_with_its_cancel(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="juno_bind_trio")
    # A fallback turn (503, then a 409 with no retries left, then the answer),
    # then a batch that a hard cancel cuts: no Agent anywhere.
    script: dict[str, list[FakeResponse]] = {
        "big": [ErrorResponse(503), ErrorResponse(409)],
        "small": [
            _tool_calls(
                ("c1", "quick", {}),
                ("c2", "slow", {"n": 1}),
                ("c3", "slow", {"n": 2}),
                ("c4", "slow", {"n": 3}),
            )
        ],
    }
    slow_started = anyio.Event()

    async def run_tool(call: ToolCallLike) -> ToolCallOutcome:
        if tool_call_name(call) == "slow":
            slow_started.set()
            await anyio.sleep(100)
        return ToolCallOutcome.from_content(tool_call_id(call), "ok")

    async with fallback_model(script) as (model, _server):
        loop = ToolLoop(
            state=LoopState(messages=[{"role": "user", "content": "go"}]),
            max_iterations=3,
            call_model=model,
            run_tool_call=run_tool,
            run_id="bare-run",
            per_tool_limit=1,
        )
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_slow_runs() -> None:
                    await slow_started.wait()
                    await anyio.sleep(1)
                    scope.cancel()

                tg.start_soon(cancel_once_slow_runs)
                await loop.run()
    assert scope.cancelled_caught
    # The route's decisions and the cancel, each at INFO.
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "juno_bind_trio"] == [
        (logging.INFO, "route: big from provider-a failed (InternalServerError): next_candidate"),
        (
            logging.INFO,
            "route: big from provider-b failed (ConflictError): "
            "next_candidate (retry_budget_spent)",
        ),
        (logging.INFO, "route: succeeded after 3 attempt(s)"),
        (logging.INFO, "run bare-run: cancelled (hard cancel)"),
    ]
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [
        (
            "invoke_agent",
            (
                ("chat big", ()),
                ("chat big", ()),
                ("chat small", ()),
                ("execute_tool quick", ()),
                ("execute_tool slow", ()),
                ("execute_tool slow", ()),
                ("execute_tool slow", ()),
            ),
        )
    ]
    (run,) = named(spans, "invoke_agent")
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == "bare-run"
    assert "gen_ai.agent.name" not in run.attributes
    assert [e.name for e in run.events] == ["juno.run.cancelled"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["error.type"] == "cancelled"
    actions = [
        (s.attributes or {}).get("juno.route.action")
        for s in named(spans, "chat big") + named(spans, "chat small")
    ]
    assert actions == ["next_candidate", "next_candidate", None]
    states = {
        (s.attributes or {})["gen_ai.tool.call.id"]: (
            (s.attributes or {})["juno.tool.end_state"],
            s.status.status_code,
        )
        for s in spans
        if s.name.startswith("execute_tool")
    }
    assert states == {
        "c1": ("finished", StatusCode.UNSET),
        "c2": ("interrupted", StatusCode.ERROR),
        "c3": ("not_run", StatusCode.UNSET),
        "c4": ("not_run", StatusCode.UNSET),
    }


async def test_a_bare_tool_loop_soft_stop_is_an_event_on_its_run_span(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="juno_bind_trio")
    stop = anyio.CancelScope()

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        calls = [{"id": "h1", "type": "function", "function": {"name": "halt", "arguments": "{}"}}]
        return ModelTurnResult(content=None, tool_calls=calls)

    async def run_tool(call: ToolCallLike) -> ToolCallOutcome:
        stop.cancel()
        return ToolCallOutcome.from_content(tool_call_id(call), "stopping")

    loop = ToolLoop(
        state=LoopState(messages=[{"role": "user", "content": "go"}]),
        max_iterations=5,
        call_model=call_model,
        run_tool_call=run_tool,
        stop=stop,
        run_id="stopped-run",
    )
    assert (await loop.run()).reason == "stopped"
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [("invoke_agent", (("execute_tool halt", ()),))]
    (run,) = named(spans, "invoke_agent")
    assert [e.name for e in run.events] == ["juno.run.stopped"]
    assert run.status.status_code is StatusCode.UNSET
    records = [r for r in caplog.records if r.name == "juno_bind_trio"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "run stopped-run: soft stop")
    ]


async def test_host_spans_nest_under_the_attempt_and_tools_under_the_run(
    exporter: InMemorySpanExporter,
) -> None:
    script: dict[str, list[FakeResponse]] = {
        "big": [ErrorResponse(503), ErrorResponse(503)],  # each turn falls back once
        "small": [
            _tool_calls(*((f"s{n}", "step", {"n": n}) for n in range(6))),
            StreamResponse.of_text("Done ", "here."),
        ],
    }
    inside: dict[str, int] = {}  # call id -> the current span while its tool ran

    async def run_tool(call: ToolCallLike) -> ToolCallOutcome:
        await anyio.sleep(0.01 * (int(tool_call_id(call)[1:]) % 3))
        inside[tool_call_id(call)] = span_id(trace.get_current_span())
        return ToolCallOutcome.from_content(tool_call_id(call), "ok")

    async with instrumented_model(script, "big", "small") as (model, http):
        loop = ToolLoop(
            state=LoopState(messages=[{"role": "user", "content": "go"}]),
            max_iterations=3,
            call_model=model,
            run_tool_call=run_tool,
            per_tool_limit=2,  # two workers, each claiming several calls in turn
        )
        with HOST.start_as_current_span("host request") as host:
            result = await loop.run()
            # The run left nothing of its own current.
            assert span_id(trace.get_current_span()) == span_id(host)
    assert result.reason == "completed"
    spans = exporter.get_finished_spans()
    (run,) = named(spans, "invoke_agent")
    assert parent_id(run) == span_id(host)
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert [s.name for s in chats] == ["chat big", "chat small", "chat big", "chat small"]
    https = named(spans, "HTTP POST")
    assert len(https) == 4 == len(http.reads)
    for chat, request, reads in zip(chats, https, http.reads, strict=True):
        # Each attempt's own: the one after a fallback is not under the failed one.
        assert parent_id(chat) == span_id(run)
        assert parent_id(request) == span_id(chat)
        # While the SDK consumed the body (the stream), the attempt was current.
        assert reads
        assert set(reads) == {span_id(chat)}
    steps = named(spans, "execute_tool step")
    assert len(steps) == 6
    for step in steps:
        assert parent_id(step) == span_id(run)
        call_id = (step.attributes or {})["gen_ai.tool.call.id"]
        assert inside[str(call_id)] == span_id(step)


async def test_a_cancelled_attempt_leaves_the_host_context_as_it_was(
    exporter: InMemorySpanExporter,
) -> None:
    script: dict[str, list[FakeResponse]] = {
        "m": [StreamResponse([TextDelta("Partial "), Pause(100), TextDelta("never")])]
    }
    async with instrumented_model(script, "m") as (model, http):
        with HOST.start_as_current_span("host request") as host:
            with anyio.move_on_after(10) as scope:
                await model.route([{"role": "user", "content": "hi"}])
            assert scope.cancelled_caught
            assert span_id(trace.get_current_span()) == span_id(host)
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [("host request", (("chat m", (("HTTP POST", ()),)),))]
    (chat,) = named(spans, "chat m")
    assert chat.status.status_code is StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "cancelled"
    (reads,) = http.reads
    assert set(reads) == {span_id(chat)}


async def test_a_loop_inside_a_tool_gets_its_own_run_span_under_that_call(
    exporter: InMemorySpanExporter,
) -> None:
    # Only the loop of the Agent's own run records on the Agent's span: a loop a
    # tool runs for another run id is a run of its own, a child of the call.
    async def inner_model(turn: ModelTurn) -> ModelTurnResult:
        return ModelTurnResult(content="inner done", tool_calls=[])

    @tool
    async def nested(ctx: RunContext[None]) -> str:
        """Runs a loop of its own."""
        inner = ToolLoop(
            state=LoopState(messages=[{"role": "user", "content": "inner"}]),
            max_iterations=1,
            call_model=inner_model,
            run_id=f"{ctx.run_id}-inner",
        )
        return (await inner.run()).content or ""

    turns = [
        ModelTurnResult(
            content=None,
            tool_calls=[
                {"id": "n1", "type": "function", "function": {"name": "nested", "arguments": "{}"}}
            ],
        ),
        ModelTurnResult(content="outer done", tool_calls=[]),
    ]

    async def outer_model(turn: ModelTurn) -> ModelTurnResult:
        return turns.pop(0)

    result = await Agent(outer_model, tools=[nested], name="outer").run("go")
    assert result.output == "outer done"
    spans = exporter.get_finished_spans()
    assert span_tree(spans) == [
        ("invoke_agent outer", (("execute_tool nested", (("invoke_agent", ()),)),))
    ]
    (outer,) = named(spans, "invoke_agent outer")
    (inner,) = named(spans, "invoke_agent")
    assert (outer.attributes or {})["gen_ai.conversation.id"] == result.run_id
    assert (inner.attributes or {})["gen_ai.conversation.id"] == f"{result.run_id}-inner"


async def test_a_bare_tool_loop_that_succeeds_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Tracing off (no provider): the logger speaks for itself. A run whose every
    # attempt answered at once, with a tool batch, says nothing at any level.
    caplog.set_level(logging.DEBUG)
    script: dict[str, list[FakeResponse]] = {
        "m": [_tool_calls(("a1", "add", {"x": 1})), StreamResponse.of_text("Sum: 2.")]
    }

    async def run_tool(call: ToolCallLike) -> ToolCallOutcome:
        return ToolCallOutcome.from_content(tool_call_id(call), "2")

    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        loop = ToolLoop(
            state=LoopState(messages=[{"role": "user", "content": "1 + 1?"}]),
            max_iterations=3,
            call_model=OpenAIChatModel(
                plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
            ),
            run_tool_call=run_tool,
        )
        result = await loop.run()
    assert (result.reason, result.content) == ("completed", "Sum: 2.")
    assert [r for r in caplog.records if r.name.startswith("juno_bind_trio")] == []
