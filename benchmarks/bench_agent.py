"""What the Agent layer costs over a ToolLoop with a hand-written dispatcher, in the same run.

The run: 10 model turns, each asking for 10 tool calls over 3 typed tools,
then a final answer (11 model calls, 100 tool calls). The model is a script
returning prebuilt ``ModelTurnResult`` objects (one checkpoint each); each
tool awaits one checkpoint and returns a small dict. The same model, tools
and calls go through:

* **ToolLoop + hand-written dispatcher** (the baseline): the dispatcher
  looks the tool up, ``json.loads`` the arguments, calls the function with
  them and writes its result with ``json.dumps``; the tool list is written
  by hand. What a host writes without the agent layer.
* **Agent**: ``agent.run(prompt)`` on an ``Agent(model, tools=[...])`` built
  once (as an application builds it): schemas from the type hints, arguments
  validated by pydantic, a ``RunContext`` per call, results written as
  compact JSON, an ``AgentResult`` at the end. The loop is built per run on
  both sides: one ``ToolLoop`` per run is the kernel's rule.

Each sample runs the whole thing ``--runs`` times under one ``trio.run``;
variants are interleaved round by round, and the figure is the median of the
per-round ratios. Timed in process CPU time.

Also: argument validation of a five-field model, per call (``Tool.invoke``
driven without an event loop, the tool's body empty), against
``json.loads`` plus the call.

    python benchmarks/bench_agent.py [--rounds N] [--runs R]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from juno_bind_trio.agent import Agent, RunContext, tool
from juno_bind_trio.loop import LoopState, ModelTurn, ModelTurnResult, ToolCallOutcome, ToolLoop
from juno_bind_trio.run import (
    ToolCallLike,
    root_chain,
    tool_call_arguments,
    tool_call_id,
    tool_call_name,
)

TURNS = 10
CALLS_PER_TURN = 10


async def read(path: str, offset: int = 0) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return {"path": path, "offset": offset, "bytes": 512}


async def search(query: str, limit: int = 10) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return {"query": query, "hits": limit}


async def fetch(url: str, retries: int = 1) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return {"url": url, "status": 200}


FUNCTIONS: dict[str, Callable[..., Awaitable[Any]]] = {
    "read": read,
    "search": search,
    "fetch": fetch,
}
ARGUMENTS = {
    "read": '{"path": "/etc/motd", "offset": 3}',
    "search": '{"query": "lamps", "limit": 5}',
    "fetch": '{"url": "https://example.com/"}',
}
HAND_WRITTEN_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string"}, "retries": {"type": "integer"}},
                "required": ["url"],
            },
        },
    },
]


def script() -> list[ModelTurnResult]:
    turns: list[ModelTurnResult] = []
    names = list(FUNCTIONS)
    for i in range(TURNS):
        calls = []
        for j in range(CALLS_PER_TURN):
            name = names[j % len(names)]
            calls.append(
                {
                    "id": f"c{i}_{j}",
                    "type": "function",
                    "function": {"name": name, "arguments": ARGUMENTS[name]},
                }
            )
        turns.append(ModelTurnResult(tool_calls=calls))
    turns.append(ModelTurnResult(content="done"))
    return turns


TURN_SCRIPT = script()


async def scripted_model(turn: ModelTurn) -> ModelTurnResult:
    """The same script for every run: the turn's iteration picks its answer."""
    await trio.lowlevel.checkpoint()
    return TURN_SCRIPT[turn.iteration - 1]


async def dispatch(call: ToolCallLike) -> ToolCallOutcome:
    """The hand-written dispatcher a host writes without the agent layer."""
    call_id = tool_call_id(call)
    function = FUNCTIONS[tool_call_name(call)]
    arguments = json.loads(tool_call_arguments(call))
    value = await function(**arguments)
    return ToolCallOutcome(
        tool_message={
            "role": "tool",
            "tool_call_id": call_id,
            "content": json.dumps(value, separators=(",", ":")),
        }
    )


async def tool_loop_runs(runs: int) -> int:
    total = 0
    for _ in range(runs):
        state = LoopState([{"role": "user", "content": "go"}])
        loop = ToolLoop(
            state=state,
            max_iterations=20,
            call_model=scripted_model,
            run_tool_call=dispatch,
            build_tools=lambda: HAND_WRITTEN_TOOLS,
        )
        result = await loop.run()
        assert result.reason == "completed"
        total += len(state.messages)
    return total


TOOLS = [tool(read), tool(search), tool(fetch)]


AGENT = Agent(scripted_model, tools=TOOLS)  # built once, as an application does


async def agent_runs(runs: int) -> int:
    total = 0
    for _ in range(runs):
        result = await AGENT.run("go")
        assert result.reason == "completed"
        total += len(result.messages)
    return total


def measure(fn: Callable[[int], Awaitable[int]], runs: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        count = trio.run(fn, runs)
        elapsed = time.process_time_ns() - start
    finally:
        gc.enable()
    assert count == runs * (2 + TURNS * (1 + CALLS_PER_TURN)), count
    return elapsed / runs


# --- argument validation ----------------------------------------------------------------


async def five(name: str, count: int, ratio: float, enabled: bool, tags: list[str]) -> None:
    return None


FIVE = tool(five)
FIVE_ARGUMENTS = '{"name": "lamp", "count": 3, "ratio": 0.5, "enabled": true, "tags": ["a", "b"]}'
CONTEXT: RunContext[None] = RunContext(
    deps=None,
    run_id="r",
    tool_call_id="c",
    tool_name="five",
    iteration=1,
    chain=root_chain("r"),
)


def drive(coroutine: Any) -> None:
    try:
        coroutine.send(None)
    except StopIteration:
        return
    raise AssertionError("the tool awaited something")


def per_call(fn: Callable[[], None], calls: int) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        for _ in range(calls):
            fn()
        return (time.process_time_ns() - start) / calls
    finally:
        gc.enable()


def validated() -> None:
    drive(FIVE.invoke(CONTEXT, FIVE_ARGUMENTS))


def hand_parsed() -> None:
    drive(five(**json.loads(FIVE_ARGUMENTS)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    ratios: list[float] = []
    base_ns: list[float] = []
    agent_ns: list[float] = []
    for _ in range(args.rounds):
        # interleaved, so drift in the machine's speed hits both alike
        base = measure(tool_loop_runs, args.runs)
        mine = measure(agent_runs, args.runs)
        base_ns.append(base)
        agent_ns.append(mine)
        ratios.append(mine / base)
    print(
        f"{TURNS} turns x {CALLS_PER_TURN} calls + the answer, {args.runs} runs a sample, "
        f"{args.rounds} interleaved rounds, trio, process CPU time, medians"
    )
    print(f"  ToolLoop + hand-written dispatcher {statistics.median(base_ns) / 1000:8.1f} us/run")
    print(f"  Agent.run                          {statistics.median(agent_ns) / 1000:8.1f} us/run")
    print(f"  ratio (median of per-round ratios) {statistics.median(ratios):8.3f}x")

    validated_ns = min(per_call(validated, args.calls) for _ in range(5))
    parsed_ns = min(per_call(hand_parsed, args.calls) for _ in range(5))
    print(f"five-field arguments, best of 5 x {args.calls} calls")
    print(f"  Tool.invoke (pydantic validation)  {validated_ns / 1000:8.2f} us/call")
    print(f"  json.loads + call                  {parsed_ns / 1000:8.2f} us/call")


if __name__ == "__main__":
    main()
