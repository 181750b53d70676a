"""ToolLoop's cost per iteration, against a minimal hand-written loop in the same run.

Each iteration: one scripted model call (one checkpoint, returning a prebuilt
``ModelTurnResult`` asking for 10 tool calls over 3 tools) and 10 no-op tool
calls (one checkpoint each, returning a prebuilt ``ToolCallOutcome``), under
``trio.run``. Both loops send the calls through the same pool,
:class:`~juno_bind_trio.run.ToolBatch`, so the ratio is the loop's own
overhead: building the turn and the assistant message, answering the calls,
the stop / suspend / compaction / persist arms, the cancellation bookkeeping,
the stats. Measured with no observer (``events=None``) and with an events
channel, which is the configuration a host with a UI runs.

The baseline does only what a loop cannot skip: call the model, append the
assistant message, run the batch, append every answer, persist.

Timed in process CPU time, which other load on the machine disturbs least.

    python benchmarks/bench_loop.py [--iterations N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import trio

from juno_bind_trio.loop import (
    LoopEvent,
    LoopState,
    ModelTurn,
    ModelTurnResult,
    ToolCallOutcome,
    ToolLoop,
)
from juno_bind_trio.plugins import kind_for_error, tool_failure_message
from juno_bind_trio.run import ToolBatch, ToolCallLike, tool_call_id

CALLS_PER_TURN = 10
TOOLS = ("read", "search", "fetch")


def script(iterations: int) -> tuple[list[ModelTurnResult], dict[str, ToolCallOutcome]]:
    turns: list[ModelTurnResult] = []
    answers: dict[str, ToolCallOutcome] = {}
    for i in range(iterations):
        calls = []
        for j in range(CALLS_PER_TURN):
            call_id = f"c{i}_{j}"
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": TOOLS[j % len(TOOLS)], "arguments": "{}"},
                }
            )
            answers[call_id] = ToolCallOutcome.from_content(call_id, "ok")
        turns.append(ModelTurnResult(content=None, tool_calls=calls))
    return turns, answers


def model_for(turns: list[ModelTurnResult]) -> Callable[[Any], Awaitable[ModelTurnResult]]:
    position = iter(turns)

    async def model(turn: Any) -> ModelTurnResult:
        await trio.lowlevel.checkpoint()
        return next(position)

    return model


def tool_for(answers: dict[str, ToolCallOutcome]) -> Callable[[ToolCallLike], Awaitable[Any]]:
    async def tool(call: ToolCallLike) -> ToolCallOutcome:
        await trio.lowlevel.checkpoint()
        return answers[call["id"]]  # type: ignore[index]

    return tool


async def save() -> None:
    pass


async def bare_loop(iterations: int, turns: list[ModelTurnResult], answers: Any) -> int:
    model = model_for(turns)
    tool = tool_for(answers)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _ in range(iterations):
        result = await model(None)
        calls = result.tool_calls
        messages.append(
            {
                "role": "assistant",
                "content": result.content,
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": c["function"]} for c in calls
                ],
            }
        )
        batch: ToolBatch[ToolCallOutcome] = ToolBatch(calls)
        for call, settled in zip(calls, await batch.run(tool), strict=True):
            try:
                messages.append(settled.unwrap().tool_message)
            except Exception as exc:
                messages.append(
                    tool_failure_message(tool_call_id(call), str(exc), kind_for_error(exc))
                )
        await save()
    return len(messages)


async def tool_loop(
    iterations: int, turns: list[ModelTurnResult], answers: Any, with_events: bool
) -> int:
    state = LoopState([{"role": "user", "content": "go"}])
    model = model_for(turns)

    async def call_model(turn: ModelTurn) -> ModelTurnResult:
        return await model(turn)

    send, receive = anyio.create_memory_object_stream[LoopEvent](math.inf)
    loop = ToolLoop(
        state=state,
        max_iterations=iterations,
        call_model=call_model,
        run_tool_call=tool_for(answers),
        save_session=save,
        stop=trio.CancelScope(),
        events=send if with_events else None,
    )
    result = await loop.run()
    assert result.reason == "max_iterations"
    send.close()
    receive.close()
    return len(state.messages)


def measure(fn: Callable[..., Awaitable[int]], iterations: int, *args: Any) -> float:
    turns, answers = script(iterations)
    gc.collect()
    gc.disable()
    try:
        # CPU time of this process: the figure other load on the machine disturbs least.
        start = time.process_time_ns()
        count = trio.run(fn, iterations, turns, answers, *args)
        elapsed = time.process_time_ns() - start
    finally:
        gc.enable()
    assert count == 1 + iterations * (1 + CALLS_PER_TURN), count
    return elapsed / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()

    variants: dict[str, tuple[Callable[..., Awaitable[int]], tuple[Any, ...]]] = {
        "bare loop (same pool)": (bare_loop, ()),
        "ToolLoop, no observer": (tool_loop, (False,)),
        "ToolLoop, events channel": (tool_loop, (True,)),
    }
    best = dict.fromkeys(variants, math.inf)
    for _ in range(args.repeat):
        # interleaved, so drift in the machine's speed hits every variant alike
        for name, (fn, extra) in variants.items():
            best[name] = min(best[name], measure(fn, args.iterations, *extra))
    base = best["bare loop (same pool)"]
    print(
        f"{args.iterations} iterations x {CALLS_PER_TURN} no-op calls, best of {args.repeat}, "
        "trio, process CPU time"
    )
    for name, ns in best.items():
        print(f"  {name:<26} {ns / 1000:8.1f} us/iteration  {ns / base:5.2f}x")


if __name__ == "__main__":
    main()
