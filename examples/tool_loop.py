"""A whole tool-calling run: a scripted model, three tools, events printed as they happen.

No network and no API key: the "model" plays a script. Turn one asks for
three calls: ``enable_calendar`` (runs serially, before the pool, and
activates a plugin), ``get_weather`` and ``send_email`` (which fails with a
``validation`` kind the model can act on). Turn two answers. A reader task
prints every loop event; the transcript and the run's stats are printed at
the end.

    python examples/tool_loop.py

Needs only the base install (``pip install -e .`` in the checkout), no extra.
"""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from juno_bind_trio.loop import (
    AssistantMessageEvent,
    LoopEvent,
    LoopResult,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    StatusEvent,
    ToolCallOutcome,
    ToolCallRejectedEvent,
    ToolLoop,
)
from juno_bind_trio.plugins import ToolFailureError
from juno_bind_trio.run import ToolCallLike, tool_call_arguments, tool_call_id, tool_call_name


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


class ScriptedModel:
    """Plays two turns: first the tool calls, then an answer built from what came back."""

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        await anyio.sleep(0.2)  # "thinking"
        if turn.iteration == 1:
            return ModelTurnResult(
                content="Let me check a few things.",
                tool_calls=[
                    tool_call("call_1", "enable_calendar"),
                    tool_call("call_2", "get_weather", city="Lisbon"),
                    tool_call("call_3", "send_email", to="not-an-address"),
                ],
                input_tokens=120,
                output_tokens=40,
                cost=0.002,
            )
        tools_seen = [m for m in turn.messages if m["role"] == "tool"]
        return ModelTurnResult(
            content=f"Done: {len(tools_seen)} results back; the email needs a valid address.",
            input_tokens=300,
            output_tokens=25,
            cost=0.003,
        )


async def run_tool_call(call: ToolCallLike) -> ToolCallOutcome:
    """The host's dispatcher: three tools."""
    call_id, name = tool_call_id(call), tool_call_name(call)
    arguments = json.loads(tool_call_arguments(call))
    if name == "enable_calendar":
        await anyio.sleep(0.1)
        return ToolCallOutcome.from_content(
            call_id, '{"enabled": "calendar"}', activated_plugin="calendar"
        )
    if name == "get_weather":
        await anyio.sleep(0.3)
        return ToolCallOutcome.from_content(
            call_id, json.dumps({"city": arguments["city"], "sky": "clear", "celsius": 21})
        )
    if name == "send_email":
        await anyio.sleep(0.1)
        raise ToolFailureError("validation", f"{arguments['to']!r} is not an email address")
    raise ToolFailureError("not_found", f"no tool named {name!r}")


async def print_events(receive: MemoryObjectReceiveStream[LoopEvent]) -> None:
    async with receive:
        async for event in receive:
            if isinstance(event, StatusEvent):
                print(f"  [{event.iteration}] {event.status}")
            elif isinstance(event, AssistantMessageEvent):
                print(f"  [{event.iteration}] assistant: {event.content}")
            elif isinstance(event, ToolCallRejectedEvent):
                what = f"{event.tool_name} failed ({event.kind})"
                print(f"  [{event.iteration}] {what}: {event.message}")


async def main() -> LoopResult:
    state = LoopState([{"role": "user", "content": "Weather in Lisbon, then email Ana."}])
    plugins: list[str] = []
    saves = 0

    async def activate_plugins(names: tuple[str, ...]) -> None:
        plugins.extend(names)

    async def save_session() -> None:
        nonlocal saves
        saves += 1

    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    loop = ToolLoop(
        state=state,
        max_iterations=5,
        call_model=ScriptedModel(),
        run_tool_call=run_tool_call,
        build_tools=lambda: ["get_weather", "send_email", *plugins],
        runs_serially=lambda call: tool_call_name(call) == "enable_calendar",
        activate_plugins=activate_plugins,
        save_session=save_session,
        events=send,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(print_events, receive)
        async with send:
            result = await loop.run()

    print("\ntranscript:")
    for message in state.messages:
        text = message.get("content")
        calls = [c["function"]["name"] for c in message.get("tool_calls", [])]
        print(f"  {message['role']:>9}: {text}" + (f"  -> calls {calls}" if calls else ""))
    print(f"\nended: {result.reason} after {result.iterations} model calls, {saves} saves")
    print(f"plugins active: {plugins}")
    stats = result.stats
    print(
        f"tokens {stats.input_tokens} in / {stats.output_tokens} out, cost {stats.cost:.3f}, "
        f"{stats.tool_calls} tool calls ({stats.tool_failures} failed), "
        f"model {stats.model_seconds:.1f}s, tools {stats.tool_seconds:.1f}s"
    )
    return result


if __name__ == "__main__":
    final = anyio.run(main, backend="trio")
    raise SystemExit(0 if final.reason == "completed" else 1)
