"""What an MCP toolset adds to a call, against the SDK's own client on the same connection.

An in-process server (the SDK's ``MCPServer``, connected with
``mcp.Client(server)``: no process, no socket, so the figure is this
package's work and the SDK's, not the operating system's) with one tool,
``add(a, b)``. Measured in the same run, interleaved round by round:

* **bare SDK call**: ``await client.call_tool("add", {...})`` on the
  toolset's own entered client, the result left as the SDK returns it.
* **toolset call**: ``await toolset.call("calc_add", {...})``: the name
  lookup, the argument check against the input schema (jsonschema), the
  same SDK call, and turning the result into the value the agent writes.

Each round runs ``--calls`` sequential calls of each variant; the figure is
the median over ``--rounds`` rounds of the per-round ratio (toolset / bare),
in this process's CPU time.

    python benchmarks/bench_mcp.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import mcp
import trio
from mcp.server.mcpserver import MCPServer

from juno_bind_trio.mcp import MCPToolset, open_mcp_client


def build_server() -> MCPServer:
    server = MCPServer("bench")

    @server.tool(description="Add two integers.")
    async def add(a: int, b: int) -> int:
        return a + b

    return server


async def bare(client: mcp.Client, calls: int) -> float:
    start = time.process_time()
    for i in range(calls):
        await client.call_tool("add", {"a": i, "b": 1})
    return time.process_time() - start


async def through_toolset(toolset: MCPToolset, calls: int) -> float:
    start = time.process_time()
    for i in range(calls):
        await toolset.call("calc_add", {"a": i, "b": 1})
    return time.process_time() - start


async def measure(calls: int, rounds: int) -> list[tuple[float, float]]:
    results: list[tuple[float, float]] = []
    async with open_mcp_client(mcp.Client(build_server()), prefix="calc") as toolset:
        client = toolset._client  # the toolset's own connection, for the bare baseline
        assert client is not None
        await bare(client, 20)  # warm both paths
        await through_toolset(toolset, 20)
        for index in range(rounds):
            gc.collect()
            if index % 2:
                t = await through_toolset(toolset, calls)
                b = await bare(client, calls)
            else:
                b = await bare(client, calls)
                t = await through_toolset(toolset, calls)
            results.append((b, t))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    results = trio.run(measure, args.calls, args.rounds)
    ratios = [t / b for b, t in results]
    bare_us = statistics.median(b for b, _ in results) / args.calls * 1e6
    toolset_us = statistics.median(t for _, t in results) / args.calls * 1e6
    print(f"bare SDK call:  {bare_us:8.1f} µs CPU per call (median of {args.rounds} rounds)")
    print(f"toolset call:   {toolset_us:8.1f} µs CPU per call")
    print(
        f"ratio toolset / bare: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
