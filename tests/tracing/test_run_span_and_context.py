"""The run span of a bare ToolLoop, and which span is current where, on both backends.

A host's own spans (an HTTP client instrumentation, spans made inside a
provider) must nest under the ``chat`` span of the attempt they belong to; a
tool's under its ``execute_tool`` span; and nothing of ours may stay current
once the run, an attempt or a call is left, however it was left.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx2
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, StatusCode
from tracing_helpers import EXPORTER, PROVIDER, named, span_tree

from juno_bind_trio import _tracing
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
    monkeypatch.delenv(_tracing.CAPTURE_CONTENT_ENV, raising=False)
    EXPORTER.clear()
    monkeypatch.setattr(_tracing, "_provider_override", PROVIDER)
    yield EXPORTER
    EXPORTER.clear()


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


def _tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> StreamResponse:
    return StreamResponse.of_tool_calls(*((i, n, json.dumps(a)) for i, n, a in calls))


async def test_a_bare_tool_loop_run_is_one_run_span_with_its_cancel(
    exporter: InMemorySpanExporter,
) -> None:
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

    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client_a,
        open_openai_client(base_url=server.base_url, api_key="k") as client_b,
    ):
        plan = RoutePlan(
            [
                RouteStage("big", [Candidate("provider-a"), Candidate("provider-b")]),
                RouteStage("small", [Candidate("provider-a")]),
            ],
            max_retries=0,
        )
        model = OpenAIChatModel(plan=plan, clients={"provider-a": client_a, "provider-b": client_b})
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

    http = HostHTTP()
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(
            base_url=server.base_url, api_key="k", http_client=httpx2.AsyncClient(transport=http)
        ) as client,
    ):
        plan = RoutePlan(
            [RouteStage("big", [Candidate("p")]), RouteStage("small", [Candidate("p")])],
            max_retries=0,
        )
        loop = ToolLoop(
            state=LoopState(messages=[{"role": "user", "content": "go"}]),
            max_iterations=3,
            call_model=OpenAIChatModel(plan=plan, clients={"p": client}),
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
    script = {"m": [StreamResponse([TextDelta("Partial "), Pause(100), TextDelta("never")])]}
    http = HostHTTP()
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(
            base_url=server.base_url, api_key="k", http_client=httpx2.AsyncClient(transport=http)
        ) as client,
    ):
        model = OpenAIChatModel(
            plan=RoutePlan([RouteStage("m", [Candidate("p")])]), clients={"p": client}
        )
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
