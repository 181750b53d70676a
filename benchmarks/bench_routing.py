"""execute_route_plan's cost per attempt, against calling the attempt functions directly.

Two attempt functions, each doing one checkpoint (the least a real attempt
awaits):

* **succeed**: a one-candidate route that succeeds on its first attempt;
* **fail over**: a three-candidate route whose first two candidates fail
  (``NEXT_CANDIDATE``) and whose third succeeds;

and, for the record, **exhausted**: three candidates that all fail, which
also builds the ``AllRoutesFailedError`` with its trail.

The baseline, measured in the same run on the same event loop: await the same
attempt functions directly, the same number of times, with cursors built in
advance. Prints ns per attempt and the ratio. Target: at most 1.5x.

    python benchmarks/bench_routing.py [--routes N] [--repeat R] [--backend trio|asyncio|all]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import httpx2
import openai

from juno_bind_trio.routing import (
    AttemptFailure,
    AttemptSuccess,
    Candidate,
    ClassifiedError,
    RouteAction,
    RouteCursor,
    RoutePlan,
    RouteStage,
    execute_route_plan,
)

FAILURE = AttemptFailure(
    ClassifiedError(
        RouteAction.NEXT_CANDIDATE,
        openai.APIConnectionError(request=httpx2.Request("POST", "https://provider.test/v1")),
    )
)
SUCCESS = AttemptSuccess("ok")

ONE = RoutePlan([RouteStage("m", [Candidate("a")])])
THREE = RoutePlan([RouteStage("m", [Candidate("a"), Candidate("b"), Candidate("c")])])


async def succeed(candidate: Candidate, cursor: RouteCursor) -> AttemptSuccess[str]:
    await anyio.lowlevel.checkpoint()
    return SUCCESS


async def fail_over(
    candidate: Candidate, cursor: RouteCursor
) -> AttemptSuccess[str] | AttemptFailure:
    await anyio.lowlevel.checkpoint()
    return SUCCESS if candidate.provider == "c" else FAILURE


async def always_fail(candidate: Candidate, cursor: RouteCursor) -> AttemptFailure:
    await anyio.lowlevel.checkpoint()
    return FAILURE


Attempt = Callable[[Candidate, RouteCursor], Awaitable[object]]


async def direct(attempt: Attempt, route: RoutePlan, n: int) -> int:
    calls = [
        (candidate, RouteCursor(0, i, 1, i + 1, stage.model))
        for stage in route.stages
        for i, candidate in enumerate(stage.candidates)
    ]
    start = time.thread_time_ns()
    for _ in range(n):
        for candidate, cursor in calls:
            await attempt(candidate, cursor)
    return time.thread_time_ns() - start


async def routed(attempt: Attempt, route: RoutePlan, n: int) -> int:
    start = time.thread_time_ns()
    for _ in range(n):
        await execute_route_plan(route, attempt)  # type: ignore[arg-type]
    return time.thread_time_ns() - start


async def measure(routes: int, repeat: int) -> list[tuple[str, float, float]]:
    rows = []
    for name, attempt, route in (
        ("succeed (1 attempt)", succeed, ONE),
        ("fail over (3 attempts)", fail_over, THREE),
        ("exhausted (3 attempts)", always_fail, THREE),
    ):
        attempts = routes * sum(len(s.candidates) for s in route.stages)
        bare = routed_best = float("inf")
        # Short runs, alternated, best of many: on a shared machine the minimum
        # of each is the figure least disturbed by other processes.
        for _ in range(repeat):
            gc.collect()
            gc.disable()
            try:
                bare = min(bare, await direct(attempt, route, routes) / attempts)
                routed_best = min(routed_best, await routed(attempt, route, routes) / attempts)
            finally:
                gc.enable()
        rows.append((name, bare, routed_best))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--routes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--backend", choices=("trio", "asyncio", "all"), default="all")
    args = parser.parse_args()
    backends = ("trio", "asyncio") if args.backend == "all" else (args.backend,)
    for backend in backends:
        rows = anyio.run(measure, args.routes, args.repeat, backend=backend)
        print(f"[{backend}] {args.routes} routes, best of {args.repeat}")
        for name, bare, routed_ns in rows:
            print(
                f"  {name:24} direct {bare:7.0f} ns/attempt   routed {routed_ns:7.0f} ns/attempt"
                f"   ratio {routed_ns / bare:4.2f}x"
            )


if __name__ == "__main__":
    main()
