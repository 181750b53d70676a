"""Span trees, an SDK provider and a scripted model, for the tracing tests.

The API lets the *global* provider be set once per process, so the provider is
built once here and handed to the package through its private override, per
test (the ``exporter`` fixture), with the exporter cleared: no other test in the
run is traced.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from juno_bind_trio import _tracing
from juno_bind_trio.loop import ModelTurn, ModelTurnResult
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import FakeOpenAIServer, FakeResponse, open_fake_openai_server

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


def installed_exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The body of each test module's ``exporter`` fixture.

    The in-memory exporter, empty, with the SDK provider installed for one
    test and message content capture off.
    """
    monkeypatch.delenv(_tracing.CAPTURE_CONTENT_ENV, raising=False)
    EXPORTER.clear()
    monkeypatch.setattr(_tracing, "_provider_override", PROVIDER)
    yield EXPORTER
    EXPORTER.clear()


def call(call_id: str, name: str, /, **kwargs: Any) -> dict[str, Any]:
    """A tool call with *kwargs* as its JSON arguments."""
    arguments = json.dumps(kwargs)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@attrs.define
class Say:
    """A turn: *text*, or *calls*."""

    text: str | None = None
    calls: Sequence[dict[str, Any]] = ()


@attrs.define
class ScriptedModel:
    """``async (ModelTurn) -> ModelTurnResult`` playing *turns* in order."""

    turns: list[Say]

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        say = self.turns.pop(0)
        if turn.text_stream is not None:
            turn.text_stream.begin_attempt()
        await anyio.sleep(0.01)
        return ModelTurnResult(content=say.text, tool_calls=list(say.calls))


@asynccontextmanager
async def fallback_model(
    script: Mapping[str, list[FakeResponse]], **client_options: Any
) -> AsyncIterator[tuple[OpenAIChatModel, FakeOpenAIServer]]:
    """A model routing ``big`` on provider-a then provider-b, then ``small`` on provider-a.

    No same-endpoint retries; both providers are clients of one fake server
    playing *script*; *client_options* go to both clients.
    """
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k", **client_options) as client_a,
        open_openai_client(base_url=server.base_url, api_key="k", **client_options) as client_b,
    ):
        plan = RoutePlan(
            [
                RouteStage("big", [Candidate("provider-a"), Candidate("provider-b")]),
                RouteStage("small", [Candidate("provider-a")]),
            ],
            max_retries=0,
        )
        clients = {"provider-a": client_a, "provider-b": client_b}
        yield OpenAIChatModel(plan=plan, clients=clients), server


Tree = tuple[str, tuple[Any, ...]]


def span_tree(spans: Sequence[ReadableSpan]) -> list[Tree]:
    """The finished spans as ``(name, (children...))``.

    Siblings are ordered by name, then tool call id, then start time: tasks a
    pool starts together begin in an order the backend chooses.
    """
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)

    def build(parent: int | None) -> tuple[Tree, ...]:
        children = sorted(by_parent.get(parent, []), key=_order)
        return tuple((s.name, build(s.context.span_id)) for s in children if s.context)

    return list(build(None))


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called *name*, in start order."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def _order(span: ReadableSpan) -> tuple[str, str, int]:
    call_id = (span.attributes or {}).get("gen_ai.tool.call.id", "")
    return (span.name, str(call_id), span.start_time or 0)
