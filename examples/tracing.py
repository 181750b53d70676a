"""Trace an agent run with OpenTelemetry: a fallback turn, a tool call, printed as a tree.

Run it: ``python examples/tracing.py``. It talks to the loopback fake server
of ``juno_bind_trio.testing``, so no key and no network.

Needs the ``otel`` extra (``opentelemetry-api``, all the package itself uses)
and an SDK to export the spans: ``pip install -e '.[otel]' opentelemetry-sdk``
in the checkout (the ``test`` extra has both).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

try:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError as missing:
    raise SystemExit(
        f"examples/tracing.py needs the otel extra and an OpenTelemetry SDK ({missing}): "
        "pip install -e '.[otel]' opentelemetry-sdk"
    ) from None

from juno_bind_trio.agent import Agent, tool
from juno_bind_trio.providers.openai import OpenAIChatModel, open_openai_client
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.testing import (
    ErrorResponse,
    FakeResponse,
    StreamResponse,
    Usage,
    open_fake_openai_server,
)

# 1. Once, at start-up: a real tracer provider. In production the processor
#    would be a BatchSpanProcessor with an OTLP exporter.
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

# 2. Optional: the package's logger says why routing moved on.
logging.basicConfig(format="%(name)s %(levelname)s %(message)s")
logging.getLogger("juno_bind_trio").setLevel(logging.INFO)


@tool
async def get_weather(city: str) -> str:
    """The forecast for a city.

    Args:
        city: The city's name.
    """
    return f"clear in {city}"


async def main() -> None:
    script: dict[str, list[FakeResponse]] = {
        # The big model's provider is down; the small model answers.
        "big": [ErrorResponse(503), ErrorResponse(503)],
        "small": [
            StreamResponse.of_tool_calls(("call_1", "get_weather", '{"city": "Oslo"}')),
            StreamResponse.of_text("Clear in Oslo.", usage=Usage(10, 4)),
        ],
    }
    async with (
        open_fake_openai_server(script) as server,
        open_openai_client(base_url=server.base_url, api_key="k") as client,
    ):
        plan = RoutePlan(
            [RouteStage("big", [Candidate("p")]), RouteStage("small", [Candidate("p")])],
            max_retries=0,
        )
        model = OpenAIChatModel(plan=plan, clients={"p": client})
        agent = Agent(model, tools=[get_weather], name="forecaster")
        result = await agent.run("Weather in Oslo?")
    print(result.output)
    print_tree(exporter.get_finished_spans())


def print_tree(spans: Sequence[ReadableSpan]) -> None:
    """Each span under its parent, with the attributes that tell the story."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def show(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            attributes = span.attributes or {}
            notes = [
                f"{key}={attributes[key]!s}"
                for key in ("error.type", "juno.route.action", "juno.tool.end_state")
                if key in attributes
            ]
            print("  " * depth + span.name + ("  " + " ".join(notes) if notes else ""))
            assert span.context is not None
            show(span.context.span_id, depth + 1)

    show(None, 0)


if __name__ == "__main__":
    trio.run(main)
