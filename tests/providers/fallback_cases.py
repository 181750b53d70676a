"""What the cross-provider fallback tests share: the lookup tool, the loop, the two-stage plan.

``test_cross_provider.py`` (Anthropic and chat completions),
``test_cross_gemini.py`` (Gemini and Anthropic), ``test_cross_responses.py``
(the Responses API and chat completions) and ``test_cross_compat.py`` (two
OpenAI-compatible endpoints) each let one provider die mid-stream inside a
tool loop and another answer. The loop, its one tool and the plan of two
stages are the same in all four; each file keeps its pair of fakes and what
each wire must have been sent.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from juno_bind_trio.completion import ListSink, TurnTextView
from juno_bind_trio.loop import LoopState, ToolCallOutcome, ToolLoop
from juno_bind_trio.providers import ProviderAdapter, RoutedModel
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


async def lookup(call: Any) -> ToolCallOutcome:
    """Half a second's work, then ``found: <q>``."""
    await anyio.sleep(0.5)
    return ToolCallOutcome.from_content(
        call["id"], "found: " + json.loads(call["function"]["arguments"])["q"]
    )


def lookup_loop(
    model: RoutedModel, state: LoopState, sink: ListSink, *, run_tool_call: Any = lookup
) -> ToolLoop:
    """Three turns at most of run ``r``, offering [TOOL][], its text to *sink*."""
    return ToolLoop(
        state=state,
        max_iterations=3,
        call_model=model,
        run_tool_call=run_tool_call,
        build_tools=lambda: [TOOL],
        text_sink=sink,
        run_id="r",
    )


def turn_text(sink: ListSink, turn_id: str) -> str:
    """What the reader of *turn_id* ends with, resets applied."""
    view = TurnTextView(turn_id)
    for event in sink.events:
        if event.turn_id == turn_id:
            view.apply(event)
    return view.text


Stage = tuple[str, str, ProviderAdapter]
"""(model, provider name, adapter): one stage of one candidate."""


def fallback_model(
    first: Stage, second: Stage, *, in_order: bool = True, **options: Any
) -> RoutedModel:
    """A plan of two stages, *first* then *second* (the other way round unless *in_order*)."""
    stages = [RouteStage(model, [Candidate(name)]) for model, name, _ in (first, second)]
    return RoutedModel(
        plan=RoutePlan(stages if in_order else stages[::-1], max_retries=0),
        adapters={name: adapter for _, name, adapter in (first, second)},
        **options,
    )
