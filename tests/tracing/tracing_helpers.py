"""Span trees, an SDK provider and a scripted model, for the tracing tests.

The API lets the *global* provider be set once per process, so the provider is
built once here and handed to the package through its private override, per
test (the ``exporter`` fixture), with the exporter cleared: no other test in the
run is traced.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import attrs
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from juno_bind_trio.loop import ModelTurn, ModelTurnResult

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


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
