"""Cancel a scenario at every step it takes, one run per step, on both backends.

The sweep answers "does the cancellation always get out?" by brute force, but
deterministically: run the scenario once per *k* and cancel it just before its
*k*-th step, for k = 1, 2, ... until a run finishes before step *k* comes.
Everything runs on a virtual clock, so the same *k* lands at the same point
every time.

* asyncio: the way a host stops a task, and the way ``asyncio.Runner`` turns
  Ctrl-C into a stop: a bare ``task.cancel()`` of the task that runs the
  scenario, which is the runner's main task. A step is one callback the event
  loop runs (a task step, a timer, an I/O callback): the cancel is made
  before the *k*-th of them, from outside every task, as a signal handler
  would. The run must end with ``CancelledError`` out of ``Runner.run`` (the
  task cancelled), never a normal return and never another exception.
* trio: the run's scope is cancelled before the *k*-th task step (an
  instrument counts them). The scope must catch the cancellation; nothing
  else may come out.

After each run the scenario's own check looks at what it left behind (the
transcript answers every call, and so on).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import attrs
import trio
import trio.testing

from virtual_asyncio import VirtualClockEventLoop

Scenario = Callable[[], Awaitable[object]]
"""A fresh run: called once per *k*, it builds everything anew and runs it."""

Ending = Literal["cancelled", "finished before k", "returned", "raised"]


@attrs.define(eq=False)
class Run:
    """How the run that was cancelled before step *k* ended."""

    k: int
    ending: Ending
    error: BaseException | None = None


class _CountingReady(collections.deque[Any]):
    """The event loop's ready queue: counts the callbacks it hands out, cancels before the k-th."""

    def __init__(self, loop: _CancellingLoop) -> None:
        super().__init__()
        self._loop = loop

    def popleft(self) -> Any:
        loop = self._loop
        target = loop.target
        if target is not None and not loop.fired:
            loop.steps += 1
            if loop.steps == loop.cancel_before and not target.done():
                target.cancel()
                loop.fired = True
        return super().popleft()


class _CancellingLoop(VirtualClockEventLoop):
    def __init__(self, cancel_before: int) -> None:
        super().__init__()
        self.cancel_before = cancel_before
        self.steps = 0
        self.fired = False
        self.target: asyncio.Task[Any] | None = None
        self._ready = _CountingReady(self)


def run_asyncio_cancelled_before(k: int, scenario: Scenario) -> Run:
    """Run *scenario* as an ``asyncio.Runner``'s main task; ``task.cancel()`` it before step *k*."""
    loops: list[_CancellingLoop] = []

    def make_loop() -> _CancellingLoop:
        loops.append(_CancellingLoop(k))
        return loops[-1]

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loops[-1].target = task
        await scenario()

    with asyncio.Runner(loop_factory=make_loop) as runner:
        try:
            runner.run(main())
        except asyncio.CancelledError:
            return Run(k, "cancelled")
        except BaseException as exc:
            return Run(k, "raised", exc)
    return Run(k, "returned" if loops[-1].fired else "finished before k")


@attrs.define(eq=False)
class _StepCounter(trio.abc.Instrument):
    cancel_before: int
    scope: trio.CancelScope
    on_cancel: Callable[[], object] | None = None
    steps: int = 0
    fired: bool = False
    left: bool = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.fired or self.left:
            return
        self.steps += 1
        if self.steps == self.cancel_before:
            if self.on_cancel is not None:
                self.on_cancel()
            self.scope.cancel()
            self.fired = True


def run_trio_cancelled_before(
    k: int, scenario: Scenario, on_cancel: Callable[[], object] | None = None
) -> Run:
    """Run *scenario* in a cancel scope that is cancelled before the *k*-th task step.

    *on_cancel* is called just before the scope is cancelled (to note the
    moment in the scenario's log).
    """
    scope = trio.CancelScope()
    counter = _StepCounter(k, scope, on_cancel)

    async def main() -> None:
        with scope:
            await scenario()
            # A cancel made after the run's last checkpoint lands here, so a run
            # never "finishes" with a cancel it did not see.
            await trio.lowlevel.checkpoint()
        counter.left = True

    try:
        trio.run(
            main,
            clock=trio.testing.MockClock(autojump_threshold=0),
            instruments=[counter],
            strict_exception_groups=True,
        )
    except BaseException as exc:
        return Run(k, "raised", exc)
    if not counter.fired:
        return Run(k, "finished before k")
    return Run(k, "cancelled" if scope.cancelled_caught else "returned")


def run_cancelled_before(
    backend: str, k: int, scenario: Scenario, on_trio_cancel: Callable[[], object] | None = None
) -> Run:
    """One run of *scenario* on *backend*, cancelled before its *k*-th step."""
    if backend == "trio":
        return run_trio_cancelled_before(k, scenario, on_trio_cancel)
    return run_asyncio_cancelled_before(k, scenario)


def sweep(
    backend: str,
    scenario: Scenario,
    check: Callable[[Run], None],
    *,
    start: int = 1,
    stride: int = 1,
    limit: int = 5_000,
    on_trio_cancel: Callable[[], object] | None = None,
) -> list[Run]:
    """Cancel a fresh *scenario* before its k-th step for every k from *start*, *stride* apart.

    *check* is called after every run (the scenario keeps what it needs to
    inspect in its own closure). Stops at the first *k* the run never reached;
    fails if that takes more than *limit* steps (a scenario that never ends).
    Returns every run, for the caller to assert on. *on_trio_cancel* is
    called at the moment the scope is cancelled, on trio. (A ``task.cancel()``
    has no such moment: it takes effect when the task next resumes, and other
    tasks may run first.)
    """
    runs: list[Run] = []
    for k in range(start, limit, stride):
        result = run_cancelled_before(backend, k, scenario, on_trio_cancel)
        if result.ending == "finished before k":
            return runs
        check(result)
        runs.append(result)
    raise AssertionError(f"the scenario was still running after {limit} steps")


def assert_always_cancelled(runs: list[Run]) -> None:
    """Every run ended in its cancellation: no normal return, no other exception."""
    bad = [r for r in runs if r.ending != "cancelled"]
    assert bad == [], [(r.k, r.ending, repr(r.error)) for r in bad[:10]]
    assert runs, "the scenario took no steps at all"
