"""The demo's fallback scenario, cancelled the way asyncio.Runner handles Ctrl-C, at many points.

A bare ``task.cancel()`` of the task running the scenario (on trio, its
scope), before a step of the event loop: the scenario always ends cancelled.
Before the fix it ran on past its ``async with`` in a few of these windows, as
if nobody had cancelled it, and failed later with ``UnboundLocalError``. The
scenario takes about five hundred steps, through the real ``openai`` SDK on
loopback, and the window where the cancel was lost was seven steps wide.

The default run cancels before every 30th step, and on asyncio before each
step of that window as the full sweep found it with both halves of the fix
taken out (`_cancel.task_cancellation` returning ``None`` and the fake server
stopped by cancelling its task group's scope): steps 470 to 476, of 513 then,
of 510 now. A change to the scenario or to anything it awaits moves the steps,
so the full sweep, before every 5th step on both backends (about 40 s), runs
under ``JUNO_CANCEL_SWEEP=full``: ``nox -s cancel_sweep``.
"""

from __future__ import annotations

import io
import os

from native_cancel import assert_always_cancelled, run_cancelled_before, sweep
from test_examples import demo

FULL = os.environ.get("JUNO_CANCEL_SWEEP") == "full"
STRIDE = 5 if FULL else 30
LOST_WINDOW = range(470, 477)
"""The asyncio steps where the cancel was lost without the fix (see above)."""


async def scenario() -> None:
    await demo.fallback_scenario(io.StringIO())


def test_the_fallback_scenario_always_ends_cancelled(backend: str) -> None:
    runs = sweep(backend, scenario, lambda run: None, stride=STRIDE)
    assert len(runs) * STRIDE > 250  # it really went through the scenario
    if backend == "asyncio" and not FULL:
        runs += [run_cancelled_before(backend, k, scenario) for k in LOST_WINDOW]
    assert_always_cancelled(runs)
